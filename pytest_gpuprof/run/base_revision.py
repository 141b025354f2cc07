"""The head of an A/B comparison (``--gpuprof-base DIR``): a plugin object registered for a run
that compares with the base revision measured alongside (``run.sides``).

It checks at collection that the base holds the profiled tests, measures at the base, in one
fresh process, every test that has no stored baseline (every test under
``--gpuprof-base-only``) for the judge to judge it against (``entry``), and after judging
decides a failure on times or ratios alone from interleaved base/head pairs (``sides.measure_pairs``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..capture.marker import is_profiled
from ..compare.baseline import baseline_file
from ..compare.entry import Entry
from ..compare.evaluate import TestResult
from ..compare.judge import Judge
from ..compare.pairs import base_entry, judge_without_pairs, needs_pairs
from ..errors import GpuprofError
from .outcomes import say
from .sides import SideRun, Sides, file_in, measure_pairs, run_side, unusable


class BaseRevision:
    """(the head's process) The base revision: its checkout, its fresh processes."""

    def __init__(self, sides: Sides, given: Path, judge: Judge, base_pairs: int, timeline_events: int,
                 worker: bool) -> None:
        self.sides = sides
        self.given = given  # the base's checkout as the option named it (sides.base: resolved)
        self.judge = judge
        self.base_pairs = base_pairs  # at most this many base/head pairs decide a failure
        self.timeline_events = timeline_events
        self.worker = worker  # a pytest-xdist worker: it measures its own tests at the base, one by one
        self.config: pytest.Config | None = None
        self._profiled: list[str] = []  # the profiled tests collected, in order
        self._base_pass: SideRun | None = None  # the base's fresh process for the tests judged against it
        self._base_missing = ""  # why none of the profiled tests is at the base, if none is

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.config = session.config
        self._profiled = [item.nodeid for item in session.items if is_profiled(item)]
        self.check_tests_at_base()

    def check_tests_at_base(self) -> None:
        """A run none of whose profiled tests is in the base by its node id, a path from the
        rootdir, is a usage error saying where it looked: every test would be judged against
        nothing (a rootdir that is not the base's counterpart).  A pytest-xdist worker's would
        stop the run without its message: its tests judged against the base fail with it."""
        if not self._profiled:
            return
        files = sorted({file_in(self.sides.base, n) for n in self._profiled})
        if any(f.exists() for f in files):
            return
        self._base_missing = (f"--gpuprof-base: none of the {len(self._profiled)} profiled test(s) is in the base "
                              f"checkout {self.sides.base} ({files[0]} does not exist); node ids are paths from the "
                              f"rootdir, {self.sides.head}, and the base must be a checkout of that directory")
        if not self.worker:
            raise pytest.UsageError(self._base_missing)

    def entry(self, nodeid: str, gpu: str) -> tuple[Entry | None, dict[str, Any]]:
        """The entry a test without a stored baseline (every test, ``--gpuprof-base-only``) is
        judged against: the base revision measured in a fresh process, once for every such
        test of the session; None, said in what its result says of the base (``alongside``,
        returned with it), when the base did not measure it.  An error when nothing else may
        judge it: under ``--gpuprof-base-only``, or when no profiled test is at the base."""
        if self._base_missing:
            raise GpuprofError(self._base_missing)
        if self._base_pass is None or nodeid not in self._base_pass.ended:
            self._base_pass = self._measure_base(gpu, nodeid)
        problem = unusable(self._base_pass, nodeid, "base")
        note = f"not judged against the base: {problem}" if problem else ""
        if problem and self.judge.base_only:  # no stored baseline may stand in: it cannot pass unjudged
            raise GpuprofError(f"{note} (--gpuprof-base-only judges every profiled test against the base alone)")
        alongside = {"base": str(self.given), "against": None if problem else "base", "note": note}
        return (None if problem else base_entry(self._base_pass.results[nodeid])), alongside

    @pytest.hookimpl(tryfirst=True)  # before the other steps: it may take a failure back
    def pytest_gpuprof_judged(self, item: pytest.Item, result: TestResult, arguments: dict[str, Any]) -> None:
        """A test that would fail on times or ratios alone: base and head measured in turn,
        each in a fresh process, decide (``sides.measure_pairs``); any other test's regressions
        not significant against the one base process are let through (``judge_without_pairs``)."""
        if not needs_pairs(result):
            judge_without_pairs(result)
            return
        measure_pairs(result, self.judge.rules_for(arguments),
                    lambda side: run_side(self.sides, side, [item.nodeid]), self.sides.base, self.base_pairs,
                    lambda line: say(item.config, line))

    def _measure_base(self, gpu: str, nodeid: str) -> SideRun:
        """One fresh process of the base revision measuring ``nodeid`` and every profiled test
        still to come that has no stored baseline for ``gpu`` (all of them, ``--gpuprof-base-only``)."""
        assert self.config is not None  # (set when the run was configured)
        todo = self._profiled[self._profiled.index(nodeid):] if nodeid in self._profiled and not self.worker \
            else [nodeid]
        base_only = self.judge.base_only
        if not base_only:
            todo = [n for n in todo if n == nodeid or not self._has_baseline(n, gpu)]
        say(self.config, f"gpuprof: measuring {len(todo)} test(s) without a stored baseline for {gpu} at the base "
                         f"revision ({self.given}) in a fresh process" if not base_only else
            f"gpuprof: measuring {len(todo)} test(s) at the base revision ({self.given}) in a fresh process")
        run = run_side(self.sides, "base", todo, self.timeline_events)
        say(self.config, f"gpuprof: the base revision measured {len(run.results)} of {len(todo)} test(s) in "
                         f"{run.seconds:.1f} s" + (f" ({run.problem})" if run.problem else ""))
        return run

    def _has_baseline(self, nodeid: str, gpu: str) -> bool:
        try:
            file = baseline_file(self.judge.baseline_dir, nodeid)
            return self.judge.baselines.entry(file, nodeid, gpu) is not None
        except GpuprofError:
            return True  # judged as today: its own judgment says what is wrong with the file
