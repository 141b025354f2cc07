"""A/A and A/B runs of the time gate on a GPU machine (docs/benchmarks.md has the figures).

    python benchmarks/gate_noise.py aa --runs 20 --out DIR
        record the example suite's baselines once, then run the suite RUNS times
        against them: every time regression reported is a false alarm.
    python benchmarks/gate_noise.py ab --runs 20 --slowdown 0.10 --slowdown 0.03 --out DIR
        record the MoE test's baseline, then run it RUNS times with each planted
        slowdown (GPUPROF_EXAMPLE_SLOWDOWN: that much more work in every expert
        kernel): a run catches it when a time metric is reported regressed.

Each run writes --gpuprof-json; the table counts verdicts from those files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIME_KINDS = ("time_us", "window_us", "gpu_utilization", "overlap_efficiency", "sync_wait_fraction")


def pytest(args: list[str], env: dict[str, str] | None = None) -> int:
    cmd = [sys.executable, "-m", "pytest", "example_suite", "-p", "no:cacheprovider", "-q", *args]
    return subprocess.run(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True).returncode


def not_ok(results: Path) -> list[dict]:
    """Every verdict that was not ok, with its test, and each test's unstable reasons."""
    doc = json.loads(results.read_text())
    out = []
    for t in doc["tests"]:
        for v in t["verdicts"]:
            if v["status"] != "ok":
                out.append({"test": t["nodeid"].split("::")[-1], "status": v["status"], "metric": v["metric"][:80],
                            "baseline": v["baseline"], "current": v["current"], "evidence": v.get("evidence", ""),
                            "time": any(k in v["metric"] for k in TIME_KINDS)})
        if t.get("unstable"):
            out.append({"test": t["nodeid"].split("::")[-1], "status": "unstable", "metric": "-",
                        "evidence": "; ".join(t["unstable"]), "time": False})
    return out


def run_series(label: str, runs: int, out: Path, baselines: Path, select: list[str], env: dict[str, str]) -> dict:
    caught, rows = 0, []
    for i in range(runs):
        results = out / f"{label.replace('/', '').replace(' ', '_')}-{i}.json"
        rc = pytest(["--gpuprof", f"--gpuprof-baseline-dir={baselines}", f"--gpuprof-json={results}", *select], env)
        verdicts = not_ok(results)
        regressed = sorted({f"{v['test']}:{v['metric']}" for v in verdicts if v["time"] and v["status"] == "regressed"})
        caught += bool(regressed)
        rows.append({"run": i, "exit": rc, "time_regressions": regressed, "not_ok": verdicts})
        print(f"{label} run {i:2d}: exit {rc}  time regressions: {len(regressed)}", flush=True)
        for v in verdicts:
            print(f"    {v['test']} {v['metric']} {v['status']}: {v.get('baseline')} -> {v.get('current')} "
                  f"{v['evidence']}", flush=True)
    return {"label": label, "runs": runs, "runs_with_time_regression": caught, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("aa", "ab"))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--slowdown", type=float, action="append", default=[])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    baselines = args.out / "baselines"
    select = [] if args.mode == "aa" else ["-k", "moe"]
    rc = pytest(["--gpuprof-update-baseline", f"--gpuprof-baseline-dir={baselines}", *select])
    print(f"recorded baselines in {baselines}: exit {rc}", flush=True)
    if args.mode == "aa":
        series = [run_series("A/A", args.runs, args.out, baselines, select, {})]
    else:
        series = [run_series(f"A/B +{s:.0%}", args.runs, args.out, baselines, select,
                             {"GPUPROF_EXAMPLE_SLOWDOWN": str(s)}) for s in args.slowdown]
    print()
    for s in series:
        print(f"{s['label']:<12} runs with a time regression: {s['runs_with_time_regression']} of {s['runs']}")
    (args.out / f"{args.mode}.json").write_text(json.dumps(series, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
