"""Machine-readable results of a run, and the report files made from them.

``results_document`` is the one structure every report reads (docs/results.md
documents it): the JSON file is that document as it is, and the other reports
are views of it.  Tests are ordered regressions first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .baseline import write_atomic
from .session import GpuprofSession, TestResult

SCHEMA_VERSION = 1
#: Status order in every report: what needs a reviewer first.
STATUS_ORDER = ("error", "failed", "improved", "no baseline", "updated", "passed")


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
    entry = r.baseline_entry or {}
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
        "verdicts": [v.to_json() for v in r.verdicts],
        "timeline": r.timeline,
        "baseline_timeline": entry.get("timeline"),
    }


def write_json(doc: dict[str, Any], path: Path) -> None:
    write_atomic(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


#: Report files: the option's name (after --gpuprof-) -> function writing the document there.
REPORTS: dict[str, Callable[[dict[str, Any], Path], None]] = {"json": write_json}


def write_reports(session: GpuprofSession) -> list[str]:
    """Write every report file asked for; one line each for the terminal."""
    doc = results_document(session)
    lines = []
    for kind, path in session.settings.reports.items():
        if path is not None:
            REPORTS[kind](doc, path)
            lines.append(f"{kind} report: {path}")
    return lines
