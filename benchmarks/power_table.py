"""The power table: how often the gate catches a planted slowdown, and how often it fails an
unchanged run, judged again on a CPU from the results documents of GPU runs
(benchmarks/power_collect.sh collects them; figures: docs/benchmarks.md).

    python benchmarks/power_table.py ARCHIVE_OR_DIR [...] [--kernel-tolerance 0.02 ...]

For each GPU model's archive, every run (GPU i, planted slowdown s) is judged as gpuprof
judges today against the baselines recorded on its own GPU ("same GPU"), and against those
recorded on each other GPU of the machine ("another GPU": a baseline judged on a card it was
not recorded on, as a fresh machine of the same model judges the repository's baselines).
The rows "moved by" give the median change of the slowed kernel's median time per step
against its own GPU's baseline (the planted extra work is not the same extra time: a kernel
of a few waves moves in steps).  A run catches the slowdown when its verdict on the slowed
kernel's time is ``regressed`` (an ``unstable`` one, which passes, does not count); a test
fails when any verdict is broken (the gate's failure, counts included).  Cells read ``caught/runs``; the unchanged runs'
column (0%) counts failing tests: false alarms.

    python benchmarks/power_table.py --alongside ARCHIVE_OR_DIR [...]

tables the runs of benchmarks/alongside_power.sh as the device judged them (the pairs' processes
are not kept, so nothing is judged again): per workload and planted slowdown, the tests that
failed, the runs whose slowed kernel the pairs called worse, the pairs run, and the slowed
kernel's head/base (the pairs' geometric mean) from the lowest to the highest run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tarfile
import tempfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_gpuprof.compare.baseline import BaselineFile, baseline_file
from pytest_gpuprof.compare.evaluate import TestResult, is_timing
from pytest_gpuprof.compare.machine import common_shift, explains, machine_differences, moved_alike, on_recorded_card
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.compare.status import BROKEN, State
from pytest_gpuprof.compare.verdicts import judge

#: The kernel GPUPROF_EXAMPLE_SLOWDOWN slows in each workload (its activation), by test name.
SLOWED = {"test_cnn_train_step": "launch_clamp_scalar", "test_moe_forward": "GeluCUDAKernelImpl",
          "test_transformer_train_step": "GeluCUDAKernelImpl", "test_weight_streaming": "GeluCUDAKernelImpl",
          "test_small_batch_decode": "GeluCUDAKernelImpl"}


def rejudged(test: dict, entry: dict, rules: Rules) -> list:
    """The test's verdicts judged again against ``entry`` as ``compare.evaluate`` judges: its
    samples against the entry's (on the card the recorded runs measured, or another:
    ``machine.on_recorded_card``), then a timing regression that the run's health or a slower
    machine explains made ``unstable``."""
    result = TestResult.from_json(test)
    runs = entry.get("runs", [])
    verdicts = judge(test["metrics"], entry["metrics"], rules, entry.get("backend", "torch") == test.get("backend"),
                     (test["per_step"], entry.get("per_step")), (test["distribution"], entry.get("distribution")),
                     runs, other_card=not on_recorded_card(test.get("environment"), runs))
    differences = machine_differences(test.get("machine"), [r.get("machine") for r in runs])
    shift = common_shift(verdicts)
    for v in verdicts:
        if v.status == State.REGRESSED and is_timing(v.metric) and (
                result.health or any(explains(p, v.metric) for p in differences)
                or shift is not None and moved_alike(v, shift)):
            v.status = State.UNSTABLE
    return verdicts


def card(test: dict, entry: dict, gpu: str, against: str) -> None:
    """Runs collected before results named their card (``environment.gpu_id``, 2026-11-28)
    are given the card their folder names (``gpu<i>``), the run's and the recorded runs'."""
    test.setdefault("environment", {}).setdefault("gpu_id", gpu)
    for run in entry.get("runs", []):
        run.setdefault("environment", {}).setdefault("gpu_id", against)


def runs_of(folder: Path) -> dict[str, list[tuple[float, dict]]]:
    """Each GPU's runs, ``gpu<i>`` -> [(slowdown, results document)]."""
    out: dict[str, list[tuple[float, dict]]] = defaultdict(list)
    for path in sorted(folder.glob("gpu*/s*-*.json")):
        level = float(path.stem[1:].rsplit("-", 1)[0])
        out[path.parent.name].append((level, json.loads(path.read_text())))
    return out


def table(folder: Path, rules: Rules) -> list[str]:
    """Rows per mode, workload and slowdown: runs that caught the slowed kernel, tests that failed."""
    runs = runs_of(folder)
    gpus = sorted(runs)
    cells: dict[tuple[str, str, float], list[int]] = defaultdict(lambda: [0, 0, 0])  # caught, failed, runs
    moved: dict[tuple[str, float], list[float]] = defaultdict(list)  # the slowed kernel's change, same GPU
    for gpu, docs in runs.items():
        for level, doc in docs:
            for test in doc["tests"]:
                name = test["nodeid"].split("::")[-1]
                if name not in SLOWED or not test.get("per_step"):
                    continue
                for against in gpus:
                    file = baseline_file(folder / against / "baselines", test["nodeid"])
                    entry = BaselineFile(file).entry(test["nodeid"], test["gpu"]) if file.is_file() else None
                    if entry is None:
                        continue
                    card(test, entry, gpu, against)
                    verdicts = rejudged(test, entry, rules)
                    mode = "same GPU" if against == gpu else "another GPU"
                    cell = cells[(mode, name, level)]
                    cell[0] += any(v.status == State.REGRESSED and SLOWED[name] in v.metric for v in verdicts)
                    cell[1] += any(v.status in BROKEN for v in verdicts)
                    cell[2] += 1
                    slowed = next((v for v in verdicts if SLOWED[name] in v.metric and v.metric.endswith(".time_us")
                                   and v.baseline and v.current is not None), None)
                    if mode == "same GPU" and slowed is not None:
                        moved[(name, level)].append(slowed.current / slowed.baseline - 1)
    levels = sorted({level for (_, _, level) in cells})
    lines = [f"{'mode':<12} {'workload':<28} " + " ".join(f"{f'{level:.0%}':>13}" for level in levels)]
    for name in sorted({n for (n, _) in moved}):
        row = []
        for level in levels:
            changes = sorted(moved[(name, level)])
            row.append(f"{changes[len(changes) // 2]:+.2%}" if changes else "-")
        lines.append(f"{'moved by':<12} {name:<28} " + " ".join(f"{c:>13}" for c in row))
    for mode in ("same GPU", "another GPU"):
        for name in sorted({n for (m, n, _) in cells if m == mode}):
            row = []
            for level in levels:
                caught, failed, n = cells[(mode, name, level)]
                row.append(f"{failed}/{n} fail" if level == 0 else f"{caught}/{n}")
            lines.append(f"{mode:<12} {name:<28} " + " ".join(f"{c:>13}" for c in row))
    return lines


def alongside_table(folder: Path) -> list[str]:
    """Rows per workload and slowdown of runs gated against the base measured alongside."""
    # failed, caught, runs, pairs, head/base
    cells: dict[tuple[str, float], list[Any]] = defaultdict(lambda: [0, 0, 0, [], []])
    for docs in runs_of(folder).values():
        for level, doc in docs:
            for test in doc["tests"]:
                name = test["nodeid"].split("::")[-1]
                if name not in SLOWED:
                    continue
                cell = cells[(name, level)]
                cell[0] += test["status"] == "failed"
                cell[1] += any(v["status"] == State.REGRESSED and SLOWED[name] in v["metric"] for v in test["verdicts"])
                cell[2] += 1
                alongside = test.get("alongside") or {}
                cell[3].append(alongside.get("pairs") or 0)
                cell[4] += [math.exp(d["mean"]) for d in alongside.get("decisions") or []
                            if SLOWED[name] in d["metric"] and d["mean"] is not None]
    lines = [f"{'workload':<28} {'slowdown':>8} {'failed':>7} {'caught':>7} {'pairs':>7} {'head/base':>15}"]
    for (name, level), (failed, caught, n, pairs, ratios) in sorted(cells.items()):
        spread = f"{min(ratios):.3f}-{max(ratios):.3f}" if ratios else "-"
        lines.append(f"{name:<28} {level:>8.0%} {f'{failed}/{n}':>7} {f'{caught}/{n}':>7} "
                     f"{f'{min(pairs)}-{max(pairs)}':>7} {spread:>15}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", type=Path, nargs="+", help="archives of power_collect.sh's output, or its folders")
    parser.add_argument("--kernel-tolerance", type=float, action="append", default=[],
                        help="judge with this minimum effect on kernel times too (repeatable); default: today's")
    parser.add_argument("--time-floor-us", type=float, default=None,
                        help="judge with this time floor; default: today's")
    parser.add_argument("--alongside", action="store_true",
                        help="the inputs are alongside_power.sh's runs: table them as judged there")
    args = parser.parse_args()
    for source in args.inputs:
        with tempfile.TemporaryDirectory() as tmp:
            folder = source
            if source.is_file():
                with tarfile.open(source) as tar:
                    tar.extractall(tmp, filter="data")
                folder = next(Path(tmp).glob("*/gpu0")).parent
            if args.alongside:
                print(f"{source.name}: against the base revision measured alongside")
                print("\n".join(alongside_table(folder)) + "\n")
                continue
            for tolerance in args.kernel_tolerance or [None]:
                rules = Rules() if tolerance is None else Rules(kernel_time_tolerance=tolerance)
                if args.time_floor_us is not None:
                    rules = replace(rules, time_floor_us=args.time_floor_us)
                print(f"{source.name}: kernel-time minimum effect {rules.kernel_time_tolerance:.0%}, "
                      f"time floor {rules.time_floor_us:g} µs")
                print("\n".join(table(folder, rules)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
