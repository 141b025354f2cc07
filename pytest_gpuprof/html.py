"""The HTML report: one self-contained file made from the results document.

``render_html(doc)`` is pure (document in, text out); ``write_html(doc, path)``
writes it.  The page needs no network and no script: inline CSS, and SVG drawn
here for the timelines and the metric bars, with exact numbers in hover titles
and tables.  Per test, in the document's order (regressions first):

* what broke, in the terminal report's wording;
* the GPU timeline of the sampled measured step, baseline run above the current
  run on one time scale, one lane per stream, kernels and each memcpy kind in
  their own color;
* every metric as a bar against its baseline marker and threshold lines;
* the kernel diff: new, vanished and changed kernels, biggest first.

Every text taken from the document (node ids, kernel names, messages) is escaped.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path
from typing import Any, Iterable

from . import timeline as timeline_mod
from .baseline import write_atomic
from .compare import BROKEN, compared_values, format_number, kernel_diff
from .metrics import METRICS
from .report import change, verdict_line

#: Colors of test statuses and verdicts (the failure color is the one tests look for).
STATUS_COLORS = {
    "error": "#8e0000",
    "failed": "#c62828",
    "unstable": "#ad1457",
    "undecided": "#6d4c41",
    "improved": "#00838f",
    "no baseline": "#ef6c00",
    "updated": "#1565c0",
    "passed": "#2e7d32",
    "skipped": "#757575",
}
FAIL_COLOR = STATUS_COLORS["failed"]
VERDICT_COLORS = {
    "fail": FAIL_COLOR, "improved": STATUS_COLORS["improved"], "undecided": STATUS_COLORS["undecided"],
    "ok": "#78909c", "reported": "#b0bec5",
}
#: Timeline colors by activity kind, close to Nsight Systems' (kernels blue, HtoD green, DtoH pink).
KIND_COLORS = {
    "kernel": "#3b73b9", "htod": "#2ca02c", "dtoh": "#d6409f", "dtod": "#ff8c1a",
    "ptop": "#8c564b", "htoh": "#7f7f7f", "other": "#bcbd22", "memset": "#17becf",
}
KIND_LABELS = {
    "kernel": "kernel", "htod": "Memcpy HtoD", "dtoh": "Memcpy DtoH", "dtod": "Memcpy DtoD",
    "ptop": "Memcpy PtoP", "htoh": "Memcpy HtoH", "other": "Memcpy (other)", "memset": "Memset",
}
#: Kernel diff rows shown before the rest is folded away.
KERNEL_ROWS = 25
#: Per-kernel verdicts listed under "what broke" before the rest is left to the kernel diff.
KERNEL_LINES = 6

_THRESHOLD_RULE = re.compile(r"^(?P<metric>[a-z_]+) (?P<op>>=|<=|==|!=|>|<) (?P<value>[-+]?[0-9.]+)")


def write_html(doc: dict[str, Any], path: Path) -> None:
    """Write the HTML report of a results document (``results.results_document``)."""
    write_atomic(Path(path), render_html(doc))


def render_html(doc: dict[str, Any]) -> str:
    """The whole page as one string."""
    tests = doc.get("tests") or []
    parts = [_HEAD, _summary(doc, tests)]
    parts += [_test_section(i, t) for i, t in enumerate(tests)]
    if doc.get("skipped"):
        rows = "".join(f"<tr><td><code>{_e(s['nodeid'])}</code></td><td>{_e(s['reason'])}</td></tr>"
                       for s in doc["skipped"])
        parts.append(f'<section class="skipped"><h2>Skipped profiled tests</h2>'
                     f'<table class="grid"><tr><th>test</th><th>reason</th></tr>{rows}</table></section>')
    parts.append("</body></html>\n")
    return "".join(parts)


# --- small helpers -------------------------------------------------------------

def _e(text: Any) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def _anchor(i: int, nodeid: str) -> str:
    return f"t{i}-" + re.sub(r"[^A-Za-z0-9_-]+", "-", nodeid).strip("-")[:80]


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    return format_number(value) + (f" {unit}" if unit else "")


def _unit(metric: str) -> str:
    spec = METRICS.get(metric)
    if spec is None:
        return ""
    return f"{spec.unit}/step" if spec.per_step and spec.unit else ("/step" if spec.per_step else spec.unit)


def _pct(value: float | None) -> str:
    return "" if value is None else f" ({value:.2%})"


def _time(ns: float) -> str:
    """A duration in ns as an engineer reads it: ns, us or ms, exact to the ns."""
    if abs(ns) < 1_000:
        return f"{ns:.0f} ns"
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:.3f} us"
    return f"{ns / 1e6:.6f} ms"


def _failing(status: str) -> bool:
    return status in BROKEN


def _verdict_class(status: str | None) -> str:
    if status is None:
        return "reported"
    if _failing(status):
        return "fail"
    return status if status in ("improved", "undecided") else "ok"


# --- summary ---------------------------------------------------------------------

def _summary(doc: dict[str, Any], tests: list[dict[str, Any]]) -> str:
    counts = doc.get("counts") or {}
    chips = "".join(
        f'<span class="chip" style="background:{STATUS_COLORS.get(k, "#555")}">{_e(k)}: {n}</span>'
        for k, n in counts.items() if n
    ) or '<span class="chip" style="background:#757575">no profiled tests</span>'
    gpus = sorted({t["gpu"] for t in tests if t.get("gpu")})
    failing = sum(1 for t in tests if t.get("status") in ("failed", "error"))
    verdict = (f'<p class="verdict fail">{failing} test(s) failed the GPU performance gate</p>' if failing
               else '<p class="verdict ok">no GPU performance regression</p>')
    meta = (f'<dl class="meta"><dt>GPU</dt><dd>{_e(", ".join(gpus) or "n/a")}</dd>'
            f'<dt>backend</dt><dd>{_e(doc.get("backend"))}</dd>'
            f'<dt>baselines</dt><dd><code>{_e(doc.get("baseline_dir"))}</code></dd>'
            f'<dt>gpuprof</dt><dd>{_e(doc.get("gpuprof_version"))} (results schema {_e(doc.get("schema_version"))})</dd>'
            "</dl>")
    head = ("<tr><th>status</th><th>test</th><th>broke</th><th>kernels/step</th><th>kernel time/step</th>"
            "<th>gpu_utilization</th><th>syncs/step</th></tr>")
    rows = []
    for i, t in enumerate(tests):
        status = t.get("status", "")
        broke = sum(1 for v in t.get("verdicts") or [] if _failing(v["status"]))
        now = compared_values(t["metrics"]) if t.get("metrics") else {}
        before = compared_values(t["baseline_metrics"]) if t.get("baseline_metrics") else {}
        cells = "".join(
            f"<td class=\"num\">{_summary_cell(m, now.get(m), before.get(m))}</td>"
            for m in ("kernel_count", "kernel_time_us", "gpu_utilization", "sync_count")
        )
        rows.append(
            f'<tr class="status-{_e(status.replace(" ", "-"))}" data-status="{_e(status)}">'
            f'<td><span class="badge" style="background:{STATUS_COLORS.get(status, "#555")}">{_e(status)}</span></td>'
            f'<td><a href="#{_anchor(i, t["nodeid"])}"><code>{_e(t["nodeid"])}</code></a></td>'
            f'<td class="num">{broke if broke else ""}</td>{cells}</tr>'
        )
    table = (f'<table class="grid summary" id="summary">{head}{"".join(rows)}</table>' if rows else "")
    return (f'<header><h1>gpuprof report</h1>{verdict}<div class="chips">{chips}</div>{meta}</header>'
            f"<section>{table}</section>")


def _summary_cell(metric: str, now: float | None, before: float | None) -> str:
    if now is None:
        return "n/a"
    unit = "\u00a0us" if metric.endswith("_us") else ""
    text = f"{format_number(now)}{unit}"
    if before is None:
        return _e(text)
    cls = "" if math.isclose(now, before, rel_tol=1e-9, abs_tol=1e-9) else ' class="delta"'
    return f"{_e(text)} <span{cls}>({_e(change(metric, now, before))})</span>"


# --- one test --------------------------------------------------------------------

def _test_section(i: int, t: dict[str, Any]) -> str:
    status = t.get("status", "")
    color = STATUS_COLORS.get(status, "#555")
    m = t.get("metrics") or {}
    bits = [f"GPU {_e(t.get('gpu') or 'n/a')}", f"backend {_e(t.get('backend') or 'n/a')}"]
    if m.get("step_count") is not None:
        bits.append(f"{m['step_count']} measured step(s)")
    if t.get("baseline_metrics") and t["baseline_metrics"].get("step_count") is not None:
        bits.append(f"baseline: {t['baseline_metrics']['step_count']} step(s)")
    if t.get("baseline_file"):
        bits.append(f"baseline file <code>{_e(t['baseline_file'])}</code>")
    if t.get("trace"):
        bits.append(f"trace <code>{_e(t['trace'])}</code>")
    out = [f'<section class="test status-{_e(status.replace(" ", "-"))}" id="{_anchor(i, t["nodeid"])}" '
           f'data-status="{_e(status)}" style="border-left-color:{color}">',
           f'<h2><span class="badge" style="background:{color}">{_e(status)}</span> <code>{_e(t["nodeid"])}</code></h2>',
           f'<p class="sub">{" · ".join(bits)}</p>']
    if t.get("message"):
        out.append(f'<pre class="message">{_e(t["message"])}</pre>')
    out.append(_environment(t))
    out.append(_broke(t))
    if t.get("metrics") is not None:
        out.append(_timelines(t))
        out.append(_metric_table(t))
        out.append(_kernel_diff(t))
    out.append("</section>")
    return "".join(out)


def _environment(t: dict[str, Any]) -> str:
    env, old = t.get("environment") or {}, t.get("baseline_environment")
    notes = []
    if t.get("baseline_backend") and t.get("backend") and t["baseline_backend"] != t["backend"]:
        notes.append(f"baseline recorded with the {_e(t['baseline_backend'])} backend: only counts and bytes "
                     "are compared, and kernel names may be spelled differently")
    if old:
        diff = [f"{_e(k)}: {_e(old.get(k, '-'))} → {_e(env.get(k, '-'))}"
                for k in sorted(set(env) | set(old)) if env.get(k) != old.get(k)]
        if diff:
            notes.append("environment differs from the baseline's: " + "; ".join(diff))
    return "".join(f'<p class="note">{n}</p>' for n in notes)


def _broke(t: dict[str, Any]) -> str:
    """The failing verdicts in the failure message's words (``report.verdict_line``), then
    improvements and undecided ones.  Per-kernel verdicts come after the metrics, biggest
    time change first, shortened to what changed and the name; past a few, the kernel diff
    below has them all."""
    scalar, kernels = [], {}
    for v in t.get("verdicts") or []:
        s = v["status"]
        if not (_failing(s) or s in ("improved", "undecided")):
            continue
        if v["metric"].startswith("kernels["):
            kernels.setdefault(_kernel_of(v["metric"]), []).append(v)
        else:
            scalar.append(f'<li class="{_verdict_class(s)}" title="{_e(verdict_line(v))}">{_e(verdict_line(v))}</li>')
    order = {r["name"]: i for i, r in enumerate(kernel_diff(t.get("metrics") or {}, t.get("baseline_metrics")))}
    kernel_lines = []
    for name in sorted(kernels, key=lambda n: order.get(n, len(order))):
        for v in kernels[name]:
            what = _kernel_verdict_words(v)
            kernel_lines.append(f'<li class="{_verdict_class(v["status"])}" title="{_e(verdict_line(v))}">'
                                f'{_e(what)}: <code>{_e(name)}</code></li>')
    lines = scalar + kernel_lines[:KERNEL_LINES]
    if len(kernel_lines) > KERNEL_LINES:
        lines.append(f'<li class="more">… and {len(kernel_lines) - KERNEL_LINES} more per-kernel verdict(s): '
                     "see the kernel diff below</li>")
    if not lines:
        return ""
    verdicts = t.get("verdicts") or []
    fails = sum(1 for v in verdicts if _failing(v["status"]))
    if fails:
        title = f"{fails} metric(s) broke"
    elif any(v["status"] == "improved" for v in verdicts):
        title = "improved (refresh the baseline with --gpuprof-update-baseline)"
    else:
        title = "undecided: too few steps to tell a change from noise"
    return f'<div class="broke"><h3>{_e(title)}</h3><ul>{"".join(lines)}</ul></div>'


def _kernel_of(metric: str) -> str:
    """``kernels[NAME].count`` -> NAME (names may hold brackets and dots)."""
    return metric[len("kernels["):metric.rindex("]")]


def _kernel_verdict_words(v: dict[str, Any]) -> str:
    """A per-kernel verdict without the (long) name: what changed, per step."""
    s, b, c = v["status"], v.get("baseline"), v.get("current")
    if s == "new":
        return f"new kernel, {format_number(c)} per step"
    if s == "vanished":
        return f"vanished kernel, was {format_number(b)} per step"
    what = "time per step" if v["metric"].endswith(".time_us") else "count per step"
    unit = " us" if what.startswith("time") else ""
    change = f" ({v['change']})" if v.get("change") else ""
    return f"{what} {format_number(b)}{unit} → {format_number(c)}{unit}{change} [{s}]"


# --- timelines -------------------------------------------------------------------

_TL_WIDTH, _TL_LABEL, _TL_RIGHT = 1200, 132, 16
_LANE_H, _LANE_GAP, _RUN_HEAD = 16, 4, 24


def _timelines(t: dict[str, Any]) -> str:
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
            body.append(f'<text x="4" y="{y + 14}" class="runhead">{label}: {_e(why)}</text>')
            y += _RUN_HEAD + 4
            continue
        evs = timeline_mod.events(sample)
        streams = sample["streams"]
        head = (f"{label} run · step {sample['step']} (median GPU busy time) · span {_time(sample['span_ns'])} · "
                f"{len(evs)} activities on {len(streams)} stream(s)"
                + (" · truncated to the first events" if sample.get("truncated") else ""))
        body.append(f'<text x="4" y="{y + 14}" class="runhead">{_e(head)}</text>')
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
                f"{n} {KIND_LABELS.get(k, k)}" for k, n in sorted(per_kind.items())) + f"; busy {_time(busy)}"
            body.append(f'<g class="lane"><title>{_e(tip)}</title>'
                        f'<rect x="{_TL_LABEL}" y="{ly}" width="{x(sample["span_ns"]) - _TL_LABEL:.2f}" '
                        f'height="{_LANE_H}" class="lanebg"/>'
                        f'<text x="{_TL_LABEL - 6}" y="{ly + 12}" class="lanelabel">stream {stream}</text></g>')
            for e in mine:
                w = max(e["dur_ns"] / span * plot, 0.6)
                flag = e["kind"] == "kernel" and e["name"] in marked
                cls = f'ev k-{e["kind"]}' + (" marked" if flag else "")
                what = KIND_LABELS.get(e["kind"], e["kind"])
                extra = ("\nnew: absent from the baseline" if label == "current" else
                         "\nvanished: absent from the current run") if flag else ""
                tip = (f"{e['name']}\n{what} · stream {stream}\nstart +{_time(e['start_ns'])} · "
                       f"duration {_time(e['dur_ns'])}{extra}")
                body.append(f'<rect x="{x(e["start_ns"]):.2f}" y="{ly + 1}" width="{w:.2f}" '
                            f'height="{_LANE_H - 2}" class="{cls}"><title>{_e(tip)}</title></rect>')
                if flag:
                    body.append(f'<rect x="{x(e["start_ns"]):.2f}" y="{ly - 3.5}" width="{max(w, 1.5):.2f}" '
                                f'height="3" class="mark"><title>{_e(tip)}</title></rect>')
        y = top + len(streams) * (_LANE_H + _LANE_GAP) + 6
    axis, y = _axis(span, x, y, grid_top or 0)
    legend = "".join(
        f'<span class="key"><i style="background:{KIND_COLORS[k]}"></i>{_e(KIND_LABELS[k])}</span>'
        for k in KIND_COLORS
    ) + '<span class="key"><i class="marked-key"></i>red tick above: kernel new in the current run / vanished from it</span>'
    svg = (f'<svg class="timeline" viewBox="0 0 {_TL_WIDTH} {y}" width="{_TL_WIDTH}" height="{y}" '
           f'role="img" aria-label="GPU timeline of {_e(t["nodeid"])}">'
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


# --- metrics ---------------------------------------------------------------------

def _metric_rows(t: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per scalar metric: per-step values, the comparison verdict and any thresholds."""
    now = compared_values(t["metrics"]) if t.get("metrics") else {}
    before = compared_values(t["baseline_metrics"]) if t.get("baseline_metrics") else {}
    compare: dict[str, dict[str, Any]] = {}
    thresholds: dict[str, list[dict[str, Any]]] = {}
    for v in t.get("verdicts") or []:
        if v["metric"] not in METRICS:
            continue
        m = _THRESHOLD_RULE.match(v.get("rule") or "")
        if v.get("baseline") is None and m and m["metric"] == v["metric"]:
            thresholds.setdefault(v["metric"], []).append({**v, "op": m["op"], "value": float(m["value"])})
        else:
            compare[v["metric"]] = v
    rows = []
    for order, (name, spec) in enumerate(METRICS.items()):
        if name == "step_count":
            continue
        verdicts = ([compare[name]] if name in compare else []) + thresholds.get(name, [])
        statuses = [v["status"] for v in verdicts]
        cls = ("fail" if any(_failing(s) for s in statuses) else "improved" if "improved" in statuses
               else "undecided" if "undecided" in statuses else "ok" if verdicts else "reported")
        # the values judged: a time metric judged on per-step samples is compared by its median
        v = compare.get(name)
        judged = v is not None and v.get("baseline") is not None and v.get("current") is not None
        rows.append({
            "metric": name, "spec": spec, "order": order, "class": cls,
            "baseline": v["baseline"] if judged else before.get(name) if before else None,
            "current": v["current"] if judged else now.get(name),
            "compare": compare.get(name), "thresholds": thresholds.get(name, []),
            "iqr": (_iqr(t.get("baseline_distribution"), name), _iqr(t.get("distribution"), name)),
        })
    rank = {"fail": 0, "improved": 1, "undecided": 2, "ok": 3, "reported": 4}
    return sorted(rows, key=lambda r: (rank[r["class"]], r["order"]))


def _metric_table(t: dict[str, Any]) -> str:
    rows = _metric_rows(t)
    shown = [r for r in rows if r["thresholds"] or r["class"] == "fail"
             or any(v not in (None, 0) for v in (r["baseline"], r["current"]))]
    zero = [r["metric"] for r in rows if r not in shown]
    out = ['<h3>Metrics (per step; baseline ▼ marker, threshold ┆ line, bar colored by verdict)</h3>'
           '<div class="scroll"><table class="grid metrics"><tr><th>metric and rule</th><th class="barcol">current vs baseline</th>'
           '<th>baseline</th><th>current</th><th>change</th><th>verdict</th></tr>']
    for r in shown:
        v = r["compare"]
        unit = _unit(r["metric"])
        ratio = r["spec"].kind == "ratio"
        change = v["change"] if v and v.get("change") else _change(r)
        verdicts = [v["status"]] if v else []
        rules = [v["rule"] + (f"; {v['evidence']}" if v.get("evidence") else "")] if v else []
        for th in r["thresholds"]:
            state = ("violated" if th["status"] == "threshold" else
                     "holds" if th.get("current") is not None else "not applicable")
            rules.append(f"threshold {th['rule']}: {state}")
            if state == "violated":
                verdicts.append("threshold violated")
        badges = "".join(f'<span class="vd v-{r["class"]}">{_e(word)}</span>'
                         for word in verdicts or ["ok" if r["thresholds"] else "reported only"])
        out.append(
            f'<tr class="m-{r["class"]}" data-metric="{_e(r["metric"])}">'
            f'<td class="mname"><code>{_e(r["metric"])}</code>'
            f'{"".join(f"<div class=rule>{_e(x)}</div>" for x in rules)}</td><td class="barcol">{_bar(r)}</td>'
            f'<td class="num">{_e(_num(r["baseline"], unit))}{_pct(r["baseline"]) if ratio else ""}{r["iqr"][0]}</td>'
            f'<td class="num">{_e(_num(r["current"], unit))}{_pct(r["current"]) if ratio else ""}{r["iqr"][1]}</td>'
            f'<td class="num">{_e(change)}</td>'
            f'<td class="verdicts">{badges}</td></tr>'
        )
    out.append("</table></div>")
    if zero:
        out.append(f'<p class="note">0 or n/a in both runs: {", ".join(f"<code>{_e(z)}</code>" for z in zero)}</p>')
    return "".join(out)


def _iqr(distribution: dict[str, Any] | None, metric: str) -> str:
    """A time metric's interquartile range over the run's steps, shown under its value."""
    s = (distribution or {}).get(metric)
    return f'<div class="iqr">IQR {_e(format_number(s["q1"]))}–{_e(format_number(s["q3"]))}</div>' if s else ""


def _change(r: dict[str, Any]) -> str:
    b, c = r["baseline"], r["current"]
    if b is None or c is None:
        return ""
    return change(r["spec"].name, c, b)


def _bar(r: dict[str, Any]) -> str:
    """Current value as a bar, baseline as a marker, thresholds as dashed lines, on one scale."""
    width, height, pad = 240, 22, 6
    b, c = r["baseline"], r["current"]
    values = [abs(v) for v in (b, c) if v is not None] + [abs(th["value"]) for th in r["thresholds"]]
    top = max(values + [0.0])
    if r["spec"].kind == "ratio":
        top = max(top, 1.0)
    top = top * 1.08 or 1.0
    unit = _unit(r["metric"])

    def x(v: float) -> float:
        return pad + abs(v) / top * (width - 2 * pad)

    parts = [f'<svg class="bar" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
             f'<line x1="{pad}" y1="{height - 3}" x2="{width - pad}" y2="{height - 3}" class="track"/>']
    if c is not None:
        parts.append(f'<rect x="{pad}" y="6" width="{max(x(c) - pad, 0):.2f}" height="11" '
                     f'fill="{VERDICT_COLORS[r["class"]]}" class="cur"><title>current: {_e(_num(c, unit))}</title></rect>')
    if b is not None:
        bx = x(b)
        parts.append(f'<g class="base"><title>baseline: {_e(_num(b, unit))}</title>'
                     f'<line x1="{bx:.2f}" y1="3" x2="{bx:.2f}" y2="{height - 1}"/>'
                     f'<path d="M{bx - 4:.2f} 0 L{bx + 4:.2f} 0 L{bx:.2f} 5 Z"/></g>')
    for th in r["thresholds"]:
        tx = x(th["value"])
        state = "violated" if th["status"] == "threshold" else "holds"
        parts.append(f'<g class="thr"><title>threshold {_e(th["rule"])} ({state})</title>'
                     f'<line x1="{tx:.2f}" y1="0" x2="{tx:.2f}" y2="{height}"/></g>')
    parts.append("</svg>")
    return "".join(parts)


# --- kernel diff -----------------------------------------------------------------

def _kernel_diff(t: dict[str, Any]) -> str:
    if t.get("baseline_metrics") is None:
        return '<h3>Kernel diff</h3><p class="note">no baseline to compare the kernels with</p>'
    rows = kernel_diff(t["metrics"], t["baseline_metrics"])
    gated = sum(1 for r in rows if r["status"] != "time only")
    # the per-kernel time verdicts (median per-step time against the baseline's)
    timed = {_kernel_of(v["metric"]): v for v in t.get("verdicts") or []
             if v["metric"].startswith("kernels[") and v["metric"].endswith(".time_us")}
    head = ('<colgroup><col><col class="c-change"><col class="c-count"><col class="c-time"><col class="c-delta">'
            "</colgroup><tr><th>kernel</th><th>change</th><th>count/step<br>baseline → current</th>"
            "<th>time/step<br>baseline → current</th><th>Δ time/step</th></tr>")

    def row(r: dict[str, Any]) -> str:
        bt, ct = r["baseline_time_us"], r["current_time_us"]
        rel = f" ({r['time_change_us'] / bt:+.1%})" if bt and ct is not None else ""
        label, tip = r["status"], ""
        if r["status"] != "time only":
            cls = "fail"
        else:
            v = timed.get(r["name"])
            cls = _verdict_class(v["status"]) if v else "reported"
            if v and v["status"] != "ok":
                label = f"time {v['status']}"
            tip = verdict_line(v) if v else "per-kernel time not compared"
        return (f'<tr class="k-{cls}" data-kernel-status="{_e(r["status"])}">'
                f'<td class="kname" title="{_e(r["name"])}"><code>{_e(r["name"])}</code></td>'
                f'<td title="{_e(tip)}"><span class="vd v-{cls}">{_e(label)}</span></td>'
                f'<td class="num">{_e(_num(r["baseline_count"]))} → {_e(_num(r["current_count"]))}</td>'
                f'<td class="num">{_e(_num(bt, "us"))} → {_e(_num(ct, "us"))}</td>'
                f'<td class="num">{_e(format_number(r["time_change_us"], signed=True))} us{_e(rel)}</td></tr>')

    shown, rest = rows[:max(KERNEL_ROWS, gated)], rows[max(KERNEL_ROWS, gated):]
    out = [f'<h3>Kernel diff ({gated} gated change(s) of {len(rows)} kernel name(s); '
           'new, vanished and count changes first, then time, biggest first)</h3>',
           f'<table class="grid kernels">{head}{"".join(row(r) for r in shown)}</table>']
    if rest:
        out.append(f'<details><summary>{len(rest)} more kernel(s), count unchanged</summary>'
                   f'<table class="grid kernels">{head}{"".join(row(r) for r in rest)}</table></details>')
    return "".join(out)


def _kinds_css(items: Iterable[tuple[str, str]]) -> str:
    return "".join(f".k-{k}{{fill:{c}}}" for k, c in items)


_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>gpuprof report</title>
<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 24px 40px;color:#212121;background:#fafafa}
header{padding:12px 0 4px}
h1{font-size:22px;margin:8px 0}
h2{font-size:16px;margin:0 0 4px}
h3{font-size:14px;margin:14px 0 6px;color:#37474f}
code{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px}
.verdict{font-weight:600;margin:4px 0}.verdict.fail{color:#c62828}.verdict.ok{color:#2e7d32}
.chip,.badge{display:inline-block;color:#fff;border-radius:3px;padding:1px 8px;margin-right:6px;font-weight:600;font-size:12.5px}
dl.meta{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:8px 0}
dl.meta dt{color:#616161}dl.meta dd{margin:0}
table.grid{border-collapse:collapse;background:#fff;margin:4px 0}
table.grid th,table.grid td{border:1px solid #e0e0e0;padding:3px 8px;text-align:left;vertical-align:middle}
table.grid th{background:#eceff1;font-weight:600;font-size:12.5px}
td.num{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px;white-space:nowrap;text-align:right}
.summary tr.status-failed td:first-child,.summary tr.status-error td:first-child{box-shadow:inset 4px 0 #c62828}
.summary td.num{white-space:normal}.summary td code{overflow-wrap:anywhere}
.summary tr.status-failed,.summary tr.status-error{background:#ffebee}
span.delta{color:#b71c1c}
section.test{background:#fff;border:1px solid #e0e0e0;border-left:6px solid #999;padding:10px 14px;margin:18px 0}
section.test.status-failed,section.test.status-error{background:#fffafa}
p.sub{color:#616161;margin:0 0 6px;font-size:12.5px}
p.note{color:#5d4037;background:#fff8e1;padding:3px 8px;margin:4px 0;font-size:12.5px}
pre.message{background:#ffebee;padding:6px 8px;white-space:pre-wrap}
.broke ul{margin:0;padding-left:18px}
.broke li{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:1160px}
.broke li.fail{color:#b71c1c}.broke li.improved{color:#006064}.broke li.undecided{color:#4e342e}.broke li.more{color:#546e7a;list-style:none}
.broke li code{font-size:12px}
.tlwrap{overflow-x:auto;background:#fff}
.scroll{overflow-x:auto}
svg.timeline{display:block;width:100%;max-width:1200px;height:auto;font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace}
.runhead{font-size:12px;fill:#263238;font-weight:600}
.lanelabel{font-size:11px;fill:#37474f;text-anchor:end}
.lanebg{fill:#f1f3f4}
.ev{stroke:none}.ev:hover{stroke:#000;stroke-width:1}
.mark{fill:#c62828}
.axis{stroke:#546e7a}.gridline{stroke:#cfd8dc;stroke-width:.5;stroke-dasharray:2 3}
.tick{font-size:10.5px;fill:#455a64;text-anchor:middle}.tick.start{text-anchor:start;fill:#78909c}
.scalebar line{stroke:#212121;stroke-width:1.5}.scalelabel{font-size:11px;text-anchor:end;fill:#212121}
.legend{font-size:12px;margin:4px 0 8px}.key{margin-right:14px;white-space:nowrap}
.key i{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:-1px}
.key i.marked-key{background:linear-gradient(#c62828 0 3px,#fff 3px 4px,#3b73b9 4px)}
svg.bar{display:block}.bar .track{stroke:#cfd8dc}
.bar .base line{stroke:#212121;stroke-width:1.5}.bar .base path{fill:#212121}
.bar .thr line{stroke:#6a1b9a;stroke-width:2;stroke-dasharray:3 2}
.vd{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;color:#fff;white-space:nowrap}
.v-fail{background:#c62828}.v-improved{background:#00838f}.v-undecided{background:#6d4c41}.v-ok{background:#90a4ae}.v-reported{background:#cfd8dc;color:#37474f}
tr.m-fail{background:#fff5f5}
td.verdicts .vd{display:block;width:max-content;margin:1px 0}
table.metrics,table.kernels{width:100%;max-width:1400px}
td.mname{min-width:190px}td.mname code{white-space:nowrap}
div.rule,div.iqr{font-size:11.5px;color:#607d8b;line-height:1.3}
table.kernels{table-layout:fixed}
col.c-change{width:116px}col.c-count{width:110px}col.c-time{width:210px}col.c-delta{width:180px}
td.kname code{display:-webkit-box;-webkit-box-orient:vertical;-webkit-line-clamp:3;overflow:hidden;overflow-wrap:anywhere;font-size:12px}
tr.k-fail td.kname code{color:#b71c1c}
details summary{cursor:pointer;color:#37474f;margin:4px 0}
""" + _kinds_css(KIND_COLORS.items()) + """
</style></head><body>
"""
