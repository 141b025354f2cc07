"""The results document: the one structure every report renders (docs/results.md).

The JSON file (``--gpuprof-json``) is this document as it is; the terminal, the
Markdown summary, the HTML page, the benchmark file and ``gpuprof diff`` read it (a file
read back is checked first: ``compare.results_doc``, which owns ``SCHEMA_VERSION``).
Tests are ordered regressions first (``compare.evaluate.STATUSES``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import __version__
from ..compare.evaluate import TestResult
from ..compare.results_doc import SCHEMA_VERSION
from ..compare.status import STATUSES


def results_document(results: Iterable[TestResult], skipped: Mapping[str, str], backend: str, baseline_dir: Path,
                     replay_dir: Path | None = None, traces_dir: Path | None = None,
                     baselines: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every profiled test with status, metrics, baseline values, rules and verdicts, environment;
    the tests skipped with their reasons; where the baselines and kept traces are; with
    ``baselines``, the baseline files the run wrote at its end, or why it wrote none."""
    doc = document_of([r.to_json() for r in results], skipped, backend, str(baseline_dir),
                      None if replay_dir is None else str(replay_dir), None if traces_dir is None else str(traces_dir))
    if baselines is not None:
        doc["baselines"] = dict(baselines)
    return doc


def document_of(tests: list[dict[str, Any]], skipped: Mapping[str, str], backend: str, baseline_dir: str,
                replay_dir: str | None = None, traces_dir: str | None = None) -> dict[str, Any]:
    """The document of tests already written as JSON (``TestResult.to_json``): ordered
    regressions first, counted by status."""
    tests = sorted(tests, key=lambda t: (STATUSES.index(t["status"]), t["nodeid"]))
    counts: dict[str, int] = {}
    for t in tests:
        counts[t["status"]] = counts.get(t["status"], 0) + 1
    return {
        "schema_version": SCHEMA_VERSION,
        "gpuprof_version": __version__,
        "backend": backend,
        "baseline_dir": baseline_dir,
        "replay_dir": replay_dir,
        "traces_dir": traces_dir,
        "counts": {**counts, "skipped": len(skipped)},
        "tests": tests,
        "skipped": [{"nodeid": n, "reason": why} for n, why in sorted(skipped.items())],
    }
