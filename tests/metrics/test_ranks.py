"""Several ranks of one distributed run (metrics/skew.py, ``gpuprof analyze FOLDER``):
each rank's trace measured on its own timeline, and ``rank_skew`` worked out by hand from
traces built from the definition in docs/metrics.md ("Several ranks")."""

import json
from pathlib import Path

import pytest

from pytest_gpuprof.cli.main import main

# rank 0 starts a step every 1000 us, rank 1 every 1300 us; each step runs 800 us on the
# CPU and launches one 100 us kernel 10 us in


def _rank_trace(rank: int, every_us: int, world_size: int = 2, steps: int = 3) -> dict:
    events = []
    for i in range(steps):
        t = i * every_us
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": t,
             "dur": 800, "args": {}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 10,
             "dur": 5, "args": {"correlation": 10 + i}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": 0, "tid": 7,
             "ts": t + 20, "dur": 100, "args": {"device": rank, "stream": 7, "correlation": 10 + i}},
        ]
    return {"deviceProperties": [{"id": rank, "name": "GPU"}],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world_size},
            "traceEvents": events}


@pytest.fixture
def run_folder(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    for rank, every in ((0, 1000), (1, 1300)):
        (folder / f"rank{rank}.json").write_text(json.dumps(_rank_trace(rank, every)))
    return folder


def test_rank_skew_is_the_slowest_ranks_median_step_span_over_the_mean(run_folder, capsys):
    assert main(["analyze", str(run_folder), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # spans: rank 0 [1000, 1000, 800] (the last step to the window's end, its CPU end
    # 2800 us), median 1000 us; rank 1 [1300, 1300, 800], median 1300 us; mean 1150:
    # (1300 - 1150) / 1150 = 0.130435
    assert out["rank_skew"] == pytest.approx(0.130435, abs=1e-6)
    assert set(out["ranks"]) == {"0", "1"}
    for rank in ("0", "1"):
        metrics = out["ranks"][rank]["metrics"]
        assert metrics["step_count"] == 3 and metrics["comm_kernel_count"] == 3 and metrics["comm_time_us"] == 300
        assert out["ranks"][rank]["trace"].endswith(f"rank{rank}.json")
    assert out["ranks"]["1"]["window_ns"] == [0, 3400_000]  # rank 1's own window: its last step ends at 3400 us


def test_the_table_names_each_rank_and_the_skew(run_folder, capsys):
    assert main(["analyze", str(run_folder)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "rank 0:" and "rank 1:" in out
    assert out[-1].startswith("rank_skew: 0.130435 (2 rank(s)")


def test_a_folder_without_ranks_or_with_one_rank_twice_is_refused(tmp_path, run_folder, capsys):
    doc = _rank_trace(1, 1000)
    (run_folder / "again.json").write_text(json.dumps(doc))
    assert main(["analyze", str(run_folder)]) == 2
    assert "are both rank 1" in capsys.readouterr().err
    del doc["distributedInfo"]
    (run_folder / "again.json").write_text(json.dumps(doc))
    assert main(["analyze", str(run_folder)]) == 2
    assert "again.json: no rank (the trace has no distributedInfo)" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["analyze", str(empty)]) == 2
    assert "holds no .json or .json.gz file" in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# one nsys report of two processes (as `nsys profile` of an mp.spawn captures): a real
# single-process export (tests/data/nsys/sync.sqlite.gz) with every CUDA and NVTX row of
# its process copied to a second process id on device 1, 1 ms later

def _two_processes(tmp_path):
    import gzip
    import shutil
    import sqlite3

    path = tmp_path / "two.sqlite"
    with gzip.open(Path(__file__).parents[1] / "data" / "nsys" / "sync.sqlite.gz") as src, open(path, "wb") as out:
        shutil.copyfileobj(src, out)
    con = sqlite3.connect(path)
    shift_pid = 1 << 24  # process id + 1 in a global id (bits 24 to 47)
    for table, column in (("CUPTI_ACTIVITY_KIND_KERNEL", "globalPid"), ("CUPTI_ACTIVITY_KIND_MEMCPY", "globalPid"),
                          ("CUPTI_ACTIVITY_KIND_MEMSET", "globalPid"), ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"),
                          ("NVTX_EVENTS", "globalTid")):
        if not con.execute("SELECT name FROM sqlite_master WHERE name = ?", (table,)).fetchone():
            continue
        columns = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        moved = [f"{c} + {shift_pid}" if c in (column, "endGlobalTid") else
                 f"{c} + 1000000" if c in ("start", "end") else
                 "1" if c == "deviceId" else c for c in columns]
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(moved)} FROM {table}")
    con.commit()
    con.close()
    return path


def test_an_nsys_report_of_two_processes_is_cut_per_process(tmp_path, capsys):
    from pytest_gpuprof.trace.nsys_sqlite import cuda_processes

    one = tmp_path / "one.sqlite"
    import gzip
    import shutil

    with gzip.open(Path(__file__).parents[1] / "data" / "nsys" / "sync.sqlite.gz") as src, open(one, "wb") as out:
        shutil.copyfileobj(src, out)
    assert main(["analyze", str(one), "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert "ranks" not in alone  # one process: analyzed as before
    two = _two_processes(tmp_path)
    (pid, device), (other, other_device) = cuda_processes(two)
    assert (other - pid, device, other_device) == (1, 0, 1)  # ordered by device: rank 0, rank 1
    assert main(["analyze", str(two), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["ranks"]) == {"0", "1"}
    for rank in ("0", "1"):  # each process measured on its own events: what the one-process report gives
        assert out["ranks"][rank]["metrics"] == alone["metrics"]
    assert out["ranks"]["1"]["trace"].endswith(f"process {other} (device 1)")
    assert out["rank_skew"] == 0  # the same steps, 1 ms apart


def test_diff_compares_two_distributed_runs_rank_by_rank(tmp_path, capsys):
    before, slower = tmp_path / "before", tmp_path / "slower"
    before.mkdir()
    slower.mkdir()
    for rank, every in ((0, 1000), (1, 1300)):
        (before / f"rank{rank}.json").write_text(json.dumps(_rank_trace(rank, every, steps=8)))
        doc = _rank_trace(rank, every, steps=8)
        if rank == 1:  # rank 1's all-reduce kernels take 150 us instead of 100
            for e in doc["traceEvents"]:
                if e["cat"] == "kernel":
                    e["dur"] = 150
        (slower / f"rank{rank}.json").write_text(json.dumps(doc))
    assert main(["diff", str(before), str(slower)]) == 1
    out = capsys.readouterr().out
    assert "(distributed run, 2 rank(s), GPU)" in out
    # regressions first: rank 1's comm time +50% (100 -> 150 us a step, 8 steps a side)
    assert out.index("=== rank 1 ===") < out.index("=== rank 0 ===")
    assert "comm_time_us: baseline 100 µs, current 150 µs (+50.0%)" in out
    single = tmp_path / "single.json"
    single.write_text(json.dumps(_rank_trace(0, 1000)))
    assert main(["diff", str(before), str(single)]) == 2
    assert "is a distributed run of several ranks: it compares with another one" in capsys.readouterr().err
