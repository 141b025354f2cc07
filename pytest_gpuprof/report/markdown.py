"""``--gpuprof-summary``: the results document as Markdown, for a pull request or a
GitHub job summary ($GITHUB_STEP_SUMMARY).

A table of every profiled test, regressions first (the document's order), with
the key metrics as ``baseline → current (change)``; then, for each failing test,
its broken metrics in the words of the failure message (``words.broken_line``) and
what to do next (``words.next_steps``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..compare.evaluate import FAILED_STATUSES
from ..files import write_atomic
from ..numbers import format_number
from .escaping import markdown_block, markdown_code, markdown_text
from .names import kernel_metric
from .values import VALUES_NOTE, Shown, rank_sections, shown_values
from .words import (
    SUMMARY_COLUMNS,
    broken_header,
    broken_metrics,
    capture_words,
    compared_against,
    gpu_text,
    health_lines,
    let_through_lines,
    ncu_lines,
    next_steps,
    skipped_line,
    verdict_name,
    verdict_words,
)


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
    if tests:
        lines.append("| test | status | " + " | ".join(title for _, title in SUMMARY_COLUMNS) + " | verdict |")
        lines.append("|---|---|" + "---:|" * len(SUMMARY_COLUMNS) + "---|")
        for t in (shown for test in tests for shown in rank_sections(test)):
            lines.append("| " + " | ".join(_row(t)) + " |")
        lines += ["", f"<sub>{markdown_text(VALUES_NOTE)}</sub>", ""]
    if doc["skipped"]:
        lines += [markdown_text(skipped_line(doc["skipped"])), ""]
    failing = [t for t in tests if t["status"] in FAILED_STATUSES]
    if failing:
        lines += ["### Failures", ""]
    for t in failing:
        lines += _failure(t)
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


def _row(t: Mapping[str, Any]) -> list[str]:
    status = t["status"]
    row = [markdown_code(t["nodeid"]), f"**{status}**" if status in FAILED_STATUSES else status]
    shown = shown_values(t)
    for metric, _ in SUMMARY_COLUMNS:
        row.append(_values(shown[metric], t["baseline_metrics"] is not None) if t["metrics"] else "–")
    row.append(_verdict(t))
    return row


def _values(shown: Shown, has_baseline: bool) -> str:
    """``baseline → current (change)``; the current value alone without a baseline."""
    if not has_baseline:
        return format_number(shown.current)
    text = f"{format_number(shown.baseline)} → {format_number(shown.current)}"
    return f"{text} ({shown.change})" if shown.change else text


def _verdict(t: Mapping[str, Any]) -> str:
    """The verdict cell: what broke or what stood out, then the changes let through and how
    the test was measured."""
    if t["message"]:
        return markdown_text(t["message"])
    return "; ".join([_outcome(t)] + [markdown_text(line) for line in let_through_lines(t) + health_lines(t)])


def _outcome(t: Mapping[str, Any]) -> str:
    status = t["status"]
    broken = broken_metrics(t["verdicts"])
    if broken:
        return f"{len(broken)} metric(s) broke: {_names([vs[0] for vs in broken.values()])}"
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


def _names(verdicts: list[Mapping[str, Any]]) -> str:
    """Metric names once each; kernels only counted (their names are long), with what of
    them was judged (``count``, ``time_us``, a counter)."""
    names = list(dict.fromkeys(verdict_name(v) for v in verdicts if kernel_metric(v["metric"]) is None))
    per_kernel = [found for v in verdicts if (found := kernel_metric(v["metric"])) is not None]
    if not per_kernel:
        return ", ".join(names)
    judged = ", ".join(dict.fromkeys(rest[2:] for _, rest in per_kernel if rest.startswith("].")))
    kernels = f"{len({kernel for kernel, _ in per_kernel})} kernel(s)" + (f" ({judged})" if judged else "")
    return ", ".join(names + [kernels])


def _failure(t: Mapping[str, Any]) -> list[str]:
    """A failing test's broken metrics, each line as the failure message words it, then
    what to do next."""
    out = [f"#### {markdown_code(t['nodeid'])}", ""]
    steps = [line for step in next_steps(t) for line in (markdown_text(step), "")]  # a paragraph each
    if t["message"]:
        return out + [*markdown_block(f"gpuprof: {t['message']}"), "", *steps]
    broken = broken_metrics(t["verdicts"])
    out.append(markdown_text(broken_header(len(broken), t["gpu"], compared_against(t))) + ":")
    out.append("")
    for name, verdicts in broken.items():
        out.append(f"- {markdown_code(name)}: {markdown_text('; '.join(verdict_words(v) for v in verdicts))}")
    out += [f"- {markdown_text(line)}" for line in let_through_lines(t) + health_lines(t)]
    return out + ["", *steps]
