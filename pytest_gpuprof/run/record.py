"""Record a baseline in several fresh processes (``--gpuprof-record-processes N``): the
process that ran ``--gpuprof-update-baseline`` is the first run; N - 1 more pytest
processes, one after the other, run the same command and each adds its run.

A baseline's recorded runs are what the next run's medians are bounded by (docs/metrics.md):
where pinned memory lands, the clocks and the CPU placement are fixed for a process, so
runs of one process would learn no spread at all.  One command is then enough to record.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import GpuprofError
from ..options import option_args
from ..report.words import refused_line, updated_line
from .fresh import fresh_pytest, read_results
from .role import RECORDING


def replay_recorded(replay_dir: Path, processes: int) -> str:
    """What a recording from replayed traces recorded from: one run each, the kept traces'
    own, never a fresh process (they would replay the same traces again)."""
    skipped = f"; --gpuprof-record-processes={processes} applies to tests run on a GPU" if processes > 1 else ""
    return f"recorded from the traces replayed from {replay_dir}: one run a test, no fresh process{skipped}"


def record_again(args: list[str], where: Path, processes: int, keep: int, say: Callable[[str], None]) -> list[str]:
    """Run the same pytest command in ``processes - 1`` fresh processes from ``where``, each
    recording once more and keeping at least this recording's runs (``keep`` is the
    command's ``--gpuprof-baseline-runs``: 1 starts afresh in the first process only);
    ``say`` shows a line as each ends, with the baseline files its results document says it
    wrote.  Returns why any of them did not record (empty when each did)."""
    problems = []
    for k in range(2, processes + 1):
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="gpuprof-record-") as tmp:
            out = Path(tmp) / "results.json"
            done = fresh_pytest([*args, *option_args({"record-processes": 1, "baseline-runs": max(keep, processes),
                                                       "json": out})], where, {RECORDING: str(k)})
            lines = done.stdout.splitlines()
            outcome = lines[-1].strip("= ") if lines else "no output"
            try:
                baselines = read_results(out, f"recorded run {k}", f"exit {done.returncode}").get("baselines") or {}
                unread = ""
            except GpuprofError as exc:
                baselines, unread = {}, str(exc)
        say(f"gpuprof: recorded run {k} of {processes} in a fresh process ({time.monotonic() - started:.1f} s): "
            f"{outcome}")
        updates = [updated_line(u) for u in baselines.get("updated") or []]
        said = updates or [unread or refused_line(baselines.get("refused") or "the process recorded no test")]
        for line in said:  # one line each: the terminal writer escapes a line's control characters
            say(f"  {line}")
        if done.returncode not in (0, 1) or not updates:
            problems.append(f"run {k} of {processes} recorded nothing (exit {done.returncode}): " + "; ".join(said))
    return problems
