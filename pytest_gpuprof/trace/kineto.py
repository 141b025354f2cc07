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
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from array import array
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import TraceError
from .formats import CUT_SLACK, JSON_HEAD, check_json_head, is_gzipped, is_sqlite, open_content
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
    first_problem,
    make_table,
)
from .nsys_sqlite import sqlite_given_as_json

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
    for key in ("correlation", "device", "stream", "bytes")
}
#: The key as a quoted token: more of these than integer hits is a value of another
#: type or a key given twice, for the generic parser to judge.
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
_EVENTS_START = re.compile(rb'"traceEvents"[ \t\n\r]*:[ \t\n\r]*\[')
#: Distinct event texts remembered across chunks (a real trace has a few hundred).
_VOUCHED = 1 << 16

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
        trace = _build(events, header, str(path))
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
        raise TraceError(f"{path} holds no kernel, memcpy, runtime or annotation events "
                         "(is it a torch.profiler trace?)")
    return trace


def _open(path: Path):
    """The file's bytes, gunzipped when it is gzipped; an SQLite file is refused by name, and
    one whose first bytes cannot begin a JSON document by the error ``json`` gives for them
    (``check_json_head``), before either parser reads on."""
    fh = open_content(path)
    try:
        head = fh.read(JSON_HEAD)
        if is_sqlite(head):
            raise _Invalid(sqlite_given_as_json(is_gzipped(path)))
        check_json_head(head)
        fh.seek(0)
    except BaseException:
        fh.close()
        raise
    return fh


class _Columns:
    """Per-category column lists, filled chunk by chunk."""

    def __init__(self) -> None:
        self.codes: dict[bytes, int] = {}
        self.names: dict[str, int] = {}
        self.cols: dict[str, dict[str, Any]] = {  # lists of chunks; under "args", a dict of them
            cat: {"name": [], "tid": [], "start": [], "dur": [], "args": {}} for cat in CATEGORIES
        }
        self.collectives: list[tuple[int, str, int]] = []  # (start, name, bytes) of record_param_comms
        self.threads: dict[int, str] = {}  # thread id -> its name (the last Kineto gives it)

    def name_threads(self, data: bytes, end: int) -> None:
        """The thread names of ``data[:end]`` (metadata events, which the metrics do not read)."""
        for tid, raw in _THREAD_NAME.findall(data, 0, end):
            self.threads[int(tid)] = _decode_name(raw)

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
    vouched: set[bytes] = set()
    carry = b""
    with _open(path) as fh:
        while True:
            block = fh.read(_CHUNK)
            last = not block
            data = carry + block
            del block  # the chunk lives on in data; holding both would double the peak
            if header is None:
                start = _EVENTS_START.search(data)
                if not start:
                    if not last and len(data) <= _CHUNK:  # the key may be cut at the first chunk's end
                        carry = data
                        continue
                    raise _Fallback  # Kineto's header is a few KB; no text growing chunk by chunk is searched again
                header = _parse_header(data[:start.start()])
                data = data[start.end():]
            # Scan up to the last event's end, in place: slicing would copy the chunk.
            cut = data.rfind(_SEP)
            if cut < 0 and not last:
                if len(data) >= _CHUNK:  # no event ends within a whole chunk: not Kineto's layout
                    raise _Fallback
                carry = data
                continue
            end = cut + len(_SEP) if cut >= 0 else 0
            _scan(data, end, columns, vouched)
            columns.name_threads(data, end)
            if "distributedInfo" in header:  # only a process of a process group calls collectives
                columns.collectives += _collectives(_comms_events(data, end))
            if last:
                event, members = _trailer(data[end:])
                _scan(event, len(event), columns, vouched)
                columns.name_threads(event, len(event))
                if "distributedInfo" in header:
                    columns.collectives += _collectives(_comms_events(event + _SEP, len(event) + len(_SEP)))
                header.update(members)
                break
            carry = data[end:]
    return header, columns


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


def _scan(data: bytes, end: int, columns: _Columns, vouched: set[bytes]) -> None:
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
                _to_ns(ts_i, ts_f), _to_ns(dur_i, dur_f), _find_args(args, _CAT_ARGS[cat]),
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
        if not _WHOLE.fullmatch(event) if _needed(value) else _EVENT.search(event):
            raise _Fallback
        vouched.add(text)



def _needed(event: Any) -> bool:
    """Whether the metrics read the event: a complete event ("X") of a category they use."""
    return isinstance(event, dict) and event.get("ph") == "X" and event.get("cat") in CATEGORIES


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


def _read_generic(path: Path) -> tuple[dict, _Columns]:
    """Any valid Chrome-trace JSON; floats are read as Decimal so the ns conversion stays exact.

    The document is read as it streams (``_Document``): each event is decoded alone and
    what the metrics read of it kept as integers, so memory follows the events the metrics
    use, never the file's size; a top-level value other than the events that runs past
    ``_VALUE_CAP`` (no trace's does) is refused when it does.  Every value the metrics use
    is checked here, and an event that does not hold it is an error naming the event
    (``_Invalid``).
    """
    rows = _Rows()
    header: dict[str, Any] = {}
    with _open(path) as fh:
        doc = _Document(fh)
        first = doc.peek()
        if first == "[":  # an array of events alone
            for i, event in enumerate(doc.elements("the events array")):
                rows.add(event, f"the events array[{i}]")
        elif first == "{":
            found = False
            for key in doc.members():
                if key != "traceEvents":
                    header[key] = doc.value(f"its member {_shown(key)}")
                elif found:
                    raise _Invalid("it gives traceEvents twice")
                elif doc.peek() != "[":
                    raise ValueError("no traceEvents array")
                else:
                    found = True
                    for i, event in enumerate(doc.elements("traceEvents")):
                        rows.add(event, f"traceEvents[{i}]")
            if not found:
                raise ValueError("no traceEvents array")
        else:
            doc.value("the document")
            raise ValueError("no traceEvents array")
        doc.end()
    header = _floats(header)
    return header, rows.columns("distributedInfo" in header)


#: The largest JSON value the generic parser decodes whole: an event, or a top-level member
#: other than the events (a trace's are a few KB); one larger is no trace's, and refused.
_VALUE_CAP = 16 << 20


class _Document:
    """A JSON document read piece by piece: the structure around the events by hand, each
    value decoded whole by ``json`` once its text is held (``value``).  A JSON error is the
    one ``json`` gives, at its place in the whole document."""

    def __init__(self, fh) -> None:
        head = fh.read(4)
        self._fh = fh
        self._text = codecs.getincrementaldecoder(json.detect_encoding(head))("surrogatepass")
        self._buf = self._text.decode(head)
        self._pos = 0
        self._before = 0  # characters read and dropped before the buffer
        self._lines = 0  # line breaks among them
        self._column = 0  # characters after the last of them
        self._eof = False
        self._decoder = json.JSONDecoder(parse_float=Decimal)

    def peek(self) -> str:
        """The next character that is not white space, not consumed; "" at the end."""
        while True:
            self._pos = _skip_space(self._buf, self._pos)
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._more():
                return ""

    def value(self, what: str) -> Any:
        """The next JSON value; ``what`` names it in the error when it runs past ``_VALUE_CAP``.
        An array or object the text held cut short is decoded again only once its closing
        bracket is held (``_Closing``): a long one is not decoded piece by piece."""
        self.peek()
        closing = None
        while True:
            if closing is None or self._eof or closing.found(self._buf):
                try:
                    value, end = self._decoder.raw_decode(self._buf, self._pos)
                    if end < len(self._buf) or self._eof or closing is not None:  # (a number may go on)
                        self._pos = end
                        return value
                except json.JSONDecodeError as exc:
                    cut = exc.pos >= len(self._buf) - CUT_SLACK or exc.msg.startswith("Unterminated")
                    if self._eof or closing is not None or not cut:
                        self._fail(exc.msg, exc.pos)
            if closing is None and self._buf[self._pos] in "[{":
                closing = _Closing(self._pos)
            if len(self._buf) - self._pos > _VALUE_CAP:
                raise _Invalid(f"{what} runs past {_VALUE_CAP >> 20} MiB of JSON, which no trace's does")
            start = self._pos
            self._more()
            if closing is not None:
                closing.dropped(start - self._pos)

    def elements(self, what: str) -> Iterable[Any]:
        """The values of the array that starts here, one at a time."""
        self._expect("[", "Expecting value")
        if self.peek() == "]":
            self._pos += 1
            return
        index = 0
        while True:
            yield self.value(f"{what}[{index}]")
            index += 1
            if self._delimiter("]", "Expecting ',' delimiter"):
                return

    def members(self) -> Iterable[str]:
        """The names of the object that starts here, one at a time, each followed by its value,
        which the caller reads."""
        self._expect("{", "Expecting value")
        if self.peek() == "}":
            self._pos += 1
            return
        while True:
            if self.peek() != '"':
                self._fail("Expecting property name enclosed in double quotes", self._pos)
            key = self.value("a name")
            self._expect(":", "Expecting ':' delimiter")
            yield key
            if self._delimiter("}", "Expecting ',' delimiter"):
                return

    def end(self) -> None:
        """Nothing but white space after the document."""
        if self.peek():
            self._fail("Extra data", self._pos)

    def _delimiter(self, close: str, message: str) -> bool:
        """A comma (then more), or ``close`` (True)."""
        found = self.peek()
        if found not in (",", close):
            self._fail(message, self._pos)
        self._pos += 1
        return found == close

    def _expect(self, char: str, message: str) -> None:
        if self.peek() != char:
            self._fail(message, self._pos)
        self._pos += 1

    def _more(self) -> bool:
        """The next piece of the file in the buffer, what was consumed dropped; False at the end."""
        if self._eof:
            return False
        block = self._fh.read(_CHUNK)
        text = self._text.decode(block, final=not block)
        dropped = self._buf[:self._pos]
        self._before += len(dropped)
        breaks = dropped.count("\n")
        self._lines += breaks
        self._column = len(dropped) - dropped.rfind("\n") - 1 if breaks else self._column + len(dropped)
        self._buf, self._pos = self._buf[self._pos:] + text, 0
        self._eof = not block
        return bool(text) or not self._eof

    def _fail(self, message: str, pos: int) -> None:
        """``json``'s error at ``pos`` of the buffer, placed in the whole document."""
        before = self._buf[:pos]
        breaks = before.count("\n")
        column = pos - before.rfind("\n") if breaks else self._column + pos + 1
        raise ValueError(f"{message}: line {self._lines + breaks + 1} column {column} (char {self._before + pos})")


class _Closing:
    """Where the array or object starting at a place in a text closes, found as the text
    grows: its brackets counted, strings skipped, resuming where the last search stopped."""

    _TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|["\[\]{}]')

    def __init__(self, start: int) -> None:
        self._at = start
        self._depth = 0

    def found(self, text: str) -> bool:
        """Whether ``text`` holds the closing bracket (or ends where the value cannot go on)."""
        for token in self._TOKEN.finditer(text, self._at):
            mark = token.group()
            if mark == '"':  # a string not closed in the text yet
                self._at = token.start()
                return False
            if mark in "[{":
                self._depth += 1
            elif mark in "]}":
                self._depth -= 1
                if self._depth == 0:
                    return True
        self._at = len(text)
        return False

    def dropped(self, count: int) -> None:
        """The text lost ``count`` characters at its start (``_Document._more`` dropped them)."""
        self._at -= count


def _skip_space(text: str, pos: int) -> int:
    return _SPACE.match(text, pos).end()  # type: ignore[union-attr]


_SPACE = re.compile(r"[ \t\n\r]*")


class _Rows:
    """What the metrics read of each event the generic parser decodes, kept as integers as
    the events come (the events themselves are dropped): the columns of each category, the
    host threads' names and the collectives' CPU ops."""

    def __init__(self) -> None:
        self._columns = _Columns()
        self._cats: dict[str, dict[str, array]] = {}
        self._comms: list[dict] = []

    def add(self, ev: Any, what: str) -> None:
        """One event, ``what`` (its place) in the error when it is no object: then the file is
        no trace, and is refused before the rest is read."""
        if not isinstance(ev, dict):
            raise _Invalid(f"{what} is {_shown(ev)}, not an event (an object)")
        if _needed(ev):
            self._keep(ev)
        elif isinstance(ev, dict) and ev.get("name") == "thread_name" and ev.get("ph") == "M" \
                and type(ev.get("tid")) is int and isinstance(ev.get("args"), dict) \
                and isinstance(ev["args"].get("name"), str):
            self._columns.threads[ev["tid"]] = ev["args"]["name"]
        if isinstance(ev, dict) and ev.get("name") == _COMMS_NAME:
            self._comms.append(ev)

    def _keep(self, ev: dict) -> None:
        cat = ev["cat"]
        col = self._cats.get(cat)
        if col is None:
            col = self._cats[cat] = {key: array("q") for key in ("name", "tid", "start", "dur", *_CAT_ARGS[cat])}
        name = ev.get("name")
        if not isinstance(name, str):
            raise _Invalid(f"a {cat} event has the name {_shown(name)}, not a string")
        what = f"{cat} event {name[:80]!r}"
        given = ev.get("args", {})
        if not isinstance(given, dict):
            raise _Invalid(f"{what}: args is {_shown(given)}, not an object")
        values = [_ns(ev, "ts", what), _ns(ev, "dur", what), integer(ev.get("tid", _MISSING), f"{what}: tid"),
                  *(integer(given[key], f"{what}: args.{key}") if key in given else -1 for key in _CAT_ARGS[cat]),
                  self._columns.code(json.dumps(name)[1:-1].encode())]
        for key, value in zip(("start", "dur", "tid", *_CAT_ARGS[cat], "name"), values):
            col[key].append(value)

    def columns(self, distributed: bool) -> _Columns:
        """The columns of every event kept; the collectives where the trace's process was one
        of a process group (as the fast path)."""
        columns = self._columns
        if distributed:
            columns.collectives = _collectives(self._comms)
        for cat, col in self._cats.items():
            ints = {key: np.frombuffer(values, dtype=np.int64) for key, values in col.items()}
            columns.add(cat, ints["name"], ints["tid"], ints["start"], ints["dur"],
                        {key: ints[key] for key in _CAT_ARGS[cat]})
        return columns


#: The CPU op torch records for each collective call, with its name, sizes and dtype in args.
_COMMS_NAME = "record_param_comms"
_COMMS = b'"' + _COMMS_NAME.encode() + b'"'


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
        if isinstance(event, dict) and event.get("name") == _COMMS_NAME:  # not the name in another's args
            out.append(event)
        at = data.find(_COMMS, stop, end)
    return out


def _collectives(events) -> list[tuple[int, str, int]]:
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
        out.append((_ns(ev, "ts", f"record_param_comms {raw[:40]!r}"), collective_name(raw) or raw.lower(),
                    total if total <= INT64_MAX else -1))
    return out


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


def integer(value: Any, what: str) -> int:
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


def _build(columns: _Columns, header: dict, file: str) -> Trace:
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
        raise _Invalid(f"deviceProperties is {_shown(devices)}, not a list of objects with a string "
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
