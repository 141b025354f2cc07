"""The one-step timeline sample kept with results and baselines."""

from pathlib import Path

import numpy as np

from pytest_gpuprof.metrics import timeline
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.trace.kineto import load_kineto

TRACE = Path(__file__).parent / "data" / "overlap.pt.trace.json.gz"


def test_sample_is_the_median_step_s_own_work():
    m = measure(load_kineto(TRACE))
    s = timeline.sample(m)
    busy = m.metrics["step_gpu_time_us"]
    assert s["step"] == int(np.argsort(busy, kind="stable")[len(busy) // 2])
    work = m.work[m.work["step"] == s["step"]]
    events = timeline.events(s)
    assert len(events) == len(work) == 10  # 8 matmuls, an add, one host-to-device copy
    origin = int(work["start"].min())
    assert sorted(e["start_ns"] + origin for e in events) == sorted(work["start"].tolist())
    assert sum(e["dur_ns"] for e in events) == int((work["end"] - work["start"]).sum())
    assert {e["kind"] for e in events} == {"kernel", "htod"}
    assert s["span_ns"] == int(work["end"].max()) - origin and not s["truncated"]


def test_cap_truncates_and_zero_disables():
    m = measure(load_kineto(TRACE))
    s = timeline.sample(m, cap=3)
    assert s["truncated"] and len(timeline.events(s)) == 3
    assert timeline.sample(m, cap=0) is None
