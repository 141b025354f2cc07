"""Any trace a command is given: a Kineto JSON, or an nsys report (its SQLite export,
or a ``.nsys-rep`` exported first), and its metrics."""

from __future__ import annotations

from pathlib import Path

from ..capture.nsys import export_sqlite, find_nsys
from ..errors import GpuprofError
from ..metrics.measure import Measurement, measure
from ..trace.kineto import load_kineto
from ..trace.model import Trace
from ..trace.nsys_sqlite import for_range, load_nsys


def load_any(path: str, test_range: str | None = None, nsys: str | None = None) -> Trace:
    """A Kineto trace or an nsys report (a .nsys-rep is exported to SQLite beside it first)."""
    if path.endswith((".sqlite", ".nsys-rep")):
        if path.endswith(".nsys-rep"):
            path = str(export_sqlite(find_nsys(nsys, option="--nsys"), Path(path)))
        trace = load_nsys(path)
        return for_range(trace, test_range) if test_range else trace
    if test_range:
        raise GpuprofError("--range applies to nsys reports only")
    return load_kineto(path)


def measure_any(path: str, test_range: str | None = None, nsys: str | None = None) -> Measurement:
    """The metrics of any trace; one the metrics cannot use is an error naming it."""
    trace = load_any(path, test_range, nsys)
    try:
        return measure(trace)
    except ValueError as exc:
        raise GpuprofError(f"{path}: {exc}") from None
