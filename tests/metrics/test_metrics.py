"""Metrics on real traces recorded on a GPU (tests/data/record_traces.py), checked
against values known by construction and against a naive, independent reading
of the raw JSON (stdlib json, exact decimal timestamps, plain Python loops)."""

import dataclasses
import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest

from helpers.naive import Naive, ns
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.trace.kineto import load_kineto
from pytest_gpuprof.trace.model import (
    COPY_COLUMNS,
    KERNEL_COLUMNS,
    RANGE_COLUMNS,
    RUNTIME_COLUMNS,
    SET_COLUMNS,
    Trace,
    make_table,
)

DATA = Path(__file__).parents[1] / "data"
EXAMPLES = Path(__file__).parents[2] / "example_suite" / "traces"
STEPS = 4  # record_traces.py: STEPS measured steps per trace


@pytest.fixture(scope="module")
def overlap():
    return measure(load_kineto(DATA / "overlap.pt.trace.json.gz")), Naive(DATA / "overlap.pt.trace.json.gz")


@pytest.fixture(scope="module")
def sync():
    return measure(load_kineto(DATA / "sync.pt.trace.json.gz")), Naive(DATA / "sync.pt.trace.json.gz")


def test_counts_and_bytes_known_by_construction(overlap, sync):
    m = overlap[0]
    assert m.metrics["step_count"] == STEPS
    assert m.step_source == "ProfilerStep#N"
    # 8 matmuls + 1 add per step; one 16 MiB pinned host-to-device copy per step
    assert m.per_step["kernel_count"] == [9] * STEPS
    assert m.per_step["memcpy_htod_count"] == [1] * STEPS
    assert m.per_step["memcpy_htod_bytes"] == [16 * 2**20] * STEPS
    assert m.metrics["memcpy_htod_bytes"] == STEPS * 16 * 2**20
    assert m.metrics["sync_count"] == 0
    s = sync[0]
    # one fill kernel, one 4-byte .item() copy, .item()'s stream sync + a device sync per step
    assert s.per_step["kernel_count"] == [1] * STEPS
    assert s.per_step["memcpy_dtoh_count"] == [1] * STEPS
    assert s.per_step["memcpy_dtoh_bytes"] == [4] * STEPS
    assert s.per_step["sync_count"] == [2] * STEPS
    assert s.metrics["overlap_efficiency"] == 0.0


def test_warmup_leftovers_are_not_counted(overlap):
    """Kernels launched during warm-up that ran inside the window belong to no step."""
    m, naive = overlap
    assert len(naive.all_kernels) > len(naive.kernels)  # the trace does hold such leftovers
    assert m.metrics["kernel_count"] == len(naive.kernels) == 9 * STEPS


def assert_matches_naive(m, naive):
    """Every scalar metric against the naive reading; ratios to the 6 decimals they are rounded to."""
    assert m.window == naive.w
    expected = naive.metrics()
    for name, value in expected.items():
        got = m.metrics[name]
        if value is None or isinstance(value, int):
            assert got == value, name
        elif name in ("gpu_utilization", "copy_utilization", "overlap_efficiency", "sync_wait_fraction"):
            assert got == round(value, 6), name
        else:
            assert got == pytest.approx(value, abs=1e-9), name


@pytest.mark.parametrize("which", ["overlap", "sync"])
def test_times_and_ratios_match_independent_computation(which, request):
    assert_matches_naive(*request.getfixturevalue(which))


def test_overlap_trace_really_overlaps(overlap):
    """The side-stream copy runs under the matmuls: most of its time overlaps a kernel."""
    assert overlap[0].metrics["overlap_efficiency"] > 0.9


def test_step_gpu_time_is_union_of_the_steps_own_work(overlap):
    m, naive = overlap
    for i in range(STEPS):
        own = [(s, e) for _, s, e, _, step in naive.kernels + naive.copies if step == i]
        busy = naive.union(own, float("-inf"), float("inf"))
        assert m.metrics["step_gpu_time_us"][i] == sum(e - s for s, e in busy) / 1000


def test_per_kernel_counts_add_up(overlap):
    kernels = overlap[0].metrics["kernels"]
    assert sum(k["count"] for k in kernels.values()) == overlap[0].metrics["kernel_count"]
    gemm = [k for name, k in kernels.items() if "gemm" in name]
    assert len(gemm) == 1 and gemm[0]["count"] == 8 * STEPS
    times = [k["time_us"] for k in kernels.values()]
    assert times == sorted(times, reverse=True)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json.gz")), ids=lambda p: p.name.split(".py_")[1][:30])
def test_example_traces_match_naive_reading(path):
    """On the example suite's real traces, whose kernels overlap one another on a stream
    (CNN and transformer) and whose copies run beside kernels on a side stream (weight
    streaming): every count, byte total, time and ratio per the naive reading."""
    m, naive = measure(load_kineto(path)), Naive(path)
    assert_matches_naive(m, naive)
    # the single-GPU workloads recorded on an H200, the two-GPU ones on two H100s
    assert m.gpu_name == ("NVIDIA H100 80GB HBM3" if "distributed" in path.name else "NVIDIA H200")


def _without_ranges(tmp_path, prefixes):
    with gzip.open(DATA / "overlap.pt.trace.json.gz", "rt") as fh:
        doc = json.load(fh)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith(prefixes)]
    path = tmp_path / "stripped.json"
    path.write_text(json.dumps(doc))
    return measure(load_kineto(path))


def test_steps_fall_back_to_step_n_ranges(tmp_path, overlap):
    m = _without_ranges(tmp_path, ("ProfilerStep#",))
    assert m.step_source == "step_N"
    assert list(m.steps["name"]) == [f"step_{i}" for i in range(STEPS)]
    # the same work lies inside the narrower step_N ranges
    assert m.per_step["kernel_count"] == [9] * STEPS
    assert m.metrics["memcpy_htod_bytes"] == overlap[0].metrics["memcpy_htod_bytes"]


def test_without_step_ranges_the_whole_trace_is_one_step(tmp_path):
    m = _without_ranges(tmp_path, ("ProfilerStep#", "step_"))
    with gzip.open(DATA / "overlap.pt.trace.json.gz", "rt") as fh:
        events = [e for e in json.load(fh, parse_float=Decimal)["traceEvents"]
                  if e.get("ph") == "X" and not str(e.get("name", "")).startswith(("ProfilerStep#", "step_"))]
    used = [e for e in events if e.get("cat") in
            ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "user_annotation")]
    assert m.step_source == "whole trace" and m.metrics["step_count"] == 1
    assert m.window[0] == min(ns(e["ts"]) for e in used)
    launched = {e["args"]["correlation"] for e in used if e["cat"] in ("cuda_runtime", "cuda_driver")}
    kernels = [e for e in used if e["cat"] == "kernel"]
    # kernels whose launch is in the trace count; the warm-up leftovers do not
    assert m.metrics["kernel_count"] == sum(e["args"]["correlation"] in launched for e in kernels) < len(kernels)


def test_per_step_time_samples_match_the_naive_reading(overlap):
    m, naive = overlap
    for i in range(STEPS):
        own = [(name, s, e) for name, s, e, _, step in naive.kernels if step == i]
        assert m.per_step["kernel_time_us"][i] == pytest.approx(sum(e - s for _, s, e in own) / 1000, abs=1e-9)
        for name, samples in m.per_step["kernels"].items():
            assert samples[i] == pytest.approx(sum(e - s for n, s, e in own if n == name) / 1000, abs=1e-9)
        copies = [e - s for _, s, e, _, step in naive.copies if step == i]
        assert m.per_step["memcpy_htod_time_us"][i] == pytest.approx(sum(copies) / 1000, abs=1e-9)
    # window_us per step: how far each step moved the window's end; they add up to |W|
    reach, previous, expected = naive.w[0], naive.w[0], []
    for i, (_, e) in enumerate(naive.steps):
        ends = [e] + [r[2] for r in naive.kernels + naive.copies if r[4] == i]
        reach = max(reach, max(ends))
        expected.append((reach - previous) / 1000)
        previous = reach
    assert m.per_step["window_us"] == pytest.approx(expected, abs=1e-9)
    assert sum(m.per_step["window_us"]) == pytest.approx(m.metrics["window_us"], abs=1e-6)


def test_cuda_graph_kernels_belong_to_the_step_of_their_graph_launch():
    """record_traces.py's graph workload: per step a 3-kernel CUDA graph replayed twice,
    then one eager kernel.  Graph kernels carry their cudaGraphLaunch's correlation id."""
    path = DATA / "graph.pt.trace.json.gz"
    m, naive = measure(load_kineto(path)), Naive(path)
    assert m.per_step["kernel_count"] == [7] * STEPS
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh, parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    graph_launches = {e["args"]["correlation"]: naive.step_of(ns(e["ts"]))
                      for e in events if e["name"] == "cudaGraphLaunch"}
    assert sorted(graph_launches.values()) == sorted(list(range(STEPS)) * 2)
    by_graph = [e for e in events if e.get("cat") == "kernel" and e["args"]["correlation"] in graph_launches]
    assert len(by_graph) == 3 * 2 * STEPS
    for i in range(STEPS):
        own = [e - s for _, s, e, _, step in naive.kernels if step == i]
        assert len(own) == 7
        assert m.per_step["kernel_time_us"][i] == pytest.approx(sum(own) / 1000, abs=1e-9)


def test_the_l2_flush_between_steps_is_not_measured():
    """record_traces.py's flush workload, captured by the plugin with flush_l2=True: per
    step an L2 flush (a fill kernel in a gpuprof_l2_flush range), then one reduction
    (a 4-byte memset and a reduce kernel)."""
    path = DATA / "flush.pt.trace.json.gz"
    m, naive = measure(load_kineto(path)), Naive(path)
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh, parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    flushes = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
               if e["name"] == "gpuprof_l2_flush" and e["cat"] == "user_annotation"]
    flush_calls = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"
                   and any(s <= ns(e["ts"]) <= f for s, f in flushes)}
    flush_kernels = [e for e in events if e.get("cat") == "kernel" and e["args"]["correlation"] in flush_calls]
    assert len(flushes) == STEPS and len(flush_kernels) == STEPS  # the flushes are in the trace
    assert all("FillFunctor" in e["name"] for e in flush_kernels)
    assert m.per_step["kernel_count"] == [1] * STEPS and m.per_step["memset_count"] == [1] * STEPS
    assert not any("FillFunctor" in name for name in m.metrics["kernels"])
    reductions = [(s, e) for name, s, e, _, step in naive.kernels if step is not None and "reduce_kernel" in name]
    assert m.metrics["kernel_time_us"] == pytest.approx(sum(e - s for s, e in reductions) / 1000, abs=1e-9)
    # the GPU time of the flush counts as idle: only the reductions are busy
    busy = sum(e - s for s, e in Naive.union(reductions, *naive.w))
    assert m.metrics["gpu_utilization"] == pytest.approx(busy / naive.width(), abs=1e-6)
    assert m.metadata["plan"]["flush_l2"] is True


def test_only_the_flushing_threads_calls_are_left_out():
    """A call another thread makes while a flush runs is the test's work: it stays."""
    import dataclasses

    import pandas as pd

    from pytest_gpuprof.trace.model import KERNEL_COLUMNS, RUNTIME_COLUMNS, make_table

    trace = load_kineto(DATA / "flush.pt.trace.json.gz")
    ranges = trace.ranges.assign(name=trace.ranges["name"].astype(str))
    flush = ranges[ranges["name"] == "gpuprof_l2_flush"].sort_values("start").iloc[1]  # in the 2nd measured step
    start = int(flush["start"]) + 1
    other_call = make_table(RUNTIME_COLUMNS, {"start": [start], "end": [start + 10], "name": ["cudaLaunchKernel"],
                                              "tid": [int(flush["tid"]) + 1], "correlation": [10**9]})
    its_kernel = make_table(KERNEL_COLUMNS, {"start": [start + 100], "end": [start + 200], "name": ["other_thread"],
                                             "device": [0], "stream": [7], "correlation": [10**9]})

    def cat(a, b):
        out = pd.concat([a, b], ignore_index=True)
        out["name"] = pd.Categorical(out["name"].astype(str))
        return out

    both = dataclasses.replace(trace, runtime=cat(trace.runtime, other_call), kernels=cat(trace.kernels, its_kernel))
    m = measure(both)
    assert m.per_step["kernel_count"] == [1, 2, 1, 1] and "other_thread" in m.metrics["kernels"]
    assert not any("FillFunctor" in name for name in m.metrics["kernels"])


@pytest.mark.parametrize("path", [DATA / "nested.pt.trace.json.gz", DATA / "overlap.pt.trace.json.gz",
                                  *sorted(EXAMPLES.glob("*.json.gz"))],
                         ids=lambda p: p.name.split(".")[0])
def test_per_step_slices_and_gpu_utilization_match_the_naive_reading(path):
    m, naive = measure(load_kineto(path)), Naive(path)
    slices = naive.step_slices()
    assert m.per_step["window_us"] == [round((hi - lo) / 1000, 3) for lo, hi in slices]
    assert m.per_step["gpu_utilization"] == pytest.approx(naive.per_step_gpu_utilization(), abs=1e-6)


@pytest.mark.parametrize("path", [*sorted((DATA / "host").glob("*.json.gz")),
                                  *sorted((DATA / "planted").rglob("*.json.gz"))],
                         ids=lambda p: f"{p.parent.name}-{p.name.split('.')[0][-24:]}")
def test_per_step_host_gaps_match_the_naive_reading(path):
    """The host traces (planted stalls, slow hosts, launch-bound loops) and the planted
    example traces (in three of them a thread that makes CUDA calls but launches nothing)."""
    m, naive = measure(load_kineto(path)), Naive(path)
    assert m.per_step["host_gap_us"] == [round(g / 1000, 3) for g in naive.host_gaps()]


@pytest.mark.parametrize("path", [*sorted((DATA / "host").glob("*.json.gz")), *sorted(EXAMPLES.glob("*.json.gz"))],
                         ids=lambda p: p.name.split(".")[0][-28:])
def test_per_step_host_speed_readings_match_the_naive_reading(path):
    m, naive = measure(load_kineto(path)), Naive(path)
    assert m.per_step["launch_call_us"] == [None if r is None else round(r / 1000, 3) for r in naive.launch_readings()]


# --- copy bandwidth and PCIe utilization (docs/metrics.md), against the naive reader -----

BANDWIDTH_TRACES = ["overlap.pt.trace.json.gz", "sync.pt.trace.json.gz",
                    "planted/extra_kernel/example_suite_test_transformer.py_test_transformer_train_step.pt.trace.json.gz",
                    "planted/pageable/example_suite_test_weight_streaming.py_test_weight_streaming.pt.trace.json.gz"]


@pytest.mark.parametrize("name", BANDWIDTH_TRACES)
def test_copy_bandwidths_and_pcie_utilization_match_the_naive_reading(name):
    """Real H200 traces of host-to-device, device-to-host and device-to-device copies, with a
    PCIe link of generation 5 and 16 lanes put in the header: 16 lanes x 32 GT/s x 128/130
    / 8 bits = 63.015 GB/s a direction."""
    trace = load_kineto(DATA / name)
    link = {"generation": 5, "width": 16}
    m = measure(dataclasses.replace(trace, metadata={**trace.metadata, "pcie_link": link}))
    total, steps = Naive(DATA / name).bandwidths(peak_gbps=16 * 32 * 128 / 130 / 8)
    moved = [k for k in total if k.endswith("_gbps") and total[k] is not None]
    assert moved  # each trace copies something
    def rounded(key, v):  # docs/metrics.md: rates to 4 significant digits, ratios to 6 decimals
        return None if v is None else float(f"{v:.4g}") if key.endswith("gbps") else round(v, 6)

    for key, value in total.items():
        assert m.metrics[key] == rounded(key, value), key
        expected = [rounded(key, v) for v in steps[key]]
        assert m.per_step[key] == pytest.approx(expected, abs=1e-9), key
    assert measure(trace).metrics["pcie_utilization"] is None  # the trace does not say its link


def test_a_pinned_host_to_device_copy_runs_near_the_links_peak():
    """The H200's pinned 16 MiB copies of overlap.pt.trace.json.gz: 55 GB/s, 87% of a
    generation-5 x16 link's 63 GB/s; the copies take part of each step only."""
    m = measure(load_kineto(DATA / "overlap.pt.trace.json.gz"))
    assert 50 < m.metrics["memcpy_htod_gbps"] < 63.02


def test_a_pcie_link_that_is_not_one_makes_the_trace_unreadable(tmp_path):
    from pytest_gpuprof.trace.model import first_problem
    trace = load_kineto(DATA / "sync.pt.trace.json.gz")
    for bad in ({"generation": 5}, {"generation": "5", "width": 16}, {"generation": 5, "width": True}, [5, 16],
                {"generation": 0, "width": 16}):
        problem = first_problem(dataclasses.replace(trace, metadata={**trace.metadata, "pcie_link": bad}))
        assert problem.startswith("its gpuprof.pcie_link must be"), bad
    assert first_problem(dataclasses.replace(trace, metadata={**trace.metadata, "pcie_link": None})) is None


def test_the_pcie_link_recorded_in_the_header_decides_pcie_utilization():
    """An H100 trace of benchmarks/copy_bandwidth.py --mib 64 (10 steps, each a 64 MiB pinned
    copy to the device, one back, one on the device), recorded with its link in the header:
    generation 5, 16 lanes, 63.015 GB/s a direction.  The copies ran at 54-55 GB/s (by hand
    with CUDA events on the same machine: 53.4 and 54.8, docs/benchmarks.md)."""
    path = DATA / "copies_h100.pt.trace.json.gz"
    trace = load_kineto(path)
    assert trace.metadata["pcie_link"] == {"generation": 5, "width": 16}
    m = measure(trace)
    total, steps = Naive(path).bandwidths(peak_gbps=16 * 32 * 128 / 130 / 8)
    assert m.metrics["pcie_utilization"] == round(total["pcie_utilization"], 6)
    assert m.per_step["pcie_utilization"] == [round(v, 6) for v in steps["pcie_utilization"]]
    assert m.metrics["memcpy_htod_bytes"] == m.metrics["memcpy_dtoh_bytes"] == 10 * 64 << 20
    assert 50 < m.metrics["memcpy_htod_gbps"] < 63.02 and 50 < m.metrics["memcpy_dtoh_gbps"] < 63.02



# --- communication kernels (docs/metrics.md), on a trace built from the definitions ------


def _comm_trace():
    """Two steps, [0, 10000] and [10000, 20000] ns, one launching thread.  Step 0: a GEMM
    [1000, 5000), an all-reduce ncclDevKernel_* [3000, 7000) and a second one [6000, 8000)
    (union [3000, 8000), 5000 ns; the GEMM hides [3000, 5000), 2000 ns).  Step 1: a demangled
    "void ncclKernel_*" send [12000, 14000) with nothing beside it.  A kernel named
    "my_nccl_like" is no NCCL kernel (the name must start with nccl)."""
    kernels = [("gemm", 1000, 5000, 1), ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", 3000, 7000, 2),
               ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", 6000, 8000, 3),
               ("void ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", 12000, 14000, 4),
               ("my_nccl_like", 15000, 15500, 5)]
    launches = {1: 100, 2: 200, 3: 300, 4: 11000, 5: 11100}
    runtime = make_table(RUNTIME_COLUMNS, {"name": ["cudaLaunchKernel"] * 5, "start": list(launches.values()),
                                           "end": [t + 10 for t in launches.values()], "tid": [1] * 5,
                                           "correlation": list(launches)})
    runtime["name"] = runtime["name"].astype("category")
    k = make_table(KERNEL_COLUMNS, {"name": [x[0] for x in kernels], "start": [x[1] for x in kernels],
                                    "end": [x[2] for x in kernels], "device": [0] * 5, "stream": [7] * 5,
                                    "correlation": [x[3] for x in kernels]})
    ranges = make_table(RANGE_COLUMNS, {"start": [0, 10000], "end": [10000, 20000],
                                        "name": ["ProfilerStep#0", "ProfilerStep#1"], "tid": [1, 1]})
    return Trace(k, make_table(COPY_COLUMNS, {}), make_table(SET_COLUMNS, {}), runtime, ranges, source="kineto")


def test_communication_metrics_as_defined():
    m = measure(_comm_trace())
    # 3 NCCL kernels: 4000 + 2000 + 2000 ns; their union [3000, 8000) and [12000, 14000): 7000 ns,
    # of which the GEMM covers [3000, 5000): 2000 ns -> overlap 2/7, exposed 5000 ns
    assert m.metrics["comm_kernel_count"] == 3 and m.per_step["comm_kernel_count"] == [2, 1]
    assert m.metrics["comm_time_us"] == 8.0 and m.per_step["comm_time_us"] == [6.0, 2.0]
    assert m.metrics["comm_compute_overlap"] == round(2000 / 7000, 6)
    assert m.metrics["exposed_comm_us"] == 5.0
    # step 0: union 5000, hidden 2000 -> 0.4, exposed 3000 ns; step 1: union 2000, hidden 0
    assert m.per_step["comm_compute_overlap"] == [0.4, 0.0]
    assert m.per_step["exposed_comm_us"] == [3.0, 2.0]


def test_a_test_that_does_not_communicate_has_no_overlap_to_report():
    m = measure(load_kineto(DATA / "sync.pt.trace.json.gz"))
    assert m.metrics["comm_kernel_count"] == 0 and m.metrics["comm_time_us"] == 0.0
    assert m.metrics["comm_compute_overlap"] is None and m.metrics["exposed_comm_us"] == 0.0
    assert m.per_step["comm_kernel_count"] == [0] * 4  # counts per step, exact as always
    # no series of zeros to judge: they would only widen the test's Bonferroni correction
    assert not {"comm_time_us", "exposed_comm_us", "comm_compute_overlap"} & set(m.per_step)


# --- a trace without GPU work in its steps: an error naming it, never a measurement of zeros --

def _kineto_file(tmp_path, events) -> Path:
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _event(cat, name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _steps(n=3):
    """N steps of 900 us, one every 1000 us from 1000 us."""
    return [_event("user_annotation", f"ProfilerStep#{i}", 1000 * (i + 1), 900) for i in range(n)]


def test_a_trace_of_cpu_activity_alone_is_an_error_naming_it(tmp_path):
    """A torch.profiler trace with CPU events only is an error: it used to measure 0 kernels and pass."""
    from pytest_gpuprof.errors import GpuprofError, TraceError

    path = _kineto_file(tmp_path, _steps() + [_event("cpu_op", "aten::add", 1000 * i + 1010, 50) for i in range(3)]
                        + [_event("cuda_runtime", "cudaGetDevice", 1020, 1, correlation=5)])
    with pytest.raises(TraceError) as err:
        measure(load_kineto(path))
    assert isinstance(err.value, GpuprofError)  # the session makes it the test's error, the commands exit 2
    assert str(err.value) == f"{path}: no GPU work to measure: it holds no kernel, memcpy or memset on any GPU"


def test_gpu_work_launched_outside_every_step_is_an_error_naming_it(tmp_path):
    """A kernel and a memset launched before the first step (a warm-up): the steps launched
    nothing, so there is nothing of the test's to measure."""
    from pytest_gpuprof.errors import TraceError

    path = _kineto_file(tmp_path, _steps() + [
        _event("cuda_runtime", "cudaLaunchKernel", 500, 5, correlation=1),
        _event("kernel", "warm_up", 600, 100, tid=7, device=0, stream=7, correlation=1),
        _event("cuda_runtime", "cudaMemsetAsync", 700, 5, correlation=2),
        _event("gpu_memset", "Memset (Device)", 800, 1, tid=7, device=0, stream=7, correlation=2, bytes=4),
    ])
    with pytest.raises(TraceError) as err:
        measure(load_kineto(path))
    assert str(err.value) == (f"{path}: no GPU work to measure: none of its 2 kernels, memcpys and memsets was "
                              "launched in its 3 measured step(s) (from ProfilerStep#N)")


def test_a_trace_whose_only_gpu_work_is_the_l2_flush_is_an_error(tmp_path):
    """The flush is the harness's work (docs/metrics.md): a step that ran nothing else has no
    GPU work of the test's."""
    from pytest_gpuprof.capture.ranges import L2_FLUSH_RANGE
    from pytest_gpuprof.errors import TraceError

    path = _kineto_file(tmp_path, _steps(1) + [
        _event("user_annotation", L2_FLUSH_RANGE, 1100, 200),
        _event("cuda_runtime", "cudaLaunchKernel", 1150, 5, correlation=1),
        _event("kernel", "fill", 1160, 50, tid=7, device=0, stream=7, correlation=1),
    ])
    with pytest.raises(TraceError) as err:
        measure(load_kineto(path))
    assert str(err.value) == (f"{path}: no GPU work to measure: it holds no kernel, memcpy or memset on any GPU, "
                              "its L2 flushes aside")


@pytest.mark.parametrize("cat, name, args", [
    ("kernel", "k", {"device": 0, "stream": 7}),
    ("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", {"device": 0, "stream": 7, "bytes": 4}),
    ("gpu_memset", "Memset (Device)", {"device": 0, "stream": 7, "bytes": 4}),
])
def test_one_kernel_copy_or_memset_in_a_step_is_work_enough(tmp_path, cat, name, args):
    path = _kineto_file(tmp_path, _steps() + [_event("cuda_runtime", "cudaLaunchKernel", 2010, 5, correlation=1),
                                              _event(cat, name, 2020, 3, tid=7, correlation=1, **args)])
    m = measure(load_kineto(path))
    assert m.per_step["kernel_count"] == ([0, 1, 0] if cat == "kernel" else [0, 0, 0])
    assert m.metrics["step_gpu_time_us"] == [0.0, 3.0, 0.0]  # its 3 us, in the step that launched it
