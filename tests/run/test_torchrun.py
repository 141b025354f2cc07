"""The ``torchrun --nproc-per-node N -m pytest --gpuprof`` form (run/torchrun.py): every rank
profiles, rank 0 judges each test from every rank's trace and reports, and every rank fails
or passes each test alike and ends with the same exit status.  Without a GPU the ranks
replay the example suite's two-GPU traces (recorded on two H100s), each its own rank's."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DDP = "example_suite/test_distributed.py::test_ddp_training"
MOE = "example_suite/test_distributed.py::test_expert_parallel_moe"


@pytest.fixture
def suite(tmp_path):
    shutil.copytree(ROOT / "example_suite", tmp_path / "example_suite",
                    ignore=shutil.ignore_patterns("traces", "__pycache__"))
    (tmp_path / "traces").mkdir()
    for trace in (ROOT / "example_suite" / "traces").glob("*distributed*"):
        shutil.copy(trace, tmp_path / "traces")
    shutil.copytree(ROOT / "baselines", tmp_path / "baselines")
    return tmp_path


def ranks(suite: Path, world: int = 2, *args: str) -> list[subprocess.CompletedProcess]:
    """The example suite's distributed tests replayed by ``--gpuprof`` in ``world`` processes
    started as torchrun starts them (``launch``)."""
    return launch(suite, world, ["example_suite/test_distributed.py", "-p", "no:cacheprovider", "--gpuprof",
                                 "--gpuprof-replay=traces", "--gpuprof-json=results.json",
                                 "--gpuprof-rank-timeout=60", *args])


def launch(cwd: Path, world: int, pytest_args: list[str]) -> list[subprocess.CompletedProcess]:
    """The pytest command in ``world`` processes started as torchrun starts them (its variables:
    TORCHELASTIC_RUN_ID, "none" as torchrun's default, RANK, LOCAL_RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT, and TORCHELASTIC_ERROR_FILE in a folder of this launch's)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    attempt = Path(tempfile.mkdtemp(prefix="torchelastic_", dir=cwd)) / "none_x" / "attempt_0"
    started = [subprocess.Popen([sys.executable, "-m", "pytest", *pytest_args], cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "TORCHELASTIC_RUN_ID": "none", "RANK": str(r),
                                     "LOCAL_RANK": str(r), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
                                     "MASTER_PORT": str(port),
                                     "TORCHELASTIC_ERROR_FILE": str(attempt / str(r) / "error.json")})
               for r in range(world)]
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=300), p.stdout.read(), "") for p in started]


def test_rank_zero_judges_every_test_from_every_ranks_trace_and_alone_reports(suite):
    zero, one = ranks(suite)
    assert zero.returncode == one.returncode == 0, zero.stdout + one.stdout
    doc = json.loads((suite / "results.json").read_text())  # rank 0's: rank 1 writes no report
    assert sorted(t["nodeid"] for t in doc["tests"]) == [DDP, MOE]
    for t in doc["tests"]:
        assert t["status"] == "passed" and sorted(t["ranks"]) == ["0", "1"]
        assert {r["trace"] for r in t["ranks"].values()} == {
            str(suite / "traces" / p.name) for p in (suite / "traces").glob(f"*{t['nodeid'].split('::')[1]}*")}
    assert re.search(rf"^{re.escape(DDP)} \[rank 1\] +passed ", zero.stdout, re.M)
    assert "rank 1 of 2 under torchrun: rank 0 judged each profiled test" in one.stdout
    assert "[rank 1]" not in one.stdout


def test_a_rank_that_broke_fails_the_test_on_every_rank_with_one_exit_status(suite):
    path = suite / "baselines" / "example_suite" / "test_distributed.json"
    doc = json.loads(path.read_text())
    entry = next(iter(doc["tests"][DDP].values()))["ranks"]["1"]
    entry["metrics"]["kernel_count"] += entry["metrics"]["step_count"]  # one kernel a step more recorded on rank 1
    for samples in [entry["per_step"]] + [run["per_step"] for run in entry["runs"]]:
        samples["kernel_count"] = [n + 1 for n in samples["kernel_count"]]
    path.write_text(json.dumps(doc))
    zero, one = ranks(suite)
    assert zero.returncode == one.returncode == 1
    line = "rank 1 kernel_count: baseline 87, current 86 (-1.1%) [changed; rule: must match exactly per step]"
    assert line in zero.stdout and line in one.stdout  # rank 1 fails the test with rank 0's words
    for out in (zero.stdout, one.stdout):
        assert f"FAILED {DDP}" in out and f"FAILED {MOE}" not in out


def test_a_rank_that_never_says_fails_the_test_after_the_timeout(suite):
    """Rank 0 of a world of 2 is never started: rank 1 waits for its verdict (three times
    --gpuprof-rank-timeout: rank 0 may wait the timeout for the slowest rank, then judge), then fails."""
    command = [sys.executable, "-m", "pytest", "example_suite/test_distributed.py", "-p", "no:cacheprovider",
               "--gpuprof", "--gpuprof-replay=traces", "--gpuprof-rank-timeout=2", "-k", "ddp"]
    env = {**os.environ, "TORCHELASTIC_RUN_ID": "lonely", "WORLD_SIZE": "2"}
    done = subprocess.run(command, cwd=suite, capture_output=True, text=True, timeout=120,
                          env={**env, "RANK": "1", "LOCAL_RANK": "1"})
    assert done.returncode == 1
    assert "torchrun: rank(s) 0 said nothing about verdict example_suite/test_distributed.py::test_ddp_training " \
           "within 6 s (--gpuprof-rank-timeout)" in done.stdout


def test_a_test_skipped_on_every_rank_is_skipped_and_one_skipped_on_one_rank_fails_on_the_others(suite):
    (suite / "example_suite" / "conftest.py").write_text(
        (suite / "example_suite" / "conftest.py").read_text() + '''

@pytest.fixture(autouse=True)
def _skip_as_asked(request):
    import os
    if os.environ.get("SKIP_ON") in ("all", os.environ["RANK"]) and "ddp" in request.node.name:
        pytest.skip("not on this rank")
''')
    os.environ["SKIP_ON"] = "all"
    try:
        every = ranks(suite)
        os.environ["SKIP_ON"] = "1"
        one = ranks(suite)
    finally:
        del os.environ["SKIP_ON"]
    assert [r.returncode for r in every] == [0, 0]
    assert all("1 passed, 1 skipped" in r.stdout for r in every)
    assert [r.returncode for r in one] == [1, 1], one[1].stdout[-3000:]  # one exit status
    assert f"FAILED {DDP}" in one[0].stdout
    assert "gpuprof: rank 1 of 2 skipped: not on this rank, while other ranks ran the test" in one[0].stdout
    assert "1 passed, 1 skipped" in one[1].stdout  # rank 1 skipped it, and ends as rank 0 does


def test_a_session_of_one_rank_or_with_nsys_or_xdist_is_no_torchrun_session(suite):
    env = {**os.environ, "TORCHELASTIC_RUN_ID": "x", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
    command = [sys.executable, "-m", "pytest", "example_suite/test_distributed.py", "-p", "no:cacheprovider",
               "--gpuprof", "--gpuprof-replay=traces"]
    alone = subprocess.run(command, cwd=suite, capture_output=True, text=True, env=env, timeout=120)
    assert alone.returncode == 0 and "under torchrun" not in alone.stdout  # judged in this one process
    env["WORLD_SIZE"] = "2"
    nsys = subprocess.run([*command[:-1], "--gpuprof-nsys"], cwd=suite, capture_output=True, text=True, env=env,
                          timeout=120)
    assert nsys.returncode == 4 and "--gpuprof-nsys under torchrun" in nsys.stderr
    xdist = subprocess.run([*command, "-n", "2"], cwd=suite, capture_output=True, text=True, env=env, timeout=120)
    assert xdist.returncode == 4 and "pytest-xdist (-n) under torchrun" in xdist.stderr
    env["LOCAL_WORLD_SIZE"] = "1"
    nodes = subprocess.run(command, cwd=suite, capture_output=True, text=True, env=env, timeout=120)
    assert nodes.returncode == 4 and "2 ranks on several nodes" in nodes.stderr


GROUP_SUITE = """
import torch
import torch.distributed as dist


def test_first(gpuprof_rank):
    x = torch.tensor([float(gpuprof_rank.rank + 1)])
    dist.all_reduce(x)
    assert x.item() == 3.0


def test_second(gpuprof_rank):
    x = torch.tensor([1.0])
    dist.all_reduce(x)
    assert x.item() == 2.0 and dist.is_initialized()
"""

GROUP_CONFTEST = """
import os
import pytest
import torch.distributed as dist


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    with open(f"left{os.environ['RANK']}", "w") as fh:
        fh.write(str(dist.is_initialized()))
"""


JOINED_BY_THE_SUITE = """

@pytest.fixture(scope="session", autouse=True)
def own_group():
    dist.init_process_group("gloo", init_method="env://")
"""


@pytest.mark.parametrize("suite_joins", [False, True], ids=["gpuprof joins", "the suite joined"])
def test_torchruns_process_group_is_joined_once_and_left_when_the_session_ends(tmp_path, suite_joins):
    """torch warns at exit of a process that kept a NCCL group (seen on every rank of a
    torchrun session on two H200s): the group is left once no test needs it; a group the
    suite joined itself is the suite's, used and left as it is."""
    (tmp_path / "test_group.py").write_text(GROUP_SUITE)
    (tmp_path / "conftest.py").write_text(GROUP_CONFTEST + (JOINED_BY_THE_SUITE if suite_joins else ""))
    zero, one = launch(tmp_path, 2, ["test_group.py", "-p", "no:cacheprovider", "-q"])
    assert zero.returncode == one.returncode == 0, zero.stdout + one.stdout
    assert "2 passed" in zero.stdout and "2 passed" in one.stdout
    assert [(tmp_path / f"left{r}").read_text() for r in (0, 1)] == [str(suite_joins)] * 2
