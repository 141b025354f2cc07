"""Any trace a command is given: a Kineto JSON, an nsys report (its SQLite export, or a
``.nsys-rep`` exported first), or an Nsight Compute report, and its metrics."""

from __future__ import annotations

import importlib.util
import json
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from ..capture.nsight_compute import export_csv, find_ncu
from ..capture.nsys import export_sqlite, find_nsys
from ..compare.results_doc import checked
from ..errors import GpuprofError
from ..metrics.measure import Measurement, measure
from ..trace.formats import (
    JSON_HEAD,
    check_json_head,
    is_chrome_trace,
    is_ncu_input,
    is_ncu_report,
    is_nsys_input,
    is_sqlite,
    open_content,
)
from ..trace.kineto import load_kineto
from ..trace.model import Trace
from ..trace.ncu_report import read_ncu_csv, read_ncu_report
from ..trace.nsys_sqlite import cuda_processes, for_range, load_nsys


@contextmanager
def sqlite_of(report: str, nsys: str | None) -> Iterator[tuple[str, str | None]]:
    """An nsys report as an SQLite file and the name its errors give it: a .sqlite as it is,
    a .nsys-rep through its export, made in a private temporary folder and deleted once
    read: the export holds the environment of every process nsys traced (tokens and all),
    and nothing is left beside the report."""
    if not report.endswith(".nsys-rep"):
        yield report, None
        return
    binary = find_nsys(nsys, option="--nsys")
    with tempfile.TemporaryDirectory(prefix="gpuprof-") as folder:
        export = export_sqlite(binary, Path(report), Path(folder) / Path(report).with_suffix(".sqlite").name)
        yield str(export), f"{report}'s SQLite export"  # not the export about to be deleted


def measure_any(path: str, test_range: str | None = None, nsys: str | None = None) -> Measurement:
    """The metrics of any trace (an nsys report of several processes: all their events as
    one timeline; ``measure_processes`` cuts it); one the metrics cannot use is an error
    naming it; ``test_range`` applies to an nsys report (``check_range`` says so first)."""
    if is_nsys_input(path):
        with sqlite_of(path, nsys) as (sqlite, named):
            trace = load_nsys(sqlite, named=named)
        return _measured(path, for_range(trace, test_range) if test_range else trace)
    return _measured(path, load_kineto(path))


#: Which inputs ``--range`` applies to, as its refusal says.
RANGE_APPLIES = ("--range applies to nsys reports of a pytest session only (.sqlite, .nsys-rep: each test in an "
                 "NVTX range named by its node id); leave --range out")


def check_range(path: str, test_range: str | None) -> None:
    """``--range`` cuts one test out of an nsys report of a pytest session, where each test
    ran in an NVTX range named by its node id; any other input holds no such range, and is
    an error naming the option, not read whole."""
    if test_range is None or is_nsys_input(path):
        return
    raise GpuprofError(f"--range {test_range}: {path} is {input_kind(path)}, and {RANGE_APPLIES}")


def check_diff_range(a: str, b: str, test_range: str | None) -> None:
    """``gpuprof diff --range``: it cuts the test out of each side that is an nsys report (a side
    of another kind is read whole, as it holds one test); with neither side an nsys report,
    it applies to nothing, and is an error naming the option and both inputs."""
    if test_range is None or is_nsys_input(a) or is_nsys_input(b):
        return
    raise GpuprofError(f"--range {test_range}: {a} is {input_kind(a)} and {b} is {input_kind(b)}, "
                       f"and {RANGE_APPLIES}")


def input_kind(path: str) -> str:
    """What an input other than an nsys report is, in words: from its name, a results file
    (``--gpuprof-json``) from its content."""
    if Path(path).is_dir():
        return "a folder of per-rank Kineto traces"
    if is_ncu_input(path):
        return "an Nsight Compute report"
    if Path(path).is_file():
        try:
            if read_results(Path(path)) is not None:
                return "a results file (--gpuprof-json)"
        except GpuprofError:
            pass  # neither: the trace loader would name the problem
    return "a Kineto trace"


def measure_processes(report: str, nsys: str | None) -> dict[int, tuple[str, Measurement]]:
    """An nsys report (exported once), cut per process when several processes ran GPU work
    (a distributed run): each measured on its own events, numbered as a rank by its device
    (``cuda_processes``); a report of one such process is measured whole, as rank 0."""
    with sqlite_of(report, nsys) as (sqlite, named):
        processes = cuda_processes(sqlite, named)
        if len(processes) < 2:
            return {0: (report, _measured(report, load_nsys(sqlite, named=named)))}
        return {rank: (f"{report}: process {pid} (device {device})",
                       _measured(report, load_nsys(sqlite, named=named, process=pid)))
                for rank, (pid, device) in enumerate(processes)}


def ncu_launches(path: str, ncu: str | None) -> pd.DataFrame:
    """The profiled launches of an Nsight Compute input: its raw page as CSV, or a report,
    printed by the ncu given (``--ncu``), else read by NVIDIA's module where it is installed,
    else printed by an ncu found (``find_ncu``)."""
    if not is_ncu_report(path):
        return read_ncu_csv(path)
    if ncu is None and importlib.util.find_spec("ncu_report") is not None:
        return read_ncu_report(path)
    try:
        binary = find_ncu(ncu)
    except GpuprofError:
        if ncu is not None:
            raise
        return read_ncu_report(path)  # neither: its error says how to get one
    return read_ncu_csv(export_csv(binary, Path(path)), named=f"{path} (printed by ncu)")


def _measured(path: str, trace: Trace) -> Measurement:
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



def read_results(p: Path) -> dict[str, Any] | None:
    """The file's content when it is a results document, checked (``compare.results_doc.checked``:
    a problem is an error naming the file and the member); None when it looks like a trace.
    What is not JSON is refused from its first bytes (``check_json_head``), not read whole."""
    try:
        with open_content(p) as fh:
            head = fh.read(JSON_HEAD)
            if is_chrome_trace(head) or is_sqlite(head):  # the trace loaders name the problem
                return None
            check_json_head(head)
            text = head + fh.read()
        doc = json.loads(text)
    except (OSError, EOFError, zlib.error) as exc:
        raise GpuprofError(f"cannot read {p}: {exc}") from exc
    except (ValueError, RecursionError) as exc:
        raise GpuprofError(
            f"{p} is neither a results file (--gpuprof-json) nor a trace: not valid JSON ({exc})"
        ) from None
    if isinstance(doc, dict) and "traceEvents" in doc:
        return None
    if not (isinstance(doc, dict) and isinstance(doc.get("tests"), list) and "schema_version" in doc):
        raise GpuprofError(f"{p} is neither a results file (--gpuprof-json: 'schema_version' and a 'tests' "
                           f"list) nor a trace ('traceEvents')")
    return checked(doc, p)
