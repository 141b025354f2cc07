"""Which process this is: read in one place from what its parent set in its environment.

gpuprof starts pytest processes of its own, and torchrun starts others: one side of an A/B
comparison (``sides``), a confirmation re-run (``confirm``), a recording's later process
(``record``), a distributed test's rank (``rank_processes``), the session inside Nsight Systems
(``nsys_backend``), the test under Nsight Compute (``kernel_profiling``), each rank of a session torchrun
launched (``torchrun``).  A parent marks its child with the variables below; this module alone
reads them (``this_process``), and the session asks the ``Process`` it read once.  pytest-xdist
marks its workers itself (``config.workerinput``), and ``gpus`` hands them their GPUs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

#: A process that measures for another: ``base`` or ``head`` (a side of an A/B comparison),
#: ``rank`` (a profiled rank of a distributed test), ``ncu`` (the test under Nsight Compute).
#: Nothing fails it on ``--gpuprof-strict``; it neither compares with a base, confirms, probes
#: the machine nor runs Nsight Compute.
SIDE = "GPUPROF_SIDE"
#: ``SIDE`` of the process Nsight Compute profiles.
NCU_SIDE = "ncu"
#: One of a recording's later fresh processes (its number, 2 and up): it neither records
#: again, writes reports nor keeps traces.
RECORDING = "GPUPROF_RECORDING"
#: A confirmation re-run: it judges but never confirms again.
CONFIRMING = "GPUPROF_CONFIRMING"
#: A distributed test's rank: its rank (the test's own process has none).
RANK = "GPUPROF_RANK"
#: A rank that profiles its steps for its test's process (gpuprof stays on in it).
PROFILED = "GPUPROF_RANK_PROFILED"
#: Where a distributed test's ranks meet (a file store in the spawn's private folder).
STORE = "GPUPROF_RANK_STORE"
#: The session inside ``nsys profile`` (or under ncu): where it writes its outcomes for the
#: session outside, which judges them.
INSIDE_NSYS = "GPUPROF_NSYS_INNER"
#: Set by torchrun in every process it starts (the run's id): each is a rank of the whole session.
TORCHRUN = "TORCHELASTIC_RUN_ID"
#: Where torchrun asks each worker to write its error: a folder per rank in a folder per attempt.
ERROR_FILE = "TORCHELASTIC_ERROR_FILE"


class Place(NamedTuple):
    """A rank's place (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE``, as
    torchrun sets them and ``rank_processes`` sets them for a distributed test's ranks)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int


@dataclass(frozen=True)
class Process:
    """What a pytest process is for, as its parent said."""

    side: str | None = None  # SIDE's value
    recording: bool = False  # a recording's later process
    confirming: bool = False  # a confirmation re-run
    rank: int | None = None  # a distributed test's rank, spawned by its test's process
    profiled_rank: bool = False  # ... profiling its steps for its test's process
    store: Path | None = None  # ... where the ranks meet
    torchrun: str | None = None  # a rank of a session torchrun launched: the launch's id
    place: Place | None = None  # a rank's place, either kind
    inside_nsys: Path | None = None  # where the session inside nsys writes its outcomes

    @property
    def measures_for_another(self) -> bool:
        """A side's, a profiled rank's or ncu's process: what it measured is read by another."""
        return self.side is not None

    @property
    def under_ncu(self) -> bool:
        """The process ``kernel_profiling.profile_kernels`` runs under ncu: its measured steps are then
        process-wide NVTX ranges too (``capture.ranges.nvtx_process_range``), the filter
        ``kernel_profiling.ncu_command`` gives ncu (a push/pop range's filter, ``NAME/``, would hold only the
        kernels of the thread that opened it, not autograd's backward pass)."""
        return self.side == NCU_SIDE

    @property
    def first(self) -> bool:
        """The process the user started (not a side, a re-run or a recording's later process):
        the one that runs Nsight Compute and confirmation, and records again."""
        return not (self.measures_for_another or self.confirming or self.recording)

    @property
    def profiles(self) -> bool:
        """Whether gpuprof may profile here: not in a rank its test's process does not profile."""
        return self.rank is None or self.profiled_rank


def this_process(environ: Mapping[str, str] | None = None) -> Process:
    """The process as its environment says (``os.environ`` unless given)."""
    env = os.environ if environ is None else environ
    rank, store, inside = env.get(RANK), env.get(STORE), env.get(INSIDE_NSYS)
    launched = bool(env.get(TORCHRUN)) and rank is None and "RANK" in env and int(env.get("WORLD_SIZE", "1")) > 1
    place = None
    if rank is not None or launched:
        world = int(env["WORLD_SIZE"])
        place = Place(int(env["RANK"]), world, int(env.get("LOCAL_RANK", env["RANK"])),
                      int(env.get("LOCAL_WORLD_SIZE", world)))
    return Process(side=env.get(SIDE) or None, recording=bool(env.get(RECORDING)), confirming=bool(env.get(CONFIRMING)),
                   rank=None if rank is None else int(rank), profiled_rank=bool(env.get(PROFILED)),
                   store=Path(store) if store else None, torchrun=_launch(env) if launched else None, place=place,
                   inside_nsys=Path(inside) if inside else None)


def _launch(env: Mapping[str, str]) -> str:
    """torchrun's launch and attempt: its run id is "none" unless given, and a restarted attempt
    keeps it; the attempt's folder of error files (one a launch and attempt, shared by the
    node's ranks) tells them apart."""
    error_file = env.get(ERROR_FILE)
    if error_file:
        return str(Path(error_file).parent.parent)
    return f"{env[TORCHRUN]}-{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
