"""Counts and bytes: the rule that allows no change.

* count, bytes: per step, must match exactly; for a metric where lower is better
  (``sync_count``) a drop is an improvement.
* each collective's calls and bytes per step: exact (bytes where both runs record them).
* per kernel name: the count per step must match exactly; a new or vanished
  kernel is a change.

Two runs whose values all hold this rule did the same GPU work per step
(``same_program``): only then is the host's speed taken out of the window (``time_rules``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..metrics.specs import METRICS, RECORDED_SINCE, MetricSpec
from .rules import same
from .samples import compared_values
from .status import State
from .verdict import Verdict


def exact_verdict(spec: MetricSpec, b: float, c: float) -> Verdict:
    """A count or byte total per step against the baseline's: the same, or changed (improved
    or regressed where lower is better)."""
    rule = f"must match exactly{' per step' if spec.per_step else ''}"
    if same(b, c):
        return Verdict(spec.name, State.OK, b, c, rule)
    if spec.better == "lower":
        return Verdict(spec.name, State.IMPROVED if c < b else State.REGRESSED, b, c, rule + " (lower is better)")
    return Verdict(spec.name, State.CHANGED, b, c, rule)


def collective_verdicts(before: Mapping[str, Any], now: Mapping[str, Any], both: bool) -> list[Verdict]:
    """Each collective's calls and bytes per step, exact (a collective new or gone is a count
    from or to 0); bytes only where both runs record them.  None where either run's metrics
    predate ``collectives``."""
    if not both:
        return []
    out = []
    for key in sorted({k for k in list(now) + list(before) if k.startswith("collectives[")}):
        b, c = before.get(key), now.get(key)
        if key.endswith(".count"):
            b, c = b or 0.0, c or 0.0
        elif b is None or c is None:
            continue
        if not same(b, c):
            out.append(Verdict(key, State.CHANGED, b, c, f"{key.rsplit('.', 1)[1]} per step must match exactly"))
    return out


def kernel_count_verdicts(before: Mapping[str, float | None], now: Mapping[str, float | None]) -> list[Verdict]:
    """Each kernel name's count per step that is not the baseline's: new, vanished or changed."""
    out = []
    for key in sorted({k for k in list(now) + list(before) if k.startswith("kernels[")}):
        b, c = before.get(key), now.get(key)
        if b is None:
            out.append(Verdict(key, State.NEW, None, c, "kernel absent from the baseline"))
        elif c is None:
            out.append(Verdict(key, State.VANISHED, b, None, "kernel in the baseline, absent now"))
        elif not same(b, c):
            out.append(Verdict(key, State.CHANGED, b, c, "count per step must match exactly"))
    return out


def same_program(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """The two runs did the same GPU work per step: every count and byte total, and each
    kernel name's count, equal."""
    va, vb = compared_values(a), compared_values(b)
    counted = [n for n, s in METRICS.items() if s.kind in ("count", "bytes")
               and not (n in RECORDED_SINCE and (va.get(n) is None or vb.get(n) is None))]  # an older run lacks it
    kernels = {k for k in list(va) + list(vb) if k.startswith("kernels[")}
    pairs = [(va.get(k), vb.get(k)) for k in [*counted, *kernels]]
    return all(a == b or (a is not None and b is not None and same(a, b)) for a, b in pairs)
