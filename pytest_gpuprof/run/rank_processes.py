"""A distributed test (``@pytest.mark.gpuprof(world_size=N)``): its body runs in N fresh
pytest processes, one per rank, each with a process group (NCCL on GPUs, gloo without),
and the test fails with the message of any rank that failed.

The test's own process spawns the ranks and waits.  Under ``--gpuprof`` each rank profiles its own
steps on its own GPU (``profiled``: gpuprof on in it, judged against nothing, its trace kept in
the folder given), and the test's process judges the ranks together (``compare.distributed``).  A
rank that does not finish within
``--gpuprof-rank-timeout`` seconds is killed with every other rank (each rank leads its
own process group, so its children go too), and the test fails saying which ranks hung;
once a rank failed the others get ``GRACE_S`` to end (they are likely blocked in a
collective), and the failing rank's message is the test's.  Each rank is the same pytest
command on that one test (gpuprof off in it unless profiled, ``-n0`` under xdist, ``--runxfail``: the test's
own process applies its marks), told its place by the variables ``torchrun`` sets
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``) and ``GPUPROF_RANK``; the ranks meet through a
file store in a private folder (no port to race for), and NVLink multicast stays off in
every rank (``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import GpuprofError
from ..options import option_args
from . import side_plugin
from .fresh import child_pytest, read_results
from .role import INSIDE_NSYS, PROFILED, RANK, RECORDING, SIDE, STORE, this_process

#: Kept in every rank's environment: NVLink multicast off (two-GPU machines lent without it).
RANK_ENVIRONMENT = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


class Rank(NamedTuple):
    """What the ``gpuprof_rank`` fixture gives a distributed test's body."""

    rank: int
    world_size: int
    local_rank: int
    device: str  # "cuda:LOCAL_RANK", or "cpu" without a GPU


def this_rank() -> Rank | None:
    """This process's rank: one of a distributed test's ranks, or of a session torchrun started."""
    place = this_process().place
    if place is None:
        return None
    import torch

    device = f"cuda:{place.local_rank}" if torch.cuda.is_available() else "cpu"
    return Rank(place.rank, place.world_size, place.local_rank, device)


def join(rank: Rank) -> None:
    """Join the process group: NCCL on a GPU, gloo on the CPU; torchrun's (``env://``) under
    torchrun, else the spawn's file store."""
    import torch
    import torch.distributed as dist

    if rank.device.startswith("cuda"):
        torch.cuda.set_device(rank.local_rank)
    backend = "nccl" if rank.device.startswith("cuda") else "gloo"
    process = this_process()
    init = "env://" if process.torchrun else f"file://{process.store}"
    dist.init_process_group(backend, init_method=init, rank=rank.rank, world_size=rank.world_size)


def leave() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


class RankProfiling(NamedTuple):
    """How a distributed test's ranks measure for its process: the test's gpuprof options for
    every rank, the folder where rank N writes its results (``rank{N}.json``, and under
    torch.profiler its trace, ``rank{N}/``), and whether Nsight Systems records them
    (``--gpuprof-nsys``: each rank marks its steps in NVTX inside the capture range its test's
    session holds open, and names its process in its results)."""

    args: list[str]
    folder: Path
    nsys: bool = False


class RankOutcome(NamedTuple):
    rank: int
    ended: str  # passed | failed | error | skipped: REASON | hung | stopped | crashed (exit N)
    message: str  # a failed rank's failure text, or the end of a crashed rank's output
    results: Path | None = None  # a profiled rank's results document (``--gpuprof-json``)


#: Seconds the other ranks get to end once one rank failed: they are likely blocked in a
#: collective the failed rank will never join.
GRACE_S = 10.0


def spawn(item_path: Path, nodeid: str, world_size: int, rootdir: Path, timeout_s: float,
          xdist: bool, profiled: RankProfiling | None = None) -> list[RankOutcome]:
    """Run the test's body in ``world_size`` fresh pytest processes and wait for them: until
    all end, until one has run ``timeout_s`` seconds, or ``GRACE_S`` after one failed; the
    ranks still running then are killed, as they are when this process is interrupted.
    ``profiled``: how each rank measures, and where it writes what it measured."""
    with tempfile.TemporaryDirectory(prefix="gpuprof-ranks-") as tmp:
        folder = Path(tmp)
        with contextlib.ExitStack() as running:  # on leaving, the ranks still running are stopped
            processes = [running.enter_context(_start(rank, world_size, folder, item_path, nodeid, rootdir, xdist,
                                                      _profiling(rank, profiled)))
                         for rank in range(world_size)]
            stopped, first = _wait(processes, folder, nodeid, timeout_s)
        order = sorted(range(world_size), key=lambda rank: rank != first)  # the first to fail, then by rank
        outcomes = [_outcome(rank, processes[rank], folder, nodeid, stopped.get(rank)) for rank in order]
    if profiled is None:
        return outcomes
    return [o._replace(results=profiled.folder / f"rank{o.rank}.json") for o in outcomes]


def _profiling(rank: int, profiled: RankProfiling | None) -> tuple[list[str], dict[str, str]] | None:
    """A profiled rank's gpuprof options and variables: the test's options, with its own
    results file (and trace folder, under torch.profiler); under nsys the rank is a session
    inside nsys (``backends.NsysInnerBackend``) writing its results where ``INSIDE_NSYS`` says."""
    if profiled is None:
        return None
    results = profiled.folder / f"rank{rank}.json"
    if profiled.nsys:
        return [*profiled.args, *option_args({"nsys": True})], {INSIDE_NSYS: str(results)}
    return [*profiled.args, *option_args({"": True, "json": results, "output-dir": profiled.folder / f"rank{rank}",
                                          "keep-traces": True})], {}


def _start(rank: int, world_size: int, folder: Path, item_path: Path, nodeid: str, rootdir: Path,
           xdist: bool, gpuprof: tuple[list[str], dict[str, str]] | None
           ) -> contextlib.AbstractContextManager[subprocess.Popen]:
    """One rank: the same test in a fresh pytest process (``run.fresh.child_pytest``), its output
    kept in its log for a crash's message; gpuprof off in it unless ``gpuprof`` gives its options
    and variables (it then measures, as an A/B side does: nothing fails it, no probes, no base:
    ``role.SIDE``)."""
    options, variables = gpuprof if gpuprof is not None else ([], {})
    profiling = {PROFILED: "1", SIDE: "rank", **variables} if gpuprof is not None else {}
    mark = {**RANK_ENVIRONMENT, **profiling, RANK: str(rank), "RANK": str(rank), "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world_size), STORE: str(folder / "store"),
            **side_plugin.install(folder, [nodeid], folder / f"rank{rank}.json"),
            "PYTHONPATH": os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])])}
    # sys-level capture: what the process writes to its file descriptors (a crash's last
    # words) goes to its log, a crash's message
    args = [str(item_path), "-p", side_plugin.NAME, "-p", "no:cacheprovider", "-q", "--runxfail", "--capture=sys",
            "--rootdir", str(rootdir), *(["-n0"] if xdist else []), *options]
    # a recording's rank keeps its trace
    return child_pytest(args, rootdir, mark, without={RECORDING}, log=folder / f"rank{rank}.log")


def _wait(processes: list[subprocess.Popen], folder: Path, nodeid: str,
          timeout_s: float) -> tuple[dict[int, str], int | None]:
    """Poll the ranks; the ones to stop, each with why (``hung`` past the timeout, ``stopped``
    once another rank failed and the grace ran out), and the rank that failed first by its own
    clock, among every rank that failed by then: the others' failures are often its consequence
    (a peer that closed its connection), and the consequence's process may end first (the
    failing rank still tearing down its process group)."""
    deadline = time.monotonic() + timeout_s
    failed: dict[int, float] = {}  # rank -> when it failed, once it ended so
    grace_from = None
    while True:
        running = [r for r, p in enumerate(processes) if p.poll() is None]
        now = time.monotonic()
        for r, p in enumerate(processes):
            if r not in failed and (when := _failed(r, p, folder, nodeid)) is not None:
                failed[r] = when
        grace_from = now if failed and grace_from is None else grace_from
        first = min(failed, key=failed.__getitem__) if failed else None
        if not running:
            return {}, first
        if now >= deadline:
            return {r: "hung" for r in running}, first
        if grace_from is not None and now - grace_from >= GRACE_S:
            return {r: "stopped" for r in running}, first
        time.sleep(0.05)


def _failed(rank: int, process: subprocess.Popen, folder: Path, nodeid: str) -> float | None:
    """When a rank that ended failed (a crash: now), None while it runs or when it did not fail."""
    if process.poll() is None:
        return None
    doc = _report(folder, rank)
    ended = (doc.get("ended") or {}).get(nodeid)
    if ended is None:
        return time.time()
    return (doc.get("failed_at") or {}).get(nodeid, time.time()) if ended in ("failed", "error") else None


def _report(folder: Path, rank: int) -> dict[str, Any]:
    """What a rank's side plugin wrote of how its test ended; nothing when it crashed first."""
    path = folder / f"rank{rank}.json"
    return read_results(path, f"rank {rank}") if path.is_file() else {}


def _ended(folder: Path, rank: int, nodeid: str) -> tuple[str | None, str]:
    doc = _report(folder, rank)
    return (doc.get("ended") or {}).get(nodeid), (doc.get("messages") or {}).get(nodeid, "")


def _outcome(rank: int, process: subprocess.Popen, folder: Path, nodeid: str, stopped: str | None) -> RankOutcome:
    if stopped:
        return RankOutcome(rank, stopped, "")
    ended, message = _ended(folder, rank, nodeid)
    if ended is None:
        output = (folder / f"rank{rank}.log").read_text(errors="replace").strip().splitlines()
        return RankOutcome(rank, f"crashed (exit {process.returncode})", "\n".join(output[-15:]))
    return RankOutcome(rank, ended, message)


def verdict(outcomes: list[RankOutcome], timeout_s: float) -> tuple[str, str] | None:
    """("fail", why) when a rank failed, crashed or hung (a failing rank's message first:
    the others often hang waiting for it), ("skip", why) when every rank skipped, or None
    when every rank passed."""
    n = len(outcomes)
    for o in outcomes:
        if o.ended in ("failed", "error") or o.ended.startswith("crashed"):
            return "fail", f"rank {o.rank} of {n} {o.ended}" + (f":\n{o.message}" if o.message else "")
    hung = [o.rank for o in outcomes if o.ended == "hung"]
    if hung:
        return "fail", (f"rank(s) {', '.join(map(str, hung))} of {n} did not finish within {timeout_s:g} s "
                        "(--gpuprof-rank-timeout): every rank was killed")
    skipped = [o for o in outcomes if o.ended.startswith("skipped")]
    if skipped and len(skipped) == n:
        return "skip", f"every rank {skipped[0].ended}"
    if skipped:
        return "fail", f"rank {skipped[0].rank} of {n} {skipped[0].ended}, while other ranks ran the test"
    return None


def rank_trace(outcome: RankOutcome, nodeid: str) -> Path:
    """The trace a profiled rank kept; an error naming the rank when it kept none."""
    _, test = rank_result(outcome, nodeid)
    trace = test.get("trace")
    if trace is None or not Path(trace).is_file():
        raise GpuprofError(f"rank {outcome.rank} measured nothing ({test.get('message') or 'no trace kept'}): "
                           f"{outcome.results}")
    return Path(trace)


def rank_result(outcome: RankOutcome, nodeid: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A profiled rank's results document and its test ``nodeid`` in it; an error naming the
    rank and the file when it cannot be read or holds no such test."""
    assert outcome.results is not None  # (a profiled rank's)
    doc = read_results(outcome.results, f"rank {outcome.rank}")
    tests = [t for t in doc.get("tests") or [] if isinstance(t, dict) and t.get("nodeid") == nodeid]
    if not tests:
        raise GpuprofError(f"rank {outcome.rank} measured nothing (its results hold no test {nodeid}): "
                           f"{outcome.results}")
    return doc, tests[0]
