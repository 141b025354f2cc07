"""What kind of file an input is: decided here, from its name and its first bytes, for every
loader and command (the Kineto, nsys and ncu loaders, ``gpuprof analyze`` and ``gpuprof diff``)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import BinaryIO

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


def open_content(path: str | Path) -> BinaryIO:
    """The file's bytes, gunzipped when it is gzipped."""
    return gzip.open(path, "rb") if is_gzipped(path) else open(path, "rb")


def is_sqlite(head: bytes) -> bool:
    """Content (gunzipped) that is an SQLite database, from its first bytes."""
    return head.startswith(SQLITE_MAGIC)


def is_chrome_trace(head: bytes) -> bool:
    """Content (gunzipped) that is a Chrome-format trace (Kineto's), from its first 64 KiB."""
    return b'"traceEvents"' in head
