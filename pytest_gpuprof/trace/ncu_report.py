"""Nsight Compute's measurements: one row per profiled kernel launch, its hardware counters.

Read from ``ncu --csv --page raw --print-units base`` (what ``ncu --import REPORT`` prints:
a header row, a units row, then a row per launch; numbers carry thousands separators), or
from an ``.ncu-rep`` through NVIDIA's ``ncu_report`` module (the ``ncu-report`` package,
extra ``ncu``) where no ncu binary is at hand.  Both give the same table: a column per
counter of ``COUNTERS``, in its base unit (durations in integer nanoseconds, as every trace
table of gpuprof).  A report holds what its sets, sections or ``--metrics`` collected, under
the names of its ncu version: each counter is worked out by the first of its ``Way``s whose
metrics the report holds, each way the same quantity; with none it is NaN (the report
cannot give it, and ``needs`` says what would).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pandas as pd

from ..capture.nsight_compute import EXPORT_ARGS
from ..capture.ranges import NVTX_DOMAIN, STEP_RANGE_PREFIX
from ..errors import TraceError


@dataclass(frozen=True)
class Way:
    """One way to work out a counter from a report: the sum of ``metrics`` times ``scale``,
    each metric printed in ``units`` (ncu's spellings of its base unit: another, a display
    unit such as ``us``, is refused rather than misread)."""

    metrics: tuple[str, ...]
    units: tuple[str, ...]
    scale: int = 1

    def __str__(self) -> str:
        text = " + ".join(self.metrics)
        return text if self.scale == 1 else f"{text} x {self.scale}"


#: ncu's spellings of the base units the counters are read in (older versions: ``nsecond``).
NS, PERCENT, BYTE, SECTOR = ("ns", "nsecond"), ("%",), ("byte",), ("sector",)
#: Bytes in a sector, the unit the L1TEX cache's tag stage counts in (``l1tex__t_bytes`` =
#: ``l1tex__t_sectors`` x 32).
SECTOR_BYTES = 32


def _metric(name: str, units: tuple[str, ...]) -> Way:
    """The way that reads one metric as it is."""
    return Way((name,), units)


#: gpuprof's name of each counter -> its ways, the metric gpuprof asks ncu for first
#: (docs/metrics.md, "Inside the kernels", gives each way).
COUNTERS: dict[str, tuple[Way, ...]] = {
    "time_ns": (_metric("gpu__time_duration.sum", NS),),
    "sm_throughput_pct": (_metric("sm__throughput.avg.pct_of_peak_sustained_elapsed", PERCENT),),
    "memory_throughput_pct": (_metric("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", PERCENT),),
    "dram_throughput_pct": (_metric("dram__throughput.avg.pct_of_peak_sustained_elapsed", PERCENT),),
    "dram_bytes": (_metric("dram__bytes.sum", BYTE), Way(("dram__bytes_read.sum", "dram__bytes_write.sum"), BYTE)),
    "achieved_occupancy_pct": (_metric("sm__warps_active.avg.pct_of_peak_sustained_active", PERCENT),),
    "registers_per_thread": (_metric("launch__registers_per_thread", ("register/thread",)),),
    "local_load_bytes": (_metric("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", BYTE),
                         Way(("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",), SECTOR, SECTOR_BYTES)),
    "local_store_bytes": (_metric("l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum", BYTE),
                          Way(("l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",), SECTOR, SECTOR_BYTES)),
    "l1_hit_rate_pct": (_metric("l1tex__t_sector_hit_rate.pct", PERCENT),),
    "l2_hit_rate_pct": (_metric("lts__t_sector_hit_rate.pct", PERCENT),),
    "tensor_pipe_pct": (_metric("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", PERCENT),),
    "dram_peak_bytes_per_cycle": (_metric("dram__bytes.sum.peak_sustained", ("byte/cycle",)),),
    "dram_cycles_per_second": (_metric("dram__cycles_elapsed.avg.per_second", ("hz",)),),
    "grid_size": (_metric("launch__grid_size", ("",)),),
    "block_size": (_metric("launch__block_size", ("",)),),
}
#: Counters that are whole numbers (a launch's shape, bytes, registers, nanoseconds).
WHOLE = ("time_ns", "dram_bytes", "registers_per_thread", "local_load_bytes", "local_store_bytes", "grid_size",
         "block_size")
#: The ncu metrics gpuprof asks for (``ncu --metrics``): each counter's first way.
METRICS = ",".join(metric for ways in COUNTERS.values() for metric in ways[0].metrics)
#: The columns of the table: the launch's order in the report, its kernel, the gpuprof step
#: push/pop range it ran in ("" outside one, and for a kernel another thread launched: such a
#: range is the opening thread's), then ``COUNTERS``.  The kernel is named as the report
#: names it: mangled (one spelling, whatever demangler shows it: ncu's CLI, its Python
#: module and CUPTI each demangle templates differently), unless a CSV was printed otherwise.
COLUMNS = ("id", "kernel", "step", *COUNTERS)

_NVTX_COLUMN = "thread Domain:Push/Pop_Range"  # the start of the CSV column naming a launch's NVTX stack


def needs(counter: str) -> str:
    """What a counter of the table is worked out from, in words: its first way, then the
    others in parentheses (``dram__bytes.sum (or dram__bytes_read.sum + dram__bytes_write.sum)``)."""
    first, *others = COUNTERS[counter]
    return str(first) + "".join(f" (or {way})" for way in others)


def read_ncu_csv(source: str | Path, named: str | None = None) -> pd.DataFrame:
    """The launches of ``ncu --csv --page raw --print-units base`` output (gpuprof's exports add
    ``--print-kernel-base mangled``): a file's path, or the text itself with ``named`` what
    errors call it.  A counter none of whose ways the page holds is NaN."""
    name = named or str(source)
    try:
        text = str(source) if named is not None else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read {name}: {exc}") from None
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise TraceError(f"{name} is not CSV: {exc}") from None
    if len(rows) < 2 or not {"ID", "Kernel Name"} <= set(rows[0]):
        raise TraceError(f"{name} is not Nsight Compute's raw CSV page (ncu --csv --page raw): no 'ID' and "
                         "'Kernel Name' columns in its first row")
    header, units = rows[0], rows[1]
    if len(units) != len(header):
        raise TraceError(f"{name}, line 2 (the units): {len(units)} fields, the header has {len(header)}")
    at: dict[str, int] = {}
    for i, column in enumerate(header):
        at.setdefault(column, i)
    held = {key: _first_way(ways, at.get) for key, ways in COUNTERS.items()}
    for way, columns in filter(None, held.values()):
        for metric, i in zip(way.metrics, columns):
            _check_unit(units[i], way, metric, name)
    nvtx = next((i for i, h in enumerate(header) if h.startswith(_NVTX_COLUMN)), None)
    launches = []
    for line, row in enumerate(rows[2:], start=3):  # rows[1] holds the units
        if len(row) != len(header):
            raise TraceError(f"{name}, line {line}: {len(row)} fields, the header has {len(header)}")
        values = {key: math.nan if chosen is None else _csv_value(row, *chosen, name, line)
                  for key, chosen in held.items()}
        launches.append({"id": int(number(row[at["ID"]], name, line, "ID")), "kernel": row[at["Kernel Name"]],
                         "step": _step(row[nvtx]) if nvtx is not None else "", **values})
    return _table(launches, name)


def _csv_value(row: list[str], way: Way, columns: list[int], name: str, line: int) -> float:
    """A counter of one launch of a CSV page, by the way chosen for the page (its columns)."""
    return way.scale * sum(number(row[i], name, line, m) for m, i in zip(way.metrics, columns))


def read_ncu_report(path: str | Path) -> pd.DataFrame:
    """The launches of an ``.ncu-rep``, read by NVIDIA's ``ncu_report`` module."""
    try:
        import ncu_report
    except ImportError:
        raise TraceError(f"cannot read {path} without Nsight Compute: install NVIDIA's reader "
                         "(pip install 'pytest-gpuprof[ncu]', the ncu-report package) or give ncu (--ncu PATH) "
                         "to export it") from None
    if not Path(path).is_file():
        raise TraceError(f"cannot read {path}: no such file")
    try:
        context = ncu_report.load_report(str(path))
    except Exception as exc:  # the module raises its own kinds
        raise TraceError(f"{path} is not an Nsight Compute report: {exc}") from None
    launches: list[dict] = []
    for r in range(context.num_ranges()):
        profiled = context.range_by_idx(r)
        for a in range(profiled.num_actions()):
            action = profiled.action_by_idx(a)
            where = f"launch {len(launches)}"
            values = {key: _report_value(action, ways, str(path), where) for key, ways in COUNTERS.items()}
            launches.append({"id": len(launches), "kernel": action.name(action.NameBase_MANGLED),
                             "step": _report_step(action), **values})
    return _table(launches, str(path))


def _report_value(action, ways: tuple[Way, ...], name: str, where: str) -> float:
    """A counter of one launch of a report: by its first way whose metrics the launch holds;
    NaN where none."""
    chosen = _first_way(ways, action.metric_by_name)
    if chosen is None:
        return math.nan
    way, found = chosen
    for m, metric in zip(way.metrics, found):
        _check_unit(metric.unit(), way, m, name)
    return way.scale * sum(_checked(metric.as_double(), name, where, m) for m, metric in zip(way.metrics, found))


#: What a reader finds a metric as in its report: a CSV column, a launch's metric.
_Found = TypeVar("_Found")


def _first_way(ways: tuple[Way, ...], find: Callable[[str], _Found | None]) -> tuple[Way, list[_Found]] | None:
    """The first of a counter's ways whose every metric the report holds, with what ``find``
    found each of them as (``find(metric)``: None where the report lacks it); None where no way
    is held.  Both readers choose by it, so a CSV page and its report give the same counters."""
    for way in ways:
        found = []
        for metric in way.metrics:
            if (it := find(metric)) is None:
                break
            found.append(it)
        else:
            return way, found
    return None


def _check_unit(unit: str, way: Way, metric: str, name: str) -> None:
    """A metric printed in another unit than its base unit (``ncu --csv`` without
    ``--print-units base`` prints ``us``, ``Mbyte``, ``Ghz``, rounded to 6 digits) is refused,
    not converted: 2,645,930,030 bytes print as 2.645930 Gbyte."""
    if unit not in way.units:
        raise TraceError(f"{name}: {metric} is in {unit!r}, not {way.units[0]!r}: print the report in ncu's base "
                         f"units (ncu --import REPORT {' '.join(EXPORT_ARGS)})")


def _table(launches: list[dict], name: str) -> pd.DataFrame:
    if not launches:
        raise TraceError(f"{name} holds no profiled kernel launch")
    table = pd.DataFrame(launches, columns=list(COLUMNS))
    for key in WHOLE:
        held = table[key].dropna()
        if not held.map(lambda v: float(v).is_integer()).all():
            raise TraceError(f"{name}: {key} ({needs(key)}) is not a whole number in every launch")
        if len(held) == len(table):
            table[key] = table[key].astype("int64")
    return table


def number(text: str, name: str, line: int, metric: str) -> float:
    """A CSV cell's number (thousands separators and all)."""
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        raise TraceError(f"{name}, line {line}: {metric} is {text!r}, not a number") from None
    return _checked(value, name, f"line {line}", metric)


def _checked(value: float, name: str, where: str, metric: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"{name}, {where}: {metric} is {value!r}, not a finite number >= 0")
    return value


def _step(stack: str) -> str:
    """The gpuprof step range a launch ran in, from the CSV's NVTX column (``PID
    "gpuprof:step_1:none:...:step_1"``, one quoted range per level)."""
    for part in stack.split('"')[1::2]:
        domain, _, rest = part.partition(":")
        name = rest.partition(":")[0]
        if domain == NVTX_DOMAIN and name.startswith(STEP_RANGE_PREFIX):
            return name
    return ""


def _report_step(action) -> str:
    """The gpuprof step range a launch ran in, from the report's NVTX state."""
    state = action.nvtx_state()
    if state is None:
        return ""
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        if domain.name() != NVTX_DOMAIN:
            continue
        for name in domain.push_pop_ranges():
            if name.startswith(STEP_RANGE_PREFIX):
                return name
    return ""
