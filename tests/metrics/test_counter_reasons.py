"""Why a counter has no value, carried by the counters document (metrics/counters.py,
``ncu_counters``' ``no_value``) rather than guessed by whoever reads it: the metrics the
launches lack, named one by one, or the arithmetic (a bandwidth over 0 ns), on launch tables
written out here and on ncu's default set (tests/data/ncu)."""

import math
from pathlib import Path

import pandas as pd
import pytest

from pytest_gpuprof.metrics.counters import ncu_counters
from pytest_gpuprof.trace.ncu_report import COLUMNS, read_ncu_csv

DATA = Path(__file__).parents[1] / "data" / "ncu"
#: One launch that gives every counter: 1000 B moved by a card of 10 B a DRAM cycle at 1 GHz
#: (10 B/ns) in 200 ns: half its peak.
LAUNCH = {"step": "step_0", "time_ns": 200, "sm_throughput_pct": 40.0, "memory_throughput_pct": 60.0,
          "dram_throughput_pct": 50.0, "dram_bytes": 1000, "achieved_occupancy_pct": 70.0,
          "registers_per_thread": 32, "local_load_bytes": 0, "local_store_bytes": 0, "l1_hit_rate_pct": 10.0,
          "l2_hit_rate_pct": 80.0, "tensor_pipe_pct": 0.0, "dram_peak_bytes_per_cycle": 10,
          "dram_cycles_per_second": 1e9, "grid_size": 8, "block_size": 128}


def table(*launches: dict) -> pd.DataFrame:
    """A launch table as trace.ncu_report reads one: each launch ``LAUNCH`` but for what it says."""
    return pd.DataFrame([{"id": i, **LAUNCH, **launch} for i, launch in enumerate(launches)], columns=list(COLUMNS))


def counters(launches: pd.DataFrame) -> dict:
    return ncu_counters(launches, lambda name: name)


def test_a_bandwidth_over_a_zero_duration_says_so_not_that_metrics_are_missing():
    doc = counters(table({"kernel": "a", "time_ns": 0}, {"kernel": "b", "time_ns": 0}))
    assert doc["memory_bandwidth_utilization"] is None
    assert doc["no_value"] == {"memory_bandwidth_utilization": "has nothing to divide by: the profiled launches' "
                                                               "durations (gpu__time_duration.sum) total 0 ns"}
    assert doc["kernels"]["a"]["time_us"] == {"median": 0, "min": 0, "max": 0}  # a value: 0 us, no reason


def test_a_bandwidth_over_a_zero_peak_names_what_the_peak_is_made_of():
    doc = counters(table({"kernel": "a", "dram_peak_bytes_per_cycle": 0}))
    assert doc["memory_bandwidth_utilization"] is None
    assert doc["no_value"] == {"memory_bandwidth_utilization": (
        "has nothing to divide by: the peak DRAM bytes of the profiled launches' time (dram__bytes.sum.peak_sustained "
        "x dram__cycles_elapsed.avg.per_second x duration) total 0")}


def test_one_launch_of_zero_duration_leaves_the_bandwidth_of_the_others_and_no_reason():
    # a: 1000 B of 10 B/ns x 200 ns = 2000 possible; b: 500 B in 0 ns, 0 possible: 1500 / 2000
    doc = counters(table({"kernel": "a"}, {"kernel": "b", "time_ns": 0, "dram_bytes": 500}))
    assert doc["memory_bandwidth_utilization"] == 0.75 and doc["no_value"] == {}


def test_a_table_lacking_a_metric_names_it_for_the_kernel_and_the_figure_that_lack_it():
    # one of a's two launches lacks its local stores; every launch lacks the DRAM peak
    doc = counters(table({"kernel": "a", "dram_peak_bytes_per_cycle": math.nan},
                         {"kernel": "a", "local_store_bytes": math.nan, "dram_peak_bytes_per_cycle": math.nan},
                         {"kernel": "b", "dram_peak_bytes_per_cycle": math.nan}))
    assert doc["kernels"]["a"]["local_memory_bytes"] == {"median": None, "min": None, "max": None}
    assert doc["kernels"]["b"]["local_memory_bytes"] == {"median": 0, "min": 0, "max": 0}
    assert doc["memory_bandwidth_utilization"] is None
    assert doc["no_value"] == {  # the metrics lacking only, not the loads nor the bandwidth's bytes, clock, time
        "kernels[a].local_memory_bytes": "needs l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum "
                                         "(or l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum x 32)",
        "memory_bandwidth_utilization": "needs dram__bytes.sum.peak_sustained"}


@pytest.mark.parametrize("name", ("default", "full", "gpuprof"))
def test_every_null_of_a_real_report_has_its_reason_and_only_a_null_has_one(name):
    doc = counters(read_ncu_csv(DATA / f"{name}.raw.csv"))
    nulls = {f"kernels[{kernel}].{counter}" for kernel, row in doc["kernels"].items()
             for counter, stats in row.items() if isinstance(stats, dict) and stats["median"] is None}
    nulls |= {"memory_bandwidth_utilization"} if doc["memory_bandwidth_utilization"] is None else set()
    assert set(doc["no_value"]) == nulls


def test_the_default_sets_bandwidth_names_the_two_metrics_it_lacks():
    """ncu's default set holds durations and DRAM clocks, not DRAM bytes nor their peak."""
    doc = counters(read_ncu_csv(DATA / "default.raw.csv"))
    assert doc["no_value"]["memory_bandwidth_utilization"] == (
        "needs dram__bytes.sum (or dram__bytes_read.sum + dram__bytes_write.sum) and dram__bytes.sum.peak_sustained")
    nvjet = next(k for k in doc["kernels"] if k.startswith("nvjet"))
    assert doc["no_value"][f"kernels[{nvjet}].tensor_pipe_pct"] == (
        "needs sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")


def thresholds(*texts: str):
    from pytest_gpuprof.compare.rules import Rules, parse_threshold

    return Rules(thresholds=tuple(parse_threshold(t, "--gpuprof-threshold") for t in texts))


def test_a_threshold_on_a_value_the_counters_lack_breaks_with_their_reason():
    from pytest_gpuprof.compare.counter_verdicts import counter_verdicts

    over_no_time = counters(table({"kernel": "a", "time_ns": 0}))
    (v,) = counter_verdicts(None, over_no_time, thresholds("memory_bandwidth_utilization >= 0.5"))
    assert v.status == "threshold" and v.evidence == (
        "not checked: no value; memory_bandwidth_utilization has nothing to divide by: the profiled launches' "
        "durations (gpu__time_duration.sum) total 0 ns")
    no_stores = counters(table({"kernel": "a"}, {"kernel": "a", "local_store_bytes": math.nan}))
    (v,) = counter_verdicts(None, no_stores, thresholds("kernels[a].local_memory_bytes == 0"))
    assert v.status == "threshold" and v.evidence == (
        "not checked: no value; local_memory_bytes needs l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum "
        "(or l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum x 32)")
