"""What kind of file an input is: decided here, from its name and its first bytes, for every
loader and command (the Kineto, nsys and ncu loaders, ``gpuprof analyze`` and ``gpuprof diff``)."""

from __future__ import annotations

import codecs
import gzip
import io
import json
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
#: Names of Nsight Systems inputs: its SQLite export, and a report exported to one first.
NSYS_SUFFIXES = (".sqlite", ".nsys-rep")
#: Names of Nsight Compute inputs: its report, and the raw page of one printed as CSV
#: (``ncu --csv --page raw``).
NCU_REPORT = ".ncu-rep"
NCU_SUFFIXES = (NCU_REPORT, ".csv")


def is_nsys_input(path: str | Path) -> bool:
    """An Nsight Systems report or export, by its name; anything else is read as JSON."""
    return str(path).endswith(NSYS_SUFFIXES)


def is_ncu_input(path: str | Path) -> bool:
    """An Nsight Compute report, or its raw page as CSV, by its name."""
    return str(path).endswith(NCU_SUFFIXES)


def is_ncu_report(path: str | Path) -> bool:
    """An Nsight Compute report itself (``.ncu-rep``), not its raw page printed as CSV."""
    return str(path).endswith(NCU_REPORT)


def is_gzipped(path: str | Path) -> bool:
    """The file starts with gzip's magic number (raises OSError where it cannot be read)."""
    with open(path, "rb") as probe:
        return probe.read(len(GZIP_MAGIC)) == GZIP_MAGIC


def open_content(path: str | Path) -> io.BufferedIOBase:
    """The file's bytes, gunzipped when it is gzipped."""
    return gzip.open(path, "rb") if is_gzipped(path) else open(path, "rb")


def is_sqlite(head: bytes) -> bool:
    """Content (gunzipped) that is an SQLite database, from its first bytes."""
    return head.startswith(SQLITE_MAGIC)


def is_chrome_trace(head: bytes) -> bool:
    """Content (gunzipped) that is a Chrome-format trace (Kineto's), from its first 64 KiB."""
    return b'"traceEvents"' in head


#: How much of an input read as JSON is parsed before the rest is read, so that a file that is
#: not JSON at all (zeros, a binary) is refused at once, in little memory, whatever its size.
JSON_HEAD = 1 << 16
#: An error of ``json`` this close to the end of the head may be the cut's own (a number,
#: literal or escape cut short), not the file's: the whole file's reading judges it.
CUT_SLACK = 64


def check_json_head(head: bytes) -> None:
    """Raise the error ``json`` gives for HEAD, the first bytes of a file (gunzipped), where
    that error lies inside HEAD, so that nothing after it could mend it (``json`` reads from
    left to right and stops at the first error): the file is not JSON.  A ValueError (bytes
    that are not text in JSON's encodings, text that is not JSON) or a RecursionError
    (values nested too deeply)."""
    if len(head) < 4:  # json tells its encodings apart by the first 4 bytes
        return
    encoding = json.detect_encoding(head)
    text = codecs.getincrementaldecoder(encoding)("surrogatepass").decode(head)  # a character cut at the end waits
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:  # a string cut at the end is unterminated wherever it started
        if exc.pos < len(text) - CUT_SLACK and not exc.msg.startswith("Unterminated string"):
            raise
