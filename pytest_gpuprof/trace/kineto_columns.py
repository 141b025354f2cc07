"""What the metrics keep of a Kineto trace's events, whichever path reads them
(``kineto``: the fast path; ``kineto_generic``: the generic parser), and the Trace built
from it.

Both paths open the file alike (``open_trace``), fill the same columns (``Columns``: the
events of the categories the metrics use, as integers), read the collectives' CPU ops alike
(``collective_calls``) and refuse what a trace cannot hold with one error (``Invalid``), so
that they give one result or one error.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .formats import JSON_HEAD, check_json_head, is_gzipped, is_sqlite, open_content
from .model import (
    COLLECTIVE_COLUMNS,
    COPY_COLUMNS,
    DTYPE_BYTES,
    INT64_MAX,
    INT64_MIN,
    KERNEL_COLUMNS,
    RANGE_COLUMNS,
    RUNTIME_COLUMNS,
    SET_COLUMNS,
    Trace,
    collective_name,
    make_table,
)
from .nsys_sqlite import sqlite_given_as_json

CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "user_annotation")
#: The integer args keys the metrics read.
ARG_KEYS = ("correlation", "device", "stream", "bytes")
#: The args keys each category's table keeps; the others are not looked for.
CAT_ARGS = {
    cat: tuple(key for key in ARG_KEYS if key in columns)
    for cat, columns in zip(
        CATEGORIES, (KERNEL_COLUMNS, COPY_COLUMNS, SET_COLUMNS, RUNTIME_COLUMNS, RUNTIME_COLUMNS, RANGE_COLUMNS)
    )
}
#: Chunks this small stay in the CPU caches and in memory the allocator reuses:
#: against 64 MiB chunks they cut the read of a 400 MB trace by 30 to 40% and
#: halve the peak memory.
CHUNK = 8 << 20

#: The CPU op torch records for each collective call, with its name, sizes and dtype in args.
COMMS_NAME = "record_param_comms"

#: Kineto's memcpy event names start "Memcpy HtoD (...)"; the word after
#: "Memcpy" is the direction.
_COPY_KIND = {"HtoD": "htod", "DtoH": "dtoh", "DtoD": "dtod", "PtoP": "ptop", "HtoH": "htoh"}


class Invalid(ValueError):
    """Valid JSON with content a trace cannot have; the message follows the file's name."""


def open_trace(path: Path):
    """The file's bytes, gunzipped when it is gzipped; an SQLite file is refused by name, and
    one whose first bytes cannot begin a JSON document by the error ``json`` gives for them
    (``check_json_head``), before either parser reads on."""
    fh = open_content(path)
    try:
        head = fh.read(JSON_HEAD)
        if is_sqlite(head):
            raise Invalid(sqlite_given_as_json(is_gzipped(path)))
        check_json_head(head)
        fh.seek(0)
    except BaseException:
        fh.close()
        raise
    return fh


class Columns:
    """Per-category column lists, filled chunk by chunk."""

    def __init__(self) -> None:
        self.codes: dict[bytes, int] = {}
        self.names: dict[str, int] = {}
        self.cols: dict[str, dict[str, Any]] = {  # lists of chunks; under "args", a dict of them
            cat: {"name": [], "tid": [], "start": [], "dur": [], "args": {}} for cat in CATEGORIES
        }
        self.collectives: list[tuple[int, str, int]] = []  # (start, name, bytes) of record_param_comms
        self.threads: dict[int, str] = {}  # thread id -> its name (the last Kineto gives it)

    def add(self, cat: str, names, tids, starts, durs, args: dict[str, np.ndarray]) -> None:
        col = self.cols[cat]
        col["name"].append(np.asarray(names, dtype=np.int64))
        col["tid"].append(np.asarray(tids, dtype=np.int64))
        col["start"].append(starts)
        col["dur"].append(durs)
        for key, values in args.items():
            col["args"].setdefault(key, []).append(values)

    def code(self, raw: bytes) -> int:
        """Category code of a raw (still JSON-escaped) name; equal texts share a code."""
        code = self.codes.get(raw)
        if code is None:  # bytes that are not UTF-8 raise ValueError: the fast path gives up
            code = self.codes[raw] = self.names.setdefault(decode_name(raw), len(self.names))
        return code

    def code_all(self, raws: np.ndarray) -> np.ndarray:
        """Codes of many raw names: hashed in C, decoded once per distinct name."""
        index, distinct = pd.factorize(raws)
        return np.array([self.code(raw) for raw in distinct], dtype=np.int64)[index]


def is_needed(event: Any) -> bool:
    """Whether the metrics read the event: a complete event ("X") of a category they use."""
    return isinstance(event, dict) and event.get("ph") == "X" and event.get("cat") in CATEGORIES


def collective_calls(events) -> list[tuple[int, str, int]]:
    """(start, collective, input bytes or -1) of each ``record_param_comms`` CPU op: its
    ``Collective name``, its ``In msg nelems`` times the size of its ``dtype``."""
    out = []
    for ev in events:
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        raw = args.get("Collective name")
        if ev.get("ph") != "X" or not isinstance(raw, str):
            continue
        nelems, dtype = args.get("In msg nelems"), args.get("dtype")
        size = DTYPE_BYTES.get(dtype) if isinstance(dtype, str) else None  # a list or an object: unhashable
        total = (nelems * size if isinstance(nelems, int) and not isinstance(nelems, bool) and nelems >= 0
                 and size is not None else -1)
        out.append((event_ns(ev, "ts", f"record_param_comms {raw[:40]!r}"), collective_name(raw) or raw.lower(),
                    total if total <= INT64_MAX else -1))
    return out


def event_ns(ev: dict, key: str, what: str) -> int:
    """An event's time in exact integer nanoseconds, from its decimal microseconds."""
    value = ev.get(key, MISSING)
    finite = value.is_finite() if isinstance(value, Decimal) else isinstance(value, int) and not isinstance(value, bool)
    if not finite:
        raise Invalid(f"{what}: {key} is {shown(value)}, not a number of microseconds")
    whole, _, frac = str(value).partition(".")
    if "e" in whole.lower() or "e" in frac.lower():
        raise Invalid(f"{what}: {key} {value} is in exponent notation")
    ns = int(whole + frac.ljust(3, "0")[:3])
    if not INT64_MIN <= ns <= INT64_MAX:
        raise Invalid(f"{what}: {key} {value} us is out of range (beyond 2^63 ns)")
    return ns


MISSING = object()


def integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"{what} is {shown(value)}, not an integer")
    if not INT64_MIN <= value <= INT64_MAX:
        raise Invalid(f"{what} {value} is out of range (beyond 2^63)")
    return value


def shown(value: Any) -> str:
    """A value as an error message quotes it: JSON's spelling, cut short."""
    text = "missing" if value is MISSING else json.dumps(floats(value), default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def floats(value: Any) -> Any:
    """The header as the fast path's json.loads reads it: Decimal back to float."""
    if isinstance(value, dict):
        return {k: floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [floats(v) for v in value]
    return float(value) if isinstance(value, Decimal) else value


def build_trace(columns: Columns, header: dict, file: str) -> Trace:
    """The Trace of the columns either path filled, its GPU named from the header's devices."""
    names = list(columns.names)
    cat = {c: _concat(columns.cols[c], names) for c in CATEGORIES}

    kernels = make_table(KERNEL_COLUMNS, cat["kernel"])
    copy = cat["gpu_memcpy"]
    copy["kind"] = pd.Categorical([_copy_kind(n) for n in copy.get("name", [])])
    copies = make_table(COPY_COLUMNS, copy)
    sets = make_table(SET_COLUMNS, cat["gpu_memset"])
    calls = [make_table(RUNTIME_COLUMNS, cat[c]) for c in ("cuda_runtime", "cuda_driver")]
    # empty tables left out: pandas 2.1-2.3 warn that concatenating them will change dtypes
    runtime = pd.concat([t for t in calls if len(t)] or calls[:1], ignore_index=True)
    runtime["name"] = runtime["name"].astype("category")
    ranges = make_table(RANGE_COLUMNS, cat["user_annotation"])
    found = sorted(columns.collectives)
    collectives = make_table(COLLECTIVE_COLUMNS, {"start": [c[0] for c in found], "name": [c[1] for c in found],
                                                  "bytes": [c[2] for c in found]})

    devices = header.get("deviceProperties", [])
    if not isinstance(devices, list) or not all(
        isinstance(d, dict) and isinstance(d.get("name", ""), str) and type(d.get("id", 0)) is int for d in devices
    ):
        raise Invalid(f"deviceProperties is {shown(devices)}, not a list of objects with a string "
                      f"'name' and an integer 'id'")
    gpu_name = None
    if len(kernels) and devices:
        used = int(kernels["device"].mode().iloc[0])
        gpu_name = next((d.get("name") for d in devices if d.get("id") == used), devices[0].get("name"))
    elif devices:
        gpu_name = devices[0].get("name")
    stored = header.get("gpuprof")
    metadata: dict[str, Any] = stored if isinstance(stored, dict) else {}
    distributed = header.get("distributedInfo")
    if isinstance(distributed, dict) and type(distributed.get("rank")) is int:
        # the rank of a process in a process group (docs/metrics.md, "Several ranks")
        metadata = {**metadata, "distributed": {"rank": distributed["rank"],
                                                "world_size": distributed.get("world_size")}}
    return Trace(kernels, copies, sets, runtime, ranges, source="kineto", gpu_name=gpu_name, metadata=metadata,
                 collectives=collectives, file=file, threads=columns.threads)


def _concat(col: dict, names: list[str]) -> dict[str, Any]:
    if not col["start"]:
        return {}
    start = np.concatenate(col["start"])
    dur = np.concatenate(col["dur"])
    # start + dur must not wrap: it is checked before it is added (numpy wraps silently)
    with np.errstate(over="ignore"):
        wraps = ((dur > 0) & (start > INT64_MAX - dur)) | ((dur < 0) & (start < INT64_MIN - dur))
    if wraps.any():
        raise Invalid("an event's ts + dur lies beyond 2^63 ns")
    codes = np.concatenate(col["name"])
    out: dict[str, Any] = {
        "start": start,
        "end": start + dur,
        "tid": np.concatenate(col["tid"]),
        "name": pd.Categorical.from_codes(codes, categories=pd.Index(names, dtype=object), validate=False)
        .remove_unused_categories(),
    }
    for key, parts in col["args"].items():
        out[key] = np.concatenate(parts)
    return out


def decode_name(raw: bytes) -> str:
    text = raw.decode("utf-8")
    return json.loads(f'"{text}"') if "\\" in text else text


def _copy_kind(name: str) -> str:
    parts = name.split()
    return _COPY_KIND.get(parts[1], "other") if len(parts) > 1 and parts[0] == "Memcpy" else "other"
