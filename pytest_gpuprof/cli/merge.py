"""``gpuprof merge``: the results of a suite sharded over several runners (a CI matrix, one
runner per GPU or per machine) as one run, with every report and one exit status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..compare.status import FAILED_STATUSES
from ..errors import GpuprofError
from ..report.document import document_of
from .inputs import read_results


def merged(paths: list[str]) -> dict[str, Any]:
    """One results document of several: every test of each (a test on one GPU model in two
    files is an error naming both: the shards overlap), the skipped tests that ran in none,
    the backends and baseline folders of all."""
    tests: list[dict[str, Any]] = []
    owner: dict[tuple[str, str | None], str] = {}
    skipped: dict[str, str] = {}
    backends: list[str] = []
    baseline_dirs: list[str] = []
    for path in paths:
        doc = read_results(Path(path)) if Path(path).is_file() else None  # checked: inputs.read_results
        if doc is None:
            raise GpuprofError(f"{path}: not a results file (--gpuprof-json)" if Path(path).is_file()
                               else f"{path}: no such file")
        for test in doc["tests"]:
            key = (test["nodeid"], test["gpu"])
            if key in owner:
                raise GpuprofError(f"{test['nodeid']} ({test['gpu'] or 'no GPU'}) is in both {owner[key]} and "
                                   f"{path}: the shards overlap")
            owner[key] = path
            tests.append(test)
        for entry in doc.get("skipped") or []:
            skipped.setdefault(entry["nodeid"], entry.get("reason", ""))
        for seen, value in ((backends, doc.get("backend")), (baseline_dirs, doc.get("baseline_dir"))):
            if isinstance(value, str) and value not in seen:
                seen.append(value)
    ran = {nodeid for nodeid, _ in owner}
    return document_of(tests, {n: why for n, why in skipped.items() if n not in ran}, "+".join(backends),
                       ", ".join(baseline_dirs))


def merge_status(doc: dict[str, Any]) -> int:
    """The merged run's exit status: 1 when a test failed or errored, else 0."""
    return 1 if any(doc["counts"].get(status) for status in FAILED_STATUSES) else 0
