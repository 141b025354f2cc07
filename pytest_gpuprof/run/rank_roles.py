"""Where a distributed test's body runs (``@pytest.mark.gpuprof(world_size=N)``): one plugin
object for each role a process has in it, chosen once by ``plugin._register_roles``, with
gpuprof on or off.

- ``RankSpawner``: the test's own process.  It runs the body in N fresh processes, one per
  rank (``rank_processes.spawn``), waits for them, and fails with a failing rank's message.
  Under ``--gpuprof`` each rank profiles its steps for the session of this process
  (``RankMeasuring``: ``session.GpuprofSession``), which then has them judged, or, inside
  nsys, hands them over.
- ``ReplayedRanks``: the test's own process in a replay: no rank runs, the ranks' kept traces
  are judged.
- ``SpawnedRank``: one of those ranks: it runs the body, in the process group it joins for the
  test.
- ``TorchrunRank``: a rank of a session torchrun started: it runs a test of torchrun's number
  of ranks, and skips one of another, in torchrun's process group, joined once.

Each gives the ``gpuprof_rank`` fixture its value (``rank``).  A rank's role object is
registered after the session's, so its ``pytest_pyfunc_call`` comes first.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from typing import Protocol

import pytest

from ..capture.marker import marker_of
from .gpus import visible_gpus
from .rank_processes import Rank, RankOutcome, RankProfiling, join, leave, spawn, this_rank, verdict

#: How a rank is in its process group while a test runs: joined for the test, torchrun's
#: (joined once, ``plugin._gpuprof_torchrun_group``), or none (a replay runs no body).
Group = Callable[[pytest.FixtureRequest, Rank], contextlib.AbstractContextManager[None]]


class RankRole(Protocol):
    """A process's role in a distributed test (a plugin object)."""

    def rank(self, request: pytest.FixtureRequest) -> Iterator[Rank | None]:
        """The ``gpuprof_rank`` fixture: this rank, in its process group while the test runs."""


class RankMeasuring(Protocol):
    """What the session of a test's own process does with its ranks under ``--gpuprof``."""

    def rank_profiling(self, item: pytest.Item) -> RankProfiling | None:
        """How each rank measures, and where it writes what it measured (None: it does not)."""

    def ranks_ended(self, item: pytest.Item, outcomes: list[RankOutcome]) -> None:
        """Every rank passed: the test judged from its ranks (or handed over); it may fail it."""

    def add_skipped(self, nodeid: str, reason: str) -> None:
        """A profiled test not measured, and why."""


class RankSpawner:
    """(the test's own process) A distributed test's body runs in its ranks, one fresh process
    each; this process waits for them and fails with a failing rank's message.  ``measuring``:
    the session that profiles here, None with gpuprof off."""

    def __init__(self, timeout_s: float | None, xdist: bool, measuring: RankMeasuring | None = None) -> None:
        self.timeout_s = timeout_s  # --gpuprof-rank-timeout
        self.xdist = xdist  # pytest-xdist is loaded: each rank runs without it
        self.measuring = measuring or _Unmeasured()

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        size = marker_of(pyfuncitem).world_size  # (a marker found wrong failed the test's set-up)
        if size <= 1:
            return None
        self._ranks(pyfuncitem, size, self._timeout())
        return True

    def _timeout(self) -> float:
        """The seconds a rank may run; a test that spawns ranks fails on one that is not positive."""
        if not self.timeout_s or self.timeout_s <= 0:
            pytest.fail(f"--gpuprof-rank-timeout / ini key gpuprof_rank_timeout: must be positive, got "
                        f"{self.timeout_s}", pytrace=False)
        return self.timeout_s

    def _ranks(self, item: pytest.Function, size: int, timeout_s: float) -> None:
        """The ranks spawned and waited for; the test failed or skipped as they ended, else
        handed to the session that profiles here."""
        visible = _cuda_gpus()
        if 0 < visible < size:
            self._skip(item, f"a distributed test of {size} ranks needs {size} GPUs, {visible} visible "
                             "(CUDA_VISIBLE_DEVICES; under pytest-xdist each worker sees one: run these tests "
                             "without -n)")
        profiled = self.measuring.rank_profiling(item)
        try:
            outcomes = spawn(item.path, item.nodeid, size, item.config.rootpath, timeout_s, self.xdist, profiled)
            found = verdict(outcomes, timeout_s)
            if found is not None:
                how, why = found
                if how == "skip":
                    self._skip(item, why)
                pytest.fail(f"gpuprof: {why}", pytrace=False)
        except BaseException:
            if profiled is not None:  # the ranks' files judge nothing now
                shutil.rmtree(profiled.folder, ignore_errors=True)
            raise
        self.measuring.ranks_ended(item, outcomes)

    def _skip(self, item: pytest.Item, why: str) -> None:
        """Skip a distributed test; under --gpuprof it is listed among the profiled tests not measured."""
        self.measuring.add_skipped(item.nodeid, why)
        pytest.skip(f"gpuprof: {why}")

    def rank(self, request: pytest.FixtureRequest) -> Iterator[Rank | None]:
        """No rank: the test's own process."""
        yield None


class ReplayedRanks(RankSpawner):
    """(the test's own process, replaying) No rank runs: the ranks' kept traces are judged."""

    def __init__(self, timeout_s: float | None, measuring: RankMeasuring | None) -> None:
        super().__init__(timeout_s, xdist=False, measuring=measuring)

    def _ranks(self, item: pytest.Function, size: int, timeout_s: float) -> None:
        self.measuring.ranks_ended(item, [])


class SpawnedRank:
    """(one of a distributed test's ranks) The body runs here, in the process group ``group``
    gives it (joined for the test, or none in a replay)."""

    def __init__(self, group: Group) -> None:
        self.group = group

    def rank(self, request: pytest.FixtureRequest) -> Iterator[Rank | None]:
        rank = this_rank()
        assert rank is not None  # (chosen for a process that has its place)
        with self.group(request, rank):
            yield rank


class TorchrunRank(SpawnedRank):
    """(a rank of a session torchrun started) A distributed test of torchrun's number of ranks
    runs here, in torchrun's process group (``group``); one of another number is skipped."""

    def __init__(self, group: Group, world_size: int) -> None:
        super().__init__(group)
        self.world_size = world_size

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> None:
        size = marker_of(pyfuncitem).world_size
        if size > 1 and size != self.world_size:
            pytest.skip(f"gpuprof: a distributed test of {size} ranks; torchrun started {self.world_size}")


@contextlib.contextmanager
def joined(request: pytest.FixtureRequest, rank: Rank) -> Iterator[None]:
    """A spawned rank's process group, joined for the test and left after it."""
    join(rank)
    try:
        yield
    finally:
        leave()


@contextlib.contextmanager
def torchruns_group(request: pytest.FixtureRequest, rank: Rank) -> Iterator[None]:
    """torchrun's process group, joined by the first test that asks (``_gpuprof_torchrun_group``)."""
    request.getfixturevalue("_gpuprof_torchrun_group")
    yield


def torchruns_group_held() -> Iterator[None]:
    """(the session fixture ``_gpuprof_torchrun_group``) torchrun's process group, joined unless
    the suite joined it already, and left at the end if joined here."""
    import torch.distributed as dist

    joined_here = not dist.is_initialized()
    rank = this_rank()
    if joined_here and rank is not None:  # (torchrun's processes always have their place)
        join(rank)
    try:
        yield
    finally:
        if joined_here:
            leave()


@contextlib.contextmanager
def no_group(request: pytest.FixtureRequest, rank: Rank) -> Iterator[None]:
    """A replay runs no test body: nothing to join."""
    yield


class _Unmeasured:
    """gpuprof off: the ranks measure nothing, and a skipped test is only skipped."""

    def rank_profiling(self, item: pytest.Item) -> None:
        return None

    def ranks_ended(self, item: pytest.Item, outcomes: list[RankOutcome]) -> None:
        return None

    def add_skipped(self, nodeid: str, reason: str) -> None:
        return None


def _cuda_gpus() -> int:
    """The GPUs this process sees (``gpus.visible_gpus``), 0 where CUDA is not available (the
    ranks use gloo there)."""
    import torch

    return len(visible_gpus()) if torch.cuda.is_available() else 0
