"""Load an Nsight Systems report (its SQLite export) into the normalized trace.

Tables read: CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _RUNTIME,
NVTX_EVENTS, StringIds, TARGET_INFO_GPU, ENUM_CUDA_MEMCPY_OPER.  nsys already
stores integer nanoseconds.  Tables are created lazily by nsys, so a missing
one is an empty table, not an error.

NVTX ranges: when the report has the ``gpuprof`` domain (the plugin's), only
its ranges are kept; otherwise only ranges of the default domain.  Ranges of
other domains (libraries such as CUB emit their own) never define steps.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from ..capture.ranges import METADATA_MARK, NVTX_DOMAIN
from ..errors import TraceError
from .model import (
    COPY_COLUMNS,
    KERNEL_COLUMNS,
    RANGE_COLUMNS,
    RUNTIME_COLUMNS,
    SET_COLUMNS,
    Trace,
    make_table,
)

#: ENUM_CUDA_MEMCPY_OPER names -> copy kinds of the metrics.
_COPY_KIND = {
    "CUDA_MEMCPY_KIND_HTOD": "htod", "CUDA_MEMCPY_KIND_DTOH": "dtoh", "CUDA_MEMCPY_KIND_DTOD": "dtod",
    "CUDA_MEMCPY_KIND_PTOP": "ptop", "CUDA_MEMCPY_KIND_HTOH": "htoh",
}
_NVTX_RANGE_TYPES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
_NVTX_DOMAIN_CREATE = 75
_NVTX_MARK = 34


def load_nsys(path: str | Path) -> Trace:
    """Read an nsys SQLite export (``nsys export --type sqlite``) into a Trace."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"cannot read report {path}: no such file")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TraceError(f"cannot open {path} as SQLite: {exc}") from exc
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "StringIds" not in tables:
            raise TraceError(f"{path} is not an Nsight Systems SQLite export (no StringIds table)")
        trace = _read(con, tables)
    except sqlite3.DatabaseError as exc:
        raise TraceError(f"{path} is not a readable SQLite file: {exc}") from exc
    finally:
        con.close()
    if trace.span() is None:
        raise TraceError(f"{path} holds no CUDA or NVTX events (was it captured with --trace=cuda,nvtx?)")
    return trace


def _query(con: sqlite3.Connection, tables: set[str], table: str, sql: str) -> pd.DataFrame:
    if table not in tables:
        return pd.DataFrame()
    return pd.read_sql_query(sql, con)


def _read(con: sqlite3.Connection, tables: set[str]) -> Trace:
    kernels = _query(con, tables, "CUPTI_ACTIVITY_KIND_KERNEL", """
        SELECT k.start, k.end, s.value AS name, k.deviceId AS device, k.streamId AS stream,
               k.correlationId AS correlation
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName""")
    copies = _query(con, tables, "CUPTI_ACTIVITY_KIND_MEMCPY", """
        SELECT m.start, m.end, m.copyKind AS kind, m.bytes, m.deviceId AS device, m.streamId AS stream,
               m.correlationId AS correlation
        FROM CUPTI_ACTIVITY_KIND_MEMCPY m""")
    if len(copies):
        names = dict(con.execute("SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER"))
        copies["kind"] = [_COPY_KIND.get(names.get(k, ""), "other") for k in copies["kind"]]
    sets = _query(con, tables, "CUPTI_ACTIVITY_KIND_MEMSET", """
        SELECT m.start, m.end, m.bytes, m.deviceId AS device, m.streamId AS stream, m.correlationId AS correlation
        FROM CUPTI_ACTIVITY_KIND_MEMSET m""")
    runtime = _query(con, tables, "CUPTI_ACTIVITY_KIND_RUNTIME", """
        SELECT r.start, r.end, s.value AS name, r.globalTid AS tid, r.correlationId AS correlation
        FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId""")
    ranges, metadata = _nvtx(con, tables)
    gpu = con.execute("SELECT name FROM TARGET_INFO_GPU ORDER BY id").fetchone() if "TARGET_INFO_GPU" in tables else None
    return Trace(
        make_table(KERNEL_COLUMNS, _columns(kernels)),
        make_table(COPY_COLUMNS, _columns(copies)),
        make_table(SET_COLUMNS, _columns(sets)),
        make_table(RUNTIME_COLUMNS, _columns(runtime)),
        make_table(RANGE_COLUMNS, _columns(ranges)),
        source="nsys",
        gpu_name=gpu[0] if gpu else None,
        metadata=metadata,
    )


def _nvtx(con: sqlite3.Connection, tables: set[str]) -> tuple[pd.DataFrame, dict]:
    """The ranges that may define steps, and the plugin's metadata marks."""
    if "NVTX_EVENTS" not in tables:
        return pd.DataFrame(), {}
    events = pd.read_sql_query(
        """SELECT n.start, n.end, n.eventType, COALESCE(n.text, s.value) AS name, n.globalTid AS tid,
                  COALESCE(n.domainId, 0) AS domain
           FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId""",
        con,
    )
    created = events[events["eventType"] == _NVTX_DOMAIN_CREATE]
    ours = created.loc[created["name"] == NVTX_DOMAIN, "domain"]
    domain = int(ours.iloc[0]) if len(ours) else 0
    mine = events[events["domain"] == domain]
    ranges = mine[mine["eventType"].isin(_NVTX_RANGE_TYPES) & mine["end"].notna()]
    marks = mine[(mine["eventType"] == _NVTX_MARK) & mine["name"].fillna("").str.startswith(METADATA_MARK)]
    metadata = {"marks": [[int(t), json.loads(text[len(METADATA_MARK):])] for t, text in zip(marks["start"], marks["name"])]}
    return ranges[["start", "end", "name", "tid"]].astype({"end": np.int64}), metadata


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
    return Trace(trace.kernels, trace.copies, trace.sets, trace.runtime, inside, trace.source, trace.gpu_name, metadata)


def _columns(frame: pd.DataFrame) -> dict:
    return {c: frame[c].to_numpy() for c in frame.columns}
