"""Confirm before failing (``--gpuprof-confirm N``): a test whose only failures are times
or ratios is measured again, N times, each in a fresh pytest process, and fails only if
every re-run that measured it fails the same metrics.

Where pinned memory lands, the clocks a process gets and its CPU placement are fixed
for the life of a process: the steps of one run are not independent samples of the
machine, and a shift between processes can look significant within one.  A fresh
process draws them again; a real regression fails in every one.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..compare.evaluate import TestResult, fails_on_timing_alone
from ..compare.verdicts import BROKEN
from ..numbers import format_number
from ..options import option_args
from .fresh import fresh_pytest
from .role import CONFIRMING


def needs_confirmation(result: TestResult) -> bool:
    """Failed on time or ratio regressions alone (a count, a threshold or a kernel change needs none)."""
    return fails_on_timing_alone(result)


def confirm(result: TestResult, args: list[str], rootdir: Path, count: int, timeout_s: float,
            say: Callable[[str], None]) -> None:
    """Re-measure a failed test ``count`` times (``rerun``), saying before and after each
    re-run what happens (which test, re-run k of N, its outcome and how long it took),
    then keep the failures the re-runs reproduced (``apply``)."""
    nodeid = result.nodeid or ""
    broken = ", ".join(v.metric for v in result.verdicts if v.status in BROKEN)
    say(f"gpuprof: {nodeid} failed on {broken}: re-running it {count} time(s), each in a fresh process "
        f"(stopped after {format_number(timeout_s)} s), to confirm")
    reruns: list[TestResult | str] = []
    for k in range(1, count + 1):
        start = time.monotonic()
        again = rerun(nodeid, args, rootdir, timeout_s)
        say(f"gpuprof: {nodeid}: re-run {k} of {count}: {_outcome(again)} ({time.monotonic() - start:.1f} s)")
        reruns.append(again)
    apply(result, reruns)


def _outcome(again: TestResult | str) -> str:
    """What one re-run found, in a few words: its status and the metrics that broke, or why
    it measured nothing."""
    if isinstance(again, str):
        return again
    broken = [v.metric for v in again.verdicts if v.status in BROKEN]
    return f"{again.status} ({', '.join(broken)})" if broken else again.status


def rerun(nodeid: str, args: list[str], rootdir: Path, timeout_s: float) -> TestResult | str:
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
        if not out.is_file():
            return f"the re-run wrote no results (exit {done.returncode})"
        tests = [t for t in json.loads(out.read_text())["tests"] if t["nodeid"] == nodeid]
        return TestResult.from_json(tests[0]) if tests else "the re-run did not measure the test"


def apply(result: TestResult, reruns: list[TestResult | str]) -> None:
    """Keep the failures every re-run that measured the test reproduced; the others become
    ``unconfirmed``.  A re-run that measured nothing (its reason is a string), or whose
    verdict on a metric is ``unstable`` (it saw the change on an unhealthy or slower
    machine), neither confirms nor clears that metric: when no re-run decides, the failure
    stands, since a broken or unsteady re-run is no evidence of noise.  Each verdict's
    evidence and the result's ``confirmation`` say what the re-runs showed."""
    results = [r for r in reruns if isinstance(r, TestResult)]
    measured = [{v.metric: v for v in r.verdicts} for r in results]
    unsteady = "; ".join(dict.fromkeys(why for r in results for why in r.unstable))
    reasons = [r for r in reruns if isinstance(r, str)]
    confirmed = undecided = 0
    for v in result.verdicts:
        if v.status != "regressed":
            continue
        seen = [again.get(v.metric) for again in measured]
        deciding = [again for again in seen if again is None or again.status != "unstable"]
        missed = sum(1 for again in deciding if again is None or again.status != "regressed")
        if not deciding:
            undecided += 1
            v.evidence += (f"; no fresh process decided ({len(measured)} saw it unstable: {unsteady})" if measured
                           else "")
        elif not missed:  # every deciding re-run measured it, regressed
            confirmed += 1
            v.evidence += f"; confirmed in {len(deciding)} fresh process(es): " + ", ".join(
                again.change() or format_number(again.current) for again in deciding if again is not None)
        else:
            v.status = "unconfirmed"
            v.evidence += f"; not reproduced in {missed} of {len(deciding)} fresh process(es)"
    parts = [f"{confirmed} failure(s) reproduced in every re-run that decided"] if confirmed else []
    parts += [f"{undecided} failure(s) that no re-run could decide stand"] if undecided else []
    outcome = ", ".join(parts) or "the failures did not reproduce"
    result.confirmation = (f"{len(reruns)} re-run(s) in fresh processes: {outcome}"
                           + (f" ({'; '.join(reasons)})" if reasons else ""))
