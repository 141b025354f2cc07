"""The terminal: the gpuprof section after a run, and ``gpuprof analyze``'s table."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..compare.verdicts import compared_values
from ..metrics.measure import Measurement
from ..numbers import format_number
from ..trace.model import COPY_KINDS
from .escaping import terminal_text
from .names import short_name
from .words import BACKEND_NAMES, SUMMARY_COLUMNS, change, health_lines


def session_lines(doc: Mapping[str, Any], tests: Iterable[Mapping[str, Any]], written: Iterable[str] = (),
                  inside_nsys: bool = False) -> list[str]:
    """The gpuprof section after a run, from the results document: where things are, one
    row per test (``tests``: the document's tests in the order they ran), what was written;
    every line ``terminal_text``, whatever the names in it hold."""
    tests = list(tests)
    if doc.get("replay_dir"):
        mode = f"replaying traces from {doc['replay_dir']}"
    else:
        mode = BACKEND_NAMES[doc["backend"]] + (" (inside nsys; results follow from the outer session)"
                                                if inside_nsys else "")
    lines = [f"baselines: {doc['baseline_dir']}    capture: {mode}"]
    if tests:
        gpus = sorted({t["gpu"] for t in tests if t["gpu"]})
        if gpus:
            lines.append(f"GPU: {', '.join(gpus)}")
        lines += summary_lines(tests)
    if doc["skipped"]:
        reasons = sorted({s["reason"] for s in doc["skipped"]})
        lines.append(f"{len(doc['skipped'])} profiled test(s) skipped: {'; '.join(reasons)}")
    if not tests and not doc["skipped"] and not inside_nsys:
        lines.append("no profiled tests ran (use the gpuprof fixture or @pytest.mark.gpuprof)")
    for t in tests:  # indented: not a row of the table above
        lines += [f"  {t['nodeid']}: {line}" for line in health_lines(t)]
    lines += written
    if doc.get("traces_dir") and tests:
        lines.append(f"traces kept in {doc['traces_dir']}")
    return [terminal_text(line) for line in lines]


def summary_lines(tests: Iterable[Mapping[str, Any]]) -> list[str]:
    """One row per profiled test: status, key metrics and change against the baseline."""
    rows = [["test", "status"] + [title for _, title in SUMMARY_COLUMNS]]
    for t in tests:
        row = [terminal_text(t["nodeid"]), terminal_text(t["status"])]
        if t["metrics"] is None:
            rows.append(row + ["-"] * len(SUMMARY_COLUMNS))
            continue
        now = compared_values(t["metrics"])
        before = compared_values(t["baseline_metrics"]) if t["baseline_metrics"] else {}
        for metric, _ in SUMMARY_COLUMNS:
            row.append(_cell(metric, now.get(metric), before.get(metric)))
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    out.insert(1, "  ".join("-" * w for w in widths))
    return out


def _cell(metric: str, now: float | None, before: float | None) -> str:
    """A metric's value, then its change against the baseline in brackets."""
    if now is None:
        return "n/a"
    text = format_number(now)
    if before is None:
        return text
    return f"{text} ({change(metric, now, before)})"


def analysis_lines(path: str, m: Measurement, top: int = 10) -> list[str]:
    """``gpuprof analyze``: the metrics of one trace, then its heaviest kernels (every line
    ``terminal_text``)."""
    x = m.metrics
    lines = [
        f"trace: {path}",
        f"gpu: {m.gpu_name or 'unknown'}    steps: {x['step_count']} (from {m.step_source})    "
        f"window: {x['window_us']:.3f} us",
        "",
        f"kernels            {x['kernel_count']:>10}   {x['kernel_time_us']:>14.3f} us",
    ]
    for kind in COPY_KINDS:
        lines.append(
            f"memcpy {kind:<11} {x[f'memcpy_{kind}_count']:>10}   {x[f'memcpy_{kind}_time_us']:>14.3f} us"
            f"   {x[f'memcpy_{kind}_bytes']:>14} B"
        )
    lines += [
        f"memset             {x['memset_count']:>10}",
        f"sync calls         {x['sync_count']:>10}",
        "",
        f"gpu_utilization     {_pct(x['gpu_utilization'])}",
        f"copy_utilization    {_pct(x['copy_utilization'])}",
        f"overlap_efficiency  {_pct(x['overlap_efficiency'])}",
        f"sync_wait_fraction  {_pct(x['sync_wait_fraction'])}",
        f"peak memory         {_bytes(x['peak_memory_allocated_bytes'])}",
        "step GPU time (us)  " + ", ".join(f"{v:.3f}" for v in x["step_gpu_time_us"]),
    ]
    if x["kernels"]:
        lines += ["", f"top kernels by time ({min(top, len(x['kernels']))} of {len(x['kernels'])}):"]
        for name, row in list(x["kernels"].items())[:top]:
            lines.append(f"  {row['time_us']:>12.3f} us  {row['count']:>7}x  {short_name(name)}")
    return [terminal_text(line) for line in lines]


def _pct(value: float | None) -> str:
    return "n/a (no memcpy)" if value is None else f"{value:.4f}  ({value:.2%})"


def _bytes(value: int | None) -> str:
    return "n/a (not recorded in the trace)" if value is None else f"{value} B ({value / 2**20:.1f} MiB)"


