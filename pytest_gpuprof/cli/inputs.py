"""Any trace a command is given: a Kineto JSON, or an nsys report (its SQLite export,
or a ``.nsys-rep`` exported first), and its metrics."""

from __future__ import annotations

import json
import tempfile
import zlib
from pathlib import Path
from typing import Any

from ..capture.nsys import export_sqlite, find_nsys
from ..errors import GpuprofError
from ..metrics.measure import Measurement, measure
from ..report.document import SCHEMA_VERSION
from ..trace.formats import is_chrome_trace, is_nsys_input, is_sqlite, open_content
from ..trace.kineto import load_kineto
from ..trace.model import Trace
from ..trace.nsys_sqlite import for_range, load_nsys


def load_any(path: str, test_range: str | None = None, nsys: str | None = None) -> Trace:
    """A Kineto trace or an nsys report (a .nsys-rep exported to SQLite first, ``exported``)."""
    if is_nsys_input(path):
        trace = exported(path, nsys) if path.endswith(".nsys-rep") else load_nsys(path)
        return for_range(trace, test_range) if test_range else trace
    if test_range:
        raise GpuprofError("--range applies to nsys reports only")
    return load_kineto(path)


def exported(report: str, nsys: str | None) -> Trace:
    """A .nsys-rep read through its SQLite export, made in a private temporary folder and
    deleted once read: the export holds the environment of every process nsys traced
    (tokens and all), and nothing is left beside the report."""
    binary = find_nsys(nsys, option="--nsys")
    with tempfile.TemporaryDirectory(prefix="gpuprof-") as folder:
        export = export_sqlite(binary, Path(report), Path(folder) / Path(report).with_suffix(".sqlite").name)
        return load_nsys(export, named=f"{report}'s SQLite export")  # not the export about to be deleted


def measure_any(path: str, test_range: str | None = None, nsys: str | None = None) -> Measurement:
    """The metrics of any trace; one the metrics cannot use is an error naming it."""
    trace = load_any(path, test_range, nsys)
    try:
        return measure(trace)
    except ValueError as exc:
        raise GpuprofError(f"{path}: {exc}") from None


def measure_ranks(folder: str) -> dict[int, tuple[str, Measurement]]:
    """The per-rank Kineto traces of one distributed run in a folder (``*.json``,
    ``*.json.gz``), each measured on its own timeline, by the rank its ``distributedInfo``
    names; a trace without a rank, or two of one rank, is an error naming them."""
    files = sorted(str(p) for p in Path(folder).iterdir() if p.name.endswith((".json", ".json.gz")))
    if not files:
        raise GpuprofError(f"{folder}: a folder is read as the per-rank Kineto traces of one distributed run, "
                           "and it holds no .json or .json.gz file")
    ranks: dict[int, tuple[str, Measurement]] = {}
    for file in files:
        m = measure_any(file)
        rank = (m.metadata.get("distributed") or {}).get("rank")
        if rank is None:
            raise GpuprofError(f"{file}: no rank (the trace has no distributedInfo); a folder is read as the "
                               "per-rank traces of one distributed run")
        if rank in ranks:
            raise GpuprofError(f"{file} and {ranks[rank][0]} are both rank {rank}")
        ranks[rank] = (file, m)
    return dict(sorted(ranks.items()))


#: How much of a file is read to tell a results document from a trace.
_HEAD = 1 << 16


def read_results(p: Path) -> dict[str, Any] | None:
    """The file's content when it is a results document; None when it looks like a trace."""
    try:
        with open_content(p) as fh:
            head = fh.read(_HEAD)
            if is_chrome_trace(head) or is_sqlite(head):  # the trace loaders name the problem
                return None
            text = head + fh.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise GpuprofError(f"cannot read {p}: {exc}") from exc
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise GpuprofError(
            f"{p} is neither a results file (--gpuprof-json) nor a trace: not valid JSON ({exc})"
        ) from None
    if isinstance(doc, dict) and "traceEvents" in doc:
        return None
    if not (isinstance(doc, dict) and isinstance(doc.get("tests"), list) and "schema_version" in doc):
        raise GpuprofError(f"{p} is neither a results file (--gpuprof-json: 'schema_version' and a 'tests' "
                           f"list) nor a trace ('traceEvents')")
    if doc["schema_version"] != SCHEMA_VERSION:
        raise GpuprofError(f"{p} is a results file of schema_version {doc['schema_version']!r}; "
                           f"this gpuprof reads {SCHEMA_VERSION}")
    return doc
