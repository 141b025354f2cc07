"""The normalized trace: what every capture backend produces and every metric reads.

All timestamps and durations are integer nanoseconds on one clock per trace.
Tables are pandas DataFrames with fixed columns, so metrics never need to know
which profiler wrote the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

#: Columns of each table; ``name`` and ``kind`` are categoricals, the rest int64.
KERNEL_COLUMNS = ("start", "end", "name", "device", "stream", "correlation")
COPY_COLUMNS = ("start", "end", "kind", "bytes", "device", "stream", "correlation")
SET_COLUMNS = ("start", "end", "bytes", "device", "stream", "correlation")
RUNTIME_COLUMNS = ("start", "end", "name", "tid", "correlation")
RANGE_COLUMNS = ("start", "end", "name", "tid")
#: A collective call: when its CPU side started, which collective (``collective_name``), the
#: bytes of its input (-1 where the trace does not record them).
COLLECTIVE_COLUMNS = ("start", "name", "bytes")

#: What the int64 columns hold: the limits of every time, duration and byte count that a
#: loader or a baseline accepts.
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
#: The longest span a trace may cover: 2^53 ns, 104 days.  Metrics add up the
#: durations of up to millions of events in int64 and turn times into float
#: microseconds; below this bound neither wraps nor loses a nanosecond.
MAX_SPAN_NS = 1 << 53
#: The most bytes the copies (or the sets) of one trace may move in all, so that no
#: sum of them wraps around in int64: 2^62 bytes, 4 EiB.
MAX_TOTAL_BYTES = 1 << 62


def make_table(columns: tuple[str, ...], data: dict[str, Any]) -> pd.DataFrame:
    """Build a table with the canonical dtypes; missing columns become empty."""
    out = {}
    for col in columns:
        values = data.get(col, [])
        if col in ("name", "kind"):
            out[col] = values if isinstance(values, pd.Categorical) else pd.Categorical(values)
        else:
            out[col] = np.asarray(values, dtype=np.int64)
    return pd.DataFrame(out, columns=list(columns))


#: What each table's rows are called in an error message, and the column naming a row.
_ROWS = {"kernels": ("kernel", "name"), "copies": ("memcpy", "kind"), "sets": ("memset", "stream"),
         "runtime": ("runtime call", "name"), "ranges": ("range", "name")}


def first_problem(trace: Trace, processes: np.ndarray | None = None) -> str | None:
    """What makes a loaded trace impossible (an event at a negative time or ending before
    it starts, a negative byte count, a span past ``MAX_SPAN_NS``, bytes past
    ``MAX_TOTAL_BYTES``, a peak memory that is not a byte count, a PCIe link that is not one,
    GPU work that cannot be tied to its launch), or None: every loader
    checks it, so no metric is ever computed from such a trace (and -1, the metrics' mark
    of a missing time, never is one).  ``processes`` gives the process of each runtime call
    where the trace holds several: each process numbers its calls' correlation ids on its own."""
    peak = trace.metadata.get("peak_memory_allocated_bytes")
    if peak is not None and (isinstance(peak, bool) or not isinstance(peak, int) or not 0 <= peak <= INT64_MAX):
        return f"its gpuprof.peak_memory_allocated_bytes must be a byte count (an integer >= 0), got {str(peak)[:80]}"
    link = trace.metadata.get("pcie_link")
    if link is not None and not (isinstance(link, dict) and all(
            isinstance(link.get(k), int) and not isinstance(link.get(k), bool) and 0 < link[k] <= 64
            for k in ("generation", "width"))):
        return f"its gpuprof.pcie_link must be {{\"generation\": G, \"width\": W}} (integers 1 to 64) or null, " \
               f"got {str(link)[:80]}"
    for attr, (what, label) in _ROWS.items():
        table = getattr(trace, attr)
        start, end = table["start"].to_numpy(), table["end"].to_numpy()
        bad = np.flatnonzero((start < 0) | (end < start))
        if len(bad):
            row = table.iloc[bad[0]]
            where = "starts at a negative time" if row["start"] < 0 else "ends before it starts"
            return f"{what} {str(row[label])[:80]!r} {where} (start {row['start']} ns, end {row['end']} ns)"
        if "bytes" in table:
            size = table["bytes"].to_numpy()
            bad = np.flatnonzero(size < 0)
            if len(bad):
                return f"{what} at {start[bad[0]]} ns has no byte count or a negative one"
            if size.sum(dtype=np.float64) > MAX_TOTAL_BYTES:
                return f"the {what} byte counts add up to more than 2^62 bytes: not one profiled run"
    span = trace.span()
    if span is not None and span[1] - span[0] > MAX_SPAN_NS:
        return f"its events span {span[1] - span[0]} ns, more than 2^53 ns (104 days): not one profiled run"
    return _shared_correlation(trace, processes)


def _shared_correlation(trace: Trace, processes: np.ndarray | None) -> str | None:
    """GPU work that cannot be tied to the call that launched it: a correlation id that the work
    carries and more than one runtime call of one process holds.  CUPTI gives each call an id
    of its own; the kernels of one CUDA graph share their ``cudaGraphLaunch``'s, which is one
    call, so many kernels of one id are no ambiguity."""
    calls = trace.runtime
    ids = calls["correlation"].to_numpy(np.int64)
    owners = np.zeros(len(ids), np.int64) if processes is None else np.asarray(processes, np.int64)
    order = np.lexsort((ids, owners))
    ids, owners = ids[order], owners[order]
    again = (ids[1:] > 0) & (ids[1:] == ids[:-1]) & (owners[1:] == owners[:-1])
    carried = trace.launch_ids()
    shared = again.copy()
    shared[again] = np.isin(ids[1:][again], carried)  # few or none: a real trace shares no id
    if not shared.any():
        return None
    at = np.flatnonzero(shared)[0] + 1
    holders = calls.iloc[order[(ids == ids[at]) & (owners == owners[at])]]
    names = sorted({str(name)[:80] for name in holders["name"]})
    how_many = len(np.unique(ids[1:][shared]))
    return (f"{len(holders)} runtime calls ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}) share the "
            f"correlation id {ids[at]}, which GPU work carries: the work cannot be tied to the call that launched it"
            + (f" ({how_many} such correlation ids in all)" if how_many > 1 else ""))


#: Collectives by their names with the letters alone, lower case, without NCCL's prefix: what
#: Kineto's ``record_param_comms`` calls them (``allreduce``, ``all_to_allv``,
#: ``_allgather_base``) and NCCL's NVTX ranges (``ncclAllReduce``, ``ncclAlltoAll``).
_COLLECTIVES = {
    "allreduce": "all_reduce", "alltoall": "all_to_all", "alltoallv": "all_to_all", "alltoallbase": "all_to_all",
    "allgather": "all_gather", "allgatherbase": "all_gather", "allgatherintotensorcoalesced": "all_gather",
    "reducescatter": "reduce_scatter", "reducescatterbase": "reduce_scatter",
    "reducescattertensorcoalesced": "reduce_scatter", "broadcast": "broadcast", "reduce": "reduce",
    "send": "send", "recv": "recv", "gather": "gather", "scatter": "scatter", "barrier": "barrier",
}
#: Bytes of one element of each dtype Kineto's ``record_param_comms`` names.
DTYPE_BYTES = {"Bool": 1, "Byte": 1, "Char": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Half": 2, "BFloat16": 2,
               "Short": 2, "Float": 4, "Int": 4, "Double": 8, "Long": 8, "ComplexFloat": 8, "ComplexDouble": 16}


def collective_name(raw: str) -> str | None:
    """The collective a profiler's name for it means (``all_reduce``, ``all_to_all``,
    ``all_gather``, ``reduce_scatter``, ``broadcast``, ``send``, ``recv``, ...), or None for
    a name of NCCL's that is no collective (``ncclCommInitRankConfig``, ``ncclGroupStart``)."""
    letters = "".join(c for c in raw.lower() if c.isalpha())
    return _COLLECTIVES.get(letters.removeprefix("nccl"))


@dataclass
class Trace:
    """One captured run, normalized.

    ``gpu_name`` is the model of the device the work ran on (baselines are keyed
    by it); ``metadata`` carries what the capture recorded beside the events
    (environment, peak memory), so a saved trace reproduces every number.
    """

    kernels: pd.DataFrame
    copies: pd.DataFrame
    sets: pd.DataFrame
    runtime: pd.DataFrame
    ranges: pd.DataFrame
    source: str
    gpu_name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the collective calls where the trace records them (``COLLECTIVE_COLUMNS``)
    collectives: pd.DataFrame = field(default_factory=lambda: make_table(COLLECTIVE_COLUMNS, {}))
    #: the file the trace was read from, as errors about its content name it (None: built in memory)
    file: str | None = None
    #: host threads' names by the thread id the runtime and range tables carry, where the trace names them
    threads: dict[int, str] = field(default_factory=dict)

    def span(self) -> tuple[int, int] | None:
        """First start and last end over every event, or None for an empty trace."""
        starts = [t["start"].min() for t in self._tables() if len(t)]
        ends = [t["end"].max() for t in self._tables() if len(t)]
        if not starts:
            return None
        return int(min(starts)), int(max(ends))

    def launch_ids(self) -> np.ndarray:
        """The correlation ids the GPU work carries: kernels, copies and sets, each that of
        the runtime call that launched it."""
        return np.concatenate([t["correlation"].to_numpy(np.int64) for t in (self.kernels, self.copies, self.sets)])

    def _tables(self) -> tuple[pd.DataFrame, ...]:
        return (self.kernels, self.copies, self.sets, self.runtime, self.ranges)
