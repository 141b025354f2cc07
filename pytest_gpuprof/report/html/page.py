"""The HTML report: one self-contained file made from the results document.

``render_html(doc)`` is pure (document in, text out); ``write_html(doc, path)`` writes
it.  This module turns the document into what the page shows (rows, classes, numbers
as text; a test's timeline in ``gpu_timeline``, its metrics and kernel diff in
``tables``); ``templates/report.html.j2`` lays it out with jinja2, autoescaping every
text, and inlines ``style.css``, ``timeline.js`` and ``perfetto.js``, so the page needs no network.
Per test, in the document's order (regressions first; passing tests folded, their details
compressed into the text of a script element (``packed``) that the page's script unpacks
into the page when the test is unfolded, so that hundreds of them cost the page their
headings and a few kB each until read):

* what broke, one line per broken metric in the terminal report's wording, then what
  improved and the changes let through, each under its own heading, and the next step;
* the GPU timeline of the sampled measured step, baseline run above the current run on
  one time scale that zooms and pans: the annotation ranges projected onto the GPU, one
  lane per stream, kernels and each memcpy kind in their own colour;
* every metric as a bar against its baseline marker and threshold lines;
* the kernel diff: new, vanished and changed kernels, biggest first;
* for a kept Kineto trace, a button that opens it in Perfetto's UI.

Kernel names are shown demangled and shortened (``names.short_name``), each full name
once in the page (a lookup a small script reads), one hover (title) or click (details) away.
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from ...capture.environment import RECORDED
from ...compare.kernels import kernel_diff
from ...compare.rules import same
from ...compare.status import FAILED_STATUSES, STATUSES
from ...compare.verdict import shown_value
from ...files import write_atomic
from ...metrics.specs import METRICS
from ...numbers import format_number
from ..escaping import shown_lines
from ..names import full_name, kernel_metric, short_name
from ..values import Shown, rank_sections, shown_values
from ..words import (
    BACKEND_NAMES,
    COUNTER_COLUMNS,
    REFRESH,
    broken_line,
    broken_metrics,
    capture_words,
    detects_text,
    first_line,
    health_lines,
    kernel_verdict_words,
    let_through_header,
    let_through_line,
    next_steps,
    verdict_line,
    verdict_name,
)
from .classes import STATUS_COLORS, VERDICT_COLORS, failing, verdict_class
from .gpu_timeline import CALL_LABELS, KIND_COLORS, KIND_LABELS, timeline_view
from .tables import distributions, kernel_table, metric_table

#: Statuses whose section opens unfolded: what a reader has to look at.
OPEN_STATUSES = ("error", "failed", "unstable", "undecided", "improved", "no baseline")
#: The summary table's columns: metric, heading.
SUMMARY_METRICS = (("kernel_count", "kernels/step"), ("kernel_time_us", "kernel time/step"),
                   ("gpu_utilization", "gpu_utilization"), ("sync_count", "syncs/step"))
#: What a distributed test's own row shows as its metric (``compare.distributed``).
SKEW = "rank_skew"
#: Per-kernel verdicts listed under "what broke" before the rest is left to the kernel diff.
KERNEL_LINES = 6
#: Traces Perfetto's UI opens (Kineto's Chrome trace format; an nsys report it cannot).
PERFETTO_SUFFIXES = (".json", ".json.gz")


def write_html(doc: dict[str, Any], path: Path) -> None:
    """Write the HTML report of a results document (``report.document``); trace paths
    are linked relative to the report's folder."""
    path = Path(path)
    write_atomic(path, render_html(doc, path.parent))


def render_html(doc: dict[str, Any], folder: Path | None = None) -> str:
    """The whole page as one string; ``folder``: where it will lie, to link kept traces."""
    sections = [(shown, t) for t in doc.get("tests") or [] for shown in rank_sections(t)]
    tests = [_test(i, shown, folder) for i, (shown, _) in enumerate(sections)]
    kernels = _kernel_lookup(tests)
    samples = _shared_samples(tests, kernels)
    return _environment().get_template("report.html.j2").render(
        doc=doc, tests=tests, kernel_index=kernels, kernel_names=[full_name(name) for name in kernels],
        timeline_samples={"labels": KIND_LABELS, "calls": CALL_LABELS, "samples": samples},
        summary=[_summary_row(i, shown, t) for i, (shown, t) in enumerate(sections)],
        summary_heads=[head for _, head in SUMMARY_METRICS] + ["detects"],
        gpus=", ".join(sorted({t["gpu"] for t, _ in sections if t.get("gpu")})) or "n/a",
        capture=capture_words(doc.get("backend") or "", doc.get("replay_dir")),
        failing=sum(1 for t in doc.get("tests") or [] if t.get("status") in FAILED_STATUSES),
        status_colors=STATUS_COLORS, verdict_colors=VERDICT_COLORS, kind_colors=KIND_COLORS,
    )


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader(__package__, "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             finalize=_shown)
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "separators": (",", ":")}  # data, not read by people
    env.filters.update(number=format_number, short=short_name, full=full_name, breakable=breakable, packed=packed)
    env.globals["asset"] = lambda name: (Path(__file__).parent / "templates" / name).read_text(encoding="utf-8")
    return env


def _shown(value: Any) -> Any:
    """What every expression of the page writes: None as nothing, text with its control
    characters written visibly (``escaping.shown_lines``; escaped HTML stays escaped)."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return Markup(shown_lines(str(value)))
    return shown_lines(value) if isinstance(value, str) else value


def breakable(nodeid: str) -> Markup:
    """A test id that a narrow page wraps where it reads (after ``/`` and ``::``, before
    ``[``), never inside a word."""
    text = str(escape(nodeid))
    for mark, wrapped in (("/", "/<wbr>"), ("::", "::<wbr>"), ("[", "<wbr>[")):
        text = text.replace(mark, wrapped)
    return Markup(text)


def _shared_samples(tests: list[dict[str, Any]], kernels: Mapping[str, int]) -> list[dict[str, Any]]:
    """The page's one list of drawn samples, each distinct one once (a test replayed again, a
    baseline run drawn as it was measured again): each timeline's run points into it by
    ``sample``, keeping only its label and its marks; a box's full name points into the page's
    list of names where its short form is not it."""
    shared: dict[str, int] = {}
    samples: list[dict[str, Any]] = []
    for test in tests:
        for run in (test["timeline"] or {}).get("runs", []):
            if run.get("missing"):
                continue
            drawn = {key: run.pop(key) for key in list(run) if key not in ("label", "marked")}
            drawn["k"] = [kernels.get(name) for name in drawn.pop("full")]
            key = json.dumps(drawn, sort_keys=True)
            if key not in shared:
                shared[key] = len(samples)
                samples.append(drawn)
            run["sample"] = shared[key]
    return samples


def packed(markup: str) -> Markup:
    """The page's own markup as a folded test keeps it: compressed (zlib's format, RFC 1950,
    which a browser's ``DecompressionStream("deflate")`` reads) and written in base64, the text
    of a ``<script type="application/zlib">`` that the browser neither parses nor draws and
    that nothing in base64 can end.  The page's script unpacks it when the test is unfolded.
    Text from the document is escaped in the markup already (jinja's autoescape), as in an
    unfolded test's: the markup is the template's, only stored smaller (300 passing tests'
    details: 7.0 MB of markup, 1.05 MB compressed, 1.40 MB in base64)."""
    return Markup(base64.b64encode(zlib.compress(str(markup).encode("utf-8"), 9)).decode("ascii"))


def _kernel_lookup(tests: list[dict[str, Any]]) -> dict[str, int]:
    """Each kernel name the page shows, to its place in the page's one list of full names (the
    kernel diff's, what broke's and the counters' rows and the timelines' boxes point into it);
    a name its short form shows whole is not listed."""
    names: dict[str, int] = {}
    for test in tests:
        rows = [line for group in test["said"] for line in group["lines"] if line["kernel"]]
        if test["kernels"]:
            rows += test["kernels"]["shown"] + test["kernels"]["more"] + test["kernels"]["folded"]
        rows += (test["counters"] or {}).get("rows", [])
        drawn = [name for run in (test["timeline"] or {}).get("runs", []) for name in run.get("full", [])]
        for name in [row.get("kernel") or row["name"] for row in rows] + drawn:
            if short_name(name) != full_name(name):
                names.setdefault(name, len(names))
    return names


def _anchor(i: int, nodeid: str) -> str:
    return f"t{i}-" + "".join(c if c.isalnum() or c in "_-" else "-" for c in nodeid).strip("-")[:80]


# --- summary ---------------------------------------------------------------------

def summary_values(t: Mapping[str, Any]) -> dict[str, Shown]:
    """The summary table's value of each of its metrics (current, baseline, change): the
    values its verdicts judged (``report.values.shown_values``), as every other output shows."""
    shown = shown_values(t) if t.get("metrics") else {}
    return {m: shown.get(m, Shown(None, None, "")) for m, _ in SUMMARY_METRICS}


def _summary_row(i: int, t: Mapping[str, Any], whole: Mapping[str, Any]) -> dict[str, Any]:
    """A test's row (``whole``: the test it is a section of, itself or a distributed one);
    under a failing test's row, its cause: the failure's first line and what broke."""
    row = {"status": t.get("status", ""), "nodeid": t["nodeid"], "anchor": _anchor(i, t["nodeid"]),
           "broke": len(broken_metrics(t.get("verdicts") or [])), "cells": _summary_cells(t), "ranks": None,
           "cause": _cause(t) if t.get("status") in FAILED_STATUSES else None}
    if t.get("ranks"):
        row["ranks"] = _ranks_cell(whole)
    return row


def _cause(t: Mapping[str, Any]) -> dict[str, Any]:
    """Why a test failed, in brief: its first line and its broken metrics, the scalar ones
    by name, the per-kernel ones counted by what changed."""
    kernels: dict[str, int] = {}
    scalars = []
    for name, vs in broken_metrics(t.get("verdicts") or []).items():
        found = kernel_metric(vs[0]["metric"])
        if found is None:
            scalars.append(name)
        else:
            what = vs[0]["status"] if vs[0]["status"] in ("new", "vanished") else found[1].lstrip("].")
            kernels[what] = kernels.get(what, 0) + 1
    return {"first": first_line(t), "metrics": scalars,
            "kernels": ", ".join(f"{n} {what}" for what, n in kernels.items())}


def _ranks_cell(t: Mapping[str, Any]) -> dict[str, Any]:
    """What a distributed test's own row shows: its ``rank_skew`` against the recorded runs',
    how many ranks ended in each status and the worst of them."""
    ranks = t["ranks"]
    statuses: dict[str, int] = {}
    for rank in ranks.values():
        statuses[rank["status"]] = statuses.get(rank["status"], 0) + 1
    worst = min(ranks, key=lambda n: STATUSES.index(ranks[n]["status"]))
    judged = next((v for v in t.get("verdicts") or [] if v["metric"] == SKEW and v.get("threshold") is None), None)
    now = judged["current"] if judged else (t.get("metrics") or {}).get(SKEW)
    skew = shown_value(SKEW, now) + (f" ({judged['change']})" if judged and judged.get("change") else "")
    return {"skew": skew, "counts": statuses, "worst": f"rank {worst} {ranks[worst]['status']}"}


def _summary_cells(t: Mapping[str, Any]) -> list[dict[str, Any]]:
    verdicts = {v["metric"]: v["status"] for v in t.get("verdicts") or [] if v.get("threshold") is None}
    broken = {v["metric"] for v in t.get("verdicts") or [] if failing(v["status"])}  # to colour, by metric
    cells = []
    for metric, shown in summary_values(t).items():
        now, before = shown.current, shown.baseline
        cell = {"text": shown_value(metric, now).replace(" ", "\u00a0"), "change": shown.change,
                "class": "same"}
        if now is not None and before is not None and not same(now, before):
            cell["class"] = _direction(metric, now, before, verdicts.get(metric), metric in broken)
        cells.append(cell)
    return cells + [{"text": detects_text(t).replace(" ", "\u00a0"), "change": "", "class": "same"}]


def _direction(metric: str, now: float, before: float, status: str | None, broken: bool) -> str:
    """How a changed value is coloured: ``worse`` (red) only when a rule judged it broken,
    ``better`` when it moved the way the metric is better, else ``changed`` (neutral)."""
    if broken or (status is not None and failing(status)):
        return "worse"
    better = METRICS[metric].better
    if status == "improved" or (better == "lower" and now < before) or (better == "higher" and now > before):
        return "better"
    return "changed"


# --- one test --------------------------------------------------------------------

def _test(i: int, t: Mapping[str, Any], folder: Path | None) -> dict[str, Any]:
    status = t.get("status", "")
    m = t.get("metrics")
    bits = [f"GPU {t.get('gpu') or 'n/a'}", f"captured with {BACKEND_NAMES.get(t.get('backend') or '', 'n/a')}"]
    if m and m.get("step_count") is not None:
        bits.append(f"{m['step_count']} measured step(s)")
    if t.get("baseline_metrics") and t["baseline_metrics"].get("step_count") is not None:
        bits.append(f"baseline: {t['baseline_metrics']['step_count']} step(s)")
    return {
        "t": t, "status": status, "anchor": _anchor(i, t["nodeid"]), "open": status in OPEN_STATUSES,
        "bits": bits, "notes": health_lines(t) + _environment_notes(t), "said": _said(t), "next": next_steps(t),
        "broke": bool(broken_metrics(t.get("verdicts") or [])),  # its first line names the baseline file
        "timeline": timeline_view(t) if m is not None else None,
        "metrics": metric_table(t) if m is not None else None,
        "kernels": kernel_table(t) if m is not None else None,
        "counters": _counters(t),
        "perfetto": _trace_link(t.get("trace"), folder),
    }


def _trace_link(trace: str | None, folder: Path | None) -> dict[str, str] | None:
    """The kept trace as the page fetches it (relative to the report's folder) and its file
    name, when Perfetto's UI can open it."""
    if not trace or not trace.endswith(PERFETTO_SUFFIXES):
        return None
    href = Path(trace).as_posix()
    if folder is not None:
        try:
            href = Path(os.path.relpath(Path(trace).resolve(), Path(folder).resolve())).as_posix()
        except ValueError:  # another drive
            href = Path(trace).resolve().as_uri()
    return {"href": href, "name": Path(trace).name}


def _environment_notes(t: Mapping[str, Any]) -> list[str]:
    env, old = t.get("environment") or {}, t.get("baseline_environment")
    notes = []
    if t.get("baseline_backend") and t.get("backend") and t["baseline_backend"] != t["backend"]:
        notes.append(f"baseline recorded with the {t['baseline_backend']} backend: only counts and bytes "
                     "are compared, and kernel names may be spelled differently")
    if old:
        diff = [f"{k}: {old.get(k, '-')} → {env.get(k, '-')}" for k in sorted((set(env) | set(old)) - set(RECORDED))
                if env.get(k) != old.get(k)]
        if diff:
            notes.append("environment differs from the baseline's: " + "; ".join(diff))
    return notes


def _said(t: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the verdicts say, each group under its own heading: what broke, one line per
    broken metric in the failure message's words (``words.broken_metrics``, the count every
    report gives); what improved; what was undecided; the changes let through.  Per-kernel
    metrics come after the others, biggest time change first, said as what changed and the
    name; past a few, the kernel diff below has them all."""
    verdicts = t.get("verdicts") or []
    rows = kernel_diff(t.get("metrics") or {}, t.get("baseline_metrics"), distributions(t))
    order = {r["name"]: i for i, r in enumerate(rows)}
    broken = broken_metrics(verdicts)
    improved = [v for v in verdicts if v["status"] == "improved"]
    undecided = [v for v in verdicts if v["status"] == "undecided"]
    let_through = [v for v in verdicts if v.get("let_through")]
    groups = []  # (element class, line class, heading, the verdicts of each metric)
    if broken:
        groups.append(("broke", "fail", first_line(t), list(broken.values())))
    if improved:
        groups.append(("noted", "improved", f"{len(improved)} metric(s) improved ({REFRESH})", [[v] for v in improved]))
    if undecided:
        groups.append(("noted", "undecided", f"{len(undecided)} metric(s) undecided: too few steps to tell a change "
                       "from noise", [[v] for v in undecided]))
    if let_through:
        groups.append(("noted", "let-through", let_through_header(len(let_through)), [[v] for v in let_through]))
    out = []
    for css, cls, title, metrics in groups:
        scalar, kernels = [], []
        for vs in metrics:
            words = (broken_line(verdict_name(vs[0]), vs) if cls == "fail" else let_through_line(vs[0])
                     if cls == "let-through" else verdict_line(vs[0]))
            kernel = kernel_metric(vs[0]["metric"])
            if kernel is None:
                scalar.append({"class": cls, "text": words, "title": words, "kernel": None})
            else:
                kernels.append({"class": cls, "kernel": kernel[0], "title": None,  # the name's own title: the lookup's
                                "text": "; ".join(kernel_verdict_words(v) for v in vs)})
        kernels.sort(key=lambda line: order.get(line["kernel"], len(order)))
        out.append({"css": css, "title": title, "lines": scalar + kernels[:KERNEL_LINES],
                    "more": max(len(kernels) - KERNEL_LINES, 0)})
    return out


def _counters(t: Mapping[str, Any]) -> dict[str, Any] | None:
    """Nsight Compute's counters of the profiled kernels (``counters``), the baseline's beside
    them where it stored some, each in its unit (``compare.verdict.shown_value``: the bandwidth
    as a percentage, times in µs or ms, bytes in B to GiB) and coloured by its verdict
    (``compare.counter_verdicts``)."""
    now = t.get("counters")
    if not now:
        return None
    before = t.get("baseline_counters") or {}
    statuses: dict[str, str] = {}
    for v in t.get("verdicts") or []:  # a threshold's and the baseline's verdict on one counter: the worse
        if not failing(statuses.get(v["metric"], "ok")):
            statuses[v["metric"]] = v["status"]

    def cell(metric: str, b: Any, c: Any) -> dict[str, str]:  # each value in its unit, as every report says it
        text = shown_value(metric, c) if b is None else f"{shown_value(metric, b)} → {shown_value(metric, c)}"
        return {"text": text, "class": verdict_class(statuses.get(metric))}

    rows = []
    for name, k in now["kernels"].items():
        old = (before.get("kernels") or {}).get(name) or {}
        rows.append({"name": name, "launches": k["launches"],
                     "cells": [cell(f"kernels[{name}].{key}", (old.get(key) or {}).get("median"), k[key]["median"])
                               for key, _ in COUNTER_COLUMNS]})
    bandwidth = cell("memory_bandwidth_utilization", before.get("memory_bandwidth_utilization"),
                     now["memory_bandwidth_utilization"])
    return {"profiled": now["profiled"], "seconds": now["seconds"], "bandwidth": bandwidth,
            "heads": [head for _, head in COUNTER_COLUMNS], "rows": rows}


