"""The base revision measured alongside (``--gpuprof-base DIR``): fresh pytest processes
of either checkout on this GPU, and what their pairs decide (``compare.pairs``).

A test that would fail on times or ratios alone is measured again in pairs of fresh
processes, base then head, then head then base (ABBA: a drift of the machine during the
pairs falls on both sides alike), until the pairs decide every metric that broke or the
cap is reached; it fails only where head is worse than base.  A test with no stored baseline
for this GPU model (or every test, with ``--gpuprof-base-only``) is judged against one
fresh process of the base revision, counts included, and its time or ratio failures go
to the pairs as well.

The base side must run the base's code, while the head's checkout may be installed in
editable mode into the interpreter both sides use: a base process puts the base's import
roots (its checkout, and ``src/`` where it has one) first on ``PYTHONPATH``, and lists
any module it still imported from the head's checkout (``side_plugin``); such a process
measured the head's code, and its measurement is refused.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ..capture.environment import git
from ..compare.confirmation import broken_metrics
from ..compare.evaluate import TestResult
from ..compare.pairs import NOT_SURE, Decision, decide_all, judge_pairs, paired_ratio
from ..compare.rules import Rules
from ..compare.status import Status
from ..errors import GpuprofError
from ..numbers import format_number
from ..options import option_args
from . import side_plugin
from .child_results import child_results
from .fresh import fresh_pytest, read_results
from .role import SIDE


@dataclass(frozen=True)
class Sides:
    """The two checkouts and how their fresh processes run."""

    head: Path  # the head's rootdir
    base: Path  # the base revision's checkout of the same directory
    base_python: str  # the interpreter of the base side
    head_python: str  # the interpreter of this run
    args: tuple[str, ...]  # the gpuprof options of a measurement (steps, L2 flush)
    timeout_s: float  # seconds a process may take per test it measures
    xdist: bool = False  # pytest-xdist is loaded: its processes are told -n0


class SideRun(NamedTuple):
    """What one side's fresh process measured: each test's result, how each asked-for test
    ended (``missing`` when the side has no such test), why the run is unusable ('' when
    it is), and its wall time."""

    results: dict[str, TestResult]
    ended: dict[str, str]
    problem: str
    seconds: float


def top_level(rootdir: Path) -> Path:
    """The top of the git checkout holding ``rootdir`` (the rootdir itself outside git): the
    head's code may live above its rootdir (a ``tests/pytest.ini``, a monorepo)."""
    try:
        return Path(git(rootdir, "rev-parse", "--show-toplevel") or rootdir)
    except (OSError, subprocess.SubprocessError):
        return rootdir


def import_roots(sides: Sides) -> list[str]:
    """Where the base's own packages import from: its checkout of the rootdir and the top of
    its checkout (as far above the rootdir as the head's top is above the head's rootdir),
    each with ``src/`` in a src layout."""
    head_top = top_level(sides.head)
    depth = len(sides.head.relative_to(head_top).parts) if sides.head.is_relative_to(head_top) else 0
    tops = dict.fromkeys([sides.base.parents[depth - 1] if 0 < depth <= len(sides.base.parents) else sides.base,
                          sides.base])
    return [str(p) for top in tops for p in (top, top / "src") if p.is_dir()]


def file_in(root: Path, nodeid: str) -> Path:
    """Where a test's file lies in a checkout laid out as the rootdir: its node id's path under ``root``."""
    return root / nodeid.split("::")[0]


def run_side(sides: Sides, side: str, nodeids: list[str], timeline_events: int = 0) -> SideRun:
    """The tests measured in one fresh pytest process of the ``side`` ("base" or "head")
    checkout, judged against nothing (an empty baseline folder): only what it measured is
    read; ``timeline_events`` of a step's timeline kept (the base's, drawn beside head's)."""
    root = sides.base if side == "base" else sides.head
    present = [n for n in nodeids if file_in(root, n).exists()]
    ended = {n: "missing" for n in nodeids if n not in present}
    if not present:
        return SideRun({}, ended, "", 0.0)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"gpuprof-{side}-") as tmp:
        folder = Path(tmp)
        (folder / "baselines").mkdir()
        mark = {SIDE: side, **side_plugin.install(folder, present, folder / "side.json")}
        path = [str(folder)]
        if side == "base":
            path += import_roots(sides)
            mark["GPUPROF_SIDE_FORBID"] = str(top_level(sides.head))
            mark["GPUPROF_SIDE_ALLOW"] = os.pathsep.join([str(sides.base), str(folder)])
        mark["PYTHONPATH"] = os.pathsep.join(path + [p for p in [os.environ.get("PYTHONPATH")] if p])
        files = sorted({str(file_in(root, n).relative_to(root)) for n in present})
        args = [*files, "-p", side_plugin.NAME, "-p", "no:cacheprovider", "-q", "--rootdir", str(root),
                *option_args({"": True, "baseline-dir": folder / "baselines", "json": folder / "results.json",
                              "confirm": 0, "timeline-events": timeline_events}), *sides.args]
        args += ["-n0"] if sides.xdist else []  # one process: an addopts -n would hand the tests to workers
        timeout = sides.timeout_s * len(present)  # each test may take a re-run's time
        ended |= {n: "not run" for n in present}  # until the process says otherwise
        try:
            done = fresh_pytest(args, root, mark, timeout, sides.base_python if side == "base" else sides.head_python)
        except subprocess.TimeoutExpired:
            return SideRun({}, ended, f"the {side} process ran over {format_number(timeout)} s "
                           "(--gpuprof-confirm-timeout a test) and was stopped", time.monotonic() - started)
        seconds = time.monotonic() - started
        last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        child, how = f"the {side} process", f"exit {done.returncode}: {last}"
        try:
            side_doc = read_results(folder / "side.json", child, how)
            measured = child_results(folder / "results.json", child, how) if (folder / "results.json").is_file() else {}
        except GpuprofError as exc:
            return SideRun({}, ended, str(exc), seconds)
    results = {n: t for n, t in measured.items() if n in present}
    ended |= {n: side_doc["ended"].get(n, "not run") for n in present}
    ended |= {n: "missing" for n in present if n not in side_doc["ran"]}
    problem = ""
    if side_doc["from_head"]:
        problem = (f"the base process imported the head's code ({'; '.join(side_doc['from_head'][:3])}): give "
                   "--gpuprof-base-python an interpreter whose environment has the base's install")
    return SideRun(results, ended, problem, seconds)


def unusable(run: SideRun, nodeid: str, side: str) -> str:
    """Why ``run`` gives no measurement of the test on this side: missing there, its body
    failed or errored there (a gpuprof verdict failing it is still a measurement), skipped,
    or the process's own problem; '' when it measured it."""
    ended = run.ended.get(nodeid, "not run")
    result = run.results.get(nodeid)
    if run.problem:
        return run.problem
    if ended == "missing":
        return f"the test is missing at {side}"
    if ended.startswith("skipped"):
        return f"the test was {ended} at {side}"
    if ended in ("failed", "error") and not (result is not None and result.status == Status.FAILED
                                             and not result.message):
        return f"the test {'failed' if ended == 'failed' else 'raised an error'} at {side}"
    if result is None or result.status == Status.ERROR or not result.per_step:
        return f"the {side} process did not measure the test" + (f": {result.message}" if result else "")
    return ""


def measure_pairs(result: TestResult, rules: Rules, measure: Callable[[str], SideRun], base: Path, cap: int,
                say: Callable[[str], None]) -> None:
    """Measure the two sides a pair at a time, each in a fresh process, in ABBA order (base
    first in odd pairs, head first in even ones), until every metric that broke is decided
    (``compare.pairs.decide``) or ``cap`` pairs ran, saying per pair what they show; then hand
    the decisions to the judge (``compare.pairs.judge_pairs``).  ``measure(side)`` runs one
    side's process of this test (``run_side``)."""
    nodeid = result.nodeid or ""
    metrics = broken_metrics(result)
    say(f"gpuprof: {nodeid} failed on {', '.join(metrics)}: measuring it against the base revision "
        f"({base}), base and head in fresh processes (base first, then head first, in turn), up to {cap} pair(s)")
    bases: list[TestResult] = []
    heads: list[TestResult] = []
    decisions: dict[str, Decision] = {}
    started, problem = time.monotonic(), ""
    for k in range(1, cap + 1):
        if k % 2:
            on_base, on_head = measure("base"), measure("head")
        else:
            on_head, on_base = measure("head"), measure("base")
        problem = unusable(on_base, nodeid, "base") or unusable(on_head, nodeid, "head")
        if problem:
            say(f"gpuprof: {nodeid}: pair {k}: {problem}")
            break
        bases.append(on_base.results[nodeid])
        heads.append(on_head.results[nodeid])
        decisions = decide_all(metrics, bases, heads, rules, cap)
        outcomes = "; ".join(f"{d.metric} {d.outcome} ({paired_ratio(d.to_json())})" for d in decisions.values())
        say(f"gpuprof: {nodeid}: pair {k} of at most {cap} (base {on_base.seconds:.1f} s, "
            f"head {on_head.seconds:.1f} s): {outcomes}")
        if all(d.outcome != NOT_SURE for d in decisions.values()):
            break
    judge_pairs(result, decisions, str(base), time.monotonic() - started, problem)
