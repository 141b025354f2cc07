"""Nsight Compute's measurements: one row per profiled kernel launch, its hardware counters.

Read from ``ncu --csv --page raw --print-units base`` (what ``ncu --import REPORT`` prints:
a header row, a units row, then a row per launch; numbers carry thousands separators), or
from an ``.ncu-rep`` through NVIDIA's ``ncu_report`` module (the ``ncu-report`` package,
extra ``ncu``) where no ncu binary is at hand.  Both give the same table: ``COUNTERS``
names each column after the ncu metric it holds, in the metric's base unit (durations in
integer nanoseconds, as every trace table of gpuprof).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pandas as pd

from ..capture.ranges import NVTX_DOMAIN, STEP_RANGE_PREFIX
from ..errors import TraceError

#: gpuprof's name of each counter -> the ncu metric read for it (docs/metrics.md, "Inside the kernels").
COUNTERS = {
    "time_ns": "gpu__time_duration.sum",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_bytes": "dram__bytes.sum",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers_per_thread": "launch__registers_per_thread",
    "local_load_bytes": "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    "local_store_bytes": "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
    "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "tensor_pipe_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "dram_peak_bytes_per_cycle": "dram__bytes.sum.peak_sustained",
    "dram_cycles_per_second": "dram__cycles_elapsed.avg.per_second",
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
}
#: Counters that are whole numbers (a launch's shape, bytes, registers, nanoseconds).
WHOLE = ("time_ns", "dram_bytes", "registers_per_thread", "local_load_bytes", "local_store_bytes", "grid_size",
         "block_size")
#: The ncu metrics to collect (``ncu --metrics``): every counter's.
METRICS = ",".join(COUNTERS.values())
#: The columns of the table: the launch's order in the report, its kernel, the gpuprof step
#: push/pop range it ran in ("" outside one, and for a kernel another thread launched: such a
#: range is the opening thread's), then ``COUNTERS``.  The kernel is named as the report
#: names it: mangled (one spelling, whatever demangler shows it: ncu's CLI, its Python
#: module and CUPTI each demangle templates differently), unless a CSV was printed otherwise.
COLUMNS = ("id", "kernel", "step", *COUNTERS)

_NVTX_COLUMN = "thread Domain:Push/Pop_Range"  # the start of the CSV column naming a launch's NVTX stack


def read_ncu_csv(source: str | Path, named: str | None = None) -> pd.DataFrame:
    """The launches of ``ncu --csv --page raw --print-units base`` output (gpuprof's exports add
    ``--print-kernel-base mangled``): a file's path, or the text itself with ``named`` what
    errors call it."""
    name = named or str(source)
    try:
        text = source if named is not None else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read {name}: {exc}") from None
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise TraceError(f"{name} is not CSV: {exc}") from None
    if len(rows) < 2 or not {"ID", "Kernel Name"} <= set(rows[0]):
        raise TraceError(f"{name} is not Nsight Compute's raw CSV page (ncu --csv --page raw): no 'ID' and "
                         "'Kernel Name' columns in its first row")
    header = rows[0]
    missing = [m for m in COUNTERS.values() if m not in header]
    if missing:
        raise TraceError(f"{name} lacks the metric(s) {', '.join(missing)}: profile with "
                         f"--metrics {METRICS} (or a --set that holds them)")
    at = {column: header.index(column) for column in ("ID", "Kernel Name", *COUNTERS.values())}
    nvtx = next((i for i, h in enumerate(header) if h.startswith(_NVTX_COLUMN)), None)
    launches = []
    for line, row in enumerate(rows[2:], start=3):  # rows[1] holds the units
        if len(row) != len(header):
            raise TraceError(f"{name}, line {line}: {len(row)} fields, the header has {len(header)}")
        values = {key: _number(row[at[metric]], name, line, metric) for key, metric in COUNTERS.items()}
        launches.append({"id": int(_number(row[at["ID"]], name, line, "ID")), "kernel": row[at["Kernel Name"]],
                         "step": _step(row[nvtx]) if nvtx is not None else "", **values})
    return _table(launches, name)


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
    launches = []
    for r in range(context.num_ranges()):
        profiled = context.range_by_idx(r)
        for a in range(profiled.num_actions()):
            action = profiled.action_by_idx(a)
            values = {}
            for key, metric in COUNTERS.items():
                found = action.metric_by_name(metric)
                if found is None:
                    raise TraceError(f"{path} lacks the metric {metric} (launch {len(launches)}): profile with "
                                     f"--metrics {METRICS}")
                values[key] = _checked(found.as_double(), str(path), f"launch {len(launches)}", metric)
            launches.append({"id": len(launches), "kernel": action.name(action.NameBase_MANGLED),
                             "step": _report_step(action), **values})
    return _table(launches, str(path))


def _table(launches: list[dict], name: str) -> pd.DataFrame:
    if not launches:
        raise TraceError(f"{name} holds no profiled kernel launch")
    table = pd.DataFrame(launches, columns=list(COLUMNS))
    for key in WHOLE:
        if not table[key].map(lambda v: float(v).is_integer()).all():
            raise TraceError(f"{name}: {COUNTERS[key]} is not a whole number in every launch")
        table[key] = table[key].astype("int64")
    return table


def _number(text: str, name: str, line: int, metric: str) -> float:
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
