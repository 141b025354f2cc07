"""A run's settings: the options resolved (command line over ini over defaults) and what this
process is for, read once, whatever its role; every part of the run stage reads them here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..capture.profiler import StepPlan
from ..compare.entry import BACKENDS
from ..compare.judge import Judge
from ..compare.rules import Rules, parse_threshold
from ..errors import ConfigError
from ..options import BY_NAME, REPORT_OPTIONS, default, option_args
from .role import Process
from .torchrun import Torchrun, launched


@dataclass(frozen=True)
class Settings:
    """Resolved options (command line over ini over defaults)."""

    update_baseline: bool
    strict: bool
    baseline_dir: Path
    output_dir: Path
    keep_traces: bool
    replay_dir: Path | None
    plan: StepPlan
    rules: Rules
    backend: str = default("backend")  # "torch" or "nsys"
    nsys_path: str | None = None
    nsys_inner: Path | None = None  # set inside the session nsys re-executes: where its results go
    ncu: bool = False  # every profiled test's heaviest kernels also under Nsight Compute (not in a side)
    ncu_path: str | None = None  # the ncu binary
    timeline_events: int = default("timeline-events")  # events of the timeline sample kept with results, baselines
    baseline_runs: int = default("baseline-runs")  # recorded runs a baseline entry keeps
    confirm: int = default("confirm")  # fresh re-runs that must reproduce a time or ratio failure
    record_processes: int = default("record-processes")  # fresh processes an update records in
    confirm_timeout: float = default("confirm-timeout")  # seconds one such re-run may take
    base: Path | None = None  # the base revision's checkout, measured alongside (run.sides)
    base_python: str | None = None  # its interpreter (None: this one)
    base_only: bool = False  # every test judged against the base, none against stored baselines
    base_pairs: int = default("base-pairs")  # at most this many base/head pairs decide a failure
    torchrun: Torchrun | None = None  # this process is one rank of a session torchrun started (run.torchrun)
    process: Process = Process()  # what this pytest process is for, as its parent said (run.role)
    reports: dict[str, Path | None] = field(default_factory=dict)  # report kind -> path (report.writers.REPORTS)

    def judge(self, alongside: bool = False) -> Judge:
        """How this run judges each test (``alongside``: the base revision is measured here)."""
        return Judge(self.baseline_dir, self.backend, self.rules, update=self.update_baseline, strict=self.strict,
                     base_only=self.base_only, alongside=alongside, timeline_events=self.timeline_events,
                     baseline_runs=self.baseline_runs, keep_counters=self.process.recording,
                     replay=self.replay_dir is not None, ncu=self.ncu)

    @property
    def outside_nsys(self) -> bool:
        """The nsys backend's session outside nsys: it runs no test, it re-runs itself under
        nsys and judges from the report (``nsys_backend.OutsideNsys``)."""
        return self.backend == "nsys" and self.nsys_inner is None

    def plan_args(self) -> list[str]:
        """This run's step plan as options, for a measurement in a fresh process."""
        plan = self.plan
        return option_args({"wait": plan.wait, "warmup": plan.warmup, "active": plan.active, "flush-l2": plan.flush_l2,
                            "min-active": plan.min_active or None})

    def judging_args(self) -> list[str]:
        """This run's judging options and steps, for a re-run that judges as it does (``confirm``)."""
        return option_args({"": True, "baseline-dir": self.baseline_dir, **self.rules.option_values()}) \
            + self.plan_args()

    @property
    def records_again(self) -> bool:
        """An update that measured its tests records them again in fresh processes, unless it is
        one of those processes or replayed kept traces (the same traces again)."""
        return (self.update_baseline and self.record_processes > 1 and not self.process.recording
                and self.replay_dir is None)


def settings_from(opts: dict[str, Any], plan: StepPlan, process: Process, xdist: bool) -> Settings:
    """The settings of the options' values (``opts``, by option name), the step plan of the options
    and this process; ``xdist``: pytest-xdist runs it (``-n``, or a worker).  A value or a
    combination gpuprof refuses is a ``ConfigError`` naming the option."""
    backend = _backend(opts)
    rules = _rules(opts)
    _check_bounds(opts)
    settings = Settings(
        update_baseline=bool(opts["update-baseline"]),
        strict=bool(opts["strict"]) and not process.measures_for_another,  # nothing fails a side
        baseline_dir=opts["baseline-dir"],
        output_dir=opts["output-dir"],
        # the first process of a recording keeps the traces its results name; the others none
        keep_traces=bool(opts["keep-traces"]) and not process.recording,
        replay_dir=opts["replay"],
        plan=plan,
        rules=rules,
        backend=backend,
        nsys_path=opts["nsys-path"],
        nsys_inner=process.inside_nsys if backend == "nsys" else None,
        ncu=bool(opts["ncu"]),
        ncu_path=opts["ncu-path"],
        timeline_events=opts["timeline-events"],
        baseline_runs=opts["baseline-runs"],
        confirm=opts["confirm"],
        record_processes=opts["record-processes"],
        confirm_timeout=opts["confirm-timeout"],
        base=None if process.measures_for_another or opts["update-baseline"] else opts["base"],
        base_python=opts["base-python"],
        base_only=bool(opts["base-only"]),
        base_pairs=opts["base-pairs"],
        # a recording's later process writes only the results document its first process reads (run.record)
        reports={o.name: opts[o.name] for o in REPORT_OPTIONS if not process.recording or o.name == "json"},
        torchrun=launched(process, opts["output-dir"], opts["rank-timeout"]),
        process=process,
    )
    _check_combinations(settings, opts, xdist)
    return settings


def _backend(opts: dict[str, Any]) -> str:
    """The backend asked for: ``nsys`` where --gpuprof-nsys is given, else the option's."""
    backend = "nsys" if opts["nsys"] else opts["backend"]
    if backend not in BACKENDS:
        raise ConfigError(f"--gpuprof-backend / ini key gpuprof_backend: expected one of {', '.join(BACKENDS)}, "
                          f"got {backend!r}")
    return backend


def _rules(opts: dict[str, Any]) -> Rules:
    """The rules of the options (tolerances, thresholds), an error naming the option and its
    ini key."""
    thresholds = tuple(parse_threshold(t, "--gpuprof-threshold / ini gpuprof_thresholds")
                       for t in opts["threshold"] or ())
    return Rules.from_options(opts, thresholds, origin=lambda name: f"{BY_NAME[name].flag} / ini key "
                                                                   f"{BY_NAME[name].ini}")


def _check_bounds(opts: dict[str, Any]) -> None:
    """The counts that must not be negative, or must be at least 1, are."""
    for name, least in (("timeline-events", 0), ("confirm", 0), ("baseline-runs", 1), ("record-processes", 1),
                        ("confirm-timeout", 1), ("base-pairs", 1)):
        if opts[name] < least:
            bound = "must not be negative" if least == 0 else f"must be at least {least}"
            raise ConfigError(f"{BY_NAME[name].flag} / ini key {BY_NAME[name].ini}: {bound}, got {opts[name]}")


def _check_combinations(settings: Settings, opts: dict[str, Any], xdist: bool) -> None:
    """The folders named exist, and no two options are combined that cannot run together
    (torchrun with nsys or xdist, a base with nsys or a replay, nsys with --gpuprof-confirm
    or --gpuprof-ncu)."""
    if settings.replay_dir is not None and not settings.replay_dir.is_dir():
        raise ConfigError(f"--gpuprof-replay: {settings.replay_dir} is not a directory")
    check_baseline_dir(settings.baseline_dir)
    if settings.base is not None and not settings.base.is_dir():
        raise ConfigError(f"--gpuprof-base: {settings.base} is not a directory")
    if settings.torchrun is not None and settings.backend == "nsys":
        raise ConfigError("--gpuprof-nsys under torchrun: a session torchrun started is profiled with "
                          "torch.profiler only")
    if settings.torchrun is not None and xdist:
        raise ConfigError("pytest-xdist (-n) under torchrun: each rank is one pytest process on its own GPU")
    if settings.base is not None and (settings.backend != "torch" or settings.replay_dir is not None):
        raise ConfigError("--gpuprof-base: the base is measured with torch.profiler only, not with "
                          "--gpuprof-nsys or --gpuprof-replay")
    # ncu's process runs inside nsys's role
    if settings.backend == "nsys" and not settings.process.measures_for_another:
        for name, why in (("confirm", "the re-runs that confirm a failure measure with torch.profiler only"),
                          ("ncu", "Nsight Compute runs beside torch.profiler only (nsys and ncu each take the "
                                  "GPU's profiling for themselves)")):
            if opts[name]:
                raise ConfigError(f"{BY_NAME[name].flag} / ini key {BY_NAME[name].ini} under --gpuprof-nsys (or "
                                  f"--gpuprof-backend=nsys): {why}, so it would do nothing; leave one of them out")


def check_baseline_dir(folder: Path) -> None:
    """A baseline directory that is a file, or lies in one, is refused before any test runs:
    on a machine without a GPU nothing reads it, and it would fail only on the GPU runner."""
    found = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if found is not None and not found.is_dir():
        within = "" if found == folder else f", so the baseline directory {folder} cannot be made"
        raise ConfigError(f"{BY_NAME['baseline-dir'].flag} / ini key {BY_NAME['baseline-dir'].ini}: {found} is a "
                          f"file, not a directory{within}")
