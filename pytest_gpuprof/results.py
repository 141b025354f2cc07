"""Machine-readable results of a run, and the report files made from them.

``results_document`` is the one structure every report reads (docs/results.md
documents it): the JSON file is that document as it is, and the other reports
are views of it.  Tests are ordered regressions first.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .baseline import write_atomic
from .compare import compared_values, distribution, format_number
from .html import write_html
from .markdown import write_summary
from .metrics import METRICS
from .session import GpuprofSession, TestResult

SCHEMA_VERSION = 1
#: Status order in every report: what needs a reviewer first.
STATUS_ORDER = ("error", "failed", "unstable", "undecided", "improved", "no baseline", "updated", "passed")


def results_document(session: GpuprofSession) -> dict[str, Any]:
    """Every profiled test with status, metrics, baseline values, rules and verdicts, environment."""
    tests = sorted(session.results, key=lambda r: (STATUS_ORDER.index(r.status), r.nodeid))
    counts: dict[str, int] = {}
    for r in tests:
        counts[r.status] = counts.get(r.status, 0) + 1
    s = session.settings
    return {
        "schema_version": SCHEMA_VERSION,
        "gpuprof_version": __version__,
        "backend": s.backend,
        "baseline_dir": str(s.baseline_dir),
        "counts": {**counts, "skipped": len(session.skipped)},
        "tests": [_test(r) for r in tests],
        "skipped": [{"nodeid": n, "reason": why} for n, why in sorted(session.skipped.items())],
    }


def _test(r: TestResult) -> dict[str, Any]:
    """One test; with both runs' per-step samples and distributions, so that its time
    verdicts can be judged again from the document alone."""
    entry = r.baseline_entry or {}
    stored = entry.get("per_step")
    return {
        "nodeid": r.nodeid,
        "status": r.status,
        "message": r.message,
        "gpu": r.gpu,
        "backend": r.backend,
        "environment": r.environment,
        "trace": None if r.trace is None else str(r.trace),
        "baseline_file": None if r.baseline_file is None else str(r.baseline_file),
        "baseline_backend": entry.get("backend"),
        "baseline_environment": entry.get("environment"),
        "metrics": r.metrics,
        "baseline_metrics": r.baseline,
        "per_step": r.per_step,
        "distribution": r.distribution,
        "baseline_per_step": stored,
        "baseline_distribution": distribution(stored, entry.get("distribution")) if stored else None,
        "verdicts": [v.to_json() for v in r.verdicts],
        "unstable": r.unstable,
        "timeline": r.timeline,
        "baseline_timeline": entry.get("timeline"),
    }


def write_json(doc: dict[str, Any], path: Path) -> None:
    write_atomic(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def benchmark_entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """github-action-benchmark's custom format, tool ``customSmallerIsBetter``: one entry
    per profiled test with metrics and per metric where lower is better or any rise is
    worth a look (docs/results.md lists them), per step like the verdicts."""
    out = []
    for t in doc["tests"]:
        if not t["metrics"]:
            continue
        values = compared_values(t["metrics"])
        extra = (f"status: {t['status']}; gpu: {t['gpu']}; steps: {t['metrics'].get('step_count')}; "
                 + "; ".join(f"{m}: {format_number(values.get(m))}" for m in BENCHMARK_CONTEXT))
        for metric, unit in benchmark_metrics():
            value = values.get(metric)
            if value is not None:
                out.append({"name": f"{t['nodeid']} {metric} [{t['gpu']}]", "unit": unit, "value": value,
                            "extra": extra})
    return out


def benchmark_metrics() -> list[tuple[str, str]]:
    """(metric, unit) of every benchmark entry: times, counts and bytes per step, the sync
    wait fraction, the peak memory."""
    out = []
    for name, spec in METRICS.items():
        if spec.kind in ("count", "bytes", "time"):
            out.append((name, {"time": "us/step", "bytes": "B/step", "count": "count/step"}[spec.kind]))
        elif spec.kind == "ratio" and spec.better == "lower":
            out.append((name, "fraction"))
    out.append(("peak_memory_allocated_bytes", "B"))
    return out


#: Shown in each benchmark entry's ``extra`` (higher is better, so not entries themselves).
BENCHMARK_CONTEXT = ("gpu_utilization", "overlap_efficiency")


def write_benchmark(doc: dict[str, Any], path: Path) -> None:
    write_atomic(path, json.dumps(benchmark_entries(doc), indent=2) + "\n")


def junit_properties(result: TestResult) -> list[tuple[str, Any]]:
    """A profiled test's JUnit XML properties (``item.user_properties``): status, GPU,
    every scalar metric as compared (per step where the rule is per step) and each
    broken verdict in the words of the failure message."""
    from .report import broken_verdicts, verdict_line

    props: list[tuple[str, Any]] = [("gpuprof_status", result.status)]
    if result.gpu:
        props.append(("gpuprof_gpu", result.gpu))
    if result.message:
        props.append(("gpuprof_message", result.message))
    if result.baseline_file is not None:
        props.append(("gpuprof_baseline_file", str(result.baseline_file)))
    if result.metrics:
        values = compared_values(result.metrics)
        props += [(f"gpuprof.{name}", format_number(values[name])) for name in METRICS
                  if values.get(name) is not None]
    props += [("gpuprof_broken", verdict_line(v)) for v in broken_verdicts(v.to_json() for v in result.verdicts)]
    return props


#: Report files: the option's name (after --gpuprof-) -> function writing the document
#: there, called as ``write(doc, path)``.
REPORTS: dict[str, Callable[..., None]] = {
    "json": write_json,
    "summary": write_summary,
    "html": write_html,
    "benchmark-json": write_benchmark,
}

#: Reports that, when their option is not given, go to the file an environment variable
#: names, appended to: kind -> variable.  Their writer is called ``write(doc, path, append=True)``.
FROM_ENVIRONMENT: dict[str, str] = {"summary": "GITHUB_STEP_SUMMARY"}


def report_targets(reports: dict[str, Path | None]) -> list[tuple[str, Path, bool]]:
    """(kind, path, append) of every report to write: the options given, then the
    environment's files for those not given."""
    out = [(kind, path, False) for kind, path in reports.items() if path is not None]
    for kind, variable in FROM_ENVIRONMENT.items():
        value = os.environ.get(variable)
        if reports.get(kind) is None and value:
            out.append((kind, Path(value), True))
    return out


def write_reports(session: GpuprofSession) -> list[str]:
    """Write every report file asked for; one line each for the terminal."""
    targets = report_targets(session.settings.reports)
    if not targets:
        return []
    doc = results_document(session)
    lines = []
    for kind, path, append in targets:
        try:
            if append:
                REPORTS[kind](doc, path, append=True)
            else:
                REPORTS[kind](doc, path)
        except OSError as exc:
            lines.append(f"{kind} report not written: {path}: {exc.strerror or exc}")
            continue
        lines.append(f"{kind} report: {'appended to ' if append else ''}{path}")
    return lines
