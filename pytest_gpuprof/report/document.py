"""The results document: the one structure every report renders (docs/results.md).

The JSON file (``--gpuprof-json``) is this document as it is; the terminal, the
Markdown summary, the HTML page, the benchmark file and ``gpuprof diff`` read it.
Tests are ordered regressions first (``compare.evaluate.STATUSES``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from .. import __version__
from ..compare.evaluate import STATUSES, TestResult

SCHEMA_VERSION = 1


def results_document(results: Iterable[TestResult], skipped: Mapping[str, str], backend: str, baseline_dir: Path,
                     replay_dir: Path | None = None, traces_dir: Path | None = None) -> dict[str, Any]:
    """Every profiled test with status, metrics, baseline values, rules and verdicts, environment;
    the tests skipped with their reasons; where the baselines and kept traces are."""
    tests = sorted(results, key=lambda r: (STATUSES.index(r.status), r.nodeid))
    counts: dict[str, int] = {}
    for r in tests:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {
        "schema_version": SCHEMA_VERSION,
        "gpuprof_version": __version__,
        "backend": backend,
        "baseline_dir": str(baseline_dir),
        "replay_dir": None if replay_dir is None else str(replay_dir),
        "traces_dir": None if traces_dir is None else str(traces_dir),
        "counts": {**counts, "skipped": len(skipped)},
        "tests": [r.to_json() for r in tests],
        "skipped": [{"nodeid": n, "reason": why} for n, why in sorted(skipped.items())],
    }
