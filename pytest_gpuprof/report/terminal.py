"""The terminal: the gpuprof section after a run, and ``gpuprof analyze``'s table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..compare.samples import distribution
from ..compare.verdict import shown_value
from ..metrics.measure import Measurement
from ..metrics.specs import COPY_KINDS
from ..numbers import format_bytes, format_count, format_number, format_quantity, format_ratio, format_time_us
from .escaping import terminal_text
from .names import short_name
from .values import AS_JUDGED, VALUES_NOTE, Shown, rank_sections, shown_values
from .words import (
    COUNTER_COLUMNS,
    SUMMARY_COLUMNS,
    capture_words,
    detects_text,
    failed_set_up_line,
    gpu_text,
    health_lines,
    let_through_lines,
    ncu_lines,
    skipped_line,
)


def header_line(version: str, backend: str, baseline_dir: Path, replay_dir: Path | None, gpu: str | None) -> str:
    """gpuprof's line in pytest's header: ``gpuprof VERSION: capture ..., baselines DIR, GPU NAME``
    (not ``gpuprof: ``, which starts gpuprof's failure messages)."""
    about = [f"capture {capture_words(backend, replay_dir)}", f"baselines {baseline_dir}"]
    about += [f"GPU {gpu}"] if gpu else []
    return terminal_text(f"gpuprof {version}: {', '.join(about)}")


def session_lines(doc: Mapping[str, Any], tests: Iterable[Mapping[str, Any]], written: Iterable[str] = (),
                  inside_nsys: bool = False, failed_set_up: int = 0) -> list[str]:
    """The gpuprof section after a run, from the results document: where things are, one
    row per test (``tests``: the document's tests in the order they ran), the profiled tests
    skipped and those whose set-up failed (``failed_set_up``, a count), what was written;
    every line ``terminal_text``, whatever the names in it hold."""
    tests = list(tests)
    mode = capture_words(doc["backend"], doc.get("replay_dir"))
    if inside_nsys and not doc.get("replay_dir"):
        mode += " (inside nsys; results follow from the outer session)"
    lines = [f"baselines: {doc['baseline_dir']}    capture: {mode}"]
    if tests:
        gpus = sorted({t["gpu"] for t in tests if t["gpu"]})
        if gpus:
            lines.append(f"GPU: {', '.join(gpus)}")
        lines += summary_lines(tests)
    if doc["skipped"]:
        lines.append(skipped_line(doc["skipped"]))
    if failed_set_up:
        lines.append(failed_set_up_line(failed_set_up))
    if not tests and not doc["skipped"] and not failed_set_up and not inside_nsys:
        lines.append("no profiled tests ran (use the gpuprof fixture or @pytest.mark.gpuprof)")
    for t in tests:  # indented: not a row of the table above
        lines += [f"  {t['nodeid']}: {line}" for line in let_through_lines(t) + health_lines(t) + ncu_lines(t)]
    lines += written
    if doc.get("traces_dir") and tests:
        lines.append(f"traces kept in {doc['traces_dir']}")
    return [terminal_text(line) for line in lines]


def summary_lines(tests: Iterable[Mapping[str, Any]]) -> list[str]:
    """One row per profiled test: status, key metrics and change against the baseline
    (``values.shown_values``: the numbers its verdicts judged), under a line saying so."""
    rows = [["test", "status"] + [title for _, title in SUMMARY_COLUMNS] + ["detects"]]
    for t in (shown for test in tests for shown in rank_sections(test)):
        row = [terminal_text(t["nodeid"]), terminal_text(t["status"])]
        if t["metrics"] is None:
            rows.append(row + ["-"] * (len(SUMMARY_COLUMNS) + 1))
            continue
        shown = shown_values(t)
        rows.append(row + [_cell(metric, shown[metric]) for metric, _ in SUMMARY_COLUMNS] + [detects_text(t)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    out.insert(1, "  ".join("-" * w for w in widths))
    return [VALUES_NOTE + ":"] + out


def _cell(metric: str, shown: Shown) -> str:
    """A metric's value in its unit, then its change against the baseline in brackets."""
    if shown.current is None:
        return "n/a"
    text = shown_value(metric, shown.current)
    return f"{text} ({shown.change})" if shown.change else text


def analysis_lines(path: str, m: Measurement, top: int = 10) -> list[str]:
    """``gpuprof analyze``: the metrics of one trace, then its heaviest kernels (every line
    ``terminal_text``).  Each number per step as a verdict judges it (``values.shown_values``:
    the median step for times and ratios), beside the total over all steps."""
    x, n = m.metrics, m.metrics["step_count"]
    summaries = distribution(m.per_step)
    shown = shown_values({"metrics": x, "distribution": summaries, "verdicts": []})
    lines = [
        f"trace: {path}",
        f"gpu: {gpu_text(m.gpu_name)}    steps: {n} (from {m.step_source})",
        f"per step {AS_JUDGED}; total: over all {n} steps",
        "",
        *_count_lines(x, shown, n),
        "",
        f"{'':<20} {'median step':<23} over all {n} steps (the whole window)",
        *_ratio_lines(x, shown, summaries),
        *_collective_lines(x.get("collectives") or {}, n),
        f"peak memory        {_bytes(x['peak_memory_allocated_bytes'])}",
        "step GPU time      " + ", ".join(map(format_time_us, x["step_gpu_time_us"])),
        *_kernel_lines(x["kernels"], summaries, n, top),
    ]
    return [terminal_text(line) for line in lines]


def _count_lines(x: Mapping[str, Any], shown: Mapping[str, Shown], n: int) -> list[str]:
    """The table of counts, times and bytes: the GPU work of each kind, the sync calls, the
    NCCL kernels, the window."""
    def row(label: str, count: str | None, time: str | None = None, size: str | None = None) -> str:
        """Per step, then total: the count, the time and the bytes metrics of one line."""
        cells = [_cell_or_blank(value(metric), width, unit)
                 for value in (lambda v: None if v is None else shown[v].current,
                               lambda v: None if v is None else x[v])
                 for metric, width, unit in ((count, 10, ""), (time, 14, " us"), (size, 14, " B"))]
        return f"{label:<18} {' '.join(cells[:3])}   | {' '.join(cells[3:])}".rstrip()

    return [
        f"{'':<18} {'per step':<45}   | total over {n} steps",
        row("kernels", "kernel_count", "kernel_time_us"),
        *(row(f"memcpy {kind}", f"memcpy_{kind}_count", f"memcpy_{kind}_time_us", f"memcpy_{kind}_bytes")
          for kind in COPY_KINDS),
        row("memset", "memset_count"),
        row("sync calls", "sync_count"),
        row("nccl kernels", "comm_kernel_count", "comm_time_us"),
        row("exposed comm", None, "exposed_comm_us"),
        row("window", None, "window_us"),
    ]


def _ratio_lines(x: Mapping[str, Any], shown: Mapping[str, Shown], summaries: Mapping[str, Any]) -> list[str]:
    """The ratios and the copy rates: the median step's (where judged per step), then over
    the whole window; n/a, saying why, where the trace cannot give one."""
    lines = []
    for ratio in ("gpu_utilization", "copy_utilization", "pcie_utilization", "overlap_efficiency", "sync_wait_fraction",
                  "comm_compute_overlap"):
        if ratio == "pcie_utilization" and x[ratio] is None:
            lines.append(f"{ratio:<20} n/a (the trace does not say which PCIe link it ran on)")
            continue
        if ratio == "comm_compute_overlap" and x[ratio] is None:
            lines.append(f"{ratio:<20} n/a (no NCCL kernel)")
            continue
        judged = _pct(shown[ratio].current) if ratio in summaries else "(not judged per step)"
        lines.append(f"{ratio:<20} {judged:<23} {_pct(x[ratio])}")
    for kind in COPY_KINDS:
        rate = f"memcpy_{kind}_gbps"
        judged = _cell_or_blank(shown[rate].current, 0, " GB/s") if rate in summaries else "n/a"
        lines.append(f"{rate:<20} {judged:<23} {_cell_or_blank(x[rate], 0, ' GB/s') if x[rate] else 'n/a'}")
    return lines


def _collective_lines(collectives: Mapping[str, Any], n: int) -> list[str]:
    """The collective calls and their input bytes, per step (total / steps, as the verdicts
    judge them) and in total; none where the trace made no collective call."""
    lines = ["collectives        calls and their input bytes, per step | total"] if collectives else []
    for name, call in collectives.items():
        cells = [_cell_or_blank(value, width, unit) for value, width, unit in (
            (call["count"] / n, 10, ""), (None, 14, " us"),
            (None if call["bytes"] is None else call["bytes"] / n, 14, " B"),
            (call["count"], 10, ""), (None, 14, " us"), (call["bytes"], 14, " B"))]
        unknown = "" if call["bytes"] is not None else "   (bytes not in the trace)"
        lines.append(f"  {name:<16} {' '.join(cells[:3])}   | {' '.join(cells[3:])}".rstrip() + unknown)
    return lines


def _kernel_lines(kernels: Mapping[str, Any], summaries: Mapping[str, Any], n: int, top: int) -> list[str]:
    """The TOP heaviest kernels: per step (the median step where their steps were kept),
    then in total; none where the trace ran no kernel."""
    if not kernels:
        return []
    sampled = summaries["kernels"]
    lines = ["", f"top kernels by time ({min(top, len(kernels))} of {len(kernels)}): per step "
                 "(time: the median step where its steps were kept, else total / steps), "
                 f"then total over {n} steps"]
    for name, k in list(kernels.items())[:top]:
        per_step = sampled[name]["median"] if name in sampled else k["time_us"] / n
        lines.append(f"  {format_time_us(per_step):>12} {format_count(k['count'] / n):>7}x   | "
                     f"{format_time_us(k['time_us']):>14} {k['count']:>8}x  {short_name(name)}")
    return lines


def counter_lines(path: str, counters: Mapping[str, Any]) -> list[str]:
    """``gpuprof analyze`` of an Nsight Compute report (its ``metrics.counters.ncu_counters``):
    the bandwidth the profiled kernels drew, then each kernel's counters (the median of its
    launches), heaviest first."""
    utilization, kernels = counters["memory_bandwidth_utilization"], counters["kernels"]
    lines = [f"report: {path}",
             f"memory_bandwidth_utilization {'n/a' if utilization is None else _pct(utilization)}: "
             "DRAM bytes over the peak DRAM bandwidth times the profiled kernels' time", "",
             f"per kernel: the median of its launches ({len(kernels)} kernel(s))",
             " ".join(f"{head:>10}" for _, head in COUNTER_COLUMNS) + f" {'launches':>8}  kernel"]
    for name, k in kernels.items():
        lines.append(" ".join(f"{format_number(k[key]['median']):>10}" for key, _ in COUNTER_COLUMNS)
                     + f" {k['launches']:>8}  {short_name(name)}")
    return [terminal_text(line) for line in lines]


def _cell_or_blank(value: float | None, width: int, unit: str) -> str:
    """A table cell: the number and its unit, right-aligned; blank where the line has no such value."""
    quantity = "" if value is None else format_quantity(value, "count", unit.strip())
    return f"{quantity:>{width + len(unit)}}"


def _pct(value: float | None) -> str:
    return "n/a (no memcpy)" if value is None else format_ratio(value)


def _bytes(value: int | None) -> str:
    return "n/a (not recorded in the trace)" if value is None else format_bytes(value)


