"""The HTML report: one self-contained file made from the results document.

``render_html(doc)`` is pure (document in, text out); ``write_html(doc, path)`` writes
it.  This module turns the document into what the page shows (rows, classes, numbers
as text); ``templates/report.html.j2`` lays it out with jinja2, autoescaping every
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
from ...compare.status import BROKEN, FAILED_STATUSES, STATUSES
from ...compare.verdict import NOT_COMPARED, shown_value
from ...files import write_atomic
from ...metrics import timeline
from ...metrics.measure import is_comm_kernel, is_launch_call, is_sync_call
from ...metrics.specs import METRICS, kernel_counter
from ...numbers import format_count, format_number, format_quantity, format_time_us
from ..escaping import shown_lines
from ..names import full_name, function_name, kernel_metric, short_name
from ..values import Shown, per_step_text, rank_sections, shown_values
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
    let_through_header,
    let_through_line,
    next_steps,
    verdict_line,
    verdict_name,
    verdict_state,
    verdict_words,
)

#: Colours of test statuses and verdicts (the failure colour is the one tests look for).
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
    "let-through": "#f9a825", "ok": "#78909c", "reported": "#b0bec5",
}
#: Statuses whose section opens unfolded: what a reader has to look at.
OPEN_STATUSES = ("error", "failed", "unstable", "undecided", "improved", "no baseline")
#: Timeline colours by activity kind, close to Nsight Systems' (kernels blue, HtoD green, DtoH pink).
KIND_COLORS = {
    "kernel": "#3b73b9", "comm": "#9467bd", "htod": "#2ca02c", "dtoh": "#d6409f", "dtod": "#ff8c1a",
    "ptop": "#8c564b", "htoh": "#7f7f7f", "other": "#bcbd22", "memset": "#17becf",
}
KIND_LABELS = {
    "kernel": "kernel", "comm": "NCCL kernel", "htod": "Memcpy HtoD", "dtoh": "Memcpy DtoH", "dtod": "Memcpy DtoD",
    "ptop": "Memcpy PtoP", "htoh": "Memcpy HtoH", "other": "Memcpy (other)", "memset": "Memset",
}
#: What a merged timeline bar is, in the legend.
MERGED_WORDS = "merged: activities closer than 1 px at this zoom (their kind's colour; this one when kinds mix)"
#: The CPU rows' runtime calls by what they do (``_call_kind``), as their legend names them.
CALL_LABELS = {
    "sync": "synchronization (▼: the CPU waits for the GPU)", "launch": "kernel launch",
    "memcpy": "memcpy call (asynchronous)", "other": "other CUDA API call",
}
#: The summary table's columns: metric, heading.
SUMMARY_METRICS = (("kernel_count", "kernels/step"), ("kernel_time_us", "kernel time/step"),
                   ("gpu_utilization", "gpu_utilization"), ("sync_count", "syncs/step"))
#: What a distributed test's own row shows as its metric (``compare.distributed``).
SKEW = "rank_skew"
#: Verdict classes of rows a reader need not see first: folded under one ``<details>``.
QUIET_CLASSES = ("ok", "reported")
#: Per-kernel verdicts listed under "what broke" before the rest is left to the kernel diff.
KERNEL_LINES = 6
#: Changed kernels the kernel diff shows, biggest change first, before the rest fold (a changed
#: precision swaps every kernel: a page-long list would push the next test's cause away).
KERNEL_ROWS = 20
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


def _failing(status: str) -> bool:
    return status in BROKEN


def _verdict_class(status: str | None) -> str:
    if status is None:
        return "reported"
    if _failing(status):
        return "fail"
    return status if status in ("improved", "undecided") else "ok"


def _class_of(v: Mapping[str, Any]) -> str:
    """A verdict's colour class: as its status's, or ``let-through`` for an ok that let a
    change beyond its tolerance through (``words.verdict_state`` says why)."""
    return "let-through" if v.get("let_through") else _verdict_class(v["status"])


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
    broken = {v["metric"] for v in t.get("verdicts") or [] if _failing(v["status"])}  # to colour, by metric
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
    if broken or (status is not None and _failing(status)):
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
        "timeline": _timeline(t) if m is not None else None,
        "metrics": _metric_rows(t) if m is not None else None,
        "kernels": _kernel_diff(t) if m is not None else None,
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
    rows = kernel_diff(t.get("metrics") or {}, t.get("baseline_metrics"), _summaries(t))
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
                                "text": "; ".join(_kernel_verdict_words(v) for v in vs)})
        kernels.sort(key=lambda line: order.get(line["kernel"], len(order)))
        out.append({"css": css, "title": title, "lines": scalar + kernels[:KERNEL_LINES],
                    "more": max(len(kernels) - KERNEL_LINES, 0)})
    return out


def _kernel_verdict_words(v: Mapping[str, Any]) -> str:
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
        if not _failing(statuses.get(v["metric"], "ok")):
            statuses[v["metric"]] = v["status"]

    def cell(metric: str, b: Any, c: Any) -> dict[str, str]:  # each value in its unit, as every report says it
        text = shown_value(metric, c) if b is None else f"{shown_value(metric, b)} → {shown_value(metric, c)}"
        return {"text": text, "class": _verdict_class(statuses.get(metric))}

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


# --- timeline --------------------------------------------------------------------

def _timeline(t: Mapping[str, Any]) -> dict[str, Any]:
    """What ``timeline.js`` draws: both runs' samples with names shortened (the full ones
    for hover) and box labels the function's own name (as Nsight Systems shows it), each
    stream's role, each kernel whose own verdict broke marked with why, each host thread's
    runtime calls by what they do (a sample stored before calls were kept has none)."""
    marks = _kernel_marks(t.get("verdicts") or [])
    runs: list[dict[str, Any]] = []
    for label, sample in (("baseline", t.get("baseline_timeline")), ("current", t.get("timeline"))):
        if sample is None:
            why = ("the baseline was recorded without a timeline sample (refresh it with --gpuprof-update-baseline)"
                   if label == "baseline" else "no timeline sample for this run")
            runs.append({"label": label, "missing": why})
            continue
        events = [{**e, "kind": "comm"} if e["kind"] == "kernel" and is_comm_kernel(e["name"]) else e
                  for e in timeline.events(sample)]
        kinds: list[set[str]] = [set() for _ in sample["streams"]]
        for e in events:
            kinds[e["lane"]].add(e["kind"])
        names = sample["names"]
        range_names = sample.get("range_names", [])
        call_names = sample.get("call_names", [])
        runs.append({
            "label": label, "step": sample["step"], "span": sample["span_ns"], "truncated": sample["truncated"],
            "streams": [{"id": s, "role": _role(k)} for s, k in zip(sample["streams"], kinds)],
            # "full": as recorded, _shared_samples points them at the page's list
            "names": [short_name(n) for n in names], "full": names,
            "labels": [function_name(n) for n in names],
            "marked": {i: "; ".join(marks[label][n]) for i, n in enumerate(names) if n in marks[label]},
            # lane, kind, start, duration, name index, sorted by start within each lane
            "events": [[e["lane"], e["kind"], e["start_ns"], e["dur_ns"], names.index(e["name"])] for e in events],
            "threads": sample.get("threads", []),
            "thread_names": sample.get("thread_names", [""] * len(sample.get("threads", []))),
            "range_names": range_names,
            # thread, depth, GPU start, GPU end, CPU start, CPU end, name index
            "ranges": [[sample["threads"].index(r["thread"]), r["depth"], r["gpu_start_ns"], r["gpu_end_ns"],
                        r["start_ns"], r["end_ns"], range_names.index(r["name"])] for r in timeline.ranges(sample)],
            "call_names": call_names,
            # thread, what the call does, CPU start, duration, name index
            "calls": [[sample["threads"].index(c["thread"]), _call_kind(c["name"]), c["start_ns"], c["dur_ns"],
                       call_names.index(c["name"])] for c in timeline.calls(sample)],
        })
    return {"runs": runs, "legend": _legend(runs)}


def _legend(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The legend's keys (``key-`` class, words): only what the runs hold."""
    drawn = [r for r in runs if not r.get("missing")]
    kinds = {e[1] for r in drawn for e in r["events"]}
    calls = {c[1] for r in drawn for c in r["calls"]}
    keys = [(kind, label) for kind, label in KIND_LABELS.items() if kind in kinds]
    if any(len(r["events"]) > 1 for r in drawn):
        keys.append(("merged", MERGED_WORDS))
    if any(r["ranges"] for r in drawn):
        keys.append(("range", "annotation range (on the GPU: the span of the work launched in it)"))
    keys += [(f"call-{kind}", label) for kind, label in CALL_LABELS.items() if kind in calls]
    if any(r["marked"] for r in drawn):
        keys.append(("marked", "red tick above: kernel whose own verdict broke (new, vanished, count or time)"))
    return keys


def _kernel_marks(verdicts: list[Mapping[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """Per run, the kernels whose own verdict broke (count or time, new or vanished), each with
    its verdicts in words: a new kernel is marked in the current run, a vanished one in the
    baseline run, a changed one in both."""
    out: dict[str, dict[str, list[str]]] = {"baseline": {}, "current": {}}
    for v in verdicts:
        found = kernel_metric(v["metric"])
        if found is None or v["status"] not in BROKEN or kernel_counter(v["metric"]) is not None:
            continue
        runs = {"new": ("current",), "vanished": ("baseline",)}.get(v["status"], ("baseline", "current"))
        for run in runs:
            out[run].setdefault(found[0], []).append(_kernel_verdict_words(v))
    return out


def _call_kind(name: str) -> str:
    """What a runtime call does, as the CPU row colours it (``CALL_LABELS``)."""
    if is_sync_call(name):
        return "sync"
    if is_launch_call(name):
        return "launch"
    return "memcpy" if name.startswith(("cudaMemcpy", "cuMemcpy")) else "other"


def _role(kinds: set[str]) -> str:
    """What runs on a stream, in Nsight's words: compute, copy (with directions) or both."""
    copies = sorted(KIND_LABELS[k].replace("Memcpy ", "") for k in kinds if k not in ("kernel", "comm"))
    if kinds == {"comm"}:
        return "communication"
    if not kinds & {"kernel", "comm"}:
        return "copy " + "/".join(copies)
    return "compute" + (" + " + "/".join(copies) if copies else "")


# --- metrics ---------------------------------------------------------------------

def _metric_rows(t: Mapping[str, Any]) -> dict[str, Any]:
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
        cls = ("fail" if any(_failing(s) for s in statuses) else "improved" if "improved" in statuses
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


# --- kernel diff -----------------------------------------------------------------

def _kernel_diff(t: Mapping[str, Any]) -> dict[str, Any] | None:
    if t.get("baseline_metrics") is None:
        return None
    rows = kernel_diff(t["metrics"], t["baseline_metrics"], _summaries(t))
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
            cls = _class_of(v) if v else "reported"
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


def _summaries(t: Mapping[str, Any]) -> tuple[Any, Any]:
    """(this run's, the baseline's) ``distribution``: a kernel's time is its median step where
    both kept its steps, as its verdict judges it (``compare.kernels.kernel_diff``)."""
    return t.get("distribution"), t.get("baseline_distribution")
