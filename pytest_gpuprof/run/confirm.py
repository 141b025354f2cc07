"""Confirm before failing (``--gpuprof-confirm N``): a test whose only failures are times
or ratios is measured again, N times, each in a fresh pytest process, and fails only if
every re-run that measured it fails the same metrics.

Where pinned memory lands, the clocks a process gets and its CPU placement are fixed
for the life of a process: the steps of one run are not independent samples of the
machine, and a shift between processes can look significant within one.  A fresh
process draws them again; a real regression fails in every one.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..compare.confirmation import Rerun, broken_metrics
from ..compare.confirmation import confirm as judge_reruns
from ..compare.evaluate import TestResult
from ..errors import GpuprofError
from ..numbers import format_number
from ..options import option_args
from .child_results import child_results
from .fresh import fresh_pytest
from .role import CONFIRMING


def confirm(result: TestResult, args: list[str], rootdir: Path, count: int, timeout_s: float,
            say: Callable[[str], None]) -> None:
    """Re-measure a failed test ``count`` times (``rerun``), saying before and after each
    re-run what happens (which test, re-run k of N, its outcome and how long it took),
    then hand them to the judge (``compare.confirmation.confirm``)."""
    nodeid = result.nodeid or ""
    broken = ", ".join(broken_metrics(result))
    say(f"gpuprof: {nodeid} failed on {broken}: re-running it {count} time(s), each in a fresh process "
        f"(stopped after {format_number(timeout_s)} s), to confirm")
    reruns: list[Rerun] = []
    for k in range(1, count + 1):
        start = time.monotonic()
        again = rerun(nodeid, args, rootdir, timeout_s)
        say(f"gpuprof: {nodeid}: re-run {k} of {count}: {_outcome(again)} ({time.monotonic() - start:.1f} s)")
        reruns.append(again)
    judge_reruns(result, reruns)


def _outcome(again: Rerun) -> str:
    """What one re-run found, in a few words: its status and the metrics that broke, or why
    it measured nothing."""
    if isinstance(again, str):
        return again
    broken = broken_metrics(again)
    return f"{again.status} ({', '.join(broken)})" if broken else again.status


def rerun(nodeid: str, args: list[str], rootdir: Path, timeout_s: float) -> Rerun:
    """The test measured again in a fresh pytest process with these gpuprof options; its
    result, or why there is none (it ran over ``timeout_s`` seconds: it was stopped)."""
    with tempfile.TemporaryDirectory(prefix="gpuprof-confirm-") as tmp:
        out = Path(tmp) / "results.json"
        try:
            done = fresh_pytest([nodeid, "-p", "no:cacheprovider", "-q", "--rootdir", str(rootdir), *args,
                                 *option_args({"json": out, "confirm": 0, "timeline-events": 0})],
                                rootdir, {CONFIRMING: "1"}, timeout_s)
        except subprocess.TimeoutExpired:
            return (f"the re-run ran over {format_number(timeout_s)} s (--gpuprof-confirm-timeout) and was "
                    f"stopped")
        try:
            tests = child_results(out, "the re-run", f"exit {done.returncode}")
        except GpuprofError as exc:
            return str(exc)
        return tests.get(nodeid) or "the re-run did not measure the test"
