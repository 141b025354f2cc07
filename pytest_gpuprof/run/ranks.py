"""A distributed test (``@pytest.mark.gpuprof(world_size=N)``): its body runs in N fresh
pytest processes, one per rank, each with a process group (NCCL on GPUs, gloo without),
and the test fails with the message of any rank that failed.

The test's own process spawns the ranks and waits; a rank that does not finish within
``--gpuprof-rank-timeout`` seconds is killed with every other rank (each rank leads its
own process group, so its children go too), and the test fails saying which ranks hung.
Each rank is the same pytest command on that one test, told its place by the variables
``torchrun`` sets (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``)
and ``GPUPROF_RANK``; NVLink multicast stays off in every rank (``NCCL_NVLS_ENABLE=0``,
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from . import side_plugin

#: Set in a rank's process: its rank (the test's own process has none).
RANK = "GPUPROF_RANK"
#: Kept in every rank's environment: NVLink multicast off (two-GPU machines lent without it).
RANK_ENVIRONMENT = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


class Rank(NamedTuple):
    """What the ``gpuprof_rank`` fixture gives a distributed test's body."""

    rank: int
    world_size: int
    local_rank: int
    device: str  # "cuda:LOCAL_RANK", or "cpu" without a GPU


def this_rank() -> Rank | None:
    """This process's rank, when it is one of a distributed test's ranks."""
    if os.environ.get(RANK) is None:
        return None
    local = int(os.environ["LOCAL_RANK"])
    import torch

    device = f"cuda:{local}" if torch.cuda.is_available() else "cpu"
    return Rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), local, device)


def join(rank: Rank) -> None:
    """Join the test's process group: NCCL on a GPU, gloo on the CPU."""
    import torch
    import torch.distributed as dist

    if rank.device.startswith("cuda"):
        torch.cuda.set_device(rank.local_rank)
    dist.init_process_group("nccl" if rank.device.startswith("cuda") else "gloo", rank=rank.rank,
                            world_size=rank.world_size)


def leave() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RankOutcome(NamedTuple):
    rank: int
    ended: str  # passed | failed | error | skipped: REASON | hung | crashed (exit N)
    message: str  # a failed rank's failure text


def spawn(nodeid: str, world_size: int, rootdir: Path, timeout_s: float) -> list[RankOutcome]:
    """Run the test's body in ``world_size`` fresh pytest processes and wait for all of them,
    killing every rank once one has run ``timeout_s`` seconds."""
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="gpuprof-ranks-") as tmp:
        folder = Path(tmp)
        (folder / "_gpuprof_side.py").write_bytes(Path(side_plugin.__file__).read_bytes())
        processes = []
        for rank in range(world_size):
            env = {**os.environ, **RANK_ENVIRONMENT, RANK: str(rank), "RANK": str(rank), "LOCAL_RANK": str(rank),
                   "WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                   "GPUPROF_SIDE_NODEIDS": json.dumps([nodeid]), "GPUPROF_SIDE_OUT": str(folder / f"rank{rank}.json"),
                   "PYTHONPATH": os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])])}
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "pytest", nodeid.split("::")[0], "-p", "_gpuprof_side", "-p", "no:cacheprovider",
                 "-q", "--rootdir", str(rootdir)],
                cwd=rootdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        deadline = time.monotonic() + timeout_s
        hung = set()
        for rank, process in enumerate(processes):
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                hung.add(rank)
        if hung:
            for process in processes:
                _kill(process)
        return [_outcome(rank, process, folder / f"rank{rank}.json", nodeid, rank in hung)
                for rank, process in enumerate(processes)]


def _kill(process: subprocess.Popen) -> None:
    """The rank and everything it started (it leads its own process group)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def _outcome(rank: int, process: subprocess.Popen, report: Path, nodeid: str, hung: bool) -> RankOutcome:
    if hung:
        return RankOutcome(rank, "hung", "")
    doc: dict[str, Any] = json.loads(report.read_text()) if report.is_file() else {}
    ended = (doc.get("ended") or {}).get(nodeid)
    if ended is None:
        return RankOutcome(rank, f"crashed (exit {process.returncode})", "")
    return RankOutcome(rank, ended, (doc.get("messages") or {}).get(nodeid, ""))


def verdict(outcomes: list[RankOutcome], timeout_s: float) -> str | None:
    """Why the distributed test failed (the first failing rank's message, which ranks hung),
    or None when every rank passed (or skipped)."""
    hung = [o.rank for o in outcomes if o.ended == "hung"]
    if hung:
        return (f"rank(s) {', '.join(map(str, hung))} of {len(outcomes)} did not finish within "
                f"{timeout_s:g} s (--gpuprof-rank-timeout): every rank was killed")
    for o in outcomes:
        if o.ended in ("failed", "error") or o.ended.startswith("crashed"):
            return f"rank {o.rank} of {len(outcomes)} {o.ended}" + (f":\n{o.message}" if o.message else "")
    return None
