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
parser instead, so the result never depends on which path ran.  So does anything the
fast path cannot vouch for (a value of another type, a number out of range, a name
with a raw control character, a document that does not end with the events array and
the top-level object closed, as a truncated file does not): the generic parser is
the one judge of what is wrong with a file, so both paths give one result or one
error.  The fast path does not check the JSON syntax of events the metrics do not
read (a full parse costs 10 times the load): a broken byte there cannot change a
number, and the generic parser refuses such a file.

Timestamps are decimal microseconds with up to three fractional digits; they
are converted exactly, from their text, to integer nanoseconds.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ..errors import TraceError
from .model import (
    COPY_COLUMNS,
    INT64_MAX,
    INT64_MIN,
    KERNEL_COLUMNS,
    RANGE_COLUMNS,
    RUNTIME_COLUMNS,
    SET_COLUMNS,
    Trace,
    first_problem,
    make_table,
)
from .nsys_sqlite import SQLITE_MAGIC, sqlite_given_as_json

CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "user_annotation")
_CAT_ALT = "|".join(CATEGORIES).encode()
#: A JSON string: no raw control character, only JSON's escapes.
_STRING = rb'"([^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*)"'
_EVENT = re.compile(
    rb'"ph":\s*"X",\s*"cat":\s*"(' + _CAT_ALT + rb')",\s*"name":\s*' + _STRING
    + rb',\s*"pid":\s*-?\d+,\s*"tid":\s*(-?\d+),'
    rb'\s*"ts":\s*(-?\d+)(?:\.(\d+))?,\s*"dur":\s*(\d+)(?:\.(\d+))?\s*,'
    rb'\s*"args":\s*\{([^{}]*)\}'
)
#: Every event's category, needed or not, and the member's end.
_CAT = re.compile(rb'"cat":\s*"([^"]*)"\s*[,}]')
#: What a category looks like; any other (a broken byte, a quote moved) sends the file
#: to the generic parser.
_CLEAN_CAT = re.compile(rb'[A-Za-z0-9_]*')
_QUOTED = {cat.encode(): b'"' + cat.encode() + b'"' for cat in CATEGORIES}
#: One needed args key with an integer value; the tail runs on to the end of the
#: event's args (they are scanned joined by NUL), so an event yields at most one hit.
_ARG = {
    key: re.compile(rb'"' + key.encode() + rb'"\s*:\s*(-?\d+)(?=\s*(?:,|\x00|$))[^\x00]*')
    for key in ("correlation", "device", "stream", "bytes")
}
#: The key as a quoted token: more of these than integer hits is a value of another
#: type, a key given twice or a broken byte around it, for the generic parser to judge.
_ARG_KEY = {key: b'"' + key.encode() + b'"' for key in _ARG}
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
    """The file is not laid out the way the fast path expects, or holds what it cannot vouch for."""


class _Invalid(ValueError):
    """Valid JSON with content a trace cannot have; the message follows the file's name."""


def load_kineto(path: str | Path) -> Trace:
    """Read a Kineto Chrome-trace JSON (optionally gzipped) into a Trace."""
    path = Path(path)
    try:
        try:
            header, events = _read_fast(path)
        except _Fallback:
            header, events = _read_generic(path)
        trace = _build(events, header)
    except FileNotFoundError as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from exc
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(f"{path} is not a readable gzip file: {exc}") from exc
    except EOFError as exc:
        raise TraceError(f"{path} ends early (truncated?): {exc}") from exc
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from exc
    except _Invalid as exc:
        raise TraceError(f"{path}: {exc}") from None
    except RecursionError:
        raise TraceError(f"{path} is not a Chrome-trace JSON file: its values nest too deeply to read") from None
    except ValueError as exc:
        raise TraceError(f"{path} is not a Chrome-trace JSON file: {exc}") from None
    problem = first_problem(trace)
    if problem:
        raise TraceError(f"{path}: {problem}")
    if trace.span() is None:
        raise TraceError(f"{path} holds no kernel, memcpy, runtime or annotation events (is it a torch.profiler trace?)")
    return trace


def _open(path: Path):
    """The file's bytes, gunzipped when it is gzipped; an SQLite file is refused by name."""
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    fh = gzip.open(path, "rb") if gzipped else open(path, "rb")
    try:
        head = fh.read(len(SQLITE_MAGIC))
        fh.seek(0)
    except BaseException:
        fh.close()
        raise
    if head == SQLITE_MAGIC:
        fh.close()
        raise _Invalid(sqlite_given_as_json(gzipped))
    return fh


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
        if code is None:  # bytes that are not UTF-8 raise ValueError: the fast path gives up
            code = self.codes[raw] = self.names.setdefault(_decode_name(raw), len(self.names))
        return code

    def code_all(self, raws: np.ndarray) -> np.ndarray:
        """Codes of many raw names: hashed in C, decoded once per distinct name."""
        index, distinct = pd.factorize(raws)
        return np.array([self.code(raw) for raw in distinct], dtype=np.int64)[index]


def _read_fast(path: Path) -> tuple[dict, _Columns]:
    try:
        return _read_chunks(path)
    except (OverflowError, ValueError) as exc:  # a number out of range, bytes that are not UTF-8
        if isinstance(exc, _Invalid):
            raise
        raise _Fallback from None


def _read_chunks(path: Path) -> tuple[dict, _Columns]:
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
                header.update(_trailer(data))
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
    except (ValueError, RecursionError):
        raise _Fallback from None


def _trailer(tail: bytes) -> dict:
    """The top-level members after ``traceEvents``, read from the last event on: that
    event, the events array and the top-level object must all close, which a truncated
    file's end does not."""
    at = tail.rfind(b'"ph"')
    if at < 0:
        raise _Fallback
    text = "{" + tail[at:].decode("utf-8")
    try:
        event, end = _DECODER.raw_decode(text)
        rest = text[end:].lstrip()
        if not isinstance(event, dict) or not rest.startswith("]"):
            raise _Fallback
        members = json.loads('{"_": 0' + rest[1:])  # "}" or ", more members }"
    except (ValueError, RecursionError):
        raise _Fallback from None
    del members["_"]
    if "traceEvents" in members:  # given twice: JSON keeps the last, the fast path read the first
        raise _Fallback
    return members


_DECODER = json.JSONDecoder()


def _scan(data: bytes, end: int, columns: _Columns) -> None:
    """Add the needed events of ``data[:end]`` to the columns, or give up on the fast path.

    The regular expressions yield Python bytes per field; everything after them
    works on whole columns (numpy, pandas), never event by event.
    """
    matches = _EVENT.findall(data, 0, end)
    expected = Counter(_CAT.findall(data, 0, end))
    if not all(_CLEAN_CAT.fullmatch(cat) for cat in expected):  # a broken byte must not hide a needed event
        raise _Fallback
    # A broken byte around a needed event's category hides the event from both expressions:
    # in the key, the category's quoted name is left; in the value, the key is left.
    if data.count(b'"cat"', 0, end) != sum(expected.values()) or any(
        data.count(_QUOTED[cat], 0, end) != expected[cat] for cat in _QUOTED
    ):
        raise _Fallback
    if not matches:
        if any(expected[cat] for cat in _QUOTED):
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
    """One integer per event for each of the keys.  An event without one (Kineto writes
    them all) or with a broken byte near one goes to the generic parser, which reads a
    missing key as -1 and refuses a broken file."""
    if not keys:
        return {}
    blob = b"\x00".join(args)
    if blob.count(b"\x00") != len(args) - 1:  # a raw NUL: not valid JSON text
        raise _Fallback
    parsed = {}
    for key in keys:
        found = _ARG[key].findall(blob)
        if not len(found) == len(args) == blob.count(_ARG_KEY[key]):  # one hit per event, in event order
            raise _Fallback
        parsed[key] = _ints(found)
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
    """Any valid Chrome-trace JSON; floats are read as Decimal so the ns conversion stays exact.

    Every value the metrics use is checked here, and an event that does not hold
    it is an error naming the event (``_Invalid``).
    """
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
        if isinstance(ev, dict) and ev.get("ph") == "X" and ev.get("cat") in CATEGORIES:
            rows.setdefault(ev["cat"], []).append(ev)
    for cat, evs in rows.items():
        names, tids, starts, durs = [], [], [], []
        args: dict[str, list[int]] = {key: [] for key in _CAT_ARGS[cat]}
        for ev in evs:
            name = ev.get("name")
            if not isinstance(name, str):
                raise _Invalid(f"a {cat} event has the name {_shown(name)}, not a string")
            what = f"{cat} event {name[:80]!r}"
            starts.append(_ns(ev, "ts", what))
            durs.append(_ns(ev, "dur", what))
            tids.append(_integer(ev.get("tid", _MISSING), f"{what}: tid"))
            given = ev.get("args", {})
            if not isinstance(given, dict):
                raise _Invalid(f"{what}: args is {_shown(given)}, not an object")
            for key, values in args.items():
                values.append(_integer(given[key], f"{what}: args.{key}") if key in given else -1)
            names.append(columns.code(json.dumps(name)[1:-1].encode()))
        columns.add(cat, names, tids, np.array(starts, dtype=np.int64), np.array(durs, dtype=np.int64),
                    {key: np.array(values, dtype=np.int64) for key, values in args.items()})
    return header, columns


def _ns(ev: dict, key: str, what: str) -> int:
    """An event's time in exact integer nanoseconds, from its decimal microseconds."""
    value = ev.get(key, _MISSING)
    finite = value.is_finite() if isinstance(value, Decimal) else isinstance(value, int) and not isinstance(value, bool)
    if not finite:
        raise _Invalid(f"{what}: {key} is {_shown(value)}, not a number of microseconds")
    whole, _, frac = str(value).partition(".")
    if "e" in whole.lower() or "e" in frac.lower():
        raise _Invalid(f"{what}: {key} {value} is in exponent notation")
    ns = int(whole + frac.ljust(3, "0")[:3])
    if not INT64_MIN <= ns <= INT64_MAX:
        raise _Invalid(f"{what}: {key} {value} us is out of range (beyond 2^63 ns)")
    return ns


_MISSING = object()


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"{what} is {_shown(value)}, not an integer")
    if not INT64_MIN <= value <= INT64_MAX:
        raise _Invalid(f"{what} {value} is out of range (beyond 2^63)")
    return value


def _shown(value: Any) -> str:
    """A value as an error message quotes it: JSON's spelling, cut short."""
    text = "missing" if value is _MISSING else json.dumps(_floats(value), default=str)
    return text if len(text) <= 60 else text[:57] + "..."


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

    devices = header.get("deviceProperties", [])
    if not isinstance(devices, list) or not all(
        isinstance(d, dict) and isinstance(d.get("name", ""), str) and type(d.get("id", 0)) is int for d in devices
    ):
        raise _Invalid(f"deviceProperties is {_shown(devices)}, not a list of objects with a string "
                       f"'name' and an integer 'id'")
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
    # start + dur must not wrap: it is checked before it is added (numpy wraps silently)
    with np.errstate(over="ignore"):
        wraps = ((dur > 0) & (start > INT64_MAX - dur)) | ((dur < 0) & (start < INT64_MIN - dur))
    if wraps.any():
        raise _Invalid("an event's ts + dur lies beyond 2^63 ns")
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
    text = raw.decode("utf-8")
    return json.loads(f'"{text}"') if "\\" in text else text


def _copy_kind(name: str) -> str:
    parts = name.split()
    return _COPY_KIND.get(parts[1], "other") if len(parts) > 1 and parts[0] == "Memcpy" else "other"
