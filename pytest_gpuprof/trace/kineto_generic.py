"""The generic reader of a Kineto trace: any valid Chrome-trace JSON, however laid out,
read as it streams, one event at a time (``read_generic``).

It is the loader's one judge of what is wrong with a file (``kineto``, where the fast path
gives up on what it cannot vouch for): a JSON error is the one ``json`` gives, at its place
in the whole document, and an event that lacks a value the metrics use is an error naming
the event.  It keeps only what the metrics read, so no file costs memory in proportion to
its size.
"""

from __future__ import annotations

import codecs
import json
import re
from array import array
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from .formats import CUT_SLACK
from .kineto_columns import (
    CAT_ARGS,
    CHUNK,
    COMMS_NAME,
    MISSING,
    Columns,
    Invalid,
    collective_calls,
    event_ns,
    floats,
    integer,
    is_needed,
    open_trace,
    shown,
)


def read_generic(path: Path) -> tuple[dict, Columns]:
    """Any valid Chrome-trace JSON; floats are read as Decimal so the ns conversion stays exact.

    The document is read as it streams (``_Document``): each event is decoded alone and
    what the metrics read of it kept as integers, so memory follows the events the metrics
    use, never the file's size; a top-level value other than the events that runs past
    ``VALUE_CAP`` (no trace's does) is refused when it does.  Every value the metrics use
    is checked here, and an event that does not hold it is an error naming the event
    (``Invalid``).
    """
    rows = _Rows()
    header: dict[str, Any] = {}
    with open_trace(path) as fh:
        doc = _Document(fh)
        first = doc.peek()
        if first == "[":  # an array of events alone
            for i, event in enumerate(doc.elements("the events array")):
                rows.add(event, f"the events array[{i}]")
        elif first == "{":
            found = False
            for key in doc.members():
                if key != "traceEvents":
                    header[key] = doc.value(f"its member {shown(key)}")
                elif found:
                    raise Invalid("it gives traceEvents twice")
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
    header = floats(header)
    return header, rows.columns("distributedInfo" in header)


#: The largest JSON value the generic parser decodes whole: an event, or a top-level member
#: other than the events (a trace's are a few KB); one larger is no trace's, and refused.
VALUE_CAP = 16 << 20


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
        """The next JSON value; ``what`` names it in the error when it runs past ``VALUE_CAP``.
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
            if len(self._buf) - self._pos > VALUE_CAP:
                raise Invalid(f"{what} runs past {VALUE_CAP >> 20} MiB of JSON, which no trace's does")
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
        block = self._fh.read(CHUNK)
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
        self._columns = Columns()
        self._cats: dict[str, dict[str, array]] = {}
        self._comms: list[dict] = []

    def add(self, ev: Any, what: str) -> None:
        """One event, ``what`` (its place) in the error when it is no object: then the file is
        no trace, and is refused before the rest is read."""
        if not isinstance(ev, dict):
            raise Invalid(f"{what} is {shown(ev)}, not an event (an object)")
        if is_needed(ev):
            self._keep(ev)
        elif isinstance(ev, dict) and ev.get("name") == "thread_name" and ev.get("ph") == "M" \
                and type(ev.get("tid")) is int and isinstance(ev.get("args"), dict) \
                and isinstance(ev["args"].get("name"), str):
            self._columns.threads[ev["tid"]] = ev["args"]["name"]
        if isinstance(ev, dict) and ev.get("name") == COMMS_NAME:
            self._comms.append(ev)

    def _keep(self, ev: dict) -> None:
        cat = ev["cat"]
        col = self._cats.get(cat)
        if col is None:
            col = self._cats[cat] = {key: array("q") for key in ("name", "tid", "start", "dur", *CAT_ARGS[cat])}
        name = ev.get("name")
        if not isinstance(name, str):
            raise Invalid(f"a {cat} event has the name {shown(name)}, not a string")
        what = f"{cat} event {name[:80]!r}"
        given = ev.get("args", {})
        if not isinstance(given, dict):
            raise Invalid(f"{what}: args is {shown(given)}, not an object")
        values = [event_ns(ev, "ts", what), event_ns(ev, "dur", what), integer(ev.get("tid", MISSING), f"{what}: tid"),
                  *(integer(given[key], f"{what}: args.{key}") if key in given else -1 for key in CAT_ARGS[cat]),
                  self._columns.code(json.dumps(name)[1:-1].encode())]
        for key, value in zip(("start", "dur", "tid", *CAT_ARGS[cat], "name"), values):
            col[key].append(value)

    def columns(self, distributed: bool) -> Columns:
        """The columns of every event kept; the collectives where the trace's process was one
        of a process group (as the fast path)."""
        columns = self._columns
        if distributed:
            columns.collectives = collective_calls(self._comms)
        for cat, col in self._cats.items():
            ints = {key: np.frombuffer(values, dtype=np.int64) for key, values in col.items()}
            columns.add(cat, ints["name"], ints["tid"], ints["start"], ints["dur"],
                        {key: ints[key] for key in CAT_ARGS[cat]})
        return columns

