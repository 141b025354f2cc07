"""Load a torch.profiler (Kineto) Chrome-trace JSON into the normalized trace.

Kineto traces reach hundreds of megabytes, and a generic JSON parser turns
each event into Python dicts (gigabytes for 1.5 million events).  The fast path
reads the file in chunks and pulls only the fields the metrics need out of the
events the metrics use, with regular expressions that follow Kineto's own
writer (key order ``ph, cat, name, pid, tid, ts, dur, args``; any whitespace).
Every chunk is checked: the number of events of each needed category must equal
the number the fast path matched.  Past the regular expressions the work is on
whole columns (numpy, pandas), not event by event, so a 400 MB trace of 1.5
million events loads in seconds in a fraction of its size in memory
(docs/benchmarks.md).  A file laid out any other way (re-saved by
another tool, minified, reordered) fails the check and is read with the generic
parser instead, so the result never depends on which path ran.

Timestamps are decimal microseconds with up to three fractional digits; they
are converted exactly, from their text, to integer nanoseconds.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

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

CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "user_annotation")
_CAT_ALT = "|".join(CATEGORIES).encode()
_STRING = rb'"([^"\\]*(?:\\.[^"\\]*)*)"'
_EVENT = re.compile(
    rb'"ph":\s*"X",\s*"cat":\s*"(' + _CAT_ALT + rb')",\s*"name":\s*' + _STRING
    + rb',\s*"pid":\s*-?\d+,\s*"tid":\s*(-?\d+),'
    rb'\s*"ts":\s*(-?\d+)(?:\.(\d+))?,\s*"dur":\s*(\d+)(?:\.(\d+))?\s*,'
    rb'\s*"args":\s*\{([^{}]*)\}'
)
_CAT = re.compile(rb'"cat":\s*"(' + _CAT_ALT + rb')"')
#: One needed args key; the tail runs on to the end of the event's args (they are
#: scanned joined by NUL), so an event yields at most one hit: its first.
_ARG = {
    key: re.compile(rb'"' + key.encode() + rb'":\s*(-?\d+)[^\x00]*')
    for key in ("correlation", "device", "stream", "bytes")
}
#: The args keys each category's table keeps; the others are not looked for.
_CAT_ARGS = {
    cat: tuple(key for key in _ARG if key in columns)
    for cat, columns in zip(
        CATEGORIES, (KERNEL_COLUMNS, COPY_COLUMNS, SET_COLUMNS, RUNTIME_COLUMNS, RUNTIME_COLUMNS, RANGE_COLUMNS)
    )
}
#: Chunks this small stay in the CPU caches and in memory the allocator reuses:
#: against 64 MiB chunks they cut the read of a 400 MB trace by 30 to 40% and
#: halve the peak memory.
_CHUNK = 8 << 20
_EVENTS_KEY = b'"traceEvents"'

#: Kineto's memcpy event names start "Memcpy HtoD (...)"; the word after
#: "Memcpy" is the direction.
_COPY_KIND = {"HtoD": "htod", "DtoH": "dtoh", "DtoD": "dtod", "PtoP": "ptop", "HtoH": "htoh"}


class _Fallback(Exception):
    """The file is not laid out the way the fast path expects."""


def load_kineto(path: str | Path) -> Trace:
    """Read a Kineto Chrome-trace JSON (optionally gzipped) into a Trace."""
    path = Path(path)
    try:
        try:
            header, events = _read_fast(path)
        except _Fallback:
            header, events = _read_generic(path)
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from exc
    except (ValueError, EOFError) as exc:
        raise TraceError(f"{path} is not a Chrome-trace JSON file: {exc}") from exc
    trace = _build(events, header)
    if trace.span() is None:
        raise TraceError(f"{path} holds no kernel, memcpy, runtime or annotation events (is it a torch.profiler trace?)")
    return trace


def _open(path: Path):
    with open(path, "rb") as probe:
        magic = probe.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


class _Columns:
    """Per-category column lists, filled chunk by chunk."""

    def __init__(self) -> None:
        self.codes: dict[bytes, int] = {}
        self.names: dict[str, int] = {}
        self.cols: dict[str, dict[str, list]] = {
            cat: {"name": [], "tid": [], "start": [], "dur": [], "args": {}} for cat in CATEGORIES
        }

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
        if code is None:
            code = self.codes[raw] = self.names.setdefault(_decode_name(raw), len(self.names))
        return code

    def code_all(self, raws: np.ndarray) -> np.ndarray:
        """Codes of many raw names: hashed in C, decoded once per distinct name."""
        index, distinct = pd.factorize(raws)
        return np.array([self.code(raw) for raw in distinct], dtype=np.int64)[index]


def _read_fast(path: Path) -> tuple[dict, _Columns]:
    columns = _Columns()
    header: dict | None = None
    carry = b""
    with _open(path) as fh:
        while True:
            block = fh.read(_CHUNK)
            last = not block
            data = carry + block
            del block  # the chunk lives on in data; holding both would double the peak
            if header is None:
                at = data.find(_EVENTS_KEY)
                if at < 0:
                    if not last:
                        carry = data
                        continue
                    raise _Fallback
                header = _parse_header(data[:at])
                data = data[at:]
            if last:
                end, carry = len(data), b""
            else:
                # Scan up to the last event's start, in place: slicing would copy the chunk.
                end = data.rfind(b'"ph"')
                if end <= 0:
                    carry = data
                    continue
                carry = data[end:]
            _scan(data, end, columns)
            if last:
                break
    return header, columns


def _parse_header(text: bytes) -> dict:
    """The top-level members written before ``traceEvents`` (device properties, metadata)."""
    body = text.strip()
    if not body.startswith(b"{"):
        raise _Fallback
    body = body.rstrip().rstrip(b",")
    try:
        return json.loads(body + b"}")
    except ValueError:
        raise _Fallback from None


def _scan(data: bytes, end: int, columns: _Columns) -> None:
    """Add the needed events of ``data[:end]`` to the columns, or give up on the fast path.

    The regular expressions yield Python bytes per field; everything after them
    works on whole columns (numpy, pandas), never event by event.
    """
    matches = _EVENT.findall(data, 0, end)
    expected = Counter(_CAT.findall(data, 0, end))
    if not matches:
        if expected:
            raise _Fallback
        return
    table = np.array(matches, dtype=object)
    del matches  # its tuples are the largest transient; the table holds the same bytes
    cats = table[:, 0]
    for cat in CATEGORIES:
        rows = table[cats == cat.encode()]
        if len(rows) != expected[cat.encode()]:
            raise _Fallback
        if len(rows):
            _, names, tids, ts_i, ts_f, dur_i, dur_f, args = rows.T
            columns.add(
                cat, columns.code_all(names), _ints(tids),
                _to_ns(ts_i, ts_f), _to_ns(dur_i, dur_f), _find_args(args, _CAT_ARGS[cat]),
            )


def _find_args(args: np.ndarray, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """One integer per event for each of the keys, -1 where the event lacks it."""
    if not keys:
        return {}
    blob = b"\x00".join(args)
    if blob.count(b"\x00") != len(args) - 1:  # a raw NUL: not valid JSON text
        raise _Fallback
    parsed = {}
    for key in keys:
        rx = _ARG[key]
        found = rx.findall(blob)
        if len(found) == len(args):  # one hit per event, in event order
            parsed[key] = _ints(found)
            continue
        out = parsed[key] = np.full(len(args), -1, dtype=np.int64)
        if found:  # some events lack the key: place each hit by its offset
            starts = np.cumsum([0] + [len(a) + 1 for a in args[:-1]])
            at = [m.start() for m in rx.finditer(blob)]
            out[np.searchsorted(starts, at, side="right") - 1] = _ints(found)
    return parsed


def _ints(texts) -> np.ndarray:
    """Integers from their digits (bytes); int() parses faster than numpy's string casts."""
    return np.fromiter(map(int, texts), np.int64, len(texts))


def _to_ns(int_parts: Iterable, frac_parts: Iterable) -> np.ndarray:
    """Exact integer nanoseconds from the integer and fractional digits (text) of microseconds.

    The fraction is padded or cut to three digits ("5" is 500 ns; digits below a
    nanosecond are dropped) and appended to the integer part, so the text read
    as an integer is the nanoseconds, sign included ("-0" + "500").
    """
    frac = np.char.ljust(np.asarray(frac_parts, dtype=np.bytes_), 3, b"0").astype("S3")
    return np.char.add(np.asarray(int_parts, dtype=np.bytes_), frac).astype(np.int64)


def _read_generic(path: Path) -> tuple[dict, _Columns]:
    """Any valid Chrome-trace JSON; floats are read as Decimal so the ns conversion stays exact."""
    with _open(path) as fh:
        doc = json.load(fh, parse_float=Decimal)
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError("no traceEvents array")
    header = _floats({k: v for k, v in doc.items() if k != "traceEvents"})
    columns = _Columns()
    rows: dict[str, list[dict]] = {}
    for ev in doc["traceEvents"]:
        if isinstance(ev, dict) and ev.get("ph") == "X" and ev.get("cat") in CATEGORIES and "dur" in ev:
            rows.setdefault(ev["cat"], []).append(ev)
    for cat, evs in rows.items():
        ts_i, ts_f = zip(*(_split(ev["ts"]) for ev in evs))
        dur_i, dur_f = zip(*(_split(ev["dur"]) for ev in evs))
        args = {
            key: np.array([int((ev.get("args") or {}).get(key, -1)) for ev in evs], dtype=np.int64)
            for key in _ARG
        }
        codes = [columns.code(json.dumps(str(ev.get("name", "")))[1:-1].encode()) for ev in evs]
        tids = [ev["tid"] if isinstance(ev.get("tid"), int) else -1 for ev in evs]
        columns.add(cat, codes, tids, _to_ns(ts_i, ts_f), _to_ns(dur_i, dur_f), args)
    return header, columns


def _split(number: str) -> tuple[str, str]:
    whole, _, frac = str(number).partition(".")
    if "e" in frac.lower() or "e" in whole.lower():
        raise ValueError(f"timestamp {number!r} in exponent notation")
    return whole, frac


def _floats(value: Any) -> Any:
    """The header as the fast path's json.loads reads it: Decimal back to float."""
    if isinstance(value, dict):
        return {k: _floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats(v) for v in value]
    return float(value) if isinstance(value, Decimal) else value


def _build(columns: _Columns, header: dict) -> Trace:
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

    devices = header.get("deviceProperties") or []
    gpu_name = None
    if len(kernels) and devices:
        used = int(kernels["device"].mode().iloc[0])
        gpu_name = next((d.get("name") for d in devices if d.get("id") == used), devices[0].get("name"))
    elif devices:
        gpu_name = devices[0].get("name")
    metadata = header.get("gpuprof") if isinstance(header.get("gpuprof"), dict) else {}
    return Trace(kernels, copies, sets, runtime, ranges, source="kineto", gpu_name=gpu_name, metadata=metadata)


def _concat(col: dict, names: list[str]) -> dict[str, Any]:
    if not col["start"]:
        return {}
    start = np.concatenate(col["start"])
    dur = np.concatenate(col["dur"])
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


def _decode_name(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    return json.loads(f'"{text}"') if "\\" in text else text


def _copy_kind(name: str) -> str:
    parts = name.split()
    return _COPY_KIND.get(parts[1], "other") if len(parts) > 1 and parts[0] == "Memcpy" else "other"
