"""Every option once: its name, type, default and help.

``plugin.py`` declares each to pytest as ``--gpuprof-NAME`` and ini key
``gpuprof_NAME``; ``gpuprof diff`` declares the rule options again as ``--NAME``
(``add_rule_options``); the rules take their defaults from here.  Only the
standard library is imported: pytest loads this module in every run.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Option:
    """One option.  ``name`` is the part after the prefix (``kernel-time-tolerance``);
    the empty name is the switch ``--gpuprof`` itself."""

    name: str
    kind: str  # bool | int | float | str | path | list
    default: Any
    help: str
    plural: bool = False  # the ini key ends in "s": a list option, one value per line

    @property
    def flag(self) -> str:
        return "--gpuprof" + (f"-{self.name}" if self.name else "")

    @property
    def ini(self) -> str:
        """The ini key, also the option's ``dest``: the flag's words joined by underscores."""
        return self.flag[2:].replace("-", "_") + ("s" if self.plural else "")

    @property
    def described(self) -> str:
        """The help text with the default appended, as ``--help`` shows it; a path option's
        says where a relative path is taken from (``plugin._get``)."""
        text = f"{self.help}; {RELATIVE_PATHS}" if self.kind == "path" else self.help
        if self.kind in ("bool", "list") or self.default is None:
            return text
        if self.kind == "path":
            return f"{text} (default: {self.default}, under the rootdir)"
        return f"{text} (default: {self.default:g})" if self.kind == "float" else f"{text} (default: {self.default})"


#: Where a relative path given to a path option is taken from.
RELATIVE_PATHS = ("a relative path is taken from the current directory on the command line, from the rootdir in an "
                  "ini file")


#: The options of the rules, shared with ``gpuprof diff``.
RULE_OPTIONS: tuple[Option, ...] = (
    Option("kernel-time-tolerance", "float", 0.05,
           "the minimum effect on kernel times per step, kernel_time_us and each kernel name's time: a smaller "
           "change never fails; a noisier series keeps the wider margin its baseline's recorded runs give"),
    Option("time-tolerance", "float", 0.10,
           "relative tolerance of the other time metrics per step: copy times and window_us"),
    Option("time-floor-us", "float", 5.0, "time changes per step smaller than this many microseconds never count"),
    Option("ratio-tolerance", "float", 0.05, "absolute tolerance of ratio metrics such as gpu_utilization"),
)

OPTIONS: tuple[Option, ...] = (
    Option("", "bool", False,
           "profile tests that use the gpuprof fixture or marker and compare them with their baselines"),
    Option("update-baseline", "bool", False,
           "record or refresh the baselines of the profiled tests that ran (implies --gpuprof)"),
    Option("strict", "bool", False, "fail a profiled test that has no baseline for this GPU model, and the run "
           "when a profiled test was not measured (no GPU, no trace to replay)"),
    Option("baseline-dir", "path", "baselines", "directory of baseline JSON files"),
    Option("output-dir", "path", ".gpuprof", "directory for kept traces and reports"),
    Option("keep-traces", "bool", False, "keep each profiled test's Chrome/Perfetto trace under OUTPUT_DIR/traces"),
    Option("replay", "path", None,
           "judge kept traces from this directory instead of running the profiled tests (implies --gpuprof; "
           "no GPU needed)"),
    *RULE_OPTIONS,
    Option("baseline-runs", "int", 5,
           "recorded runs a baseline keeps: --gpuprof-update-baseline adds this run to them while the GPU work "
           "per step is unchanged, and time and ratio verdicts must lie outside what they show; 1 starts afresh"),
    Option("record-processes", "int", 3,
           "fresh processes --gpuprof-update-baseline records each test in: this one, then the same command again "
           "in N - 1 new processes, one after the other, each adding its run (the baseline learns how much each "
           "metric moves between processes); 1: this process only"),
    Option("confirm", "int", 0,
           "re-run a test whose only failures are times or ratios this many times, each in a fresh process, "
           "and fail it only if every re-run that decides fails them too (one that measured nothing, or judged "
           "them unstable, decides nothing); torch backend only: refused with --gpuprof-nsys"),
    Option("confirm-timeout", "float", 300.0,
           "seconds each fresh process of a --gpuprof-confirm re-run or a --gpuprof-base pair may take; one that "
           "runs over is stopped and decides nothing"),
    Option("base", "path", None,
           "a checkout of the revision this one is compared with (a pull request's base), laid out as this rootdir: "
           "a test failing on times or ratios alone is measured again in pairs of fresh processes (ABBA order), and "
           "fails only where head is worse than base; a test without a stored baseline for this GPU model is "
           "judged against the base measured alongside, counts included"),
    Option("base-python", "str", None,
           "the Python interpreter of the base side (default: this one; the base's import roots go first on "
           "PYTHONPATH either way)"),
    Option("base-only", "bool", False,
           "with --gpuprof-base, judge every profiled test against the base measured alongside, not against "
           "stored baselines; a test the base cannot measure (missing, failing or skipped there) is an error "
           "(without --gpuprof-base it does nothing)"),
    Option("base-pairs", "int", 5,
           "at most this many base/head pairs of fresh processes decide a failure; pairs stop as soon as every "
           "metric is decided"),
    Option("rank-timeout", "float", 600.0,
           "seconds a distributed test's ranks (@pytest.mark.gpuprof(world_size=N)) may run; then every rank is "
           "killed and the test fails naming the ranks that hung"),
    Option("threshold", "list", [],
           "absolute requirement such as 'gpu_utilization >= 0.85'; repeatable (ini gpuprof_thresholds: one per line)",
           plural=True),
    Option("backend", "str", "torch",
           "capture with torch.profiler ('torch') or re-run the session under Nsight Systems ('nsys')"),
    Option("nsys", "bool", False, "short for --gpuprof --gpuprof-backend=nsys"),
    Option("nsys-path", "str", None,
           "the nsys binary (default: $GPUPROF_NSYS, then PATH, then the usual install locations)"),
    Option("ncu", "bool", False,
           "also profile each profiled test's heaviest kernels under Nsight Compute, in a fresh process (slow: "
           "ncu replays each kernel; marker: ncu=True or ncu={'top': N, 'kernels': REGEX, 'step': K, "
           "'launches': L}); torch backend only: refused with --gpuprof-nsys, and a replay runs no kernels"),
    Option("ncu-path", "str", None, "the ncu binary (default: PATH, then the usual install locations)"),
    Option("json", "path", None,
           "write every profiled test's status, metrics, baseline, rules and verdicts here (docs/results.md)"),
    Option("summary", "path", None,
           "write a Markdown summary of the profiled tests here (default: appended to $GITHUB_STEP_SUMMARY when set)"),
    Option("html", "path", None,
           "write one self-contained HTML report: timelines, metrics against baselines, kernel diff (docs/html.md)"),
    Option("benchmark-json", "path", None,
           "write the metrics here for github-action-benchmark (tool customSmallerIsBetter; docs/results.md)"),
    Option("timeline-events", "int", 600,
           "events of the one-step timeline sample kept with results and baselines; 0: none"),
    Option("wait", "int", 0, "default unprofiled steps before warm-up"),
    Option("warmup", "int", 3, "default warm-up steps"),
    Option("active", "int", 10, "default measured steps"),
    Option("min-active", "int", 0,
           "at least this many measured steps in every profiled test, whatever its marker or steps() asks: "
           "more steps detect smaller changes (each result's detects); 0: as each test asks"),
    Option("flush-l2", "bool", False,
           "empty the GPU's L2 cache before every step, for kernel micro-benchmarks; the flush itself is "
           "not measured (marker or steps() argument: flush_l2=True)"),
)

#: Options by name, for the modules that take a default from here.
BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}

def default(name: str) -> Any:
    """An option's default value, by name (``default("kernel-time-tolerance")`` is 0.05)."""
    return BY_NAME[name].default


def option_args(values: Mapping[str, Any]) -> list[str]:
    """Command-line arguments giving options by name (``{"timeline-events": 0}``) to a pytest
    process gpuprof starts, each as its flag says: a true bool option its flag alone, a list
    option one ``FLAG=VALUE`` a value, any other ``FLAG=VALUE``; a false bool or None leaves
    the option out."""
    args: list[str] = []
    for name, value in values.items():
        flag = BY_NAME[name].flag
        if BY_NAME[name].kind == "bool":
            args += [flag] if value else []
        elif BY_NAME[name].kind == "list":
            args += [f"{flag}={item}" for item in value]
        elif value is not None:
            args.append(f"{flag}={value}")
    return args


#: The options naming a report file, which ``gpuprof merge`` declares again as ``--NAME``.
REPORT_OPTIONS = tuple(o for o in OPTIONS if o.name in ("json", "summary", "html", "benchmark-json"))


def add_report_options(add: Callable[..., Any], prefix: str = "--") -> None:
    """Declare the report options through an argparse-like ``add(flag, **kwargs)``, as
    ``PREFIX + NAME`` (``gpuprof merge``: ``--html``)."""
    for option in REPORT_OPTIONS:
        add(prefix + option.name, type=Path, default=None, metavar="PATH", help=option.help)


def add_rule_options(add: Callable[..., Any], prefix: str = "--") -> None:
    """Declare the rule options through an argparse-like ``add(flag, **kwargs)``, as
    ``PREFIX + NAME`` (``gpuprof diff``: ``--kernel-time-tolerance``)."""
    for option in RULE_OPTIONS:
        add(prefix + option.name, type=finite_number, default=option.default, metavar="FLOAT", help=option.described)


def finite_number(text: Any) -> float:
    """A float option's value, which must be a finite number: NaN compares false with every
    bound and would let any change pass, infinity overflows what is computed from it."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def count(text: Any) -> int:
    """An option's value that counts something: an integer, 0 or more."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def reference() -> str:
    """The options reference, docs/options.md, made from ``OPTIONS`` alone: each option's flag,
    ini key, type and default, and its help as ``--help`` shows it (``python -m
    pytest_gpuprof.options > docs/options.md``; tests/test_options_reference.py keeps it current)."""
    rows = ["# Options", "",
            "Every option of `pytest --gpuprof`, as `pytest --help` lists it and as an ini key (`[pytest]`",
            "in pytest.ini, `[tool.pytest.ini_options]` in pyproject.toml); the command line wins over the",
            "ini file, the ini file over the default. Made from `pytest_gpuprof/options.py`:",
            "`python -m pytest_gpuprof.options > docs/options.md`.", "",
            "| option | ini key | type | default | what it does |", "|---|---|---|---|---|"]
    for o in OPTIONS:
        shown = "" if o.default in (None, False, (), []) or o.kind == "bool" else f"`{o.default}`"
        help_text = (o.help + (f"; {RELATIVE_PATHS}" if o.kind == "path" else "")).replace("|", r"\|")
        rows.append(f"| `{o.flag}` | `{o.ini}` | {o.kind} | {shown} | {help_text} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(reference(), end="")
