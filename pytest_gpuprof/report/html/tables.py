"""A test's two tables: every scalar metric with its verdicts and its bar, and the kernel
diff (new, vanished and changed kernels, biggest change first)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...compare.kernels import kernel_diff
from ...compare.verdict import NOT_COMPARED, shown_value
from ...metrics.specs import METRICS
from ...numbers import format_count, format_quantity, format_time_us
from ..names import kernel_metric
from ..values import per_step_text, shown_values
from ..words import verdict_state, verdict_words
from .classes import QUIET_CLASSES, VERDICT_COLORS, class_of, failing

#: Changed kernels the kernel diff shows, biggest change first, before the rest fold (a changed
#: precision swaps every kernel: a page-long list would push the next test's cause away).
KERNEL_ROWS = 20


def metric_table(t: Mapping[str, Any]) -> dict[str, Any]:
    """One row per scalar metric: per-step values, the comparison verdict, thresholds and
    its bar; metrics 0 or n/a in both runs only named."""
    shown = shown_values(t)  # the values judged, as every other output shows them
    compare: dict[str, dict[str, Any]] = {}
    thresholds: dict[str, list[dict[str, Any]]] = {}
    for v in t.get("verdicts") or []:
        if v["metric"] not in METRICS:
            continue
        if v.get("threshold") is not None:
            thresholds.setdefault(v["metric"], []).append({**v, **v["threshold"]})
        else:
            compare[v["metric"]] = v
    rows: list[dict[str, Any]] = []
    zero: list[str] = []
    for order, (name, spec) in enumerate(METRICS.items()):
        if name == "step_count":
            continue
        v = compare.get(name)
        verdicts = ([v] if v else []) + thresholds.get(name, [])
        statuses = [x["status"] for x in verdicts]
        cls = ("fail" if any(failing(s) for s in statuses) else "improved" if "improved" in statuses
               else "undecided" if "undecided" in statuses else "let-through" if v and v.get("let_through")
               else "ok" if verdicts else "reported")
        # the values judged (``report.values.shown_values``): its verdict's, else each run's
        # median step where it kept samples, as its thresholds took them
        b, c, moved = shown[name]
        if not (thresholds.get(name) or cls == "fail" or any(x not in (None, 0) for x in (b, c))):
            zero.append(name)
            continue
        rules = [v["rule"] + (f"; {v['evidence']}" if v.get("evidence") else "")] if v else []
        badges = [verdict_state(v)] if v else []
        for th in thresholds.get(name, []):
            state = ("violated" if th["status"] == "threshold" else
                     "holds" if th.get("current") is not None else "not applicable")
            rules.append(f"threshold {th['rule']}: {state}")
            if state == "violated":
                badges.append("threshold violated")
        rows.append({
            "metric": name, "class": cls, "order": order, "rules": rules,
            "badges": badges or ["ok" if thresholds.get(name) else "reported only"],
            "baseline": per_step_text(name, b),
            "current": per_step_text(name, c),
            "change": moved,
            "iqr": [_iqr(t.get("baseline_distribution"), name), _iqr(t.get("distribution"), name)],
            "bar": _bar(name, spec.kind, b, c, thresholds.get(name, []), VERDICT_COLORS[cls]),
        })
    rank = {"fail": 0, "improved": 1, "undecided": 2, "let-through": 3, "ok": 4, "reported": 5}
    rows.sort(key=lambda r: (rank[r["class"]], r["order"]))
    loud = [r for r in rows if r["class"] not in QUIET_CLASSES]
    if not loud:  # nothing to look at first: every row in view
        return {"rows": rows, "folded": [], "zero": zero}
    return {"rows": loud, "folded": rows[len(loud):], "zero": zero}


def _iqr(distribution: dict[str, Any] | None, metric: str) -> str:
    """A time metric's interquartile range over the run's steps, shown under its value."""
    s = (distribution or {}).get(metric)
    return f"IQR {shown_value(metric, s['q1'])}–{shown_value(metric, s['q3'])}" if s else ""


def _bar(metric: str, kind: str, b: float | None, c: float | None, thresholds: list[dict[str, Any]],
         color: str) -> dict[str, Any]:
    """Current value as a bar, baseline as a marker, thresholds as lines, on one scale (x in px)."""
    width, pad = 240, 6
    top = max([abs(v) for v in (b, c) if v is not None] + [abs(th["value"]) for th in thresholds] + [0.0])
    top = (max(top, 1.0) if kind == "ratio" else top) * 1.08 or 1.0

    def x(v: float) -> float:
        return round(pad + abs(v) / top * (width - 2 * pad), 2)

    return {
        "width": width, "pad": pad, "color": color,
        "current": None if c is None else {"w": max(x(c) - pad, 0), "title": f"current: {per_step_text(metric, c)}"},
        "baseline": None if b is None else {"x": x(b), "title": f"baseline: {per_step_text(metric, b)}"},
        "thresholds": [{"x": x(th["value"]), "title": f"threshold {th['rule']} "
                        f"({'violated' if th['status'] == 'threshold' else 'holds'})"} for th in thresholds],
    }


def kernel_table(t: Mapping[str, Any]) -> dict[str, Any] | None:
    if t.get("baseline_metrics") is None:
        return None
    rows = kernel_diff(t["metrics"], t["baseline_metrics"], distributions(t))
    gated = sum(1 for r in rows if r["status"] != "time only")
    # the per-kernel time verdicts (median per-step time against the baseline's)
    timed = {found[0]: v for v in t.get("verdicts") or []
             if v["metric"].endswith(".time_us") and (found := kernel_metric(v["metric"]))}
    out = []
    for r in rows:
        bt, ct = r["baseline_time_us"], r["current_time_us"]
        label, tip, v = r["status"], "", timed.get(r["name"])
        if r["status"] != "time only":
            cls = "fail"
        else:  # said by its time verdict, so that one label and colour mean one thing
            cls = class_of(v) if v else "reported"
            label = f"time {verdict_state(v) if v else NOT_COMPARED}"
            tip = verdict_words(v) if v else f"per-kernel time {NOT_COMPARED}"  # the row names its kernel
        out.append({
            "name": r["name"], "status": r["status"], "class": cls, "label": label, "tip": tip,
            "count": f"{format_count(r['baseline_count'] or 0)} → {format_count(r['current_count'] or 0)}",
            "time": f"{format_quantity(bt, 'time', 'us')} → {format_quantity(ct, 'time', 'us')}",
            "delta": format_time_us(r['time_change_us'], signed=True)
                     + (f" ({r['time_change_us'] / bt:+.1%})" if bt and ct is not None else ""),
        })
    changed = [r for r in out if r["class"] not in QUIET_CLASSES]
    return {"gated": gated, "total": len(rows), "shown": changed[:KERNEL_ROWS], "more": changed[KERNEL_ROWS:],
            "folded": [r for r in out if r["class"] in QUIET_CLASSES]}


def distributions(t: Mapping[str, Any]) -> tuple[Any, Any]:
    """(this run's, the baseline's) ``distribution``: a kernel's time is its median step where
    both kept its steps, as its verdict judges it (``compare.kernels.kernel_diff``)."""
    return t.get("distribution"), t.get("baseline_distribution")
