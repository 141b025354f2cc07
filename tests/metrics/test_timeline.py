"""The one-step timeline sample kept with results and baselines."""

from pathlib import Path

import numpy as np

from pytest_gpuprof.metrics import timeline
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.trace.kineto import load_kineto

TRACE = Path(__file__).parents[1] / "data" / "overlap.pt.trace.json.gz"
ROOT_TRACES = Path(__file__).parents[2] / "example_suite" / "traces"


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


def test_ranges_of_the_step_with_their_depth_and_gpu_span():
    """Checked against a plain loop over the trace's ranges and the step's work."""
    m = measure(load_kineto(ROOT_TRACES / "example_suite_test_moe.py_test_moe_forward.pt.trace.json.gz"))
    s = timeline.sample(m)
    step = m.steps.iloc[s["step"]]
    work = m.work[m.work["step"] == s["step"]]
    origin = int(work["start"].min())
    table = list(m.ranges.itertuples(index=False))
    mine = [r for r in table if r.start <= step["end"] and r.end >= step["start"]]
    got = timeline.ranges(s)
    assert len(got) == len(mine) > 10 and not s["truncated"]
    for r in mine:
        g = next(x for x in got if x["start_ns"] == r.start - origin and x["name"] == str(r.name))
        assert g["end_ns"] == r.end - origin and g["thread"] == r.tid
        # open when it starts: same thread, started before (or with it and longer), not yet ended
        assert g["depth"] == sum(1 for o in mine if o.tid == r.tid and o is not r and o.end > r.start
                                 and (o.start < r.start or (o.start == r.start and o.end > r.end)))
        launched = [w for w in work.itertuples(index=False) if r.start <= w.launch <= r.end]
        if launched:
            assert g["gpu_start_ns"] == min(w.start for w in launched) - origin
            assert g["gpu_end_ns"] == max(w.end for w in launched) - origin
        else:
            assert g["gpu_start_ns"] is None
    assert {x["name"] for x in got if x["depth"] == 0} == {step["name"]}  # ProfilerStep#N encloses the rest
    assert timeline.sample(m, cap=3)["truncated"] and len(timeline.ranges(timeline.sample(m, cap=3))) == 3


MOE_ITEM = Path(__file__).parents[1] / "data" / "planted" / "item"\
    / "example_suite_test_moe.py_test_moe_forward.pt.trace.json.gz"


def test_calls_of_the_step_with_their_threads_named():
    """Checked against a plain loop over the trace's runtime calls that start in the step."""
    trace = load_kineto(MOE_ITEM)
    m = measure(trace)
    s = timeline.sample(m, calls=trace.runtime, thread_names={1933: "main"})
    step = m.steps.iloc[s["step"]]
    origin = int(m.work[m.work["step"] == s["step"]]["start"].min())
    mine = [r for r in trace.runtime.itertuples(index=False) if step["start"] <= r.start <= step["end"]]
    got = timeline.calls(s)
    assert [(c["start_ns"], c["dur_ns"], c["name"], c["thread"]) for c in got] == sorted(
        (r.start - origin, r.end - r.start, str(r.name), r.tid) for r in mine)
    assert {c["thread_name"] for c in got} == {"main"} and not s["truncated"]
    # the .item() bug: eight synchronizations a step
    assert [c["name"] for c in got].count("cudaStreamSynchronize") == 8
    # ranges index the same thread list as calls
    assert {r["thread"] for r in timeline.ranges(s)} == {1933} and s["threads"] == [1933]


def test_a_capped_sample_keeps_the_synchronizations_first():
    trace = load_kineto(MOE_ITEM)
    s = timeline.sample(measure(trace), cap=10, calls=trace.runtime)
    got = timeline.calls(s)
    assert s["truncated"] and len(got) == 10
    assert [c["name"] for c in got].count("cudaStreamSynchronize") == 8
    assert [c["start_ns"] for c in got] == sorted(c["start_ns"] for c in got)
    assert s["thread_names"] == [""]  # no names given


def test_a_sample_without_calls_reads_as_before():
    """Without the runtime calls (as every sample stored before they were kept) there are none
    and no thread names; the ranges' threads are those of the ranges alone."""
    m = measure(load_kineto(MOE_ITEM))
    s = timeline.sample(m)
    assert "calls" not in s and "thread_names" not in s and timeline.calls(s) == []
    assert s["threads"] == sorted({r["thread"] for r in timeline.ranges(s)})
