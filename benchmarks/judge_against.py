"""Results documents judged again against another baseline directory.

    python benchmarks/judge_against.py BASELINE_DIR RESULTS.json [RESULTS.json ...]

For runs made against one baseline and to be judged against another recorded on the same
machine: the 10% slowdown runs of docs/benchmarks.md ran against the shipped baselines and
are judged against the slowdown mode's at 0 (the mode adds copies, so only its own
baselines do the same GPU work).  Each test's own samples and summaries are judged as
``gate_noise.rejudged_regressions`` judges (the run's health and machine probes as it
recorded them; no confirmation re-runs), with the entry for its GPU in BASELINE_DIR; one
line per run: each test's failing metrics, or "passed".  A test with Nsight Compute
counters is also judged on them against the entry's (``compare.counter_verdicts``, the plugin's rules
without the marker's thresholds): the runs of docs/benchmarks.md's counter sections.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from gate_noise import SLOWED, rejudged_regressions
from pytest_gpuprof.compare.baseline import BaselineFile, baseline_file
from pytest_gpuprof.compare.counter_verdicts import counter_verdicts
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.compare.verdicts import judge


def against(test: dict, baselines: Path) -> dict | None:
    """``test`` with the baseline fields of its entry in ``baselines``; None without one."""
    entry = BaselineFile(baseline_file(baselines, test["nodeid"])).entry(test["nodeid"], test["gpu"])
    if not entry:
        return None
    return {**test, "baseline_metrics": entry["metrics"], "baseline_per_step": entry["per_step"],
            "baseline_distribution": entry.get("distribution"), "baseline_runs": entry["runs"],
            "baseline_counters": entry.get("counters")}


def failing(test: dict) -> list[str]:
    """The metrics that fail the test: exact ones (counts, bytes, kernel names) that changed,
    and time and ratio regressions as gpuprof judges them today."""
    rules = Rules()
    exact = [v.metric for v in judge(test["metrics"], test["baseline_metrics"], rules)
             if v.status in ("changed", "regressed", "new", "vanished") and v.metric.endswith(("count", "bytes"))
             or v.status in ("new", "vanished")]
    counters = [v.metric for v in counter_verdicts(test["baseline_counters"], test["counters"], rules)
                if v.failed] if test.get("counters") else []
    return exact + rejudged_regressions(test, (rules.kernel_time_tolerance, rules.time_tolerance)) + counters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baselines", type=Path)
    parser.add_argument("results", type=Path, nargs="+")
    args = parser.parse_args()
    for path in args.results:
        parts = []
        for test in json.loads(path.read_text())["tests"]:
            judged = against(test, args.baselines)
            name = test["nodeid"].split("::")[-1]
            if judged is None:
                parts.append(f"{name}: no baseline")
                continue
            metrics = failing(judged)
            slowed = SLOWED.get(name)
            caught = any(slowed and slowed in m for m in metrics)
            if metrics:
                parts.append(f"{name}: {'CAUGHT ' if caught else ''}" + ", ".join(m[:60] for m in metrics))
        print(f"{path.stem}: {' | '.join(parts) or 'passed'}")


if __name__ == "__main__":
    main()
