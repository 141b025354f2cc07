"""Text reports: the failure message, the terminal summary, ``gpuprof analyze``'s table."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .compare import BROKEN, compared_values, format_number
from .metrics import METRICS, Measurement
from .session import BACKEND_NAMES, GpuprofSession, TestResult
from .trace import COPY_KINDS


def session_lines(session: GpuprofSession) -> list[str]:
    """The gpuprof section after a run: where things are, one row per test, what was written."""
    s = session.settings
    if s.replay_dir:
        mode = f"replaying traces from {s.replay_dir}"
    else:
        mode = BACKEND_NAMES[s.backend] + (" (inside nsys; results follow from the outer session)" if s.nsys_inner else "")
    lines = [f"baselines: {s.baseline_dir}    capture: {mode}"]
    if session.results:
        gpus = sorted({r.gpu for r in session.results if r.gpu})
        if gpus:
            lines.append(f"GPU: {', '.join(gpus)}")
        lines += summary_lines(session.results)
    if session.skipped:
        reasons = sorted(set(session.skipped.values()))
        lines.append(f"{len(session.skipped)} profiled test(s) skipped: {'; '.join(reasons)}")
    if not session.results and not session.skipped and not s.nsys_inner:
        lines.append("no profiled tests ran (use the gpuprof fixture or @pytest.mark.gpuprof)")
    lines += session.written
    if s.keep_traces and s.replay_dir is None and s.backend == "torch" and session.results:
        lines.append(f"traces kept in {s.output_dir / 'traces'}")
    return lines


def failure_message(result: TestResult) -> str:
    """Every metric that broke, with baseline, current value, change and rule."""
    if result.status == "error" or result.message:
        return f"gpuprof: {result.message}"
    broken = broken_verdicts(v.to_json() for v in result.verdicts)
    lines = [f"gpuprof: {broken_header(len(broken), result.gpu, f'baseline file {result.baseline_file}')}:"]
    lines += [f"  {verdict_line(v)}" for v in broken]
    lines.append(UPDATE_HINT)
    return "\n".join(lines)


UPDATE_HINT = "If the change is intended, refresh the baseline with --gpuprof-update-baseline."


def is_broken(verdict: Mapping[str, Any]) -> bool:
    """A verdict that fails its test: regressed, changed, threshold, or a new or vanished kernel."""
    return verdict["status"] in BROKEN


def broken_verdicts(verdicts: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [v for v in verdicts if is_broken(v)]


def broken_header(count: int, gpu: str | None, against: str) -> str:
    """First line of a failure: ``N metric(s) broke on GPU (AGAINST)``."""
    where = f" on {gpu}" if gpu else ""
    return f"{count} metric(s) broke{where} ({against})"


def verdict_line(v: Mapping[str, Any]) -> str:
    """One verdict in the words of the failure message (``Verdict.to_json()`` form):
    ``METRIC: baseline B, current C (CHANGE) [STATUS; rule: RULE; EVIDENCE]`` and the like.
    The summary, the JUnit properties and ``gpuprof diff`` print the same line."""
    status, metric = v["status"], v["metric"]
    if status == "threshold":
        return f"{metric}: current {format_number(v['current'])} violates threshold {v['rule']}"
    if status == "new":
        return f"{metric}: new kernel, {format_number(v['current'])} per step (not in the baseline)"
    if status == "vanished":
        return f"{metric}: vanished, baseline {format_number(v['baseline'])} per step, now none"
    change = f" ({v['change']})" if v.get("change") else ""
    evidence = f"; {v['evidence']}" if v.get("evidence") else ""
    return (
        f"{metric}: baseline {format_number(v['baseline'])}, current {format_number(v['current'])}{change} "
        f"[{status}; rule: {v['rule']}{evidence}]"
    )


_SUMMARY_COLUMNS = (
    ("kernel_count", "kernels/step"),
    ("kernel_time_us", "kernel us/step"),
    ("gpu_utilization", "gpu util"),
    ("overlap_efficiency", "overlap"),
    ("sync_count", "syncs/step"),
)


def summary_lines(results: Iterable[TestResult]) -> list[str]:
    """One row per profiled test: status, key metrics and change against the baseline."""
    rows = [["test", "status"] + [title for _, title in _SUMMARY_COLUMNS]]
    for r in results:
        row = [r.nodeid, r.status]
        if r.metrics is None:
            rows.append(row + ["-"] * len(_SUMMARY_COLUMNS))
            continue
        now = compared_values(r.metrics)
        before = compared_values(r.baseline) if r.baseline else {}
        for metric, _ in _SUMMARY_COLUMNS:
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


def change(metric: str, now: float, before: float) -> str:
    """Change of a compared value: in percent, or as a difference for ratios and from zero."""
    if METRICS[metric].kind != "ratio" and before:
        return f"{(now - before) / before:+.1%}"
    return format_number(now - before, signed=True)


def analysis_lines(path: str, m: Measurement, top: int = 10) -> list[str]:
    """``gpuprof analyze``: the metrics of one trace, then its heaviest kernels."""
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
            lines.append(f"  {row['time_us']:>12.3f} us  {row['count']:>7}x  {_short(name)}")
    return lines


def _pct(value: float | None) -> str:
    return "n/a (no memcpy)" if value is None else f"{value:.4f}  ({value:.2%})"


def _bytes(value: int | None) -> str:
    return "n/a (not recorded in the trace)" if value is None else f"{value} B ({value / 2**20:.1f} MiB)"


def _short(name: str, width: int = 100) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."
