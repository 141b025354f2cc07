"""Distributed tests (run/rank_processes.py): ``@pytest.mark.gpuprof(world_size=N)`` runs the body in
N fresh processes joined in a process group (gloo here, on the CPU), fails with a failing
rank's message, kills every rank when one hangs, and leaves no process behind."""

import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import NamedTuple

import pytest

from helpers.once import once_per_run

pytest.importorskip("torch.distributed")

SUITE = '''
import json, os, time
import pytest
import torch
import torch.distributed as dist


@pytest.mark.gpuprof(world_size=2)
def test_all_reduce(gpuprof_rank):
    x = torch.tensor([float(gpuprof_rank.rank + 1)])
    dist.all_reduce(x)
    with open(f"rank{gpuprof_rank.rank}.json", "w") as fh:
        json.dump({"sum": x.item(), "rank": gpuprof_rank.rank, "world_size": gpuprof_rank.world_size,
                   "device": gpuprof_rank.device, "nvls": os.environ.get("NCCL_NVLS_ENABLE"),
                   "multicast": os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST"),
                   "pid": os.getpid(), "parent": os.getppid()}, fh)


@pytest.mark.gpuprof(world_size=2)
def test_rank_one_fails(gpuprof_rank):
    assert gpuprof_rank.rank == 0, "only rank 0 may pass"


@pytest.mark.gpuprof(world_size=2)
def test_rank_one_hangs(gpuprof_rank):
    with open(f"hung{gpuprof_rank.rank}.pid", "w") as fh:
        fh.write(str(os.getpid()))
    if gpuprof_rank.rank == 1:
        time.sleep(120)


@pytest.mark.gpuprof(world_size=0)
def test_no_ranks(gpuprof_rank):
    pass


@pytest.mark.gpuprof(world_size=2)
def test_rank_one_fails_before_a_collective(gpuprof_rank):
    assert gpuprof_rank.rank == 0, "rank 1 never reaches the all-reduce"
    dist.all_reduce(torch.ones(1))  # rank 0 waits here for rank 1


@pytest.mark.gpuprof(world_size=2)
def test_every_rank_skips(gpuprof_rank):
    pytest.skip("nothing to do on this machine")


@pytest.mark.gpuprof(world_size=2)
def test_rank_one_dies(gpuprof_rank):
    if gpuprof_rank.rank == 1:
        os.write(2, b"rank 1 exits without a word to pytest\\n")
        os._exit(3)


def test_outside_a_rank(gpuprof_rank):
    assert gpuprof_rank is None
'''


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(test_dist=SUITE)
    return pytester


#: The suite's tests run together in one pytest process (``batch``): all but the hung rank's,
#: whose shorter --gpuprof-rank-timeout would cut the others short.
BATCHED = ("test_all_reduce", "test_outside_a_rank", "test_rank_one_fails", "test_rank_one_fails_before_a_collective",
           "test_every_rank_skips", "test_rank_one_dies", "test_no_ranks")


class Batch(NamedTuple):
    folder: Path
    stdout: str
    cases: dict[str, ElementTree.Element]  # each test's JUnit entry: its outcome and time

    def outcome(self, name: str) -> str:
        """passed, or the JUnit element its test left: failure, skipped, error."""
        inner = [e.tag for e in self.cases[name] if e.tag in ("failure", "skipped", "error")]
        return inner[0] if inner else "passed"

    def section(self, name: str) -> pytest.LineMatcher:
        """The lines pytest printed for the test's failure or error (its section under FAILURES
        or ERRORS), through to the next section."""
        lines = self.stdout.splitlines()
        start = next(i for i, line in enumerate(lines) if re.fullmatch(rf"_+ (ERROR at setup of )?{name} _+", line))
        end = next((i for i in range(start + 1, len(lines)) if re.fullmatch(r"(_+ .* _+|=+ .* =+)", lines[i])),
                   len(lines))
        return pytest.LineMatcher(lines[start:end])


@pytest.fixture(scope="session")
def batch(tmp_path_factory) -> Batch:
    """The tests of BATCHED run in one pytest process, each starting its own ranks, as the
    tests below once started a pytest of their own for each (a rank's set-up and
    torch's import are what take the time; made once for the run)."""
    def make(folder: Path) -> subprocess.CompletedProcess:
        (folder / "test_dist.py").write_text(SUITE)
        # a run of its own, as pytester starts one: no colours (the sections are matched
        # as text), none of this run's xdist variables
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")} | {"PY_COLORS": "0"}
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs",
                               "--gpuprof-rank-timeout=100", f"--junitxml={folder / 'junit.xml'}",
                               *(f"test_dist.py::{name}" for name in BATCHED)],
                              cwd=folder, env=environ, capture_output=True, text=True, timeout=600)

    folder, proc = once_per_run(tmp_path_factory, "ranks", make)
    cases = {case.get("name"): case for case in ElementTree.parse(folder / "junit.xml").getroot().iter("testcase")}
    assert sorted(cases) == sorted(BATCHED), proc.stdout + proc.stderr
    return Batch(folder, proc.stdout, cases)


def test_the_ranks_run_the_body_in_one_process_group(batch):
    assert batch.outcome("test_all_reduce") == batch.outcome("test_outside_a_rank") == "passed", batch.stdout
    ranks = [json.loads((batch.folder / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["sum"] for r in ranks] == [3.0, 3.0]  # 1 + 2, all-reduced over both ranks
    assert [(r["rank"], r["world_size"], r["device"]) for r in ranks] == [(0, 2, "cpu"), (1, 2, "cpu")]
    assert all(r["nvls"] == "0" and r["multicast"] == "1" for r in ranks)
    assert ranks[0]["pid"] != ranks[1]["pid"]


def test_a_failing_rank_fails_the_test_with_its_message(batch):
    assert batch.outcome("test_rank_one_fails") == "failure", batch.stdout
    batch.section("test_rank_one_fails").fnmatch_lines(["*gpuprof: rank 1 of 2 failed:*", "*only rank 0 may pass*"])


def test_a_rank_failing_before_a_collective_is_named_and_the_waiting_rank_stopped(batch):
    name = "test_rank_one_fails_before_a_collective"
    assert float(batch.cases[name].get("time")) < 60  # the 10 s grace, not the 100 s timeout
    assert batch.outcome(name) == "failure", batch.stdout
    batch.section(name).fnmatch_lines(["*gpuprof: rank 1 of 2 failed:*", "*rank 1 never reaches the all-reduce*"])


def test_a_test_every_rank_skips_is_skipped_and_a_dead_rank_shows_its_output(batch):
    assert batch.outcome("test_every_rank_skips") == "skipped" and batch.outcome("test_rank_one_dies") == "failure"
    batch.section("test_rank_one_dies").fnmatch_lines(["*gpuprof: rank 1 of 2 crashed (exit 3):*",
                                                       "rank 1 exits without a word to pytest"])
    pytest.LineMatcher(batch.stdout.splitlines()).fnmatch_lines(
        ["SKIPPED *gpuprof: every rank skipped: nothing to do on this machine"])


def test_a_hung_rank_is_killed_with_the_others_and_named(suite):
    started = time.monotonic()
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "--gpuprof-rank-timeout=20",
                                        "test_dist.py::test_rank_one_hangs")
    assert time.monotonic() - started < 90  # not the rank's 120 s
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*gpuprof: rank(s) 1 of 2 did not finish within 20 s (--gpuprof-rank-timeout): "
                                 "every rank was killed*"])
    pid = int((suite.path / "hung1.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # no process left behind


def test_a_bad_world_size_is_said(batch):
    assert batch.outcome("test_no_ranks") == "error"  # at set-up: every marker is checked when tests are collected
    batch.section("test_no_ranks").fnmatch_lines(["*world_size must be a whole number of ranks, 1 or more, got 0*"])


class _Ending:
    """A rank's process as _wait polls it: running for ``polls`` looks, then ended (exit 1)."""

    def __init__(self, polls: int) -> None:
        self.polls = polls

    def poll(self):
        self.polls -= 1
        return None if self.polls >= 0 else 1


def test_the_first_rank_to_fail_is_named_even_when_its_process_ends_last(tmp_path):
    """Seen in CI under load: rank 1 failed, then tore down its process group, and rank 0,
    whose collective lost its peer, failed later but ended first."""
    from pytest_gpuprof.run.rank_processes import _wait

    for rank, when in ((0, 200.0), (1, 100.0)):  # each rank's own clock of its failure
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(
            {"ended": {"t.py::t": "failed"}, "failed_at": {"t.py::t": when}}))
    stopped, first = _wait([_Ending(0), _Ending(3)], tmp_path, "t.py::t", timeout_s=60)
    assert (stopped, first) == ({}, 1)
