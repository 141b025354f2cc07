"""How every verdict, change and failure is said: the one place of the plugin's wording.

The terminal, the Markdown summary, the HTML report, the JUnit properties and
``gpuprof diff`` all count and say what broke with ``broken_metrics`` and
``broken_line``, a change let through with ``let_through_line``, what to do with
``next_steps``, and a failure with ``failure_message``'s words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..compare.evaluate import UNKNOWN_GPU, TestResult, is_timing
from ..compare.status import BROKEN, FAILED_STATUSES
from ..compare.time_rules import RUNS_LEVEL
from ..compare.verdict import HOST_SPEED, NOT_COMPARED, NOT_SIGNIFICANT, WITHIN_RUNS, shown_value
from ..metrics.specs import BANDWIDTH, COUNTER_SPECS, METRICS, counter_spec, kernel_counter
from ..numbers import format_change, format_quantity
from ..options import BY_NAME
from .escaping import terminal_text
from .names import full_name, function_name, in_metric, short_name

#: How reports name the capture backends.
BACKEND_NAMES = {"torch": "torch.profiler", "nsys": "Nsight Systems"}


def gpu_text(gpu: str | None) -> str:
    """A run's GPU model as reports print it, never ``None``."""
    return gpu or UNKNOWN_GPU


def capture_words(backend: str, replay_dir: str | Path | None, path: Callable[[str], str] = str) -> str:
    """How a run captured its traces: ``replaying traces from DIR`` (``path`` formats DIR)
    for ``--gpuprof-replay``, else the backend's name."""
    if replay_dir:
        return f"replaying traces from {path(str(replay_dir))}"
    return BACKEND_NAMES.get(backend, backend)


def failure_message(result: TestResult) -> str:
    """Every metric that broke, one line each with baseline, current value, change and rule;
    the changes let through and how the test was measured; what to do next.  For the
    terminal, so each line is ``terminal_text``."""
    test = result.to_json()
    if result.status == "error" or result.message:
        lines = [f"gpuprof: {result.message}"]
    else:
        broken = broken_metrics(test["verdicts"])
        lines = [f"gpuprof: {broken_header(len(broken), result.gpu, compared_against(test), named_broken(broken))}:"]
        lines += [f"  {broken_line(name, verdicts)}" for name, verdicts in broken.items()]
        lines += [f"  ({line})" for line in let_through_lines(test) + health_lines(test)]
    lines += next_steps(test)
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


def detects_text(test: Mapping[str, Any]) -> str:
    """``≥ 2.0% kernel time``: the smallest kernel-time slowdown a test's measurement could
    detect (its ``detects``; the least detectable rank's for a distributed test), or ``–``."""
    detects = test.get("detects") or {}
    return f"≥ {max(detects.values()):.1%} kernel time" if detects else "–"


def updated_line(update: Mapping[str, Any]) -> str:
    """``updated 2 test(s) in baselines/x.json (run 2 of at most 5 recorded)``: one baseline
    file a run wrote (the results document's ``baselines.updated``)."""
    return f"updated {update['tests']} test(s) in {update['file']} ({update['how']})"


def refused_line(reason: str) -> str:
    """What a run whose baselines were refused says: nothing was written."""
    return f"no baseline written, every file left as it was: {reason}"


def alongside_line(alongside: Mapping[str, Any]) -> str:
    """What the base revision measured alongside showed for a test (``run.sides``):
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


def failed_set_up_line(count: int) -> str:
    """What a run says of the profiled tests whose set-up failed: not measured, and why to look."""
    return (f"{count} profiled test(s) failed their set-up and were not measured: see their errors above (a mistake "
            "in the gpuprof marker, or a fixture that raised)")


def unrecorded_line(count: int) -> str:
    """What a recording says of the profiled tests it could not measure: no baseline, and the
    two ways to record one."""
    return (f"no baseline recorded for the {count} profiled test(s) not measured: record on a machine with a CUDA "
            f"GPU, or from traces kept there ({BY_NAME['keep-traces'].flag}) without one: "
            f"{BY_NAME['update-baseline'].flag} {BY_NAME['replay'].flag}=DIR")


#: What refreshes a baseline, as every next step and improvement says it.
REFRESH = f"refresh the baseline with {BY_NAME['update-baseline'].flag}"
#: What to do after each kind of failure (``failure_kind``): (the kind, in words; the step).
NEXT_STEPS = {
    "threshold": ("a violated threshold", "fix the code, or change the threshold where it is set (the gpuprof "
                  f"marker's thresholds=[...], {BY_NAME['threshold'].flag} or the ini key {BY_NAME['threshold'].ini});"
                  " a threshold is absolute, refreshing the baseline does not move it"),
    "work": ("a changed count, byte total or kernel", "counts, bytes and kernels are exact, noise never moves them: "
             f"fix the code; if the change is intended, {REFRESH}"),
    "time": ("a time or ratio regression", f"fix the code; if the change is intended, {REFRESH} "
             f"({BY_NAME['confirm'].flag}=N first re-measures a test failing on times or ratios alone in fresh "
             "processes)"),
    "counter": ("a changed Nsight Compute counter", "fix the kernel; if the change is intended, record the counters "
                f"again with {BY_NAME['update-baseline'].flag} {BY_NAME['ncu'].flag}"),
    "base": ("a regression against the base revision", "fix the code: the base revision measured alongside does "
             "not have it (no stored baseline judged this test)"),
    "no baseline": ("no baseline", f"record one for this GPU model with {BY_NAME['update-baseline'].flag}"),
    "error": ("an error", "nothing was judged: correct the file or setting the message names, then run again"),
}


def is_broken(verdict: Mapping[str, Any]) -> bool:
    """A verdict that fails its test: regressed, changed, threshold, or a new or vanished kernel."""
    return verdict["status"] in BROKEN


def broken_metrics(verdicts: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The broken verdicts by the metric they judged (``verdict_name``: each rank's apart), in
    order: what every report counts and lists as broke.  A metric broken by its threshold
    and against its baseline is one metric that broke, said in one line (``broken_line``)."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for v in verdicts:
        if is_broken(v):
            out.setdefault(verdict_name(v), []).append(v)
    return out


def broken_line(name: str, verdicts: list[Mapping[str, Any]]) -> str:
    """A broken metric in the failure message's words: ``METRIC: WORDS; WORDS`` (one
    ``verdict_words`` per broken verdict of it)."""
    return f"{name}: " + "; ".join(verdict_words(v) for v in verdicts)


def broken_lines(verdicts: Iterable[Mapping[str, Any]]) -> list[str]:
    """One ``broken_line`` per broken metric, as the failure message lists them."""
    return [broken_line(name, vs) for name, vs in broken_metrics(verdicts).items()]


#: How many broken metrics a failure's first line names (``broken_brief``) before ``and N more``.
NAMED_BROKEN = 3
#: How wide a kernel's name may be in a failure's first line.
BRIEF_NAME_WIDTH = 40


def named_broken(broken: Mapping[str, list[Mapping[str, Any]]]) -> list[str]:
    """The first broken metrics (``broken_metrics``) in brief, as every first line names them."""
    return [broken_brief(verdicts) for verdicts in list(broken.values())[:NAMED_BROKEN]]


def first_line(test: Mapping[str, Any]) -> str:
    """A failing test's first line (a test of the results document), as its failure message's:
    what broke, naming the first few, or why it could not be judged."""
    broken = broken_metrics(test.get("verdicts") or [])
    if test.get("status") == "error" or not broken:
        return (test.get("message") or "").split("\n")[0]
    return broken_header(len(broken), test.get("gpu"), compared_against(test), named_broken(broken))


def broken_brief(verdicts: list[Mapping[str, Any]]) -> str:
    """A broken metric in a few words, for a failure's first line (its first broken verdict):
    ``kernel_count 71 → 95 (+33.8%)``, ``sync_count 8 (threshold == 0)``, ``kernels[NAME].count
    new``; a kernel by its function's name (``names.function_name``, at most ``BRIEF_NAME_WIDTH``
    characters), as Nsight Systems shows it: the lines below name it in full."""
    v = verdicts[0]
    name = in_metric(v["metric"], lambda kernel: short_name(function_name(kernel), BRIEF_NAME_WIDTH))
    name = name if v.get("rank") is None else f"rank {v['rank']} {name}"
    if v["status"] in ("new", "vanished"):
        return f"{name} {v['status']}"
    if v["status"] == "threshold":
        limit = v.get("threshold") or {}
        said = f"{limit['op']} {shown_value(v['metric'], limit['value'])}" if limit else v["rule"]
        return f"{name} {shown_value(v['metric'], v['current'])} (threshold {said})"
    change = f" ({v['change']})" if v.get("change") else ""
    return f"{name} {shown_value(v['metric'], v['baseline'])} → {shown_value(v['metric'], v['current'])}{change}"


def broken_header(count: int, gpu: str | None, against: str, named: list[str] | None = None) -> str:
    """First line of a failure: ``N metric(s) broke on GPU: A, B, C and M more (AGAINST)``, N
    the broken metrics (``broken_metrics``), ``named`` the first few in brief (``broken_brief``)."""
    where = f" on {gpu}" if gpu else ""
    what = f": {', '.join(named)}" + (f" and {count - len(named)} more" if count > len(named) else "") if named else ""
    return f"{count} metric(s) broke{where}{what} ({against})"


def against_base(test: Mapping[str, Any]) -> bool:
    """A test judged against the base revision measured alongside (``--gpuprof-base``), not a stored baseline."""
    return (test.get("alongside") or {}).get("against") == "base"


def compared_against(test: Mapping[str, Any]) -> str:
    """What a test (results document form) was judged against, as a failure's first line says it."""
    if against_base(test):
        return f"against the base revision in {test['alongside']['base']}, measured alongside"
    return f"baseline file {test['baseline_file']}"


def failure_kind(v: Mapping[str, Any], base: bool = False) -> str:
    """Which next step a broken verdict calls for (a key of ``NEXT_STEPS``); ``base``: judged
    against the base revision measured alongside."""
    if v["status"] == "threshold":
        return "threshold"
    if base:
        return "base"
    if counter_spec(v["metric"]) is not None:
        return "counter"
    return "time" if is_timing(v["metric"]) else "work"


def next_steps(test: Mapping[str, Any]) -> list[str]:
    """What to do about a failing test of the results document, one line per kind of failure
    in it: ``Next step for KIND: STEP.``; none for a test that did not fail."""
    if test["status"] not in FAILED_STATUSES:
        return []
    if test["status"] == "error":
        kinds = ["error"]
    elif test["message"]:  # failed with nothing broken: no baseline under --gpuprof-strict
        kinds = ["no baseline"]
    else:
        base = against_base(test)
        found = {failure_kind(v, base) for v in test["verdicts"] if is_broken(v)}
        kinds = [k for k in NEXT_STEPS if k in found]
    return [f"Next step for {NEXT_STEPS[k][0]}: {NEXT_STEPS[k][1]}." for k in kinds]


def verdict_name(v: Mapping[str, Any]) -> str:
    """The metric a verdict judged, with its rank in a distributed test (``rank 1 kernel_time_us``)."""
    name = in_metric(v["metric"], full_name)
    return name if v.get("rank") is None else f"rank {v['rank']} {name}"


def verdict_state(v: Mapping[str, Any]) -> str:
    """A verdict's status as reports say it; an ``ok`` that let a change beyond its tolerance
    through (``let_through``) says why, with the p-value and the level it had to get under."""
    why = v.get("let_through")
    if why == NOT_SIGNIFICANT:
        return f"not significant (p={v['p_value']:.2g} ≥ {v['p_level']:.2g})"
    if why == WITHIN_RUNS:
        return (f"within the baseline's runs (p={v['p_value']:.2g} < {v['p_level']:.2g}, but the median inside the "
                f"{1 - RUNS_LEVEL:.0%} prediction interval of the baseline's recorded runs)")
    if why == HOST_SPEED:
        return "the host's speed (changed as measured, not at the baseline host's speed)"
    return NOT_COMPARED if v["status"] == "ok" and v["rule"].startswith(NOT_COMPARED) else v["status"]


def let_through_line(v: Mapping[str, Any]) -> str:
    """A change beyond the tolerance that the gate let through, and why:
    ``window_us +31.7% beyond its tolerance, let through: not significant (p=0.0015 ≥ 0.0004)``."""
    return f"{verdict_name(v)} {v['change']} beyond its tolerance, let through: {verdict_state(v)}"


def let_through_header(count: int) -> str:
    """What heads a list of the changes let through (``let_through_line``)."""
    return f"{count} change(s) beyond the tolerance let through"


def let_through_lines(test: Mapping[str, Any]) -> list[str]:
    """``let_through_line`` of each verdict of a test (results document form) that let one through."""
    return [let_through_line(v) for v in test.get("verdicts") or () if v.get("let_through")]


def verdict_words(v: Mapping[str, Any]) -> str:
    """A verdict (``Verdict.to_json()`` form) in the failure message's words, after its
    metric's name: ``baseline B, current C (CHANGE) [STATE; rule: RULE; EVIDENCE]`` and the
    like; STATE is ``verdict_state``."""
    status = v["status"]
    if status == "threshold":
        why = f" ({v['evidence'].lstrip('; ')})" if v.get("evidence") else ""
        return f"current {shown_value(v['metric'], v['current'])} violates threshold {v['rule']}{why}"
    if status == "new":
        return f"new kernel, {shown_value(v['metric'], v['current'])} per step (not in the baseline)"
    if status == "vanished":
        return f"vanished, baseline {shown_value(v['metric'], v['baseline'])} per step, now none"
    change = f" ({v['change']})" if v.get("change") else ""
    evidence = f"; {v['evidence']}" if v.get("evidence") else ""
    return (f"baseline {shown_value(v['metric'], v['baseline'])}, "
            f"current {shown_value(v['metric'], v['current'])}{change} "
            f"[{verdict_state(v)}; rule: {v['rule']}{evidence}]")


def verdict_line(v: Mapping[str, Any]) -> str:
    """One verdict in the words of the failure message: ``METRIC: WORDS`` (``verdict_words``).
    A kernel's name in it is demangled (``names.full_name``), not shortened: two kernels'
    short names can be one, and a failure must name its kernel (the JSON keeps the name as
    recorded)."""
    return f"{verdict_name(v)}: {verdict_words(v)}"


SUMMARY_COLUMNS = (
    ("kernel_count", "kernels/step"),
    ("kernel_time_us", "kernel time (median step)"),
    ("gpu_utilization", "gpu util (median step)"),
    ("overlap_efficiency", "overlap (median step)"),
    ("sync_count", "syncs/step"),
)


def change(metric: str, now: float, before: float) -> str:
    """Change of a compared value: in percent, or as a difference for ratios (percentage
    points) and from zero (``numbers.format_change``)."""
    return format_change(now, before, METRICS[metric].kind, METRICS[metric].unit)


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
             f"{shown_value(BANDWIDTH.name, bandwidth)}"
             + ("" if stored is None else f" (baseline {shown_value(BANDWIDTH.name, stored)})")]
    for name, k in c["kernels"].items():
        m = {key: format_quantity(k[key]["median"], COUNTER_SPECS[key].kind, COUNTER_SPECS[key].unit)
             for key, _ in COUNTER_COLUMNS}
        lines.append(f"  {short_name(name, 80)}: {m['time_us']}, DRAM {m['dram_throughput_pct']}, SM "
                     f"{m['sm_throughput_pct']}, occupancy {m['achieved_occupancy_pct']}, "
                     f"{m['registers_per_thread']} registers, {m['local_memory_bytes']} local "
                     f"({k['launches']} launch(es))")
    return lines


def kernel_verdict_words(v: Mapping[str, Any]) -> str:
    """A per-kernel verdict without the (long) name: what changed, per step (``rank N`` first
    for a rank's, in a distributed test's own section)."""
    s, b, c = v["status"], v.get("baseline"), v.get("current")
    rank = "" if v.get("rank") is None else f"rank {v['rank']} "
    if s == "new":
        return f"{rank}new kernel, {shown_value(v['metric'], c)} per step"
    if s == "vanished":
        return f"{rank}vanished kernel, was {shown_value(v['metric'], b)} per step"
    counter = kernel_counter(v["metric"])
    if counter is not None and s == "threshold":
        return f"{rank}{counter[1]} {shown_value(v['metric'], c)} violates {v['rule']}"
    moved = f" ({v['change']})" if v.get("change") else ""
    values = f"{shown_value(v['metric'], b)} → {shown_value(v['metric'], c)}{moved} [{verdict_state(v)}]"
    if counter is not None:  # Nsight Compute's (compare.counter_verdicts), the median of its launches
        return f"{rank}{counter[1]} {values}"
    return f"{rank}{'time per step' if v['metric'].endswith('.time_us') else 'count per step'} {values}"
