"""Load a torch.profiler (Kineto) Chrome-trace JSON into the normalized trace.

Kineto traces reach hundreds of megabytes, and a generic JSON parser turns
each event into Python dicts (gigabytes for 1.5 million events).  The fast path
reads the file in chunks and pulls only the fields the metrics need out of the
events the metrics use, with regular expressions that follow Kineto's own
writer (key order ``ph, cat, name, pid, tid, ts, dur, args``; any whitespace, but a
newline after the ``},`` that ends an event).
Past the regular expressions the work is on whole columns (numpy, pandas), not
event by event, so a 400 MB trace of 1.5 million events loads in seconds in a
fraction of its size in memory (docs/benchmarks.md).

A trace that is not valid JSON is refused whichever path reads it, so the fast path
checks every event, read or not, without parsing 1.5 million of them: it splits the
events where Kineto ends one (``},`` and a newline, which no JSON string holds), maps
every digit to ``1`` so that events differing only in their numbers share one text, and
has ``json`` read each distinct text once (a few hundred in a real trace).  The one
rule of JSON that the mapping would hide, no leading zero, is checked first.  The same
reading says which events the metrics use: each must be in the layout the expression
reads, and no other may hold a match, so the expression yields exactly those events.
A file laid out any other way (re-saved by another tool, minified, reordered) or
holding what the fast path cannot vouch for (a value of another type, a number out
of range, a document that does not end with the events array and the top-level
object closed, as a truncated file does not) is read with the generic parser
instead: it is the one judge of what is wrong with a file, so both paths give one
result or one error.  It too reads the file as it streams, one event at a time, and
keeps only what the metrics read: no file costs memory in proportion to its size.  A file
whose first bytes cannot begin a JSON document (zeros, a binary) is refused from them,
with the error ``json`` gives for them, before either path reads on: in a moment and in
little memory, whatever the file's size.

Timestamps are decimal microseconds with up to three fractional digits; they
are converted exactly, from their text, to integer nanoseconds.

This module holds the loader and the fast path; ``kineto_generic`` the generic parser;
``kineto_columns`` what both keep of the events and the Trace built from it.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path

import numpy as np

from ..errors import TraceError
from .kineto_columns import (
    ARG_KEYS,
    CAT_ARGS,
    CATEGORIES,
    CHUNK,
    COMMS_NAME,
    Columns,
    Invalid,
    build_trace,
    collective_calls,
    decode_name,
    is_needed,
    open_trace,
)
from .kineto_generic import read_generic
from .model import Trace, first_problem

_CAT_ALT = "|".join(CATEGORIES).encode()
#: A JSON string: no raw control character, only JSON's escapes.
_STRING = rb'"([^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*)"'
_EVENT = re.compile(
    rb'"ph":\s*"X",\s*"cat":\s*"(' + _CAT_ALT + rb')",\s*"name":\s*' + _STRING
    + rb',\s*"pid":\s*-?\d+,\s*"tid":\s*(-?\d+),'
    rb'\s*"ts":\s*(-?\d+)(?:\.(\d+))?,\s*"dur":\s*(\d+)(?:\.(\d+))?\s*,'
    rb'\s*"args":\s*\{([^{}]*)\}'
)
#: A host thread's name (Kineto's metadata event): its tid and name.
_THREAD_NAME = re.compile(
    rb'"name":\s*"thread_name",\s*"ph":\s*"M",\s*"ts":\s*-?[0-9.eE+-]+,\s*"pid":\s*-?\d+,\s*"tid":\s*(-?\d+),'
    rb'\s*"args":\s*\{\s*"name":\s*' + _STRING + rb'\s*\}'
)
#: A needed event that is nothing but what ``_EVENT`` reads: no key before, after or twice.
_WHOLE = re.compile(rb"\s*\{\s*" + _EVENT.pattern + rb"\s*\}\s*")
#: Where Kineto ends an event and the next begins; a JSON string holds no raw newline.
_SEP = b"},\n"
#: Every digit as 1: the events of a trace then come in a few hundred distinct texts.
_DIGITS = bytes.maketrans(b"0123456789", b"1111111111")
#: A zero that would start a number of more digits (``01``, ``-01``), which JSON does not
#: have and the mapped digits no longer show: a number follows whitespace, ``:``, ``,`` or
#: ``[`` (or the start of the scanned text).  Such a zero is written ``x``, which a string
#: may hold (``"12:05"``) and a number may not.
_LEADING_ZERO = re.compile(rb"0(?:(?<![^\s:,\[]0)|(?<=-0)(?<![^\s:,\[]-0))(?=[0-9])")
#: One needed args key with an integer value; the tail runs on to the end of the
#: event's args (they are scanned joined by NUL), so an event yields at most one hit.
_ARG = {
    key: re.compile(rb'"' + key.encode() + rb'"\s*:\s*(-?\d+)(?=\s*(?:,|\x00|$))[^\x00]*')
    for key in ARG_KEYS
}
#: The key as a quoted token: more of these than integer hits is a value of another
#: type or a key given twice, for the generic parser to judge.
_ARG_KEY = {key: b'"' + key.encode() + b'"' for key in _ARG}
_EVENTS_START = re.compile(rb'"traceEvents"[ \t\n\r]*:[ \t\n\r]*\[')
#: Distinct event texts remembered across chunks (a real trace has a few hundred).
_VOUCHED = 1 << 16


class _Fallback(Exception):
    """The file is not laid out the way the fast path expects, or holds what it cannot vouch for."""


def load_kineto(path: str | Path) -> Trace:
    """Read a Kineto Chrome-trace JSON (optionally gzipped) into a Trace."""
    path = Path(path)
    try:
        try:
            header, events = _read_fast(path)
        except _Fallback:
            header, events = read_generic(path)
        trace = build_trace(events, header, str(path))
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(f"{path} is not a readable gzip file: {exc}") from exc
    except EOFError as exc:
        raise TraceError(f"{path} ends early (truncated?): {exc}") from exc
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from exc
    except Invalid as exc:
        raise TraceError(f"{path}: {exc}") from None
    except RecursionError:
        raise TraceError(f"{path} is not a Chrome-trace JSON file: its values nest too deeply to read") from None
    except ValueError as exc:
        raise TraceError(f"{path} is not a Chrome-trace JSON file: {exc}") from None
    problem = first_problem(trace)
    if problem:
        raise TraceError(f"{path}: {problem}")
    if trace.span() is None:
        raise TraceError(f"{path} holds no kernel, memcpy, runtime or annotation events "
                         "(is it a torch.profiler trace?)")
    return trace


def _read_fast(path: Path) -> tuple[dict, Columns]:
    try:
        return _read_chunks(path)
    except (OverflowError, ValueError) as exc:  # a number out of range, bytes that are not UTF-8
        if isinstance(exc, Invalid):
            raise
        raise _Fallback from None


def _read_chunks(path: Path) -> tuple[dict, Columns]:
    columns = Columns()
    header: dict | None = None
    vouched: set[bytes] = set()
    carry = b""
    with open_trace(path) as fh:
        while True:
            block = fh.read(CHUNK)
            last = not block
            data = carry + block
            del block  # the chunk lives on in data; holding both would double the peak
            if header is None:
                start = _EVENTS_START.search(data)
                if not start:
                    if not last and len(data) <= CHUNK:  # the key may be cut at the first chunk's end
                        carry = data
                        continue
                    raise _Fallback  # Kineto's header is a few KB; no text growing chunk by chunk is searched again
                header = _parse_header(data[:start.start()])
                data = data[start.end():]
            # Scan up to the last event's end, in place: slicing would copy the chunk.
            cut = data.rfind(_SEP)
            if cut < 0 and not last:
                if len(data) >= CHUNK:  # no event ends within a whole chunk: not Kineto's layout
                    raise _Fallback
                carry = data
                continue
            end = cut + len(_SEP) if cut >= 0 else 0
            _scan(data, end, columns, vouched)
            _name_threads(columns.threads, data, end)
            if "distributedInfo" in header:  # only a process of a process group calls collectives
                columns.collectives += collective_calls(_comms_events(data, end))
            if last:
                event, members = _trailer(data[end:])
                _scan(event, len(event), columns, vouched)
                _name_threads(columns.threads, event, len(event))
                if "distributedInfo" in header:
                    columns.collectives += collective_calls(_comms_events(event + _SEP, len(event) + len(_SEP)))
                header.update(members)
                break
            carry = data[end:]
    return header, columns


def _name_threads(threads: dict[int, str], data: bytes, end: int) -> None:
    """The thread names of ``data[:end]`` (metadata events, which the metrics do not read)."""
    for tid, raw in _THREAD_NAME.findall(data, 0, end):
        threads[int(tid)] = decode_name(raw)


def _parse_header(text: bytes) -> dict:
    """The top-level members written before ``traceEvents`` (device properties, metadata).
    With the key and a value appended they must make one whole object: then the key is a
    member of the top-level object, not a part of a string or of a nested value."""
    if text.endswith(b"\\"):  # the key's opening quote would be escaped
        raise _Fallback
    try:
        header = json.loads(text.decode() + '"traceEvents": 0}')
    except (ValueError, RecursionError):
        raise _Fallback from None
    del header["traceEvents"]
    return header


def _trailer(tail: bytes) -> tuple[bytes, dict]:
    """The last event, ended by ``_SEP`` as the others are, and the top-level members after
    the events array, from TAIL, the text after the last separator.  The event, the array
    and the top-level object must all close, which a truncated file's end does not."""
    text = tail.decode()
    try:
        event, end = _DECODER.raw_decode(text, len(text) - len(text.lstrip(_JSON_SPACE)))
        rest = text[end:].lstrip(_JSON_SPACE)
        if not isinstance(event, dict) or not rest.startswith("]"):
            raise _Fallback
        members = json.loads('{"_": 0' + rest[1:])  # "}" or ", more members }"
    except (ValueError, RecursionError):
        raise _Fallback from None
    del members["_"]
    if "traceEvents" in members:  # given twice: JSON keeps the last, the fast path read the first
        raise _Fallback
    return text[:end - 1].encode() + _SEP, members


_DECODER = json.JSONDecoder()
_JSON_SPACE = " \t\n\r"


def _scan(data: bytes, end: int, columns: Columns, vouched: set[bytes]) -> None:
    """Add the events of ``data[:end]``, each ended by ``_SEP``, that the metrics read to the
    columns, or give up on the fast path.

    The regular expressions yield Python bytes per field; everything after them
    works on whole columns (numpy, pandas), never event by event.
    """
    _vouch(data, end, vouched)
    matches = _EVENT.findall(data, 0, end)
    if not matches:
        return
    table = np.array(matches, dtype=object)
    del matches  # its tuples are the largest transient; the table holds the same bytes
    cats = table[:, 0]
    for cat in CATEGORIES:
        rows = table[cats == cat.encode()]
        if len(rows):
            _, names, tids, ts_i, ts_f, dur_i, dur_f, args = rows.T
            columns.add(
                cat, columns.code_all(names), _ints(tids),
                _to_ns(ts_i, ts_f), _to_ns(dur_i, dur_f), _find_args(args, CAT_ARGS[cat]),
            )


def _vouch(data: bytes, end: int, vouched: set[bytes]) -> None:
    """Check that the events of ``data[:end]`` are valid JSON, each read by ``_EVENT`` whole
    if the metrics use it and not at all otherwise: then ``_EVENT`` yields exactly the
    events the generic parser keeps.  VOUCHED holds the texts (digits mapped) already
    checked, so each distinct one is read once."""
    if _LEADING_ZERO.search(data, 0, end):  # rare: searched for first, so the text is copied only then
        data = _LEADING_ZERO.sub(b"x", data)
    texts = data.translate(_DIGITS).split(_SEP)
    texts.pop()  # what follows the last separator: the next chunk's
    if len(vouched) > _VOUCHED:  # a trace of ever new texts: memory stays bounded
        vouched.clear()
    for text in set(texts).difference(vouched):
        event = text + b"}"
        try:
            value = json.loads(event.decode())
        except (ValueError, RecursionError):
            raise _Fallback from None
        if not _WHOLE.fullmatch(event) if is_needed(value) else _EVENT.search(event):
            raise _Fallback
        vouched.add(text)


def _find_args(args: np.ndarray, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """One integer per event for each of the keys.  An event without one (Kineto writes
    them all) or with a value of another type goes to the generic parser, which reads a
    missing key as -1 and names the value.  The args are valid JSON (``_vouch``), so
    no raw NUL is among them to be taken for a separator."""
    if not keys:
        return {}
    blob = b"\x00".join(args)
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


#: The collectives' CPU op's name as a JSON string, searched for in the text.
_COMMS = b'"' + COMMS_NAME.encode() + b'"'


def _comms_events(data: bytes, end: int) -> list[dict]:
    """The ``record_param_comms`` events of ``data[:end]`` (each ended by ``_SEP``), parsed:
    a few a step, found by their name, read whole (their args hold strings the fast scan
    does not read)."""
    out = []
    at = data.find(_COMMS, 0, end)  # a plain search: a regular expression over the chunk costs more
    while at >= 0:
        start, stop = data.rfind(b"{", 0, at), data.find(_SEP, at, end)
        if start < 0 or stop < 0:
            raise _Fallback
        try:
            event = json.loads(data[start:stop + 1], parse_float=Decimal)
        except (ValueError, RecursionError):
            raise _Fallback from None
        if isinstance(event, dict) and event.get("name") == COMMS_NAME:  # not the name in another's args
            out.append(event)
        at = data.find(_COMMS, stop, end)
    return out

