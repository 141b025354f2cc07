"""Load an Nsight Systems report (its SQLite export) into the normalized trace.

Tables read: CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _RUNTIME,
NVTX_EVENTS, StringIds, TARGET_INFO_GPU, ENUM_CUDA_MEMCPY_OPER.  nsys already
stores integer nanoseconds.  Tables are created lazily by nsys, so a missing
one is an empty table, not an error.

NVTX ranges: when the report has the ``gpuprof`` domain (the plugin's), only
its ranges are kept; otherwise only ranges of the default domain.  Ranges of
other domains (libraries such as CUB emit their own) never define steps.

Every value read is checked: a table without a column the loader reads, a time or
id that is NULL or not an integer, a name id missing from StringIds or a ``gpuprof:``
mark that is not a JSON object is an error naming the report, the table and the row.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from ..capture.ranges import METADATA_MARK, NVTX_DOMAIN
from ..errors import TraceError
from .formats import is_gzipped
from .model import (
    COLLECTIVE_COLUMNS,
    COPY_COLUMNS,
    KERNEL_COLUMNS,
    RANGE_COLUMNS,
    RUNTIME_COLUMNS,
    SET_COLUMNS,
    Trace,
    collective_name,
    first_problem,
    make_table,
)

#: The columns read from each table; nsys writes them all, so a missing one is damage.
_COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end", "demangledName", "deviceId", "streamId", "correlationId"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end", "copyKind", "bytes", "deviceId", "streamId", "correlationId"),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("start", "end", "bytes", "deviceId", "streamId", "correlationId"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "nameId", "globalTid", "correlationId"),
    "NVTX_EVENTS": ("start", "end", "eventType", "text", "textId", "globalTid", "domainId"),
    "StringIds": ("id", "value"),
    "TARGET_INFO_GPU": ("id", "name"),
    "ENUM_CUDA_MEMCPY_OPER": ("id", "name"),
}

#: ENUM_CUDA_MEMCPY_OPER names -> copy kinds of the metrics.
_COPY_KIND = {
    "CUDA_MEMCPY_KIND_HTOD": "htod", "CUDA_MEMCPY_KIND_DTOH": "dtoh", "CUDA_MEMCPY_KIND_DTOD": "dtod",
    "CUDA_MEMCPY_KIND_PTOP": "ptop", "CUDA_MEMCPY_KIND_HTOH": "htoh",
}
_NVTX_RANGE_TYPES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
_NVTX_DOMAIN_CREATE = 75
#: The NVTX domain NCCL names its calls' ranges in.
NCCL_DOMAIN = "NCCL"
_NVTX_MARK = 34


class _Invalid(ValueError):
    """A value the report cannot hold; the message follows the report's name."""


#: What to do with a gzipped SQLite export.
_GUNZIP = "gunzip it and pass the .sqlite file"


def sqlite_given_as_json(gzipped: bool) -> str:
    """What to say of an SQLite file given where a JSON trace was expected."""
    if gzipped:
        return f"a gzipped SQLite file, not a JSON trace: {_GUNZIP}"
    return "an SQLite file, not a JSON trace: name it *.sqlite to read it as an Nsight Systems export"


#: The process id in an nsys global id (``globalPid``, ``globalTid``): bits 24 to 47.
_PID_SHIFT, _PID_MASK = 24, (1 << 24) - 1
_PID = f"(({{column}} >> {_PID_SHIFT}) & {_PID_MASK})"


@contextmanager
def _opened(path: str | Path, named: str | None) -> Iterator[tuple[sqlite3.Connection, set[str]]]:
    """An nsys SQLite export opened read-only, with its table names; what cannot be read as
    one is an error naming the file (``named`` when given)."""
    location = Path(path)
    name = named or location
    if not location.is_file():
        raise TraceError(f"cannot read report {name}: no such file")
    if is_gzipped(location):
        raise TraceError(f"{name}: gzipped, not an SQLite file: {_GUNZIP}")
    try:
        con = sqlite3.connect(f"file:{location}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TraceError(f"cannot open {name} as SQLite: {exc}") from exc
    try:
        yield con, {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:
        raise TraceError(f"{name} is not a readable SQLite file: {exc}") from exc
    except UnicodeDecodeError as exc:  # a table's name (its schema) or a value read
        raise TraceError(f"{name} holds text that is not UTF-8: {exc}") from None
    finally:
        con.close()


def cuda_processes(path: str | Path, named: str | None = None) -> list[tuple[int, int]]:
    """(process id, device) of each process of an nsys export that ran GPU work, ordered by
    the device that ran most of its kernels and copies, then by process id: one report of a
    distributed run holds every rank's process (the device is its local rank)."""
    with _opened(path, named) as (con, tables):
        work = [f"SELECT {_PID.format(column='globalPid')} AS pid, deviceId FROM {t}"
                for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
                if t in tables]
        rows = con.execute(f"SELECT pid, deviceId, COUNT(*) FROM ({' UNION ALL '.join(work)}) "
                           "GROUP BY pid, deviceId ORDER BY COUNT(*) DESC").fetchall() if work else []
    main: dict[int, int] = {}
    for pid, device, _ in rows:
        if pid is not None and device is not None:  # a damaged row names no process
            main.setdefault(pid, device)
    return sorted(main.items(), key=lambda p: (p[1], p[0]))


def load_nsys(path: str | Path, named: str | None = None, process: int | None = None) -> Trace:
    """Read an nsys SQLite export (``nsys export --type sqlite``) into a Trace; errors call
    the file ``named`` when given (a temporary export is called after its report).  With
    ``process`` (a process id, ``cuda_processes``) only that process's events: its own
    GPU work, CUDA calls and NVTX ranges."""
    name = named or Path(path)
    with _opened(path, named) as (con, tables):
        if "StringIds" not in tables:
            raise TraceError(f"{name} is not an Nsight Systems SQLite export (no StringIds table)")
        try:
            _check_columns(con, tables)
            trace = _read(con, tables, process, str(name))
        except _Invalid as exc:
            raise TraceError(f"{name}: {exc}") from None
    # correlation ids are each process's own: a report of several processes repeats them
    problem = first_problem(trace, processes=(trace.runtime["tid"].to_numpy() >> _PID_SHIFT) & _PID_MASK)
    if problem:
        raise TraceError(f"{name}: {problem}")
    if trace.span() is None:
        raise TraceError(f"{name} holds no CUDA or NVTX events (was it captured with --trace=cuda,nvtx?)")
    return trace


def _check_columns(con: sqlite3.Connection, tables: set[str]) -> None:
    for table, needed in _COLUMNS.items():
        if table in tables:
            have = {row[1] for row in con.execute(f"PRAGMA table_info({table})")}
            missing = [c for c in needed if c not in have]
            if missing:
                raise _Invalid(f"table {table} lacks the column(s) {', '.join(missing)}")


def _query(con: sqlite3.Connection, tables: set[str], table: str, sql: str) -> pd.DataFrame:
    """The query's rows; each column but ``name`` must hold integers (none NULL), ``name``
    text: the first row that does not is an error naming the table and the row."""
    if table not in tables:
        return pd.DataFrame()
    frame = pd.read_sql_query(sql, con)
    for col in frame.columns if len(frame) else ():  # an empty table's columns have no dtype
        if col == "name":
            bad = [i for i, v in enumerate(frame[col]) if not isinstance(v, str)]
            if bad:
                raise _Invalid(f"{table} row {bad[0] + 1}: its name id {frame['name_id'].iloc[bad[0]]!r} "
                               f"is not a string of StringIds")
        elif col != "name_id" and not pd.api.types.is_integer_dtype(frame[col]):
            at = list(frame.columns).index(col)  # pandas made the column float or object: find the row
            row, value = next((i, r[at]) for i, r in enumerate(con.execute(sql)) if not isinstance(r[at], int))
            raise _Invalid(f"{table} row {row + 1}: {col} is {_shown(value)}, not an integer")
    return frame.drop(columns=["name_id"], errors="ignore")


def _shown(value) -> str:
    return "NULL" if value is None else repr(value)[:60]


def _only(process: int | None, column: str) -> str:
    """The WHERE clause keeping one process's rows (none: every row)."""
    return "" if process is None else f" WHERE {_PID.format(column=column)} = {int(process)}"


def _read(con: sqlite3.Connection, tables: set[str], process: int | None, file: str) -> Trace:
    kernels = _query(con, tables, "CUPTI_ACTIVITY_KIND_KERNEL", """
        SELECT k.start, k.end, k.demangledName AS name_id, s.value AS name, k.deviceId AS device,
               k.streamId AS stream, k.correlationId AS correlation
        FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s ON s.id = k.demangledName""" + _only(process,
                                                                                                    "k.globalPid"))
    copies = _query(con, tables, "CUPTI_ACTIVITY_KIND_MEMCPY", """
        SELECT m.start, m.end, m.copyKind AS kind, m.bytes, m.deviceId AS device, m.streamId AS stream,
               m.correlationId AS correlation
        FROM CUPTI_ACTIVITY_KIND_MEMCPY m""" + _only(process, "m.globalPid"))
    if len(copies):
        if "ENUM_CUDA_MEMCPY_OPER" not in tables:
            raise _Invalid("it has copies but no ENUM_CUDA_MEMCPY_OPER table to name their kinds")
        names = dict(con.execute("SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER"))
        copies["kind"] = [_COPY_KIND.get(names.get(k, ""), "other") for k in copies["kind"]]
    sets = _query(con, tables, "CUPTI_ACTIVITY_KIND_MEMSET", """
        SELECT m.start, m.end, m.bytes, m.deviceId AS device, m.streamId AS stream, m.correlationId AS correlation
        FROM CUPTI_ACTIVITY_KIND_MEMSET m""" + _only(process, "m.globalPid"))
    runtime = _query(con, tables, "CUPTI_ACTIVITY_KIND_RUNTIME", """
        SELECT r.start, r.end, r.nameId AS name_id, s.value AS name, r.globalTid AS tid,
               r.correlationId AS correlation
        FROM CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds s ON s.id = r.nameId""" + _only(process,
                                                                                                "r.globalTid"))
    ranges, metadata, collectives = _nvtx(con, tables, process)
    gpu = (con.execute("SELECT name FROM TARGET_INFO_GPU ORDER BY id").fetchone() if "TARGET_INFO_GPU" in tables
           else None)
    if gpu and not isinstance(gpu[0], (str, type(None))):
        raise _Invalid(f"TARGET_INFO_GPU: the GPU name is {_shown(gpu[0])}, not text")
    return Trace(
        make_table(KERNEL_COLUMNS, _columns(kernels)),
        make_table(COPY_COLUMNS, _columns(copies)),
        make_table(SET_COLUMNS, _columns(sets)),
        make_table(RUNTIME_COLUMNS, _columns(runtime)),
        make_table(RANGE_COLUMNS, _columns(ranges)),
        source="nsys",
        gpu_name=gpu[0] if gpu else None,
        metadata=metadata,
        collectives=collectives,
        file=file,
        threads=_thread_names(con, tables),
    )


def _thread_names(con: sqlite3.Connection, tables: set[str]) -> dict[int, str]:
    """Host threads' names by ``globalTid`` (the runtime and range tables' ``tid``), where
    nsys recorded them (its ``ThreadNames`` table)."""
    if "ThreadNames" not in tables:
        return {}
    rows = con.execute("SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId")
    return {tid: name for tid, name in rows if type(tid) is int and isinstance(name, str)}


def _nvtx(con: sqlite3.Connection, tables: set[str],
          process: int | None = None) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """The ranges that may define steps, the plugin's metadata marks, and the collective calls
    NCCL's own NVTX ranges record (its ``NCCL`` domain: ``ncclAllReduce``, ``ncclAlltoAll``,
    ...; their sizes are not read: bytes -1), of one process."""
    if "NVTX_EVENTS" not in tables:
        return pd.DataFrame(), {}, make_table(COLLECTIVE_COLUMNS, {})
    # read as Python values: a NULL end (a mark's) would turn pandas' column into floats
    events = pd.DataFrame(con.execute(
        """SELECT n.start, n.end, n.eventType, COALESCE(n.text, s.value) AS name, n.globalTid AS tid,
                  COALESCE(n.domainId, 0) AS domain
           FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId""" + _only(process, "n.globalTid")).fetchall(),
        columns=["start", "end", "eventType", "name", "tid", "domain"], dtype=object)
    created = events[events["eventType"] == _NVTX_DOMAIN_CREATE]
    ours = created.loc[created["name"] == NVTX_DOMAIN, "domain"]
    domain = _nvtx_integer(ours, "domainId")[0] if len(ours) else 0
    mine = events[events["domain"] == domain]
    ranges = mine[mine["eventType"].isin(_NVTX_RANGE_TYPES) & mine["end"].notna()]
    marks = mine[(mine["eventType"] == _NVTX_MARK) & mine["name"].fillna("").astype(str).str.startswith(METADATA_MARK)]
    metadata = {"marks": [[t, _mark(text)] for t, text in zip(_nvtx_integer(marks["start"], "start"), marks["name"])]}
    nccl = created.loc[created["name"] == NCCL_DOMAIN, "domain"]
    calls = events[events["domain"].isin(_nvtx_integer(nccl, "domainId").tolist())
                   & events["eventType"].isin(_NVTX_RANGE_TYPES)]
    named = [(start, collective_name(name))
             for start, name in zip(calls["start"], calls["name"].fillna("").astype(str))]
    named = sorted((int(start), name) for start, name in named if name is not None and isinstance(start, int))
    collectives = make_table(COLLECTIVE_COLUMNS, {"start": [s for s, _ in named], "name": [n for _, n in named],
                                                  "bytes": [-1] * len(named)})
    return pd.DataFrame({"start": _nvtx_integer(ranges["start"], "start"), "end": _nvtx_integer(ranges["end"], "end"),
                         "name": ranges["name"].to_numpy(), "tid": _nvtx_integer(ranges["tid"], "globalTid")}), \
        metadata, collectives


def _nvtx_integer(values: pd.Series, column: str) -> np.ndarray:
    """NVTX_EVENTS values as integers; the first that is not one is an error naming its row."""
    for row, v in zip(values.index, values):
        if not isinstance(v, int):
            raise _Invalid(f"NVTX_EVENTS row {row + 1}: {column} is {_shown(v)}, not an integer")
    return np.array(values.tolist(), dtype=np.int64)


def _mark(text: str) -> dict:
    """The values of a ``gpuprof:`` NVTX mark: a JSON object."""
    try:
        values = json.loads(text[len(METADATA_MARK):])
    except (ValueError, RecursionError) as exc:
        raise _Invalid(f"NVTX mark {text[:60]!r} is not valid JSON ({exc})") from None
    if not isinstance(values, dict):
        raise _Invalid(f"NVTX mark {text[:60]!r} holds {type(values).__name__}, not a JSON object")
    return values


def for_range(trace: Trace, name: str) -> Trace:
    """The part of a session report inside the NVTX range ``name`` (a test's node id).

    Only the ranges are cut: GPU work is attributed to steps by launch, so work
    outside the test's steps never counts.  The metadata is that of the marks
    inside the range.
    """
    ranges = trace.ranges
    outer = ranges[ranges["name"].astype(str) == name]
    if not len(outer):
        raise TraceError(f"no NVTX range named {name!r} in the report")
    start, end = int(outer["start"].iloc[-1]), int(outer["end"].iloc[-1])
    inside = ranges[(ranges["start"] >= start) & (ranges["end"] <= end)].reset_index(drop=True)
    metadata: dict = {}
    for t, values in trace.metadata.get("marks", []):
        if start <= t <= end:
            metadata.update(values)
    return Trace(trace.kernels, trace.copies, trace.sets, trace.runtime, inside, trace.source, trace.gpu_name, metadata,
                 trace.collectives, trace.file, trace.threads)


def _columns(frame: pd.DataFrame) -> dict:
    return {c: frame[c].to_numpy() for c in frame.columns}
