"""The kernel diff: per kernel name, what changed between two runs, per step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..metrics.specs import METRICS
from .rules import Rules, beyond_time_rule, same


def kernel_diff(metrics: Mapping[str, Any], baseline: Mapping[str, Any] | None,
                summaries: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] = (None, None),
                ) -> list[dict[str, Any]]:
    """Per kernel name, per-step count and time in both runs; gated changes (new,
    vanished, count changed) first, then time changes, each biggest time change first.
    A kernel whose steps both runs kept (``summaries``: the current and the baseline
    ``distribution``) has the median step for its time, as its verdict judges it; the
    others total / steps."""
    now = metrics.get("kernels") or {}
    before = (baseline or {}).get("kernels") or {}
    now_median, before_median = ((s or {}).get("kernels") or {} for s in summaries)
    n_now = metrics.get("step_count") or 1
    n_before = (baseline or {}).get("step_count") or 1
    rows = []
    for name in set(now) | set(before):
        c, b = now.get(name), before.get(name)
        cc = c["count"] / n_now if c else None
        bc = b["count"] / n_before if b else None
        ct = c["time_us"] / n_now if c else None
        bt = b["time_us"] / n_before if b else None
        if name in now_median and name in before_median:
            ct, bt = now_median[name]["median"], before_median[name]["median"]
        if bc is None:
            status = "new"
        elif cc is None:
            status = "vanished"
        elif not same(cc, bc):
            status = "count changed"
        else:
            status = "time only"
        rows.append({"name": name, "status": status, "baseline_count": bc, "current_count": cc,
                     "baseline_time_us": bt, "current_time_us": ct, "time_change_us": (ct or 0.0) - (bt or 0.0)})
    rows.sort(key=lambda r: (r["status"] == "time only", -abs(r["time_change_us"]), r["name"]))
    return rows


def kernel_changes(a: Mapping[str, Any], b: Mapping[str, Any], rules: Rules,
                   summaries: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] = (None, None),
                   ) -> tuple[list[dict[str, Any]], int]:
    """Per kernel name, per step (``kernel_diff``; ``summaries``: A's and B's
    ``distribution``): new, vanished, count changes and time changes beyond the time rule,
    biggest absolute time change first; and how many kernels did not change."""
    rows, unchanged = [], 0
    kernel_tolerance = rules.tolerance(METRICS["kernel_time_us"])  # a kernel name's time follows kernel_time_us
    for r in kernel_diff(b, a, summaries[::-1]):
        ta, tb = r["baseline_time_us"] or 0.0, r["current_time_us"] or 0.0
        delta = tb - ta
        change = {"new": "new", "vanished": "vanished", "count changed": "count"}.get(r["status"])
        if change is None:
            if not beyond_time_rule(delta, ta, kernel_tolerance, rules.time_floor_us):
                unchanged += 1
                continue
            change = "slower" if delta > 0 else "faster"
        rows.append({"kernel": r["name"], "change": change, "count_a": r["baseline_count"],
                     "count_b": r["current_count"], "time_us_a": ta, "time_us_b": tb, "delta_us": delta})
    rows.sort(key=lambda r: (-abs(r["delta_us"]), r["kernel"]))
    return rows, unchanged
