"""Record a baseline in several fresh processes (``--gpuprof-record-processes N``): the
process that ran ``--gpuprof-update-baseline`` is the first run; N - 1 more pytest
processes, one after the other, run the same command and each adds its run.

A baseline's recorded runs are what the next run's medians are bounded by (docs/metrics.md):
where pinned memory lands, the clocks and the CPU placement are fixed for a process, so
runs of one process would learn no spread at all.  One command is then enough to record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..options import option_args
from .fresh import fresh_pytest
from .role import RECORDING

#: How an update's line begins (``session``), which a fresh process's output is read for.
UPDATED, NOT_WRITTEN = "updated ", "no baseline written"


def replay_recorded(replay_dir: Path, processes: int) -> str:
    """What a recording from replayed traces recorded from: one run each, the kept traces'
    own, never a fresh process (they would replay the same traces again)."""
    skipped = f"; --gpuprof-record-processes={processes} applies to tests run on a GPU" if processes > 1 else ""
    return f"recorded from the traces replayed from {replay_dir}: one run a test, no fresh process{skipped}"


def record_again(args: list[str], where: Path, processes: int, keep: int, say: Callable[[str], None]) -> list[str]:
    """Run the same pytest command in ``processes - 1`` fresh processes from ``where``, each
    recording once more and keeping at least this recording's runs (``keep`` is the
    command's ``--gpuprof-baseline-runs``: 1 starts afresh in the first process only);
    ``say`` shows a line as each ends.  Returns why any of them did not record (empty when
    each did)."""
    problems = []
    for k in range(2, processes + 1):
        started = time.monotonic()
        done = fresh_pytest([*args, *option_args({"record-processes": 1, "baseline-runs": max(keep, processes)})],
                            where, {RECORDING: str(k)})
        lines = done.stdout.splitlines()
        updates = [line for line in lines if line.startswith((UPDATED, NOT_WRITTEN))]
        outcome = lines[-1].strip("= ") if lines else "no output"
        say(f"gpuprof: recorded run {k} of {processes} in a fresh process ({time.monotonic() - started:.1f} s): "
            f"{outcome}")
        for update in updates:  # one line each: the terminal writer escapes a line's control characters
            say(f"  {update}")
        if done.returncode not in (0, 1) or not updates or updates[0].startswith(NOT_WRITTEN):
            problems.append(f"run {k} of {processes} recorded nothing (exit {done.returncode}): "
                            + ("; ".join(updates) or (done.stderr.strip().splitlines() or ["no output"])[-1]))
    return problems
