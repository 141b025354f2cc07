"""Several ranks of one distributed run: each rank's metrics on its own timeline and steps,
and how far the slowest rank's steps run behind the others' (``rank_skew``,
docs/metrics.md "Several ranks").

A rank's trace says which rank it is: Kineto writes ``distributedInfo`` (rank, world size)
into the trace of a process that joined a process group (``trace.kineto``).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from .measure import Measurement


def step_spans_ns(m: Measurement) -> list[int]:
    """Each measured step's span: from its CPU start to the next step's CPU start, the last
    step's to the end of the measured window."""
    starts = [int(s) for s in m.steps["start"]]
    return [b - a for a, b in zip(starts, starts[1:] + [int(m.window[1])])]


def rank_skew(ranks: Mapping[int, Measurement]) -> float | None:
    """(max over ranks of the median step span - their mean) / their mean: 0 when every rank
    keeps the same pace, 0.2 when the slowest rank's steps run 20% longer than the average;
    None with fewer than two ranks or no steps."""
    medians = [statistics.median(spans) for spans in (step_spans_ns(m) for m in ranks.values()) if spans]
    if len(medians) < 2:
        return None
    mean = sum(medians) / len(medians)
    return round((max(medians) - mean) / mean, 6) if mean else None
