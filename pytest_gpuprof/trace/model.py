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

#: Copy directions the metrics report, in the order they are printed.
COPY_KINDS = ("htod", "dtoh", "dtod", "ptop")


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

    def span(self) -> tuple[int, int] | None:
        """First start and last end over every event, or None for an empty trace."""
        starts = [t["start"].min() for t in self._tables() if len(t)]
        ends = [t["end"].max() for t in self._tables() if len(t)]
        if not starts:
            return None
        return int(min(starts)), int(max(ends))

    def _tables(self) -> tuple[pd.DataFrame, ...]:
        return (self.kernels, self.copies, self.sets, self.runtime, self.ranges)
