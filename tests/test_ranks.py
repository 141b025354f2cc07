"""Several ranks of one distributed run (metrics/ranks.py, ``gpuprof analyze FOLDER``):
each rank's trace measured on its own timeline, and ``rank_skew`` worked out by hand from
traces built from the definition in docs/metrics.md ("Several ranks")."""

import json

import pytest

from pytest_gpuprof.cli.main import main

# rank 0 starts a step every 1000 us, rank 1 every 1300 us; each step runs 800 us on the
# CPU and launches one 100 us kernel 10 us in


def _rank_trace(rank: int, every_us: int, world_size: int = 2) -> dict:
    events = []
    for i in range(3):
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
