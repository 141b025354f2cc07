"""What a child pytest (``run.fresh``) measured, read back from the JSON file it wrote.

Apart from ``run.fresh`` because a plain pytest run starts no child but imports that module,
and reading a results document needs the judge's result object (and pandas).
"""

from __future__ import annotations

from pathlib import Path

from ..compare.evaluate import TestResult
from ..compare.results_doc import checked
from ..errors import GpuprofError
from .fresh import read_results


def child_results(path: Path, child: str, ended: str = "") -> dict[str, TestResult]:
    """The tests of the results document ``child`` wrote to ``path`` (``--gpuprof-json``), by
    node id: the one way a fresh pytest process's results come back.  An error naming the child
    and the file when there is none (``ended``: how it ended), or when it cannot be read or is
    no results document (``compare.results_doc.checked``, as ``gpuprof diff`` reads one)."""
    doc = read_results(path, child, ended)
    try:
        checked(doc, path)
    except GpuprofError as exc:
        raise GpuprofError(f"{child}'s results cannot be read: {exc}") from None
    return {t["nodeid"]: TestResult.from_json(t, doc.get("backend")) for t in doc["tests"]}
