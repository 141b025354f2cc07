"""The form DeepSpeed and Megatron users run: ``torchrun --nproc-per-node N -m pytest --gpuprof``.

Every rank runs the whole suite and profiles each test on its own GPU; rank 0 judges each
profiled test from every rank's trace, as one distributed test (``compare.distributed``), and
writes the baselines and reports; every rank then passes or fails that test as rank 0
judged it, and every rank ends with the same exit status (the worst rank's).

The ranks meet in a folder of the host, under ``--gpuprof-output-dir``/torchrun
(from the folder torchrun gives the attempt's error files, or its run id and restart count:
one node).  Each rank writes there what it found, as a file of its own,
atomically; the others wait for it, up to ``--gpuprof-rank-timeout`` seconds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import ConfigError, GpuprofError
from ..files import write_atomic
from .kept_traces import TRACE_SUFFIX, unique_trace_name
from .role import Process

#: How often a waiting rank looks for the others' files.
POLL_S = 0.05


class Torchrun(NamedTuple):
    """This process's place in a torchrun launch, and where the ranks meet."""

    rank: int
    world_size: int
    local_rank: int
    folder: Path
    timeout_s: float

    @property
    def judges(self) -> bool:
        """Rank 0 judges, records and reports."""
        return self.rank == 0

    def share(self, key: str, doc: dict[str, Any]) -> None:
        """What this rank found about ``key`` (a test, the session's end), for the others."""
        path = self.path(key, self.rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(doc))

    def gather(self, key: str) -> dict[int, dict[str, Any]]:
        """Every rank's file about ``key``, waiting for them; an error naming the ranks that
        wrote none within the timeout."""
        return {rank: doc for rank, doc in zip(range(self.world_size), self._wait(key, range(self.world_size)))}

    def verdict(self, key: str) -> dict[str, Any]:
        """Rank 0's file about ``key``: it may first wait the timeout for the slowest rank,
        then judge (loading every rank's trace), so this waits three times the timeout."""
        return self._wait(key, [0], 3 * self.timeout_s)[0]

    def path(self, key: str, rank: int) -> Path:
        """Where ``rank`` writes about ``key``: a folder per key, a file per rank."""
        return self.folder / unique_trace_name(key).removesuffix(TRACE_SUFFIX) / f"rank{rank}.json"

    def _wait(self, key: str, ranks, timeout_s: float | None = None) -> list[dict[str, Any]]:
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        paths = [self.path(key, r) for r in ranks]
        while not all(p.is_file() for p in paths):
            if time.monotonic() > deadline:
                missing = [r for r, p in zip(ranks, paths) if not p.is_file()]
                raise GpuprofError(f"torchrun: rank(s) {', '.join(map(str, missing))} said nothing about {key} "
                                   f"within {timeout_s:g} s (--gpuprof-rank-timeout)")
            time.sleep(POLL_S)
        return [json.loads(p.read_text()) for p in paths]


def launched(process: Process, output_dir: Path, timeout_s: float) -> Torchrun | None:
    """This process's place when torchrun started it (not one of a distributed test's ranks,
    which ``rank_processes`` starts), or None."""
    place = process.place
    if process.torchrun is None or place is None:
        return None
    if place.local_world_size != place.world_size:
        raise ConfigError(f"torchrun: {place.world_size} ranks on several nodes; gpuprof's ranks meet on one node "
                          f"(LOCAL_WORLD_SIZE {place.local_world_size})")
    return Torchrun(place.rank, place.world_size, place.local_rank,
                    output_dir / "torchrun" / unique_trace_name(process.torchrun).removesuffix(TRACE_SUFFIX), timeout_s)
