"""A/A runs and a slowdown sweep of the time gate on a GPU machine (figures: docs/benchmarks.md).

    python benchmarks/gate_noise.py aa --runs 20 --out DIR
        record the example suite's baselines (as shipped: no slowdown code), then run
        the suite RUNS times against them: every time regression reported is a false alarm.
    python benchmarks/gate_noise.py sweep --runs 10 --slowdown 0 --slowdown 0.05 ... --out DIR
        record baselines with GPUPROF_EXAMPLE_SLOWDOWN=0, then run the suite RUNS times
        at each slowdown: every workload's activation kernel does that much more work
        (example_suite/conftest.py).  A test catches it when a time verdict says regressed.
    python benchmarks/gate_noise.py table DIR [--tolerances 0.05/0.10 ...]
        per series and test: the runs that reported a time regression (as run and, for
        each pair of kernel-time/other-time tolerances given, judged again from the
        results JSON as gpuprof would), and
        how much the slowed kernel's time per step changed against the baseline.

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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIME_KINDS = ("time_us", "window_us")


def pytest(args: list[str], env: dict[str, str]) -> int:
    cmd = [sys.executable, "-m", "pytest", "example_suite", "-p", "no:cacheprovider", "-q", *args]
    return subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}, capture_output=True).returncode


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
        rc = pytest(["--gpuprof", f"--gpuprof-baseline-dir={baselines}", f"--gpuprof-json={results}"], env)
        caught = sorted(f"{t}: {m}" for t, m in time_regressions(json.loads(results.read_text())))
        print(f"{label} run {i:2d}: exit {rc}; time regressions: {'; '.join(caught) or 'none'}", flush=True)


def time_regressions(doc: dict) -> list[tuple[str, str]]:
    """(test, metric) of every time verdict that says regressed."""
    return [(t["nodeid"].split("::")[-1], v["metric"]) for t in doc["tests"] for v in t["verdicts"]
            if v["status"] == "regressed" and v["metric"].endswith(TIME_KINDS)]


#: The kernel GPUPROF_EXAMPLE_SLOWDOWN slows down in each workload (its activation).
SLOWED = {"test_cnn_train_step": "launch_clamp_scalar", "test_moe_forward": "GeluCUDAKernelImpl",
          "test_transformer_train_step": "GeluCUDAKernelImpl", "test_weight_streaming": "GeluCUDAKernelImpl"}


def slowed_kernel_change(test: dict) -> float | None:
    """Relative change of the slowed kernel's time per step, current against baseline."""
    key = SLOWED.get(test["nodeid"].split("::")[-1])
    base, now = test.get("baseline_metrics"), test.get("metrics")
    if key is None or not base or not now:
        return None

    def per_step(m: dict) -> float:
        return sum(k["time_us"] for name, k in m["kernels"].items() if key in name) / m["step_count"]

    b = per_step(base)
    return per_step(now) / b - 1 if b else None


def rejudged_regressions(test: dict, tolerances: tuple[float, float]) -> list[str]:
    """The time metrics gpuprof would call regressed with these (kernel time, other time)
    tolerances, judged again from the results JSON alone (samples and summaries of both runs)."""
    from pytest_gpuprof.compare import Rules, judge

    if not test.get("baseline_metrics") or test["status"] == "unstable":
        return []
    rules = Rules(kernel_time_tolerance=tolerances[0], time_tolerance=tolerances[1])
    verdicts = judge(test["metrics"], test["baseline_metrics"], rules,
                     samples=(test["per_step"], test["baseline_per_step"]),
                     distributions=(test["distribution"], test["baseline_distribution"]))
    return [v.metric for v in verdicts if v.status == "regressed" and v.metric.endswith(TIME_KINDS)]


def print_table(folder: Path, tolerances: list[tuple[float, float]]) -> None:
    """Per series and test: runs with a time regression as run (and, for each tolerance
    given, as judged again), and the slowed kernel's change against the baseline."""
    series: dict[str, list[dict]] = {}
    for path in sorted(folder.glob("*-*.json"), key=lambda p: (p.stem.rsplit("-", 1)[0], int(p.stem.rsplit("-", 1)[1]))):
        series.setdefault(path.stem.rsplit("-", 1)[0], []).append(json.loads(path.read_text()))
    heads = "".join(f" {f'{k:.0%}/{o:.0%}':>9}" for k, o in tolerances)
    print(f"{'series':<14} {'test':<28} {'as run':>9}{heads}  slowed kernel (min / median / max)  other")
    for label, docs in series.items():
        for name in sorted({t["nodeid"].split("::")[-1] for d in docs for t in d["tests"]}):
            tests = [t for d in docs for t in d["tests"] if t["nodeid"].endswith("::" + name)]
            caught = sum(any(m for n, m in time_regressions({"tests": [t]})) for t in tests)
            again = [sum(bool(rejudged_regressions(t, tol)) for t in tests) for tol in tolerances]
            changes = sorted(c for c in map(slowed_kernel_change, tests) if c is not None)
            spread = (f"{changes[0]:+.1%} / {changes[len(changes) // 2]:+.1%} / {changes[-1]:+.1%}"
                      if changes else "n/a")
            other: dict[str, int] = {}
            for t in tests:
                if t["status"] not in ("passed", "failed"):
                    other[t["status"]] = other.get(t["status"], 0) + 1
            cells = "".join(f" {f'{a}/{len(tests)}':>9}" for a in again)
            print(f"{label:<14} {name:<28} {f'{caught}/{len(tests)}':>9}{cells}  {spread:<34} "
                  f"{', '.join(f'{k}: {v}' for k, v in other.items())}")


def tolerance_pair(text: str) -> tuple[float, float]:
    kernel, _, other = text.partition("/")
    try:
        return float(kernel), float(other or kernel)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KERNEL/OTHER tolerances such as 0.05/0.10, got {text!r}") from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("aa", "sweep", "table"))
    parser.add_argument("dir", type=Path, nargs="?", help="table: the --out of the runs")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--slowdown", type=float, action="append", default=[])
    parser.add_argument("--budget-s", type=float, default=540, help="stop starting runs after this long")
    parser.add_argument("--tolerances", type=tolerance_pair, action="append", default=[], metavar="K/O",
                        help="table: also judge every run again with kernel time tolerance K and other time "
                        "tolerance O, e.g. 0.05/0.10 (repeatable)")
    args = parser.parse_args()
    if args.mode == "table":
        print_table(args.dir, args.tolerances)
        return 0
    deadline = time.monotonic() + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    baselines = args.out / "baselines"
    if not baselines.exists():
        env = series_env(args.mode, 0.0)
        rc = pytest(["--gpuprof-update-baseline", f"--gpuprof-baseline-dir={baselines}"], env)
        print(f"recorded baselines in {baselines} ({env or 'shipped suite'}): exit {rc}", flush=True)
    if args.mode == "aa":
        run_series(args.out, "aa", args.runs, {}, deadline)
    for s in args.slowdown:
        run_series(args.out, f"slowdown{s:.2f}", args.runs, series_env("sweep", s), deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
