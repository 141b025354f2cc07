"""pytest hooks: the options, the ``gpuprof`` fixture and marker, and the session's registration.

Without ``--gpuprof`` the plugin only declares its options, marker and fixture,
and profiled tests run as plain tests: torch, nvtx, pandas and numpy are not
imported.  With it, ``pytest_configure`` registers the plugin objects of this process's
role (``_register_roles``: ``run.session.GpuprofSession`` and the others), whose hook
methods do the work (imported there, for that reason).
"""

from __future__ import annotations

import inspect
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from _pytest.config.findpaths import determine_setup  # how pytest chooses the rootdir: no public API says

from .capture.marker import MISTAKE, marker_mistake, marker_of
from .capture.profiler import GpuProf, StepPlan
from .errors import ConfigError
from .options import BY_NAME, OPTIONS, Option
from .run.role import this_process

SETTINGS = pytest.StashKey[Any]()
SESSION = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuprof", "GPU performance gates (pytest-gpuprof)")
    for o in OPTIONS:
        if o.kind == "bool":
            group.addoption(o.flag, action="store_true", default=None, dest=o.ini, help=o.described)
            parser.addini(o.ini, o.help, type="bool", default=o.default)
        elif o.kind == "list":
            group.addoption(o.flag, action="append", default=None, dest=o.ini, metavar="EXPR", help=o.described)
            parser.addini(o.ini, o.help, type="linelist", default=o.default)
        else:
            group.addoption(o.flag, action="store", default=None, dest=o.ini, metavar=o.kind.upper(),
                            help=o.described)
            parser.addini(o.ini, o.help, default=None if o.default is None else str(o.default))


def _get(config: pytest.Config, o: Option) -> Any:
    """An option's value: command line, else ini key, else default.  Paths given on the
    command line are relative to the invocation directory, others to the rootdir."""
    value = config.getoption(o.ini)
    origin, base = o.flag, config.invocation_params.dir
    if value is None:
        value = config.getini(o.ini)
        origin, base = f"ini key {o.ini}", config.rootpath
    if o.kind in ("bool", "list"):
        return value
    if value in (None, ""):
        return None
    try:
        if o.kind == "int":
            return int(value)
        if o.kind == "float":
            return float(value)
    except ValueError:
        raise pytest.UsageError(f"{origin}: expected {o.kind}, got {value!r}") from None
    return Path(base, value) if o.kind == "path" else value


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gpuprof(wait=, warmup=, active=, flush_l2=, thresholds=[...], tolerances={...}, world_size=, ncu=): profile "
        "this test under --gpuprof; a test without the gpuprof fixture is run once per step; world_size=N runs "
        "its body in N processes, one per rank (fixture gpuprof_rank)",
    )
    settings = _settings(config)  # (the nsys backend's outer run ended in pytest_cmdline_main)
    if settings is not None and not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        from .run.gpus import hand_over

        hand_over(os.environ)  # the xdist workers, started after this, inherit it
    if settings is not None:
        config.stash[SESSION] = _register_roles(config, settings)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspec

    pluginmanager.add_hookspecs(hookspec)


def _register_roles(config: pytest.Config, settings: Any) -> Any:
    """This process's plugin objects, chosen once from what it is (``settings.process``, read by
    ``run.role``; torchrun's rank; pytest-xdist's worker or controller): the session that
    profiles (a torchrun rank's own kind), the relay of a worker or a controller, the head of an
    A/B comparison, and the steps after judging that apply here."""
    from .run.session import GpuprofSession
    from .run.xdist_relay import Outbox

    process, worker = settings.process, hasattr(config, "workerinput")
    outbox = Outbox() if worker else None  # a pytest-xdist worker sends what it finds to the controller
    if settings.torchrun is not None:
        from .run.torchrun_session import TorchrunSession

        session: Any = TorchrunSession(settings, settings.torchrun)
    else:
        session = GpuprofSession(settings, relay=None if outbox is None else outbox.send)
    config.pluginmanager.register(session, "gpuprof-session")
    if outbox is not None:
        config.pluginmanager.register(outbox, "gpuprof-outbox")
    else:
        from .run.xdist_relay import Inbox

        config.pluginmanager.register(Inbox(session.outcomes), "gpuprof-inbox")
    if session.backend.in_process and settings.torchrun is None and config.pluginmanager.has_plugin("benchmark"):
        from .run.bench import BenchmarkGate  # under torchrun rank 0 judges every rank's trace

        config.pluginmanager.register(BenchmarkGate(session.profiler_of, session.judge_test, session.metrics_of),
                                      "gpuprof-benchmark")
    if not session.backend.in_process or process.measures_for_another:
        return session  # judged elsewhere, or measured for another: no step after judging here
    sides = session.sides(config)
    if sides is not None:
        from .run.base_revision import BaseRevision

        base = BaseRevision(sides, settings.base, session.judge, settings.base_pairs, settings.timeline_events,
                            worker)
        session.against_base = base.entry
        config.pluginmanager.register(base, "gpuprof-base-revision")
    from .run.steps import Confirmation, KernelCounters

    if settings.confirm and not process.confirming and sides is None:  # the base's pairs decide there
        config.pluginmanager.register(Confirmation(settings.confirm, session.judging_args(), settings.confirm_timeout),
                                      "gpuprof-confirmation")
    if process.first:
        config.pluginmanager.register(KernelCounters(settings.ncu, settings.ncu_path, session.plan_args(),
                                                     settings.confirm_timeout, session.outcomes),
                                      "gpuprof-kernel-counters")
    return session


def _check_rootdir_not_moved(config: pytest.Config) -> None:
    """pytest chooses the rootdir and ini file, which decide the node ids that name traces and
    baselines, before it knows plugin options: in ``--gpuprof-base DIR`` it takes DIR for a test
    path as well.  A gpuprof option's value given so, with a space, that changed its choice is
    a usage error naming the option and its ``=`` form."""
    if hasattr(config, "workerinput"):  # an xdist worker: its controller checked the command line
        return
    args = [str(a) for a in config.invocation_params.args]
    flags = {o.flag for o in OPTIONS if o.kind != "bool"}
    values = {i + 1 for i, a in enumerate(args[:-1]) if a in flags and not args[i + 1].startswith("-")}
    if not values:
        return
    tests = set(config.option.file_or_dir or ())
    taken = _rootdir_and_ini(config, [a for i, a in enumerate(args) if i in values or a in tests])
    alone = _rootdir_and_ini(config, [a for i, a in enumerate(args) if i not in values and a in tests])
    if taken == alone:
        return
    moved = [(args[i - 1], args[i]) for i in sorted(values)
             if Path(config.invocation_params.dir, args[i].split("::")[0]).exists()]  # pytest takes existing paths
    raise pytest.UsageError("; ".join(
        f"{flag} {value}: given with a space, pytest also took {value} for a test path when it chose the rootdir "
        f"and ini file ({_where(taken)}; without it {_where(alone)}), which decide the node ids that name traces "
        f"and baselines: write {flag}={value}" for flag, value in moved))


def _rootdir_and_ini(config: pytest.Config, tests: list[str]) -> tuple[Path, Path | None]:
    """The rootdir and ini file pytest chooses for these test paths, with this run's ``-c``,
    ``-o`` and ``--rootdir`` (``determine_setup``'s arguments differ between pytest 7.4 and 9)."""
    given = {"inifile": config.option.inifilename, "override_ini": config.option.override_ini, "args": tests,
             "rootdir_cmd_arg": config.option.rootdir or None, "invocation_dir": config.invocation_params.dir,
             "config": config}
    accepted = inspect.signature(determine_setup).parameters
    rootdir, inifile = determine_setup(**{k: v for k, v in given.items() if k in accepted})[:2]
    return rootdir, inifile


def _where(choice: tuple[Path, Path | None]) -> str:
    rootdir, inifile = choice
    return f"rootdir {rootdir}, " + (f"ini file {inifile}" if inifile else "no ini file")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests() -> None:
    """An xdist worker of a --gpuprof run takes its own GPU before any conftest loads (``run.gpus``)."""
    from .run.gpus import pin_worker

    pin_worker(os.environ)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` under --gpuprof: a worker per visible GPU (``run.gpus``); asked before
    ``pytest_configure``, so from the options themselves."""
    if _settings(config) is None:
        return None
    from .run.gpus import visible_gpus

    return len(visible_gpus()) or None


@pytest.hookimpl(tryfirst=True)  # before pytest's -m deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses the ``gpuprof`` fixture without the marker gets the marker, so that
    ``-m gpuprof`` selects every profiled test.  Each marker is checked now, in every mode:
    its arguments, thresholds and tolerances with their metric names (``Rules.with_marker``,
    which loads no pandas)."""
    from .compare.rules import Rules

    for item in items:
        if "gpuprof" in getattr(item, "fixturenames", ()) and item.get_closest_marker("gpuprof") is None:
            item.add_marker("gpuprof")
        try:
            spec = marker_of(item)
            if spec.arguments:
                Rules().with_marker(spec.arguments, item.nodeid)
        except ConfigError as exc:
            marker_mistake(item, str(exc))


@pytest.hookimpl(wrapper=True, trylast=True)  # inside pytest's own wrappers, which tear down what they set up
def pytest_runtest_setup(item: pytest.Item):
    """A test whose marker is wrong fails at its set-up, before anything could skip it (no GPU,
    no trace to replay) and before its fixtures run: a CPU-only run catches the mistake."""
    mistake = item.stash.get(MISTAKE, None)
    if mistake is not None:
        pytest.fail(mistake, pytrace=False)
    return (yield)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Under gpuprof, one line at the top of the run: version, capture, baselines and, for a
    run that profiles on this machine, its GPU; nothing (and no torch) when gpuprof is off."""
    settings = config.stash.get(SETTINGS, None)
    if settings is None:
        return None
    from . import __version__
    from .report.terminal import header_line

    gpu = None
    if settings.replay_dir is None and settings.backend == "torch":
        from .capture.environment import visible_gpu

        gpu = visible_gpu()
    return header_line(__version__, settings.backend, settings.baseline_dir, settings.replay_dir, gpu)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """With the nsys backend, this pytest runs no test: it re-runs itself under nsys."""
    settings = _settings(config)
    if settings is None or settings.backend != "nsys" or settings.nsys_inner is not None:
        return None
    from .run.nsys_backend import main

    return main(settings, config)


def _settings(config: pytest.Config):
    """The run's Settings, or None when gpuprof is off, resolved once per run (both
    pytest_cmdline_main and pytest_configure need them).  Bad values are usage errors."""
    if SETTINGS not in config.stash:
        _check_rootdir_not_moved(config)
        config.stash[SETTINGS] = _resolve_settings(config)
    return config.stash[SETTINGS]


def _default_plan(config: pytest.Config) -> StepPlan:
    """The step plan of the options and ini keys, before any marker's overrides."""
    wait, warmup, active = (_get(config, BY_NAME[n]) for n in ("wait", "warmup", "active"))
    return StepPlan(wait, warmup, active, bool(_get(config, BY_NAME["flush-l2"])))


def _resolve_settings(config: pytest.Config):
    opts = {o.name: _get(config, o) for o in OPTIONS}
    process = this_process()  # which process this is, decided once: the session asks settings.process
    if not (opts[""] or opts["update-baseline"] or opts["replay"] or opts["nsys"]) or not process.profiles:
        return None  # off, or a distributed test's rank that its test's process does not profile
    from .run.settings import settings_from

    try:
        return settings_from(opts, _default_plan(config), process,
                             xdist=bool(config.getoption("numprocesses", None) or hasattr(config, "workerinput")))
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A distributed test's body runs in its ranks, one fresh process each (``run.rank_processes``);
    this process waits for them and fails with a failing rank's message."""
    from .run.rank_processes import spawn, verdict

    size = marker_of(pyfuncitem).world_size  # (a marker found wrong failed the test's set-up)
    place = this_process().place
    if place is not None and size > 1 and size != place.world_size and this_process().torchrun:
        pytest.skip(f"gpuprof: a distributed test of {size} ranks; torchrun started {place.world_size}")
    if size <= 1 or place is not None:  # a rank already (spawned, or torchrun's): runs it here
        return None
    config = pyfuncitem.config
    timeout = _get(config, BY_NAME["rank-timeout"])
    if not timeout or timeout <= 0:
        pytest.fail(f"--gpuprof-rank-timeout / ini key gpuprof_rank_timeout: must be positive, got {timeout}",
                    pytrace=False)
    session = config.stash.get(SESSION, None)
    if session is not None and not session.backend.runs_tests:  # replayed: its ranks' kept traces
        from .run.session import RANKS

        pyfuncitem.stash[RANKS] = []
        return True
    visible = _cuda_gpus()
    if 0 < visible < size:
        _skip(session, pyfuncitem, f"a distributed test of {size} ranks needs {size} GPUs, {visible} visible "
                                   "(CUDA_VISIBLE_DEVICES; under pytest-xdist each worker sees one: run these tests "
                                   "without -n)")
    profiled = session.rank_profiling(pyfuncitem) if session is not None else None
    try:
        outcomes = spawn(pyfuncitem.path, pyfuncitem.nodeid, size, config.rootpath, timeout,
                         config.pluginmanager.has_plugin("xdist"), profiled)
        found = verdict(outcomes, timeout)
        if found is not None:
            how, why = found
            if how == "skip":
                _skip(session, pyfuncitem, why)
            pytest.fail(f"gpuprof: {why}", pytrace=False)
    except BaseException:
        if profiled is not None:  # the ranks' files judge nothing now
            shutil.rmtree(profiled.folder, ignore_errors=True)
        raise
    if profiled is not None:
        from .run.session import RANKS

        pyfuncitem.stash[RANKS] = outcomes  # judged by the session once the call ends
    return True


def _skip(session: Any, item: pytest.Item, why: str) -> None:
    """Skip a distributed test; under --gpuprof it is listed among the profiled tests not measured."""
    if session is not None:
        session.add_skipped(item.nodeid, why)
    pytest.skip(f"gpuprof: {why}")


def _cuda_gpus() -> int:
    """The GPUs this process sees (``run.gpus.visible_gpus``), 0 where CUDA is not available
    (the ranks use gloo there)."""
    import torch

    from .run.gpus import visible_gpus

    return len(visible_gpus()) if torch.cuda.is_available() else 0




@pytest.fixture
def gpuprof_rank(request: pytest.FixtureRequest):
    """This rank of a distributed test (``@pytest.mark.gpuprof(world_size=N)``, or of a session
    torchrun started): ``rank``, ``world_size``, ``local_rank`` and ``device``, with the process
    group joined before the test and left after it (NCCL on GPUs, gloo without; under torchrun
    joined once, ``_gpuprof_torchrun_group``); None outside a rank.  A replay runs no test body:
    nothing to join."""
    from .run.rank_processes import join, leave, this_rank

    rank = this_rank()
    session = request.config.stash.get(SESSION, None)
    if rank is None or session is not None and not session.backend.runs_tests:
        yield rank
        return
    if this_process().torchrun:
        request.getfixturevalue("_gpuprof_torchrun_group")
        yield rank
        return
    join(rank)
    try:
        yield rank
    finally:
        leave()


@pytest.fixture(scope="session")
def _gpuprof_torchrun_group():
    """Under torchrun (``gpuprof_rank`` asks for it there): torchrun's process group, joined by
    the first test that asks for its rank unless the suite joined it already, kept for every
    test after, and left when the session ends if gpuprof joined it."""
    import torch.distributed as dist

    from .run.rank_processes import join, leave, this_rank

    joined = not dist.is_initialized()
    rank = this_rank()
    if joined and rank is not None:  # (torchrun's processes always have their place)
        join(rank)
    try:
        yield
    finally:
        if joined:
            leave()


@pytest.fixture
def gpuprof(request: pytest.FixtureRequest) -> GpuProf:
    """Drive a test's steps: ``for _ in gpuprof.steps(warmup=3, active=10): work()``;
    mark regions with ``with gpuprof.range("name"):``."""
    session = request.config.stash.get(SESSION, None)
    try:
        if session is not None:
            return session.profiler_of(request.node)
        return GpuProf(marker_of(request.node).plan(_default_plan(request.config)))
    except ConfigError as exc:
        problem = str(exc)
    pytest.fail(problem, pytrace=False)  # outside the except: no "during handling of" chain shown
