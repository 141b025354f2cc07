"""The SVG drawings of the HTML report: the GPU timelines of one step and the metric bars.

Pure functions of the results document's timeline samples and metric rows; every
text from the document is escaped (``escaping.html_text``)."""

from __future__ import annotations

import math
from typing import Any, Iterable

from ...metrics import timeline as timeline_mod
from ...metrics.measure import METRICS
from ...numbers import format_number
from ..escaping import html_text


def value_text(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    return format_number(value) + (f" {unit}" if unit else "")


def unit_of(metric: str) -> str:
    spec = METRICS.get(metric)
    if spec is None:
        return ""
    return f"{spec.unit}/step" if spec.per_step and spec.unit else ("/step" if spec.per_step else spec.unit)


#: Timeline colors by activity kind, close to Nsight Systems' (kernels blue, HtoD green, DtoH pink).
KIND_COLORS = {
    "kernel": "#3b73b9", "htod": "#2ca02c", "dtoh": "#d6409f", "dtod": "#ff8c1a",
    "ptop": "#8c564b", "htoh": "#7f7f7f", "other": "#bcbd22", "memset": "#17becf",
}
KIND_LABELS = {
    "kernel": "kernel", "htod": "Memcpy HtoD", "dtoh": "Memcpy DtoH", "dtod": "Memcpy DtoD",
    "ptop": "Memcpy PtoP", "htoh": "Memcpy HtoH", "other": "Memcpy (other)", "memset": "Memset",
}
def duration(ns: float) -> str:
    """A duration in ns as an engineer reads it: ns, us or ms, exact to the ns."""
    if abs(ns) < 1_000:
        return f"{ns:.0f} ns"
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:.3f} us"
    return f"{ns / 1e6:.6f} ms"


_TL_WIDTH, _TL_LABEL, _TL_RIGHT = 1200, 132, 16
_LANE_H, _LANE_GAP, _RUN_HEAD = 16, 4, 24


def timelines(t: dict[str, Any]) -> str:
    base, cur = t.get("baseline_timeline"), t.get("timeline")
    if base is None and cur is None:
        return '<h3>GPU timeline</h3><p class="note">no timeline sample in the results</p>'
    before = set((t.get("baseline_metrics") or {}).get("kernels") or {})
    now = set((t.get("metrics") or {}).get("kernels") or {})
    have_base = t.get("baseline_metrics") is not None
    # kernels marked with a red tick above their lane: vanished ones in the baseline run, new ones in the current
    runs = [("baseline", base, (before - now) if have_base else set()),
            ("current", cur, (now - before) if have_base else set())]
    span = max([s["span_ns"] for _, s, _ in runs if s] + [1])
    plot = _TL_WIDTH - _TL_LABEL - _TL_RIGHT

    def x(ns: float) -> float:
        return _TL_LABEL + ns / span * plot

    body, y, grid_top = [], 0, None
    for label, sample, marked in runs:
        if sample is None:
            why = ("the baseline was recorded without a timeline sample (refresh it with --gpuprof-update-baseline)"
                   if label == "baseline" else "no timeline sample for this run")
            body.append(f'<text x="4" y="{y + 14}" class="runhead">{label}: {html_text(why)}</text>')
            y += _RUN_HEAD + 4
            continue
        evs = timeline_mod.events(sample)
        streams = sample["streams"]
        head = (f"{label} run · step {sample['step']} (median GPU busy time) · span {duration(sample['span_ns'])} · "
                f"{len(evs)} activities on {len(streams)} stream(s)"
                + (" · truncated to the first events" if sample.get("truncated") else ""))
        body.append(f'<text x="4" y="{y + 14}" class="runhead">{html_text(head)}</text>')
        y += _RUN_HEAD
        top = y
        grid_top = y if grid_top is None else grid_top
        for lane, stream in enumerate(streams):
            ly = y + lane * (_LANE_H + _LANE_GAP)
            mine = [e for e in evs if e["lane"] == lane]
            per_kind: dict[str, int] = {}
            for e in mine:
                per_kind[e["kind"]] = per_kind.get(e["kind"], 0) + 1
            busy = sum(e["dur_ns"] for e in mine)
            tip = f"stream {stream} ({label}): " + ", ".join(
                f"{n} {KIND_LABELS.get(k, k)}" for k, n in sorted(per_kind.items())) + f"; busy {duration(busy)}"
            body.append(f'<g class="lane"><title>{html_text(tip)}</title>'
                        f'<rect x="{_TL_LABEL}" y="{ly}" width="{x(sample["span_ns"]) - _TL_LABEL:.2f}" '
                        f'height="{_LANE_H}" class="lanebg"/>'
                        f'<text x="{_TL_LABEL - 6}" y="{ly + 12}" class="lanelabel">stream {html_text(stream)}</text></g>')
            for e in mine:
                w = max(e["dur_ns"] / span * plot, 0.6)
                flag = e["kind"] == "kernel" and e["name"] in marked
                cls = html_text(f'ev k-{e["kind"]}' + (" marked" if flag else ""))
                what = KIND_LABELS.get(e["kind"], e["kind"])
                extra = ("\nnew: absent from the baseline" if label == "current" else
                         "\nvanished: absent from the current run") if flag else ""
                tip = (f"{e['name']}\n{what} · stream {stream}\nstart +{duration(e['start_ns'])} · "
                       f"duration {duration(e['dur_ns'])}{extra}")
                body.append(f'<rect x="{x(e["start_ns"]):.2f}" y="{ly + 1}" width="{w:.2f}" '
                            f'height="{_LANE_H - 2}" class="{cls}"><title>{html_text(tip)}</title></rect>')
                if flag:
                    body.append(f'<rect x="{x(e["start_ns"]):.2f}" y="{ly - 3.5}" width="{max(w, 1.5):.2f}" '
                                f'height="3" class="mark"><title>{html_text(tip)}</title></rect>')
        y = top + len(streams) * (_LANE_H + _LANE_GAP) + 6
    axis, y = _axis(span, x, y, grid_top or 0)
    legend = "".join(
        f'<span class="key"><i style="background:{KIND_COLORS[k]}"></i>{html_text(KIND_LABELS[k])}</span>'
        for k in KIND_COLORS
    ) + '<span class="key"><i class="marked-key"></i>red tick above: kernel new in the current run / vanished from it</span>'
    svg = (f'<svg class="timeline" viewBox="0 0 {_TL_WIDTH} {y}" width="{_TL_WIDTH}" height="{y}" '
           f'role="img" aria-label="GPU timeline of {html_text(t["nodeid"])}">'
           f'{"".join(body)}{axis}</svg>')
    return (f'<h3>GPU timeline of one measured step (baseline above current, same time scale)</h3>'
            f'<div class="tlwrap">{svg}</div><div class="legend">{legend}</div>')


def _axis(span: float, x, y: float, grid_top: float) -> tuple[str, float]:
    """Time ticks under the lanes and a scale bar one tick long."""
    raw = span / 8
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(f * mag for f in (1, 2, 5, 10) if f * mag >= raw)
    unit, div = ("ms", 1e6) if step >= 1e6 else ("us", 1e3) if step >= 1e3 else ("ns", 1)
    parts = [f'<line x1="{_TL_LABEL}" y1="{y}" x2="{x(span):.2f}" y2="{y}" class="axis"/>']
    n = 0
    while n * step <= span + 1e-9:
        tx = x(n * step)
        parts.append(f'<line x1="{tx:.2f}" y1="{y}" x2="{tx:.2f}" y2="{y + 5}" class="axis"/>'
                     f'<line x1="{tx:.2f}" y1="{grid_top}" x2="{tx:.2f}" y2="{y}" class="gridline"/>'
                     f'<text x="{tx:.2f}" y="{y + 17}" class="tick">{n * step / div:g} {unit}</text>')
        n += 1
    bar = step / span * (_TL_WIDTH - _TL_LABEL - _TL_RIGHT)
    bx, by = _TL_WIDTH - _TL_RIGHT - bar, y + 30
    parts.append(f'<g class="scalebar"><title>scale: {step / div:g} {unit}</title>'
                 f'<line x1="{bx:.2f}" y1="{by}" x2="{bx + bar:.2f}" y2="{by}"/>'
                 f'<line x1="{bx:.2f}" y1="{by - 4}" x2="{bx:.2f}" y2="{by + 4}"/>'
                 f'<line x1="{bx + bar:.2f}" y1="{by - 4}" x2="{bx + bar:.2f}" y2="{by + 4}"/>'
                 f'<text x="{bx - 6:.2f}" y="{by + 4}" class="scalelabel">{step / div:g} {unit}</text></g>')
    parts.append(f'<text x="{_TL_LABEL}" y="{by + 4}" class="tick start">time from the step\'s first GPU '
                 f'activity; hover an activity for its name and exact duration</text>')
    return "".join(parts), by + 12


def bar(r: dict[str, Any], color: str) -> str:
    """Current value as a bar, baseline as a marker, thresholds as dashed lines, on one scale."""
    width, height, pad = 240, 22, 6
    b, c = r["baseline"], r["current"]
    values = [abs(v) for v in (b, c) if v is not None] + [abs(th["value"]) for th in r["thresholds"]]
    top = max(values + [0.0])
    if r["spec"].kind == "ratio":
        top = max(top, 1.0)
    top = top * 1.08 or 1.0
    unit = unit_of(r["metric"])

    def x(v: float) -> float:
        return pad + abs(v) / top * (width - 2 * pad)

    parts = [f'<svg class="bar" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
             f'<line x1="{pad}" y1="{height - 3}" x2="{width - pad}" y2="{height - 3}" class="track"/>']
    if c is not None:
        parts.append(f'<rect x="{pad}" y="6" width="{max(x(c) - pad, 0):.2f}" height="11" '
                     f'fill="{color}" class="cur"><title>current: {html_text(value_text(c, unit))}</title></rect>')
    if b is not None:
        bx = x(b)
        parts.append(f'<g class="base"><title>baseline: {html_text(value_text(b, unit))}</title>'
                     f'<line x1="{bx:.2f}" y1="3" x2="{bx:.2f}" y2="{height - 1}"/>'
                     f'<path d="M{bx - 4:.2f} 0 L{bx + 4:.2f} 0 L{bx:.2f} 5 Z"/></g>')
    for th in r["thresholds"]:
        tx = x(th["value"])
        state = "violated" if th["status"] == "threshold" else "holds"
        parts.append(f'<g class="thr"><title>threshold {html_text(th["rule"])} ({state})</title>'
                     f'<line x1="{tx:.2f}" y1="0" x2="{tx:.2f}" y2="{height}"/></g>')
    parts.append("</svg>")
    return "".join(parts)


def kinds_css(items: Iterable[tuple[str, str]]) -> str:
    return "".join(f".k-{k}{{fill:{c}}}" for k, c in items)
