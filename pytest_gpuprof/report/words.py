"""How every verdict, change and failure is said: the one place of the plugin's wording.

The terminal, the Markdown summary, the HTML report, the JUnit properties and
``gpuprof diff`` all say a broken metric with ``verdict_line`` and a failure with
``failure_message``'s words.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from ..compare.alongside import AS_MEASURED, spec_of
from ..compare.evaluate import TestResult
from ..compare.verdicts import BROKEN
from ..metrics.measure import METRICS
from ..numbers import format_change, format_number
from .escaping import terminal_text
from .names import full_name, in_metric, short_name

#: How reports name the capture backends.
BACKEND_NAMES = {"torch": "torch.profiler", "nsys": "Nsight Systems"}


def failure_message(result: TestResult) -> str:
    """Every metric that broke, with baseline, current value, change and rule; for the
    terminal, so each line is ``terminal_text``."""
    if result.status == "error" or result.message:
        lines = [f"gpuprof: {result.message}"]
    else:
        broken = broken_verdicts(v.to_json() for v in result.verdicts)
        against_base = (result.alongside or {}).get("against") == "base"
        against = (f"against the base revision in {result.alongside['base']}, measured alongside" if against_base
                   else f"baseline file {result.baseline_file}")
        lines = [f"gpuprof: {broken_header(len(broken), result.gpu, against)}:"]
        lines += [f"  {verdict_line(v)}" for v in broken]
        lines += [f"  ({line})" for line in health_lines(result.to_json())]
        lines += [] if against_base else [UPDATE_HINT]
    return "\n".join(terminal_text(line) for line in lines)


def health_lines(test: Mapping[str, Any]) -> list[str]:
    """What to know about how a test was measured (a test of the results document): why its
    times were not trusted, what its steps showed, what re-running it in fresh processes showed."""
    out = [f"unstable: {why}" for why in test.get("unstable") or ()]
    out += list(test.get("notes") or ())
    if test.get("confirmation"):
        out.append(test["confirmation"])
    if test.get("alongside"):
        out.append(alongside_line(test["alongside"]))
    return out


#: How the pairs' outcome for a metric is said (``compare.alongside`` outcomes).
PAIR_OUTCOMES = {"worse": "a regression", "same": "not a regression", "not sure": "not sure (never fails)"}


def pair_change(d: Mapping[str, Any]) -> str:
    """A pairs' decision's (``compare.alongside.Decision``) mean worse-direction difference:
    +4.1% (worse) or +0.02 for a ratio."""
    if d["mean"] is None:
        return "n/a"
    if spec_of(d["metric"]).kind == "ratio":
        return format_number(round(d["mean"], 6), signed=True)
    return f"{math.expm1(d['mean']):+.1%}"


def pair_values(d: Mapping[str, Any]) -> str:
    """``head 12.1 us, base 12 us over 3 pair(s) (head worse by +0.8%)``."""
    unit = f" {spec_of(d['metric']).unit}" if spec_of(d["metric"]).unit else ""
    where = "" if d["scale"] == AS_MEASURED else f" {d['scale']}"
    return (f"head {format_number(d['head'])}{unit}, base {format_number(d['base'])}{unit}{where} over "
            f"{d['pairs']} pair(s) (head worse by {pair_change(d)})")


def pair_evidence(values: str, outcome: str, threshold: str | None = None) -> str:
    """What the pairs add to a verdict's evidence: ``against the base revision measured
    alongside: head 12.1 us, base 12 us over 3 pair(s) (head worse by +0.8%): not a
    regression``; for a broken threshold, whether the base holds it on this machine."""
    if threshold is not None:
        said = (f"the base holds {threshold} on this machine: a regression" if outcome == "worse"
                else f"the base breaks {threshold} on this machine too: not a regression")
    else:
        said = PAIR_OUTCOMES[outcome]
    return f"against the base revision measured alongside: {values}: {said}"


def alongside_line(alongside: Mapping[str, Any]) -> str:
    """What the base revision measured alongside showed for a test (``run.alongside``):
    ``A/B against BASE: judged against the base revision measured alongside, 3 base/head
    pair(s) in fresh processes, 41.2 s: kernel_time_us: same as base``."""
    parts = ["judged against the base revision measured alongside"] if alongside.get("against") == "base" else []
    parts += [alongside["note"]] if alongside.get("note") else []
    if alongside.get("decisions") is not None:
        said = "; ".join(f"{d['metric']}: {d['outcome']}" for d in alongside["decisions"])
        parts.append(f"{alongside['pairs']} base/head pair(s) in fresh processes, {alongside['seconds']} s"
                     + (f" (the pairs' outcome per metric: {said})" if said else ""))
    if alongside.get("problem"):
        parts.append(f"pairs stopped: {alongside['problem']}")
    return f"A/B against {alongside.get('base')}: " + ", ".join(parts)


def skipped_line(skipped: Iterable[Mapping[str, str]]) -> str:
    """The profiled tests skipped, each reason once: ``N profiled test(s) skipped: REASON; ...``."""
    skipped = list(skipped)
    return f"{len(skipped)} profiled test(s) skipped: {'; '.join(sorted({s['reason'] for s in skipped}))}"


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


def verdict_name(v: Mapping[str, Any]) -> str:
    """The metric a verdict judged, with its rank in a distributed test (``rank 1 kernel_time_us``)."""
    name = in_metric(v["metric"], full_name)
    return name if v.get("rank") is None else f"rank {v['rank']} {name}"


def verdict_line(v: Mapping[str, Any]) -> str:
    """One verdict in the words of the failure message (``Verdict.to_json()`` form):
    ``METRIC: baseline B, current C (CHANGE) [STATUS; rule: RULE; EVIDENCE]`` and the like.
    The summary, the JUnit properties and ``gpuprof diff`` print the same line; a kernel's
    name in it is demangled (``names.full_name``), not shortened: two kernels' short names
    can be one, and a failure must name its kernel (the JSON keeps the name as recorded)."""
    status, metric = v["status"], verdict_name(v)
    if status == "threshold":
        why = f" ({v['evidence'].lstrip('; ')})" if v.get("evidence") else ""
        return f"{metric}: current {format_number(v['current'])} violates threshold {v['rule']}{why}"
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


SUMMARY_COLUMNS = (
    ("kernel_count", "kernels/step"),
    ("kernel_time_us", "kernel us (median step)"),
    ("gpu_utilization", "gpu util (median step)"),
    ("overlap_efficiency", "overlap (median step)"),
    ("sync_count", "syncs/step"),
)


def change(metric: str, now: float, before: float) -> str:
    """Change of a compared value: in percent, or as a difference for ratios and from zero."""
    return format_change(now, before, METRICS[metric].kind != "ratio")


#: The per-kernel counters ``gpuprof analyze`` prints of an Nsight Compute report, with their
#: column heads: time and the percentages of peak, then what explains them.
COUNTER_COLUMNS = (("time_us", "time us"), ("sm_throughput_pct", "SM %"), ("memory_throughput_pct", "mem %"),
                   ("dram_throughput_pct", "DRAM %"), ("achieved_occupancy_pct", "occup %"),
                   ("tensor_pipe_pct", "tensor %"), ("l1_hit_rate_pct", "L1 hit %"), ("l2_hit_rate_pct", "L2 hit %"),
                   ("registers_per_thread", "regs"), ("local_memory_bytes", "local B"), ("dram_bytes", "DRAM B"))


def ncu_lines(test: Mapping[str, Any]) -> list[str]:
    """A test's kernels under Nsight Compute (``counters``), a line for the test and one per kernel
    (the median of its launches): the terminal's, the Markdown summary's and the JUnit file's."""
    c = test.get("counters")
    if not c:
        return []
    bandwidth = c["memory_bandwidth_utilization"]
    stored = (test.get("baseline_counters") or {}).get("memory_bandwidth_utilization")
    lines = [f"Nsight Compute ({c['profiled']}): memory_bandwidth_utilization "
             f"{'n/a' if bandwidth is None else format_number(bandwidth)}"
             + ("" if stored is None else f" (baseline {format_number(stored)})")]
    for name, k in c["kernels"].items():
        m = {key: format_number(k[key]["median"]) for key, _ in COUNTER_COLUMNS}
        lines.append(f"  {short_name(name, 80)}: {m['time_us']} us, DRAM {m['dram_throughput_pct']}%, SM "
                     f"{m['sm_throughput_pct']}%, occupancy {m['achieved_occupancy_pct']}%, {m['registers_per_thread']} "
                     f"registers, {m['local_memory_bytes']} B local ({k['launches']} launch(es))")
    return lines
