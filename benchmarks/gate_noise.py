"""A/A runs and a slowdown sweep of the time gate on a GPU machine (figures: docs/benchmarks.md).

    python benchmarks/gate_noise.py aa --runs 20 --out DIR
        record the example suite's baselines (as shipped: no slowdown code), then run
        the suite RUNS times against them: every time regression reported is a false alarm.
    python benchmarks/gate_noise.py sweep --runs 10 --slowdown 0 --slowdown 0.05 ... --out DIR
        record baselines with GPUPROF_EXAMPLE_SLOWDOWN=0, then run the suite RUNS times
        at each slowdown: every workload's activation kernel does that much more work
        (example_suite/conftest.py).  A test catches it when a time verdict says regressed.
    python benchmarks/gate_noise.py table DIR
        per series and test: the runs that reported a time regression, and how much
        the slowed kernel's time per step changed against the baseline.

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


def print_table(folder: Path) -> None:
    """Per series and test: runs with a time regression, and the slowed kernel's change."""
    series: dict[str, list[dict]] = {}
    for path in sorted(folder.glob("*-*.json"), key=lambda p: (p.stem.rsplit("-", 1)[0], int(p.stem.rsplit("-", 1)[1]))):
        series.setdefault(path.stem.rsplit("-", 1)[0], []).append(json.loads(path.read_text()))
    print(f"{'series':<14} {'test':<30} {'caught':>8}  slowed kernel change (min / median / max)  other statuses")
    for label, docs in series.items():
        tests = sorted({t["nodeid"].split("::")[-1] for d in docs for t in d["tests"]})
        for name in tests:
            caught, changes, other = 0, [], {}
            for d in docs:
                t = next((t for t in d["tests"] if t["nodeid"].endswith("::" + name)), None)
                if t is None:
                    continue
                caught += any(test == name for test, _ in time_regressions(d))
                change = slowed_kernel_change(t)
                if change is not None:
                    changes.append(change)
                if t["status"] not in ("passed", "failed"):
                    other[t["status"]] = other.get(t["status"], 0) + 1
            changes.sort()
            spread = (f"{changes[0]:+.1%} / {changes[len(changes) // 2]:+.1%} / {changes[-1]:+.1%}"
                      if changes else "n/a")
            print(f"{label:<14} {name:<30} {caught:>3} of {len(docs):<3} {spread:<40} "
                  f"{', '.join(f'{k}: {v}' for k, v in other.items())}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("aa", "sweep", "table"))
    parser.add_argument("dir", type=Path, nargs="?", help="table: the --out of the runs")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--slowdown", type=float, action="append", default=[])
    parser.add_argument("--budget-s", type=float, default=540, help="stop starting runs after this long")
    args = parser.parse_args()
    if args.mode == "table":
        print_table(args.dir)
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
