"""``--gpuprof-summary``: the results document as Markdown, for a pull request or a
GitHub job summary ($GITHUB_STEP_SUMMARY).

Read at GitHub's content width (1012 px) without scrolling sideways: a narrow table of the
tests that need a look, regressions first (the document's order): status icon and word, the
test (its node id less its folders, breakable after ``::``), and what broke in a few words
(the failure message's first line: ``10 metric(s) broke: sync_count 8 (threshold == 0), ...``);
the passing tests folded into one ``<details>``; then a ``<details>`` per failing test with
its broken metrics one per line in the words of the failure message (``words.broken_line``,
kernel names shortened by ``names.short_name``) and what to do next (``words.next_steps``);
then, folded, the key metrics of every test as ``baseline → current (change)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from ..compare.status import FAILED_STATUSES
from ..compare.verdict import shown_value
from ..files import write_atomic
from .escaping import html_text, markdown_block, markdown_code, markdown_text
from .names import in_metric, kernel_metric, short_name
from .values import VALUES_NOTE, Shown, rank_sections, shown_values
from .words import (
    SUMMARY_COLUMNS,
    broken_header,
    broken_metrics,
    capture_words,
    compared_against,
    detects_text,
    gpu_text,
    health_lines,
    let_through_line,
    named_broken,
    ncu_lines,
    next_steps,
    skipped_line,
    verdict_name,
    verdict_words,
)

#: Each status's icon in the summary (GitHub renders the emoji): failing, passing, one to look at.
STATUS_ICONS = {"error": "❌", "failed": "❌", "passed": "✅", "same as base": "✅", "updated": "🔄"}
LOOK_ICON = "⚠️"
#: Characters of a kernel name in the summary (``names.short_name``): a full name runs to thousands.
KERNEL_WIDTH = 100
#: Characters of an error message in a verdict cell; the test's details hold all of it.
BRIEF_MESSAGE = 120


def summary_markdown(doc: Mapping[str, Any]) -> str:
    """The whole summary, ending with a newline."""
    tests = doc["tests"]
    counts = ", ".join(f"{n} {status}" for status, n in doc["counts"].items() if n)
    lines = [f"## gpuprof: {counts or 'no profiled tests'}", ""]
    gpus = sorted({t["gpu"] for t in tests if t["gpu"]})
    about = [f"capture: {capture_words(doc['backend'], doc.get('replay_dir'), markdown_code)}",
             f"baselines: {markdown_code(doc['baseline_dir'])}"]
    if gpus:
        about.insert(0, f"GPU: {', '.join(markdown_text(g) for g in gpus)}")
    lines += [" · ".join(about), ""]
    to_look_at = [t for t in tests if t["status"] != "passed"]
    passed = [t for t in tests if t["status"] == "passed"]
    if to_look_at:  # a failing test's notes are in its fold under Failures
        lines += _table(to_look_at) + [""] + _noted([t for t in to_look_at if t["status"] not in FAILED_STATUSES])
    if passed:
        lines += [f"<details><summary>{STATUS_ICONS['passed']} {len(passed)} passed</summary>", ""]
        lines += _table(passed) + [""] + _noted(passed) + ["</details>", ""]
    if doc["skipped"]:
        lines += [markdown_text(skipped_line(doc["skipped"])), ""]
    failing = [t for t in tests if t["status"] in FAILED_STATUSES]
    if failing:
        lines += ["### Failures", ""]
    for t in failing:
        lines += _failure(t)
    if tests:
        lines += ["<details><summary>Key metrics per step</summary>", "",
                  "| test | " + " | ".join(title for _, title in SUMMARY_COLUMNS) + " | detects |",
                  "|---|" + "---:|" * (len(SUMMARY_COLUMNS) + 1)]
        lines += ["| " + " | ".join(_values_row(t)) + " |" for test in tests for t in rank_sections(test)]
        lines += ["", f"<sub>{markdown_text(VALUES_NOTE)}</sub>", "", "</details>", ""]
    profiled = [t for t in tests if t.get("counters")]
    if profiled:
        lines += ["### Inside the kernels (Nsight Compute)", ""]
    for t in profiled:
        first, *kernels = ncu_lines(t)
        lines += [f"- {markdown_code(t['nodeid'])}: {markdown_text(first)}"]
        lines += [f"  - {markdown_text(line.strip())}" for line in kernels] + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_summary(doc: Mapping[str, Any], path: Path, append: bool = False) -> None:
    """Write the summary to ``path``; ``append`` adds it after what is there (GitHub's
    contract for $GITHUB_STEP_SUMMARY: every step of a job appends to one file)."""
    text = summary_markdown(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    if append:
        with open(path, "a", encoding="utf-8") as fh:
            if fh.tell():
                fh.write("\n")
            fh.write(text)
    else:
        write_atomic(path, text)


def status_icon(status: str) -> str:
    """The icon of a test's status: ❌ failing, ✅ passing, 🔄 baseline updated, ⚠️ a status to look at."""
    return STATUS_ICONS.get(status, LOOK_ICON)


def _table(tests: list[Mapping[str, Any]]) -> list[str]:
    """The narrow table: status, test, verdict in a few words."""
    rows = [f"| {status_icon(t['status'])}&nbsp;{_status(t['status'])} | {_test_name(t)} | {_brief(t)} |"
            for t in tests]
    return ["| status | test | verdict |", "|---|---|---|", *rows]


def _status(status: str) -> str:
    return f"**{status}**" if status in FAILED_STATUSES else status


def _test_name(t: Mapping[str, Any]) -> str:
    """The node id less its folders, as code that may break after each ``::`` (``<wbr>``):
    a parametrized id can be long, and a table cell does not wrap inside a word."""
    path, _, rest = t["nodeid"].partition("::")
    parts = [path.rpartition("/")[2], *rest.split("::")] if rest else [path]
    return "<wbr>".join(markdown_code(part + "::") for part in parts[:-1]) + ("<wbr>" if len(parts) > 1 else "") \
        + markdown_code(parts[-1])


def _brief(t: Mapping[str, Any]) -> str:
    """The verdict in a few words: the failure's first line less its GPU and what it was judged
    against (``10 metric(s) broke: sync_count 8 (threshold == 0), ... and 7 more``); or what
    else the status says."""
    if t["message"]:
        message = t["message"].splitlines()[0]
        return markdown_text(message if len(message) <= BRIEF_MESSAGE else message[:BRIEF_MESSAGE - 1] + "…")
    broken = broken_metrics(t["verdicts"])
    status = t["status"]
    if broken:
        against = compared_against(t)
        header = broken_header(len(broken), None, against, named_broken(broken))
        return markdown_text(header.removesuffix(f" ({against})"))
    if status == "no baseline":
        return f"no baseline for {markdown_text(gpu_text(t['gpu']))}"
    if status == "updated":
        return "baseline updated"
    notable: dict[str, list[Mapping[str, Any]]] = {}
    for v in t["verdicts"]:
        if v["status"] != "ok":
            notable.setdefault(v["status"], []).append(v)
    if not notable:
        return "within the rules"
    hint = " (refresh the baseline)" if status == "improved" else ""
    return "; ".join(f"{word}: {_names(vs)}" for word, vs in notable.items()) + hint


def _kernels(verdicts: list[Mapping[str, Any]]) -> list[str]:
    """Per-kernel verdicts counted, with what of the kernels was judged: ``3 kernel(s) (count)``."""
    if not verdicts:
        return []
    found = [kernel_metric(v["metric"]) for v in verdicts]
    judged = ", ".join(dict.fromkeys(rest[2:] for _, rest in filter(None, found) if rest.startswith("].")))
    return [f"{len({name for name, _ in filter(None, found)})} kernel(s)" + (f" ({judged})" if judged else "")]


def _names(verdicts: list[Mapping[str, Any]]) -> str:
    """Metric names once each, kernels only counted (``_kernels``)."""
    names = list(dict.fromkeys(verdict_name(v) for v in verdicts if kernel_metric(v["metric"]) is None))
    return ", ".join(names + _kernels([v for v in verdicts if kernel_metric(v["metric"]) is not None]))


def _shortened(v: Mapping[str, Any]) -> Mapping[str, Any]:
    """A verdict whose kernel name reads as ``names.short_name`` at ``KERNEL_WIDTH``, for the
    words of ``words`` (a full name runs to hundreds of characters in one code span)."""
    return {**v, "metric": in_metric(v["metric"], partial(short_name, width=KERNEL_WIDTH))}


def _noted(tests: list[Mapping[str, Any]]) -> list[str]:
    """The tests' notes (``_notes``), a list item each after the table, naming the test."""
    items = [f"- {_test_name(t)}: {markdown_text(line)}" for t in tests for line in _notes(t)]
    return [*items, ""] if items else []


def _notes(t: Mapping[str, Any]) -> list[str]:
    """The changes let through and how the test was measured."""
    return [let_through_line(_shortened(v)) for v in t["verdicts"] if v.get("let_through")] + health_lines(t)


def _failure(t: Mapping[str, Any]) -> list[str]:
    """A failing test folded: its broken metrics, each line as the failure message words it,
    then what to do next."""
    head = f"{status_icon(t['status'])} <code>{html_text(t['nodeid'])}</code>"
    out = [f"<details><summary>{head}</summary>", ""]
    steps = [line for step in next_steps(t) for line in (markdown_text(step), "")]  # a paragraph each
    if t["message"]:
        return out + [*markdown_block(f"gpuprof: {t['message']}"), "", *steps, "</details>", ""]
    broken = broken_metrics(t["verdicts"])
    out += [markdown_text(broken_header(len(broken), t["gpu"], compared_against(t), named_broken(broken))) + ":", ""]
    for verdicts in broken.values():
        shown = [_shortened(v) for v in verdicts]
        out.append(f"- {markdown_code(verdict_name(shown[0]))}: "
                   f"{markdown_text('; '.join(verdict_words(v) for v in shown))}")
    out += [f"- {markdown_text(line)}" for line in _notes(t)]
    return out + ["", *steps, "</details>", ""]


def _values_row(t: Mapping[str, Any]) -> list[str]:
    shown = shown_values(t)
    has_baseline = t["baseline_metrics"] is not None
    return [markdown_code(t["nodeid"])] + [_values(metric, shown[metric], has_baseline) if t["metrics"] else "–"
                                           for metric, _ in SUMMARY_COLUMNS] + [markdown_text(detects_text(t))]


def _values(metric: str, shown: Shown, has_baseline: bool) -> str:
    """``baseline → current (change)`` in the metric's unit; the current value alone without a baseline."""
    if not has_baseline:
        return shown_value(metric, shown.current)
    text = f"{shown_value(metric, shown.baseline)} → {shown_value(metric, shown.current)}"
    return f"{text} ({shown.change})" if shown.change else text
