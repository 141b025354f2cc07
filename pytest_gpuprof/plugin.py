"""pytest hooks: the options, the fixtures and marker, and the registration of this process's roles.

Without ``--gpuprof`` the plugin declares its options, marker and fixtures, and registers
where a distributed test's body runs (``run.rank_roles``); profiled tests run as plain
tests: torch, nvtx, pandas and numpy are not imported.  With it, ``pytest_configure``
registers the plugin objects of this process's role (``_register_roles``:
``run.session.GpuprofSession`` and the others), chosen once and built with what they need,
whose hook methods do the work (imported there, for that reason); with the nsys backend,
``pytest_cmdline_main`` runs the session outside nsys instead (``run.nsys_backend``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from .capture.marker import MISTAKE, marker_mistake, marker_of, marker_origin
from .capture.profiler import GpuProf
from .errors import ConfigError
from .options import BY_NAME, OPTIONS
from .run.given import check_rootdir_not_moved, default_plan, option_value
from .run.role import Process, this_process

if TYPE_CHECKING:  # for the types only: most load pandas, which a plain run does not
    from .compare.judge import Judge
    from .run.base_revision import BaseRevision
    from .run.rank_processes import Rank
    from .run.rank_roles import RankRole
    from .run.session import GpuprofSession
    from .run.settings import Settings
    from .run.xdist_relay import Outbox

#: The run's settings, None with gpuprof off (``_settings``).
SETTINGS = pytest.StashKey["Settings | None"]()
#: The session that profiles, once gpuprof is on (``_register_roles``).
SESSION = pytest.StashKey["GpuprofSession"]()
#: Where a distributed test's body runs in this process (``_register_roles``).
RANKS = pytest.StashKey["RankRole"]()


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gpuprof(wait=, warmup=, active=, flush_l2=, thresholds=[...], tolerances={...}, world_size=, ncu=): profile "
        "this test under --gpuprof; a test without the gpuprof fixture is run once per step; world_size=N runs "
        "its body in N processes, one per rank (fixture gpuprof_rank)",
    )
    _register_roles(config, _settings(config))  # (the nsys backend's outer run ended in pytest_cmdline_main)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspec

    pluginmanager.add_hookspecs(hookspec)


def _register_roles(config: pytest.Config, settings: Settings | None) -> GpuprofSession | None:
    """This process's plugin objects, chosen once from what it is (``settings.process``, read by
    ``run.role``; torchrun's rank; pytest-xdist's worker or controller), each built with what
    it needs, in order: once gpuprof is on, the session that profiles and the objects beside it
    (``_register_session``); then, gpuprof on or off, where a distributed test's body runs
    (``_register_ranks``).  Returns the session, also kept in the config's stash (``SESSION``)."""
    if settings is None:
        _register_ranks(config, this_process(), None, replay=False)
        return None
    session = config.stash[SESSION] = _register_session(config, settings)
    _register_ranks(config, settings.process, session, replay=settings.replay_dir is not None)
    return session


def _register_ranks(config: pytest.Config, process: Process, session: GpuprofSession | None, replay: bool) -> None:
    """Where a distributed test's body runs (``run.rank_roles``): spawned from the test's own
    process (none in a replay), or run here, in a rank.  Registered after the session: its
    ``pytest_pyfunc_call`` comes first."""
    from .run import rank_roles as r

    timeout = option_value(config, BY_NAME["rank-timeout"])
    ranks: RankRole
    if process.place is None:  # the test's own process
        ranks = r.ReplayedRanks(timeout, session) if replay \
            else r.RankSpawner(timeout, config.pluginmanager.has_plugin("xdist"), session)
    elif process.torchrun:
        ranks = r.TorchrunRank(r.no_group if replay else r.torchruns_group, process.place.world_size)
    else:
        ranks = r.SpawnedRank(r.no_group if replay else r.joined)
    config.pluginmanager.register(ranks, "gpuprof-ranks")
    config.stash[RANKS] = ranks


def _register_session(config: pytest.Config, settings: Settings) -> GpuprofSession:
    """The session that profiles, the relay of a worker or a controller, the head of an A/B
    comparison, and the steps after judging that apply here, each built with what it needs."""
    from .run.xdist_relay import Outbox

    register = config.pluginmanager.register
    process, worker = settings.process, hasattr(config, "workerinput")
    if not worker and getattr(config.option, "numprocesses", None):
        from .run.gpus import hand_over

        hand_over(os.environ)  # the xdist workers, started after this, inherit it
    outbox = Outbox() if worker else None  # a pytest-xdist worker sends what it finds to the controller
    relay = None if outbox is None else outbox.send
    # the session inside nsys (a replay there replays): judged outside, nothing after judging here
    if settings.nsys_inner is not None and settings.replay_dir is None:
        from .run.nsys_backend import NsysInnerSession

        session: GpuprofSession = NsysInnerSession(settings, relay)
        _register_with_relay(config, session, outbox)
        return session
    from .run.session import GpuprofSession, backend_of

    backend = backend_of(settings)
    judge = settings.judge(alongside=settings.base is not None and backend.in_process)
    base = _base_revision(config, settings, judge, worker) if backend.in_process and not process.measures_for_another \
        else None
    against_base = None if base is None else base.entry
    if settings.torchrun is not None:  # (never a pytest-xdist worker: the settings refuse it)
        from .run.torchrun_session import TorchrunSession

        session = TorchrunSession(settings, settings.torchrun, backend, judge=judge, against_base=against_base)
    else:
        session = GpuprofSession(settings, backend, judge=judge, against_base=against_base, relay=relay)
    _register_with_relay(config, session, outbox)
    if backend.in_process and settings.torchrun is None and config.pluginmanager.has_plugin("benchmark"):
        from .run.bench import BenchmarkGate  # under torchrun rank 0 judges every rank's trace

        register(BenchmarkGate(session.profiler_of, session.judge_test, session.metrics_of), "gpuprof-benchmark")
    if not backend.in_process or process.measures_for_another:
        return session  # judged elsewhere, or measured for another: no step after judging here
    if base is not None:
        register(base, "gpuprof-base-revision")
    from .run.steps import Confirmation, KernelCounters

    if settings.confirm and not process.confirming and base is None:  # the base's pairs decide there
        register(Confirmation(settings.confirm, settings.judging_args(), settings.confirm_timeout),
                 "gpuprof-confirmation")
    if process.first:
        register(KernelCounters(settings.ncu, settings.ncu_path, settings.plan_args(), settings.confirm_timeout,
                                session.outcomes), "gpuprof-kernel-counters")
    return session


def _register_with_relay(config: pytest.Config, session: GpuprofSession, outbox: Outbox | None) -> None:
    """The session, then a pytest-xdist worker's outbox, or the inbox of the process that
    writes what the run found."""
    from .run.xdist_relay import Inbox

    config.pluginmanager.register(session, "gpuprof-session")
    config.pluginmanager.register(outbox or Inbox(session.outcomes), "gpuprof-outbox" if outbox else "gpuprof-inbox")


def _base_revision(config: pytest.Config, settings: Settings, judge: Judge, worker: bool) -> BaseRevision | None:
    """The head of an A/B comparison (``--gpuprof-base``), or None."""
    if settings.base is None:
        return None
    from .run.base_revision import BaseRevision
    from .run.sides import Sides

    sides = Sides(config.rootpath, settings.base.resolve(), settings.base_python or sys.executable, sys.executable,
                  tuple(settings.plan_args()), settings.confirm_timeout, config.pluginmanager.has_plugin("xdist"))
    return BaseRevision(sides, settings.base, judge, settings.base_pairs, settings.timeline_events, worker)


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
    its arguments (``marker_of``), thresholds and tolerances with their metric names
    (``Rules.with_marker``, which loads no pandas); every mistake found is kept, a line each."""
    from .compare.rules import Rules

    for item in items:
        if "gpuprof" in getattr(item, "fixturenames", ()) and item.get_closest_marker("gpuprof") is None:
            item.add_marker("gpuprof")
        problems = []
        try:
            marker_of(item)
        except ConfigError as exc:
            problems.append(str(exc))
        marker = item.get_closest_marker("gpuprof")
        if marker is not None and marker.kwargs:
            try:
                Rules().with_marker(marker.kwargs, marker_origin(item.nodeid))
            except ConfigError as exc:
                problems.append(str(exc))
        if problems:
            marker_mistake(item, "\n".join(problems))


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
    run that profiles on this machine, its GPU; nothing (and no torch) when gpuprof is off, or
    in a pytest-xdist worker, whose header no one sees (the controller prints its own)."""
    settings = config.stash.get(SETTINGS, None)
    if settings is None or hasattr(config, "workerinput"):
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
    """With the nsys backend, this pytest runs no test: it re-runs itself under nsys, as the
    session outside nsys (``run.nsys_backend.OutsideNsys``)."""
    settings = _settings(config)
    if settings is None or not settings.outside_nsys:
        return None
    from .run.nsys_backend import OutsideNsys

    return OutsideNsys(settings, config).main()


def _settings(config: pytest.Config) -> Settings | None:
    """The run's Settings, or None when gpuprof is off, resolved once per run (both
    pytest_cmdline_main and pytest_configure need them).  Bad values are usage errors."""
    if SETTINGS not in config.stash:
        check_rootdir_not_moved(config)
        config.stash[SETTINGS] = _resolve_settings(config)
    return config.stash[SETTINGS]


def _resolve_settings(config: pytest.Config) -> Settings | None:
    opts = {o.name: option_value(config, o) for o in OPTIONS}
    process = this_process()  # which process this is, decided once: the session asks settings.process
    if not (opts[""] or opts["update-baseline"] or opts["replay"] or opts["nsys"]) or not process.profiles:
        return None  # off, or a distributed test's rank that its test's process does not profile
    from .run.settings import settings_from

    try:
        return settings_from(opts, default_plan(config), process,
                             xdist=bool(config.getoption("numprocesses", None) or hasattr(config, "workerinput")))
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture
def gpuprof_rank(request: pytest.FixtureRequest) -> Iterator[Rank | None]:
    """This rank of a distributed test (``@pytest.mark.gpuprof(world_size=N)``, or of a session
    torchrun started): ``rank``, ``world_size``, ``local_rank`` and ``device``, with the process
    group joined before the test and left after it (NCCL on GPUs, gloo without; under torchrun
    joined once, ``_gpuprof_torchrun_group``); None outside a rank.  A replay runs no test body:
    nothing to join.  The process's role object gives it (``run.rank_roles``)."""
    yield from request.config.stash[RANKS].rank(request)


@pytest.fixture(scope="session")
def _gpuprof_torchrun_group() -> Iterator[None]:
    """Under torchrun (``gpuprof_rank`` asks for it there): torchrun's process group, joined by
    the first test that asks for its rank unless the suite joined it already, kept for every
    test after, and left when the session ends if gpuprof joined it (``run.rank_roles``)."""
    from .run.rank_roles import torchruns_group_held

    yield from torchruns_group_held()


@pytest.fixture
def gpuprof(request: pytest.FixtureRequest) -> GpuProf:
    """Drive a test's steps: ``for _ in gpuprof.steps(warmup=3, active=10): work()``;
    mark regions with ``with gpuprof.range("name"):``."""
    session = request.config.stash.get(SESSION, None)
    try:
        if session is not None:
            return session.profiler_of(request.node)
        return GpuProf(marker_of(request.node).plan(default_plan(request.config)))
    except ConfigError as exc:
        problem = str(exc)
    pytest.fail(problem, pytrace=False)  # outside the except: no "during handling of" chain shown
