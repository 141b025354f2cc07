"""Nsight Compute's counters judged (docs/metrics.md, "Inside the kernels"): a test's counters
(``run.kernel_profiling``) against the thresholds that name them and against the counters its baseline
stored.  ncu profiles a test after it was measured and judged, so ``judge_counters`` adds
these verdicts to its others then; each decision is a small function of the two sides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..metrics.counters import NO_VALUE
from ..metrics.specs import BANDWIDTH, COUNTER_SPECS, counter_spec, kernel_counter
from ..numbers import format_number
from .evaluate import TestResult
from .rules import Rules, Threshold
from .status import State
from .threshold_rules import check_threshold
from .verdict import Verdict
from .verdicts import compare_value

#: Cache hit rates move with where the allocator placed the data, not only with the kernel:
#: the one launch of the MoE test's scan kernel hit L2 41.3-56.1% of the time in four
#: processes of unchanged code on H200s, while every other percentage of the 17 kernels
#: profiled in 6 tests stayed within 2.3 points (docs/benchmarks.md).  They are compared with the
#: baseline only where the test gives them a tolerance (``tolerances={"l2_hit_rate_pct": 0.1}``);
#: a threshold on them is judged always.
PLACEMENT_DEPENDENT = ("l1_hit_rate_pct", "l2_hit_rate_pct")
#: Why a threshold on counters was not checked: ncu profiles a test that ran on a GPU, under
#: --gpuprof-ncu or its marker's ncu=.
NOT_PROFILED = "not checked: Nsight Compute did not profile this test (--gpuprof-ncu, or the marker's ncu=)"
#: Why in a replay: no kernel runs for ncu to profile.
NOT_IN_REPLAY = "not checked: a replay runs no kernels for Nsight Compute to profile (--gpuprof-replay)"
#: What a replay says of Nsight Compute asked for (the marker's ncu=, --gpuprof-ncu) with no threshold to note.
NCU_NOT_IN_REPLAY = "Nsight Compute not run: a replay runs no kernels for it to profile (--gpuprof-replay)"
#: Why under the nsys backend: ncu runs only beside torch.profiler (``run.steps.KernelCounters``).
NOT_UNDER_NSYS = ("not checked: Nsight Compute does not run under --gpuprof-nsys: profile the kernels with "
                  "--gpuprof-ncu or the marker's ncu= on the torch backend")
#: Why the counters were not compared with the baseline.
NOT_STORED = ("counters not compared: the baseline holds none (record it with --gpuprof-update-baseline "
              "--gpuprof-ncu)")


def asks_ncu(arguments: Mapping[str, Any], every: bool) -> bool:
    """Whether a test asks for Nsight Compute: its marker's ``ncu`` (True or a plan, even an
    empty one; False leaves it out), else ``--gpuprof-ncu`` (``every``)."""
    asked = arguments.get("ncu")
    return every if asked is None else asked is not False


def judge_counters(result: TestResult, rules: Rules, recording: bool, replay: bool = False,
                   asked: bool = False) -> None:
    """Add the counters' verdicts to ``result`` (a ``TestResult`` judged without them): the
    thresholds naming counters, then (not while recording) each counter against the
    baseline's; a broken one fails the test, an improved one makes it improved
    (``evaluate.status_of``).  Without counters the thresholds on them are a note
    (``unprofiled_notes``): the rest of the test stands as judged."""
    if result.counters is None:
        result.notes += unprofiled_notes(rules, result.backend, replay, asked)
        return
    stored = None if recording else (result.baseline_entry or {}).get("counters")
    if not recording and not stored and result.baseline_entry and (result.alongside or {}).get("against") != "base":
        result.notes.append(NOT_STORED)
    result.verdicts += counter_verdicts(stored, result.counters, rules)


def unprofiled_notes(rules: Rules, backend: str | None, replay: bool = False, asked: bool = False) -> list[str]:
    """What a test without counters notes of them: each threshold on counters not checked, and
    why (``replay``: the test's trace was replayed, nothing ran; ``backend``: nsys measured); in a
    replay with no such threshold, that Nsight Compute did not run where the test ``asked`` for it."""
    why = NOT_IN_REPLAY if replay else NOT_UNDER_NSYS if backend == "nsys" else NOT_PROFILED
    notes = [f"{t.text}: {why}" for t in rules.thresholds if counter_spec(t.metric)]
    return notes or ([NCU_NOT_IN_REPLAY] if replay and asked else [])


def counter_verdicts(before: Mapping[str, Any] | None, now: Mapping[str, Any], rules: Rules) -> list[Verdict]:
    """The thresholds naming counters on ``now``, then ``now`` against ``before`` where there
    are counters to compare with (the plugin's and ``gpuprof diff``'s one judgment)."""
    out = [v for t in rules.thresholds if counter_spec(t.metric) for v in threshold_verdicts(t, now)]
    return out + (baseline_verdicts(before, now, rules) if before else [])


def threshold_verdicts(t: Threshold, counters: Mapping[str, Any]) -> list[Verdict]:
    """``memory_bandwidth_utilization``'s threshold on the test's value; a kernel threshold
    on the median of each profiled kernel whose function name the pattern matches, every one
    of which must hold it (none matching breaks it: the gate would check nothing; so does a
    counter without a value, from a report that lacks its metrics)."""
    found = kernel_counter(t.metric)
    if found is None:
        value = counters.get(BANDWIDTH.name)
        return [_not_checked(t, t.metric, BANDWIDTH.name, counters) if value is None else check_threshold(t, value)]
    pattern, counter = found
    kernels = counters.get("kernels") or {}
    matched = [k for k, row in kernels.items() if re.search(pattern, row.get("function") or k)]
    if not matched:
        profiled = ", ".join(sorted({row.get("function") or k for k, row in kernels.items()})) or "none"
        return [Verdict(t.metric, State.THRESHOLD, None, None, t.text, relative=False, threshold=t, evidence=(
            f"no profiled kernel's function matches {pattern!r} (profiled: {profiled}; choose them with the "
            "marker's ncu={'kernels': PATTERN})"))]
    return [_not_checked(t, f"kernels[{k}].{counter}", counter, counters) if kernels[k][counter]["median"] is None else
            replace(check_threshold(t, kernels[k][counter]["median"]), metric=f"kernels[{k}].{counter}",
                    relative=False) for k in matched]


def _not_checked(t: Threshold, metric: str, counter: str, counters: Mapping[str, Any]) -> Verdict:
    """A threshold on a counter that holds no value breaks, saying why it has none: the reason
    the counters carry (``metrics.counters.ncu_counters``' ``no_value``: the metrics the report
    lacks, or the arithmetic); a document written before they carried one says no more."""
    why = (counters.get(NO_VALUE) or {}).get(metric)
    return Verdict(metric, State.THRESHOLD, None, None, t.text, relative=False, threshold=t,
                   evidence=f"not checked: no value; {counter} {why}" if why else "not checked: no value")


def baseline_verdicts(before: Mapping[str, Any], now: Mapping[str, Any], rules: Rules) -> list[Verdict]:
    """Each judged counter of each kernel profiled in both runs, then the test's
    ``memory_bandwidth_utilization`` where both runs profiled the same kernels (a share of
    other kernels' time is another number); a kernel profiled in one run only is not compared
    (ncu profiles the heaviest: a kernel new or vanished is the timeline's verdict).  Registers
    and local memory are judged as counts and bytes are, the bandwidth as a ratio
    (``verdicts.compare_value``); hit rates only where the test gives them a tolerance
    (``PLACEMENT_DEPENDENT``)."""
    out = []
    kernels = now.get("kernels") or {}
    for kernel, row in kernels.items():
        stored = (before.get("kernels") or {}).get(kernel)
        if stored is None:
            continue
        for counter, spec in COUNTER_SPECS.items():
            if spec.kind == "info" or counter not in stored or counter not in row \
                    or counter in PLACEMENT_DEPENDENT and counter not in rules.tolerances:
                continue
            metric = f"kernels[{kernel}].{counter}"
            b, c = stored[counter]["median"], row[counter]["median"]
            if spec.kind == "percent" and b is not None and c is not None:
                out.append(percent_verdict(metric, stored[counter], row[counter], 100 * rules.tolerance(spec)))
            else:  # counts and bytes; a counter one report could not give is not compared, saying so
                out.append(replace(compare_value(spec, b, c, rules), metric=metric))
    if set(kernels) != set(before.get("kernels") or {}):
        return out + [Verdict(BANDWIDTH.name, State.OK, before.get(BANDWIDTH.name), now.get(BANDWIDTH.name),
                              "not compared: ncu profiled other kernels than the baseline's", relative=False)]
    return out + [compare_value(BANDWIDTH, before.get(BANDWIDTH.name), now.get(BANDWIDTH.name), rules)]


def percent_verdict(metric: str, before: Mapping[str, float], now: Mapping[str, float], points: float) -> Verdict:
    """Worse when this run's median over its launches lies below the smallest of the
    baseline's launches by more than ``points`` (the ratio tolerance x 100, or the counter's
    own); improved when above their largest by more; launches that spread wide move the edge
    with them."""
    b, c = before["median"], now["median"]
    rule = (f"within {format_number(points)} points of the baseline's launches "
            f"({format_number(before['min'])}-{format_number(before['max'])}%), higher is better")
    status = (State.REGRESSED if c < before["min"] - points else State.IMPROVED if c > before["max"] + points
              else State.OK)
    return Verdict(metric, status, b, c, rule, relative=False)
