"""A/A runs and a slowdown sweep of the time gate on a GPU machine (figures: docs/benchmarks.md).

    python benchmarks/gate_noise.py aa --runs 20 --out DIR [--record-runs 3]
        record the example suite's baselines (as shipped: no slowdown code) with one command
        in RECORD_RUNS fresh processes (--gpuprof-record-processes), then run the suite RUNS
        times against them: every time or ratio regression reported is a false alarm.
        Baselines already in DIR/baselines (copied from another machine, say) are used as
        they are.
    python benchmarks/gate_noise.py sweep --runs 10 --slowdown 0 --slowdown 0.05 ... --out DIR
        record baselines with GPUPROF_EXAMPLE_SLOWDOWN=0, then run the suite RUNS times
        at each slowdown: every workload's activation kernel does that much more work
        (example_suite/conftest.py).  A test catches it when its verdict on that kernel's
        time says regressed.
    python benchmarks/gate_noise.py table DIR [--tolerances 0.05/0.10 ...]
        per series and test, as run and, for each pair of kernel-time/other-time
        tolerances given, judged again from the results JSON as gpuprof judges today:
        "S/N +F", of N runs S called the slowed kernel's time regressed and F some other
        time (a false alarm; in an A/A series S is one too); and how much the slowed
        kernel's time per step changed against the baseline.
    python benchmarks/gate_noise.py --smoke
        table, judged again with today's tolerances, on the first three runs of the archived
        A/A series and of its 10% slowdown series (benchmarks/results/), in a second.

Runs are resumable: a run whose results file exists is not run again, so a series
can be spread over several calls on a machine that stays up.  Each run writes
--gpuprof-json to DIR/<series>-<i>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from pytest_gpuprof.compare.evaluate import TestResult, is_timing
from pytest_gpuprof.compare.machine import explains, machine_differences
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.compare.verdicts import judge

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks/results"
#: Archived results files of the smoke run: three runs of a series of each archive.
SMOKE_RUNS = {"gate_aa_h200_2026-11-21.tgz": "aa/aa-{}.json",
              "gate_sweep_h200_2026-11-21.tgz": "sweep/slowdown0.10-{}.json"}


def pytest(args: list[str], env: dict[str, str]) -> int:
    """The example suite in a subprocess; the planting variables are only what ``env`` says."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUPROF_EXAMPLE_")}
    cmd = [sys.executable, "-m", "pytest", "example_suite", "-p", "no:cacheprovider", "-q",
           "--ignore=example_suite/test_fused_norm.py", *args,  # no activation to slow; ncu in every run
           *os.environ.get("GATE_PYTEST_ARGS", "").split()]  # e.g. "-k not launch_bound"
    return subprocess.run(cmd, cwd=ROOT, env={**base, **env}, capture_output=True).returncode


def series_env(mode: str, slowdown: float | None) -> dict[str, str]:
    if mode == "aa":
        return {}
    return {"GPUPROF_EXAMPLE_SLOWDOWN": str(slowdown or 0)}


def run_series(out: Path, label: str, runs: int, env: dict[str, str], deadline: float) -> None:
    baselines = out / "baselines"
    for i in range(runs):
        results = out / f"{label}-{i}.json"
        if results.exists():
            continue
        if time.monotonic() > deadline:
            print(f"{label}: stopping before run {i} (time budget spent); run again to go on", flush=True)
            return
        rc = pytest(["--gpuprof", f"--gpuprof-baseline-dir={baselines}", f"--gpuprof-json={results}",
                     "--gpuprof-timeline-events=0"], env)
        if not results.exists():
            print(f"{label} run {i:2d}: exit {rc}, no results file written", flush=True)
            continue
        doc = json.loads(results.read_text())
        caught = sorted(f"{t['nodeid'].split('::')[-1]}: {m}" for t in doc["tests"] for m in time_regressions(t))
        print(f"{label} run {i:2d}: exit {rc}; time regressions: {'; '.join(caught) or 'none'}", flush=True)


def time_regressions(test: dict) -> list[str]:
    """The metrics of a test's time and ratio verdicts that say regressed, as the run judged them."""
    return [v["metric"] for v in test["verdicts"] if v["status"] == "regressed" and is_timing(v["metric"])]


#: The kernel GPUPROF_EXAMPLE_SLOWDOWN slows down in each workload (its activation).
SLOWED = {"test_cnn_train_step": "launch_clamp_scalar", "test_moe_forward": "GeluCUDAKernelImpl",
          "test_transformer_train_step": "GeluCUDAKernelImpl", "test_weight_streaming": "GeluCUDAKernelImpl",
          "test_small_batch_decode": "GeluCUDAKernelImpl"}


def slowed_kernel_change(test: dict) -> float | None:
    """Relative change of the slowed kernel's mean time per step (totals / steps; the gate
    judges medians), current against baseline."""
    key = SLOWED.get(test["nodeid"].split("::")[-1])
    base, now = test.get("baseline_metrics"), test.get("metrics")
    if key is None or not base or not now:
        return None

    def per_step(m: dict) -> float:
        return sum(k["time_us"] for name, k in m["kernels"].items() if key in name) / m["step_count"]

    b = per_step(base)
    return per_step(now) / b - 1 if b else None


def rejudged_regressions(test: dict, tolerances: tuple[float, float]) -> list[str]:
    """The time and ratio metrics gpuprof would call regressed with these (kernel time, other
    time) tolerances, judged again from the results JSON alone as ``compare.evaluate``
    judges today: both runs' samples and summaries, the baseline's recorded runs where
    the file has them, then the downgrades to unstable (health reasons as the run
    recorded them, less the clock moves that are notes today; machine probes against the
    baseline runs' probes)."""
    if not test.get("baseline_metrics") or "per_step" not in test:
        return []
    rules = Rules(kernel_time_tolerance=tolerances[0], time_tolerance=tolerances[1])
    runs = test.get("baseline_runs") or ()
    verdicts = judge(test["metrics"], test["baseline_metrics"], rules,
                     samples=(test["per_step"], test["baseline_per_step"]),
                     distributions=(test["distribution"], test["baseline_distribution"]),
                     runs=list(runs))
    unhealthy = TestResult.from_json(test).health
    if "health" not in test:  # archived before health was a field of its own
        unhealthy = [r for r in unhealthy if not r.startswith(CLOCK_DROP_IN_ARCHIVES)]
    slower = machine_differences(test.get("machine"), [r.get("machine") for r in runs])
    return [v.metric for v in verdicts if v.status == "regressed" and is_timing(v.metric) and not unhealthy
            and not any(explains(p, v.metric) for p in slower)]


#: An SM clock drop with no slowdown reason made a run unstable in the results archived
#: before ``health`` was a field of its own (2026-11-21 and 2026-11-23); it is a note today.
CLOCK_DROP_IN_ARCHIVES = "SM clock dropped"


def tally(tests: list[dict], regressions) -> str:
    """``S/N +F``: of N runs, S called the slowed kernel's time regressed and F called some
    other time regressed (F is only shown when not 0).  In an A/A series both are false alarms."""
    slowed = other = 0
    for t in tests:
        key = SLOWED[t["nodeid"].split("::")[-1]]
        metrics = regressions(t)
        slowed += any(key in m for m in metrics)
        other += any(key not in m for m in metrics)
    return f"{slowed}/{len(tests)}" + (f" +{other}" if other else "")


def print_table(folder: Path, tolerances: list[tuple[float, float]]) -> None:
    """Per series and test: the runs that called the slowed kernel, or any other time,
    regressed, as run and judged again with each pair of tolerances; and the slowed
    kernel's change against the baseline."""
    series: dict[str, list[dict]] = {}
    for path in sorted(folder.glob("*-*.json"),
                       key=lambda p: (p.stem.rsplit("-", 1)[0], int(p.stem.rsplit("-", 1)[1]))):
        series.setdefault(path.stem.rsplit("-", 1)[0], []).append(json.loads(path.read_text()))
    heads = "".join(f" {f'{k:.0%}/{o:.0%}':>10}" for k, o in tolerances)
    print(f"{'series':<14} {'test':<28} {'as run':>10}{heads}  slowed kernel, mean (min / median / max)  statuses")
    for label, docs in series.items():
        for name in sorted({t["nodeid"].split("::")[-1] for d in docs for t in d["tests"]}):
            tests = [t for d in docs for t in d["tests"] if t["nodeid"].endswith("::" + name)]
            cells = [tally(tests, time_regressions)]
            cells += [tally(tests, lambda t, tol=tol: rejudged_regressions(t, tol)) for tol in tolerances]
            changes = sorted(c for c in map(slowed_kernel_change, tests) if c is not None)
            spread = (f"{changes[0]:+.1%} / {changes[len(changes) // 2]:+.1%} / {changes[-1]:+.1%}"
                      if changes else "n/a")
            statuses: dict[str, int] = {}
            for t in tests:
                statuses[t["status"]] = statuses.get(t["status"], 0) + 1
            print(f"{label:<14} {name:<28}{''.join(f' {c:>10}' for c in cells)}  {spread:<40} "
                  f"{', '.join(f'{k}: {v}' for k, v in sorted(statuses.items()))}")


def tolerance_pair(text: str) -> tuple[float, float]:
    kernel, _, other = text.partition("/")
    try:
        return float(kernel), float(other or kernel)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KERNEL/OTHER tolerances such as 0.05/0.10, got {text!r}") from None


def smoke(tolerances: list[tuple[float, float]]) -> None:
    """``table`` on a few archived runs, extracted into a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        for archive, name in SMOKE_RUNS.items():
            with tarfile.open(RESULTS / archive) as tar:
                for i in range(3):
                    member = tar.getmember(name.format(i))
                    member.name = Path(member.name).name  # side by side, as a series' --out holds them
                    tar.extract(member, tmp, filter="data")
        print_table(Path(tmp), tolerances)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("aa", "sweep", "table"), nargs="?")
    parser.add_argument("dir", type=Path, nargs="?", help="table: the --out of the runs")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--slowdown", type=float, action="append", default=[])
    parser.add_argument("--budget-s", type=float, default=540, help="stop starting runs after this long")
    parser.add_argument("--record-runs", type=int, default=3,
                        help="fresh processes that record the baselines when DIR/baselines does not exist")
    parser.add_argument("--tolerances", type=tolerance_pair, action="append", default=[], metavar="K/O",
                        help="table: also judge every run again with kernel time tolerance K and other time "
                        "tolerance O, e.g. 0.05/0.10 (repeatable)")
    parser.add_argument("--smoke", action="store_true", help="table on three archived runs of two series")
    args = parser.parse_args()
    if args.smoke:
        smoke(args.tolerances or [(0.05, 0.10)])
        return 0
    if args.mode is None:
        parser.error("a mode is required (or --smoke)")
    if args.mode == "table":
        print_table(args.dir, args.tolerances)
        return 0
    deadline = time.monotonic() + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    baselines = args.out / "baselines"
    if not baselines.exists():
        env = series_env(args.mode, 0.0)
        # one command records in RECORD_RUNS fresh processes: the baseline learns the spread between them
        rc = pytest(["--gpuprof-update-baseline", f"--gpuprof-record-processes={args.record_runs}",
                     f"--gpuprof-baseline-dir={baselines}"], env)
        print(f"recorded the baselines in {args.record_runs} processes in {baselines} ({env or 'shipped suite'}): "
              f"exit {rc}", flush=True)
    if args.mode == "aa":
        run_series(args.out, "aa", args.runs, {}, deadline)
    for s in args.slowdown:
        run_series(args.out, f"slowdown{s:.2f}", args.runs, series_env("sweep", s), deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
