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

import re
from importlib import resources
from pathlib import Path
from typing import Any

from ...capture.environment import RECORDED
from ...compare.kernels import kernel_diff
from ...compare.rules import same
from ...compare.verdicts import BROKEN
from ...files import write_atomic
from ...metrics.measure import METRICS
from ...numbers import format_number
from ..words import health_lines, verdict_line
from ..escaping import html_text
from ..values import VALUES_NOTE, Shown, shown_values
from .svg import KIND_COLORS, bar, kinds_css, timelines, unit_of, value_text

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
#: Kernel diff rows shown before the rest is folded away.
KERNEL_ROWS = 25
#: Per-kernel verdicts listed under "what broke" before the rest is left to the kernel diff.
KERNEL_LINES = 6


def write_html(doc: dict[str, Any], path: Path) -> None:
    """Write the HTML report of a results document (``report.document``)."""
    write_atomic(Path(path), render_html(doc))


def render_html(doc: dict[str, Any]) -> str:
    """The whole page as one string."""
    tests = doc.get("tests") or []
    parts = [_HEAD, _summary(doc, tests)]
    parts += [_test_section(i, t) for i, t in enumerate(tests)]
    if doc.get("skipped"):
        rows = "".join(f"<tr><td><code>{html_text(s['nodeid'])}</code></td><td>{html_text(s['reason'])}</td></tr>"
                       for s in doc["skipped"])
        parts.append(f'<section class="skipped"><h2>Skipped profiled tests</h2>'
                     f'<table class="grid"><tr><th>test</th><th>reason</th></tr>{rows}</table></section>')
    parts.append("</body></html>\n")
    return "".join(parts)


# --- small helpers -------------------------------------------------------------

def _anchor(i: int, nodeid: str) -> str:
    return f"t{i}-" + re.sub(r"[^A-Za-z0-9_-]+", "-", nodeid).strip("-")[:80]


def _pct(value: float | None) -> str:
    return "" if value is None else f" ({value:.2%})"


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
        f'<span class="chip" style="background:{STATUS_COLORS.get(k, "#555")}">{html_text(k)}: {n}</span>'
        for k, n in counts.items() if n
    ) or '<span class="chip" style="background:#757575">no profiled tests</span>'
    gpus = sorted({t["gpu"] for t in tests if t.get("gpu")})
    failing = sum(1 for t in tests if t.get("status") in ("failed", "error"))
    verdict = (f'<p class="verdict fail">{failing} test(s) failed the GPU performance gate</p>' if failing
               else '<p class="verdict fail">nothing was measured: no profiled test was judged</p>' if not tests
               else '<p class="verdict ok">no GPU performance regression</p>')
    meta = (f'<dl class="meta"><dt>GPU</dt><dd>{html_text(", ".join(gpus) or "n/a")}</dd>'
            f'<dt>backend</dt><dd>{html_text(doc.get("backend"))}</dd>'
            f'<dt>baselines</dt><dd><code>{html_text(doc.get("baseline_dir"))}</code></dd>'
            f'<dt>gpuprof</dt><dd>{html_text(doc.get("gpuprof_version"))} (results schema {html_text(doc.get("schema_version"))})</dd>'
            "</dl>")
    head = ("<tr><th>status</th><th>test</th><th>broke</th><th>kernels/step</th><th>kernel time/step</th>"
            "<th>gpu_utilization</th><th>syncs/step</th></tr>")
    rows = []
    for i, t in enumerate(tests):
        status = t.get("status", "")
        broke = sum(1 for v in t.get("verdicts") or [] if _failing(v["status"]))
        shown = shown_values(t)
        cells = "".join(
            f"<td class=\"num\">{_summary_cell(m, shown.get(m))}</td>"
            for m in ("kernel_count", "kernel_time_us", "gpu_utilization", "sync_count")
        )
        rows.append(
            f'<tr class="status-{html_text(status.replace(" ", "-"))}" data-status="{html_text(status)}">'
            f'<td><span class="badge" style="background:{STATUS_COLORS.get(status, "#555")}">{html_text(status)}</span></td>'
            f'<td><a href="#{_anchor(i, t["nodeid"])}"><code>{html_text(t["nodeid"])}</code></a></td>'
            f'<td class="num">{broke if broke else ""}</td>{cells}</tr>'
        )
    table = (f'<table class="grid summary" id="summary"><caption>{html_text(VALUES_NOTE)}</caption>'
             f'{head}{"".join(rows)}</table>' if rows else "")
    return (f'<header><h1>gpuprof report</h1>{verdict}<div class="chips">{chips}</div>{meta}</header>'
            f"<section>{table}</section>")


def _summary_cell(metric: str, shown: Shown | None) -> str:
    if shown is None or shown.current is None:
        return "n/a"
    unit = "\u00a0us" if metric.endswith("_us") else ""
    text = f"{format_number(shown.current)}{unit}"
    if not shown.change:
        return html_text(text)
    cls = "" if same(shown.current, shown.baseline) else ' class="delta"'
    return f"{html_text(text)} <span{cls}>({html_text(shown.change)})</span>"


# --- one test --------------------------------------------------------------------

def _test_section(i: int, t: dict[str, Any]) -> str:
    status = t.get("status", "")
    color = STATUS_COLORS.get(status, "#555")
    m = t.get("metrics") or {}
    bits = [f"GPU {html_text(t.get('gpu') or 'n/a')}", f"backend {html_text(t.get('backend') or 'n/a')}"]
    if m.get("step_count") is not None:
        bits.append(f"{m['step_count']} measured step(s)")
    if t.get("baseline_metrics") and t["baseline_metrics"].get("step_count") is not None:
        bits.append(f"baseline: {t['baseline_metrics']['step_count']} step(s)")
    if t.get("baseline_file"):
        bits.append(f"baseline file <code>{html_text(t['baseline_file'])}</code>")
    if t.get("trace"):
        bits.append(f"trace <code>{html_text(t['trace'])}</code>")
    out = [f'<section class="test status-{html_text(status.replace(" ", "-"))}" id="{_anchor(i, t["nodeid"])}" '
           f'data-status="{html_text(status)}" style="border-left-color:{color}">',
           f'<h2><span class="badge" style="background:{color}">{html_text(status)}</span> <code>{html_text(t["nodeid"])}</code></h2>',
           f'<p class="sub">{" · ".join(bits)}</p>']
    if t.get("message"):
        out.append(f'<pre class="message">{html_text(t["message"])}</pre>')
    out += [f'<p class="note">{html_text(line)}</p>' for line in health_lines(t)]
    out.append(_environment(t))
    out.append(_broke(t))
    if t.get("metrics") is not None:
        out.append(timelines(t))
        out.append(_metric_table(t))
        out.append(_kernel_diff(t))
    out.append("</section>")
    return "".join(out)


def _environment(t: dict[str, Any]) -> str:
    env, old = t.get("environment") or {}, t.get("baseline_environment")
    notes = []
    if t.get("baseline_backend") and t.get("backend") and t["baseline_backend"] != t["backend"]:
        notes.append(f"baseline recorded with the {html_text(t['baseline_backend'])} backend: only counts and bytes "
                     "are compared, and kernel names may be spelled differently")
    if old:
        diff = [f"{html_text(k)}: {html_text(old.get(k, '-'))} → {html_text(env.get(k, '-'))}"
                for k in sorted((set(env) | set(old)) - set(RECORDED)) if env.get(k) != old.get(k)]
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
            scalar.append(f'<li class="{_verdict_class(s)}" title="{html_text(verdict_line(v))}">{html_text(verdict_line(v))}</li>')
    diff = kernel_diff(t.get("metrics") or {}, t.get("baseline_metrics"),
                       (t.get("distribution"), t.get("baseline_distribution")))
    order = {r["name"]: i for i, r in enumerate(diff)}
    kernel_lines = []
    for name in sorted(kernels, key=lambda n: order.get(n, len(order))):
        for v in kernels[name]:
            what = _kernel_verdict_words(v)
            kernel_lines.append(f'<li class="{_verdict_class(v["status"])}" title="{html_text(verdict_line(v))}">'
                                f'{html_text(what)}: <code>{html_text(name)}</code></li>')
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
    return f'<div class="broke"><h3>{html_text(title)}</h3><ul>{"".join(lines)}</ul></div>'


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


# --- metrics ---------------------------------------------------------------------

def _metric_rows(t: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per scalar metric: per-step values, the comparison verdict and any thresholds."""
    shown = shown_values(t)
    compare: dict[str, dict[str, Any]] = {}
    thresholds: dict[str, list[dict[str, Any]]] = {}
    for v in t.get("verdicts") or []:
        if v["metric"] not in METRICS:
            continue
        if v.get("threshold") is not None:
            thresholds.setdefault(v["metric"], []).append({**v, **v["threshold"]})
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
        rows.append({
            "metric": name, "spec": spec, "order": order, "class": cls,
            "baseline": shown[name].baseline if shown else None,
            "current": shown[name].current if shown else None,
            "change": shown[name].change if shown else "",
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
        unit = unit_of(r["metric"])
        ratio = r["spec"].kind == "ratio"
        verdicts = [v["status"]] if v else []
        rules = [v["rule"] + (f"; {v['evidence']}" if v.get("evidence") else "")] if v else []
        for th in r["thresholds"]:
            state = ("violated" if th["status"] == "threshold" else
                     "holds" if th.get("current") is not None else "not applicable")
            rules.append(f"threshold {th['rule']}: {state}")
            if state == "violated":
                verdicts.append("threshold violated")
        badges = "".join(f'<span class="vd v-{r["class"]}">{html_text(word)}</span>'
                         for word in verdicts or ["ok" if r["thresholds"] else "reported only"])
        out.append(
            f'<tr class="m-{r["class"]}" data-metric="{html_text(r["metric"])}">'
            f'<td class="mname"><code>{html_text(r["metric"])}</code>'
            f'{"".join(f"<div class=rule>{html_text(x)}</div>" for x in rules)}</td><td class="barcol">{bar(r, VERDICT_COLORS[r["class"]])}</td>'
            f'<td class="num">{html_text(value_text(r["baseline"], unit))}{_pct(r["baseline"]) if ratio else ""}{r["iqr"][0]}</td>'
            f'<td class="num">{html_text(value_text(r["current"], unit))}{_pct(r["current"]) if ratio else ""}{r["iqr"][1]}</td>'
            f'<td class="num">{html_text(r["change"])}</td>'
            f'<td class="verdicts">{badges}</td></tr>'
        )
    out.append("</table></div>")
    if zero:
        out.append(f'<p class="note">0 or n/a in both runs: {", ".join(f"<code>{html_text(z)}</code>" for z in zero)}</p>')
    return "".join(out)


def _iqr(distribution: dict[str, Any] | None, metric: str) -> str:
    """A time metric's interquartile range over the run's steps, shown under its value."""
    s = (distribution or {}).get(metric)
    return f'<div class="iqr">IQR {html_text(format_number(s["q1"]))}–{html_text(format_number(s["q3"]))}</div>' if s else ""


# --- kernel diff -----------------------------------------------------------------

def _kernel_diff(t: dict[str, Any]) -> str:
    if t.get("baseline_metrics") is None:
        return '<h3>Kernel diff</h3><p class="note">no baseline to compare the kernels with</p>'
    rows = kernel_diff(t["metrics"], t["baseline_metrics"], (t.get("distribution"), t.get("baseline_distribution")))
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
        return (f'<tr class="k-{cls}" data-kernel-status="{html_text(r["status"])}">'
                f'<td class="kname" title="{html_text(r["name"])}"><code>{html_text(r["name"])}</code></td>'
                f'<td title="{html_text(tip)}"><span class="vd v-{cls}">{html_text(label)}</span></td>'
                f'<td class="num">{html_text(value_text(r["baseline_count"]))} → {html_text(value_text(r["current_count"]))}</td>'
                f'<td class="num">{html_text(value_text(bt, "us"))} → {html_text(value_text(ct, "us"))}</td>'
                f'<td class="num">{html_text(format_number(r["time_change_us"], signed=True))} us{html_text(rel)}</td></tr>')

    shown, rest = rows[:max(KERNEL_ROWS, gated)], rows[max(KERNEL_ROWS, gated):]
    out = [f'<h3>Kernel diff ({gated} gated change(s) of {len(rows)} kernel name(s); '
           'new, vanished and count changes first, then time, biggest first)</h3>',
           f'<table class="grid kernels">{head}{"".join(row(r) for r in shown)}</table>']
    if rest:
        out.append(f'<details><summary>{len(rest)} more kernel(s), count unchanged</summary>'
                   f'<table class="grid kernels">{head}{"".join(row(r) for r in rest)}</table></details>')
    return "".join(out)


_HEAD = ("""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>gpuprof report</title>
<style>
""" + (resources.files(__package__) / "style.css").read_text(encoding="utf-8") + kinds_css(KIND_COLORS.items()) + """
</style></head><body>
""")
