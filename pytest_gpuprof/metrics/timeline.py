"""A small timeline sample of one measured step, kept with baselines and results so
that reports can draw the baseline run's GPU timeline beside the current one
without the old trace.

The sample is the step whose GPU busy time is the median of the run's steps that
have GPU work (a step without any has nothing to draw), capped at a number of events.  Events are stored as one string (``lane kind start dur name;``)
so that a refreshed baseline changes one line of its JSON, not thousands.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..options import default
from .measure import Measurement

KINDS = ("kernel", "htod", "dtoh", "dtod", "ptop", "htoh", "other", "memset")


def sample(m: Measurement, cap: int = default("timeline-events")) -> dict[str, Any] | None:
    """The median step's attributed GPU work, times relative to its first GPU activity
    (the GPU may run well behind the CPU, so the step's CPU start is no origin)."""
    if cap <= 0 or m.work is None or not len(m.work):
        return None
    busy = np.asarray(m.metrics["step_gpu_time_us"])
    working = np.unique(m.work["step"].to_numpy())  # the steps with GPU work, in order
    step = int(working[np.argsort(busy[working], kind="stable")[len(working) // 2]])
    work = m.work[m.work["step"] == step].sort_values("start", kind="stable")
    truncated = len(work) > cap
    work = work.head(cap)
    origin = int(work["start"].min())
    streams = sorted(int(s) for s in work["stream"].unique())
    names = sorted(set(work["name"]))
    lane = {s: i for i, s in enumerate(streams)}
    code = {n: i for i, n in enumerate(names)}
    events = ";".join(
        f"{lane[int(r.stream)]} {KINDS.index(r.kind)} {int(r.start) - origin} {int(r.end - r.start)} {code[r.name]}"
        for r in work.itertuples(index=False)
    )
    return {
        "step": step,
        "span_ns": int(work["end"].max()) - origin,
        "streams": streams,
        "names": names,
        "kinds": list(KINDS),
        "events": events,
        "truncated": truncated,
    }


def events(sample_: dict[str, Any]) -> list[dict[str, Any]]:
    """The sample's events as dicts: lane, stream, kind, start_ns, dur_ns, name."""
    out = []
    for item in filter(None, sample_["events"].split(";")):
        lane, kind, start, dur, name = (int(v) for v in item.split())
        out.append({"lane": lane, "stream": sample_["streams"][lane], "kind": sample_["kinds"][kind],
                    "start_ns": start, "dur_ns": dur, "name": sample_["names"][name]})
    return out
