"""``--gpuprof-benchmark-json``: the metrics in github-action-benchmark's custom format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..files import json_text, write_atomic
from ..metrics.specs import METRICS
from ..numbers import format_number
from .values import rank_sections, shown_values
from .words import gpu_text


def benchmark_entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """github-action-benchmark's custom format, tool ``customSmallerIsBetter``: one entry
    per profiled test with metrics and per metric where lower is better or any rise is
    worth a look (docs/results.md lists them), the values the verdicts judged
    (``values.shown_values``); a distributed test's per rank (``NODEID [rank N]``)."""
    out = []
    for t in (shown for test in doc["tests"] for shown in rank_sections(test)):
        if not t["metrics"]:
            continue
        values = {name: shown.current for name, shown in shown_values(t).items()}
        extra = (f"status: {t['status']}; gpu: {gpu_text(t['gpu'])}; steps: {t['metrics'].get('step_count')}; "
                 + "; ".join(f"{m}: {format_number(values.get(m))}" for m in BENCHMARK_CONTEXT))
        for metric, unit in benchmark_metrics():
            value = values.get(metric)
            if value is not None:
                out.append({"name": f"{t['nodeid']} {metric} [{gpu_text(t['gpu'])}]", "unit": unit, "value": value,
                            "extra": extra})
    return out


def benchmark_metrics() -> list[tuple[str, str]]:
    """(metric, unit) of every benchmark entry: times, counts and bytes per step, the sync
    wait fraction, the peak memory."""
    out = []
    for name, spec in METRICS.items():
        if spec.kind in ("count", "bytes", "time"):
            out.append((name, {"time": "us/step", "bytes": "B/step", "count": "count/step"}[spec.kind]))
        elif spec.kind == "ratio" and spec.better == "lower":
            out.append((name, "fraction"))
    out.append(("peak_memory_allocated_bytes", "B"))
    return out


#: Shown in each benchmark entry's ``extra`` (higher is better, so not entries themselves).
BENCHMARK_CONTEXT = ("gpu_utilization", "overlap_efficiency", "pcie_utilization", "memcpy_htod_gbps",
                     "memcpy_dtoh_gbps")


def write_benchmark(doc: dict[str, Any], path: Path) -> None:
    write_atomic(path, json_text(benchmark_entries(doc), indent=2) + "\n")
