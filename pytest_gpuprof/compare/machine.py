"""Is today's machine the baseline's?  The session's probes against those of the runs
that recorded the baseline (``capture.probes``).

A probe differs when it lies on the slower side of the range of the baseline runs'
values widened by its tolerance: the noise of the probe between processes and
machines of one GPU model, measured on H200s (docs/benchmarks.md).  A difference
makes the regressions it can explain ``unstable`` (``explains``): they may be the
machine's, not the code's.  A faster machine explains no regression.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..capture.probes import PROBES
from ..metrics.specs import METRICS
from ..numbers import format_number
from .verdict import Verdict

#: The kernel series a test must judge, how far in the bad direction their median change
#: must lie, and how far at most, before their moving alike says the card (its clocks, another
#: card of the model) and not the code (``common_shift``): a slowed kernel moves alone, a
#: slower card moves every kernel, and by no more than cards differ.  On a machine of four
#: H200s one card ran a transformer's 20 kernel series 4-6% slower than the baseline recorded
#: on another, every one of them (docs/benchmarks.md); every kernel 20% slower is no card's
#: doing that a machine probe would not see (``TOLERANCE``: the GEMM probe's is 15%).
ALIKE = (5, 0.005, 0.08)


def _kernel_change(v: Verdict) -> float | None:
    """log(current / baseline) of a verdict on a kernel time (the total or a kernel name's)."""
    kernel = v.metric == "kernel_time_us" or (v.metric.startswith("kernels[") and v.metric.endswith(".time_us"))
    return math.log(v.current / v.baseline) if kernel and v.baseline and v.current else None


def common_shift(verdicts: Iterable[Verdict]) -> float | None:
    """The median log change of the test's kernel names' times when at least ``ALIKE[0]`` of
    them were judged and it lies beyond ``ALIKE[1]`` in the bad direction, and within
    ``ALIKE[2]``; else None."""
    changes = [c for v in verdicts if v.metric != "kernel_time_us" and (c := _kernel_change(v)) is not None]
    if len(changes) < ALIKE[0]:
        return None
    shift = statistics.median(changes)
    return shift if math.log1p(ALIKE[1]) < shift <= math.log1p(ALIKE[2]) else None


def moved_alike(v: Verdict, shift: float) -> bool:
    """A kernel-time regression that the test's ``common_shift`` explains: less the shift, it
    lies within its margin."""
    change = _kernel_change(v)
    return change is not None and v.margin is not None and change - shift <= math.log1p(v.margin)


def alike_sentence(shift: float, verdicts: Iterable[Verdict]) -> str:
    """Why kernel regressions that ``moved_alike`` are ``unstable``, in words."""
    n = sum(1 for v in verdicts if v.metric != "kernel_time_us" and _kernel_change(v) is not None)
    return (f"the test's {n} kernel series moved alike, {math.expm1(shift):+.1%} at the median: this card ran its "
            f"kernels slower than the baseline's (its clocks, or another card), not one kernel slower")


def on_recorded_card(environment: Mapping[str, Any] | None, runs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether this run measured a card that recorded one of the baseline's runs (their
    ``environment``'s ``gpu_id``, ``capture.environment.card``): there its kernel times move
    as the recorded runs' do; on another card of the model, or where either does not say
    which card it is, they also move as cards of one model differ (``time_rules.BETWEEN_CARDS``)."""
    here = (environment or {}).get("gpu_id")
    return here is not None and any((r.get("environment") or {}).get("gpu_id") == here for r in runs)


#: Relative change of each probe that is beyond its noise.
TOLERANCE = {
    "h2d_pinned_gbps": 0.10,
    "h2d_pageable_gbps": 0.25,
    "gemm_us": 0.15,
    "launch_us": 0.60,
    "sm_clock_mhz": 0.20,
}


#: What a slower reading of each probe can move: copy times, kernel times, or only what
#: the host's pace sets (every probe moves the window and the ratios, see ``explains``).
MOVES = {
    "h2d_pinned_gbps": "copy",
    "h2d_pageable_gbps": "copy",
    "gemm_us": "kernel",
    "sm_clock_mhz": "kernel",
    "launch_us": "host",
}


def explains(probe: str, metric: str) -> bool:
    """Whether a slower ``probe`` can move the verdict on ``metric``: the window and the
    ratios move with anything; a kernel's time only with the GPU's speed; a copy's time
    only with the link's."""
    spec = METRICS.get(metric)
    if metric == "window_us" or (spec is not None and spec.kind == "ratio"):
        return True
    if MOVES[probe] == "kernel":
        return metric == "kernel_time_us" or metric.startswith("kernels[")
    return MOVES[probe] == "copy" and metric.startswith("memcpy_") and metric.endswith(("_time_us", "_gbps"))


def machine_differences(current: Mapping[str, Any] | None,
                        baseline: list[Mapping[str, Any] | None]) -> dict[str, str]:
    """Probe name -> a sentence, for each probe on which this machine is slower than every
    run of the baseline beyond the probe's tolerance, e.g. ``host-to-device bandwidth
    (pinned) is 24% below the baseline machine's (41.2 GB/s; baseline 54.3 GB/s)``."""
    known = [b for b in baseline if b]
    if not current or not known:
        return {}
    out = {}
    for name, (what, unit, better) in PROBES.items():
        values = [b[name] for b in known if b.get(name)]
        now = current.get(name)
        if not values or not now:
            continue
        slower = now < min(values) * (1 - TOLERANCE[name]) if better == "higher" else \
            now > max(values) * (1 + TOLERANCE[name])
        if not slower:
            continue
        reference = sorted(values)[len(values) // 2]
        change = now / reference - 1
        out[name] = (f"{what} is {abs(change):.0%} {'above' if change > 0 else 'below'} the baseline machine's "
                     f"({format_number(now)} {unit}; baseline {format_number(reference)} {unit})")
    return out


def is_difference(sentence: str) -> bool:
    """Whether a reason is one of ``machine_differences``' sentences."""
    return sentence.startswith(tuple(what for what, _, _ in PROBES.values()))
