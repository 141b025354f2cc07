"""pytest hooks: options, the ``gpuprof`` fixture and marker, and wiring to the session.

Without ``--gpuprof`` the plugin only registers its options, marker and fixture,
and profiled tests run as plain tests: torch, pandas and numpy are imported only
once profiling is on (``session``, ``compare`` and ``report`` are loaded lazily).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .capture import PLAN_KEYS, GpuProf, StepPlan, nvtx_range
from .errors import ConfigError

# (option, ini key, kind, default, help).  Every option is also an ini key of
# [tool.pytest.ini_options]; the command line wins over the ini file.
OPTIONS: tuple[tuple[str, str, str, Any, str], ...] = (
    ("--gpuprof", "gpuprof", "bool", False,
     "profile tests that use the gpuprof fixture or marker and compare them with their baselines"),
    ("--gpuprof-update-baseline", "gpuprof_update_baseline", "bool", False,
     "record or refresh the baselines of the profiled tests that ran (implies --gpuprof)"),
    ("--gpuprof-strict", "gpuprof_strict", "bool", False,
     "fail a profiled test that has no baseline for this GPU model"),
    ("--gpuprof-baseline-dir", "gpuprof_baseline_dir", "path", "baselines",
     "directory of baseline JSON files (default: baselines under the rootdir)"),
    ("--gpuprof-output-dir", "gpuprof_output_dir", "path", ".gpuprof",
     "directory for kept traces and reports (default: .gpuprof under the rootdir)"),
    ("--gpuprof-keep-traces", "gpuprof_keep_traces", "bool", False,
     "keep each profiled test's Chrome/Perfetto trace under OUTPUT_DIR/traces"),
    ("--gpuprof-replay", "gpuprof_replay", "path", None,
     "judge kept traces from this directory instead of running the profiled tests (implies --gpuprof; "
     "no GPU needed)"),
    ("--gpuprof-kernel-time-tolerance", "gpuprof_kernel_time_tolerance", "float", 0.05,
     "relative tolerance of kernel times per step: kernel_time_us and each kernel name's time (default: 0.05)"),
    ("--gpuprof-time-tolerance", "gpuprof_time_tolerance", "float", 0.10,
     "relative tolerance of the other time metrics per step: copy times and window_us (default: 0.10)"),
    ("--gpuprof-time-floor-us", "gpuprof_time_floor_us", "float", 5.0,
     "time changes per step smaller than this many microseconds never count (default: 5)"),
    ("--gpuprof-ratio-tolerance", "gpuprof_ratio_tolerance", "float", 0.05,
     "absolute tolerance of ratio metrics such as gpu_utilization (default: 0.05)"),
    ("--gpuprof-threshold", "gpuprof_thresholds", "list", [],
     "absolute requirement such as 'gpu_utilization >= 0.85'; repeatable (ini: one per line)"),
    ("--gpuprof-backend", "gpuprof_backend", "str", "torch",
     "capture with torch.profiler ('torch', default) or re-run the session under Nsight Systems ('nsys')"),
    ("--gpuprof-nsys", "gpuprof_nsys", "bool", False, "short for --gpuprof --gpuprof-backend=nsys"),
    ("--gpuprof-nsys-path", "gpuprof_nsys_path", "str", None,
     "the nsys binary (default: $GPUPROF_NSYS, then PATH, then the usual install locations)"),
    ("--gpuprof-json", "gpuprof_json", "path", None,
     "write every profiled test's status, metrics, baseline, rules and verdicts here (docs/results.md)"),
    ("--gpuprof-summary", "gpuprof_summary", "path", None,
     "write a Markdown summary of the profiled tests here (default: appended to $GITHUB_STEP_SUMMARY when set)"),
    ("--gpuprof-html", "gpuprof_html", "path", None,
     "write one self-contained HTML report: timelines, metrics against baselines, kernel diff (docs/html.md)"),
    ("--gpuprof-benchmark-json", "gpuprof_benchmark_json", "path", None,
     "write the metrics here for github-action-benchmark (tool customSmallerIsBetter; docs/results.md)"),
    ("--gpuprof-timeline-events", "gpuprof_timeline_events", "int", 600,
     "events of the one-step timeline sample kept with results and baselines; 0: none (default: 600)"),
    ("--gpuprof-wait", "gpuprof_wait", "int", 0, "default unprofiled steps before warm-up (default: 0)"),
    ("--gpuprof-warmup", "gpuprof_warmup", "int", 3, "default warm-up steps (default: 3)"),
    ("--gpuprof-active", "gpuprof_active", "int", 10, "default measured steps (default: 10)"),
    ("--gpuprof-flush-l2", "gpuprof_flush_l2", "bool", False,
     "empty the GPU's L2 cache before every step, for kernel micro-benchmarks; the flush itself is "
     "not measured (marker or steps() argument: flush_l2=True)"),
)

MARKER_KEYS = {*PLAN_KEYS, "thresholds", "tolerances"}

SETTINGS = pytest.StashKey["Any"]()
SESSION = pytest.StashKey["Any"]()
PROFILER = pytest.StashKey[GpuProf]()
BENCHMARK = pytest.StashKey["Any"]()
RESULT = pytest.StashKey["Any"]()  # a test judged early (bench.GpuBenchmark measured it)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuprof", "GPU performance gates (pytest-gpuprof)")
    for opt, ini, kind, default, help_text in OPTIONS:
        dest = ini
        if kind == "bool":
            group.addoption(opt, action="store_true", default=None, dest=dest, help=help_text)
            parser.addini(ini, help_text, type="bool", default=default)
        elif kind == "list":
            group.addoption(opt, action="append", default=None, dest=dest, metavar="EXPR", help=help_text)
            parser.addini(ini, help_text, type="linelist", default=default)
        else:
            group.addoption(opt, action="store", default=None, dest=dest, metavar=kind.upper(), help=help_text)
            parser.addini(ini, help_text, default=None if default is None else str(default))


def _get(config: pytest.Config, ini: str, kind: str) -> Any:
    """An option's value: command line, else ini key, else default.  Paths given on the
    command line are relative to the invocation directory, others to the rootdir."""
    value = config.getoption(ini)
    origin, base = f"--{ini.replace('_', '-')}", config.invocation_params.dir
    if value is None:
        value = config.getini(ini)
        origin, base = f"ini key {ini}", config.rootpath
    if kind in ("bool", "list"):
        return value
    if value in (None, ""):
        return None
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
    except ValueError:
        raise pytest.UsageError(f"{origin}: expected {kind}, got {value!r}") from None
    return Path(base, value) if kind == "path" else value


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gpuprof(wait=, warmup=, active=, flush_l2=, thresholds=[...], tolerances={...}): profile this test "
        "under --gpuprof; a test without the gpuprof fixture is run once per step",
    )
    settings = _settings(config)
    if settings is not None:
        from .session import GpuprofSession

        config.stash[SESSION] = GpuprofSession(settings)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """With the nsys backend, this pytest runs no test: it re-runs itself under nsys."""
    settings = _settings(config)
    if settings is None or settings.backend != "nsys" or settings.nsys_inner is not None:
        return None
    from .errors import GpuprofError
    from .nsys_session import run_outer
    from .report import failure_message, session_lines

    try:
        status, session = run_outer(settings, list(config.invocation_params.args), config.invocation_params.dir)
    except KeyboardInterrupt:
        print("gpuprof: interrupted; nsys and the session under it were stopped")
        return pytest.ExitCode.INTERRUPTED
    except GpuprofError as exc:
        print(f"gpuprof: {exc}")
        return pytest.ExitCode.INTERNAL_ERROR
    if not session.finish():
        status = status or pytest.ExitCode.TESTS_FAILED
    print("=" * 30 + " gpuprof (nsys backend) " + "=" * 30)
    for result in session.results:
        if result.failed:
            print(f"FAILED {result.nodeid}\n{failure_message(result)}")
    print("\n".join(session_lines(session)))
    return status


def _settings(config: pytest.Config):
    """The run's Settings, or None when gpuprof is off, resolved once per run (both
    pytest_cmdline_main and pytest_configure need them).  Bad values are usage errors."""
    if SETTINGS not in config.stash:
        config.stash[SETTINGS] = _resolve_settings(config)
    return config.stash[SETTINGS]


def _default_plan(config: pytest.Config) -> StepPlan:
    """The step plan of the options and ini keys, before any marker's overrides."""
    return StepPlan(*(_get(config, f"gpuprof_{n}", "int") for n in ("wait", "warmup", "active")),
                    bool(_get(config, "gpuprof_flush_l2", "bool")))


def _resolve_settings(config: pytest.Config):
    opts = {ini: _get(config, ini, kind) for _, ini, kind, _, _ in OPTIONS}
    if not (opts["gpuprof"] or opts["gpuprof_update_baseline"] or opts["gpuprof_replay"] or opts["gpuprof_nsys"]):
        return None
    from .compare import Rules, parse_threshold
    from .nsys_session import inner_results_path
    from .session import BACKENDS, Settings

    backend = "nsys" if opts["gpuprof_nsys"] else opts["gpuprof_backend"]
    try:
        if backend not in BACKENDS:
            raise ConfigError(f"--gpuprof-backend / ini key gpuprof_backend: expected one of {', '.join(BACKENDS)}, "
                              f"got {backend!r}")
        thresholds = tuple(parse_threshold(t, "--gpuprof-threshold / ini gpuprof_thresholds")
                           for t in opts["gpuprof_thresholds"] or ())
        for name in ("gpuprof_kernel_time_tolerance", "gpuprof_time_tolerance", "gpuprof_ratio_tolerance",
                     "gpuprof_time_floor_us", "gpuprof_timeline_events"):
            if opts[name] < 0:
                raise ConfigError(
                    f"--{name.replace('_', '-')} / ini key {name}: must not be negative, got {opts[name]}"
                )
        settings = Settings(
            update_baseline=bool(opts["gpuprof_update_baseline"]),
            strict=bool(opts["gpuprof_strict"]),
            baseline_dir=opts["gpuprof_baseline_dir"],
            output_dir=opts["gpuprof_output_dir"],
            keep_traces=bool(opts["gpuprof_keep_traces"]),
            replay_dir=opts["gpuprof_replay"],
            plan=_default_plan(config),
            rules=Rules(
                kernel_time_tolerance=opts["gpuprof_kernel_time_tolerance"],
                time_tolerance=opts["gpuprof_time_tolerance"],
                time_floor_us=opts["gpuprof_time_floor_us"],
                ratio_tolerance=opts["gpuprof_ratio_tolerance"],
                thresholds=thresholds,
            ),
            backend=backend,
            nsys_path=opts["gpuprof_nsys_path"],
            nsys_inner=inner_results_path() if backend == "nsys" else None,
            timeline_events=opts["gpuprof_timeline_events"],
            reports={"json": opts["gpuprof_json"], "summary": opts["gpuprof_summary"],
                     "html": opts["gpuprof_html"], "benchmark-json": opts["gpuprof_benchmark_json"]},
        )
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings.replay_dir is not None and not settings.replay_dir.is_dir():
        raise pytest.UsageError(f"--gpuprof-replay: {settings.replay_dir} is not a directory")
    return settings


def _session(config: pytest.Config):
    return config.stash.get(SESSION, None)


def _marker_kwargs(item: pytest.Item) -> dict[str, Any]:
    marker = item.get_closest_marker("gpuprof")
    if marker is None:
        return {}
    if marker.args:
        raise ConfigError(f"@pytest.mark.gpuprof on {item.nodeid}: takes keyword arguments only")
    unknown = set(marker.kwargs) - MARKER_KEYS
    if unknown:
        raise ConfigError(
            f"@pytest.mark.gpuprof on {item.nodeid}: unknown argument(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(MARKER_KEYS))}"
        )
    return dict(marker.kwargs)


def _is_profiled(item: pytest.Item) -> bool:
    return item.get_closest_marker("gpuprof") is not None or "gpuprof" in getattr(item, "fixturenames", ())


def _profiler(item: pytest.Item) -> GpuProf:
    """The item's GpuProf, made on first use (fixture or marker form)."""
    prof = item.stash.get(PROFILER, None)
    if prof is None:
        session = _session(item.config)
        kwargs = _marker_kwargs(item)
        if session is None:
            prof = GpuProf(_default_plan(item.config).with_overrides(**{k: kwargs.get(k) for k in PLAN_KEYS}))
        else:
            prof = session.new_profiler(item.nodeid, kwargs)
        item.stash[PROFILER] = prof
    return prof


@pytest.fixture
def gpuprof(request: pytest.FixtureRequest) -> GpuProf:
    """Drive a test's steps: ``for _ in gpuprof.steps(warmup=3, active=10): work()``;
    mark regions with ``with gpuprof.range("name"):``."""
    try:
        return _profiler(request.node)
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    session = _session(item.config)
    if session is None or not _is_profiled(item) or session.settings.replay_dir is not None:
        return
    import torch

    if not torch.cuda.is_available():
        reason = "gpuprof: no CUDA GPU available (torch.cuda.is_available() is False), profiled test skipped"
        session.skipped[item.nodeid] = reason
        pytest.skip(reason)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Marker form: run the test body once per step.  Replay: do not run it at all.
    pytest-benchmark's fixture: hand it over GPU-aware (bench.GpuBenchmark)."""
    session = _session(pyfuncitem.config)
    if session is not None and "benchmark" in pyfuncitem.fixturenames and _wrap_benchmark(pyfuncitem, session):
        return None  # pytest runs the test once, with the wrapped fixture
    if session is None or not _is_profiled(pyfuncitem):
        return None
    if session.settings.replay_dir is not None:
        return True
    if "gpuprof" in pyfuncitem.fixturenames:
        return None
    try:
        prof = _profiler(pyfuncitem)
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    for _ in prof.steps():
        pyfuncitem.obj(**args)
    return True


def _wrap_benchmark(item: pytest.Function, session) -> bool:
    """Under --gpuprof with torch.profiler on a CUDA machine, wrap the test's ``benchmark``."""
    if session.settings.replay_dir is not None or session.settings.backend != "torch":
        return False
    import torch

    if not torch.cuda.is_available():
        return False
    from .bench import GpuBenchmark
    from .kineto import load_kineto
    from .metrics import measure

    try:
        prof = _profiler(item)
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)

    def metrics_of(p: GpuProf) -> dict[str, Any]:
        """A gated test is judged here, once: _profiled_call reports that result."""
        if not _is_profiled(item):
            return measure(load_kineto(p.trace_path)).metrics
        item.stash[RESULT] = session.evaluate(item.nodeid, p, _marker_kwargs(item))
        return item.stash[RESULT].metrics or {}

    original = item.funcargs["benchmark"]
    item.stash[BENCHMARK] = original  # put back after the call: pytest-benchmark reports from it
    item.funcargs["benchmark"] = GpuBenchmark(original, prof, metrics_of)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    session = _session(item.config)
    if session is None:
        return (yield)
    try:
        return (yield from _profiled_call(item, session))
    finally:
        if BENCHMARK in item.stash:
            item.funcargs["benchmark"] = item.stash[BENCHMARK]


def _profiled_call(item: pytest.Item, session):
    if not _is_profiled(item):
        return (yield)
    inner = session.settings.nsys_inner is not None
    if inner:
        session.start_nsys_capture()
    if session.settings.replay_dir is None:
        with nvtx_range(item.nodeid):
            outcome = yield
    else:
        outcome = yield
    from .report import failure_message

    try:
        kwargs = _marker_kwargs(item)
        prof = _profiler(item)
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)
    if inner:  # judged by the outer session once nsys has written the report
        session.nsys_tests.append({"nodeid": item.nodeid, "marker": kwargs, "passed": prof.completed})
        return outcome
    result = item.stash[RESULT] if RESULT in item.stash else session.evaluate(item.nodeid, prof, kwargs)
    from .results import junit_properties

    item.user_properties.extend(junit_properties(result))  # JUnit XML <properties> (docs/results.md)
    if result.failed:
        pytest.fail(failure_message(result), pytrace=False)
    return outcome


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    session = _session(config)
    if session is None:
        return
    from .report import session_lines

    terminalreporter.write_sep("=", "gpuprof")
    for line in session_lines(session):
        terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = _session(session.config)
    if state is None:
        return
    if state.settings.nsys_inner is not None:
        state.finish_nsys_session(int(exitstatus))
        return
    if not state.finish():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    session = _session(config)
    if session is not None:
        session.close()
