"""The one judge: a test's measurement (one process's, or each rank's of a distributed test),
its stored baseline entry and its rules in; its result, and the entry a recording stores, out.

Every path that judges goes through ``Judge.judge``: a test measured in this process, a
distributed test's ranks, the session the nsys backend re-ran, a replay.  It imports no
pytest: what the run stage adds (the base revision measured alongside, the machine probes
read again) comes in as functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import GpuprofError
from ..metrics.measure import measure
from ..metrics.skew import rank_skew
from ..trace.model import Trace
from .baseline import BaselineFile, baseline_file
from .counter_verdicts import asks_ncu, judge_counters
from .distributed import combine, entry_for, new_distributed_entry, rank_entry, rank_rules
from .entry import Entry, StoredEntry
from .evaluate import UNKNOWN_GPU, TestResult, evaluate, fail_unjudged, new_baseline_entry, of_measurement
from .rules import Rules

#: What a distributed test is judged against in an A/B run (``--gpuprof-base``).
RANKS_NOT_ALONGSIDE = ("a distributed test is judged against its stored baseline only, not against the base revision "
                       "measured alongside")

#: Each measured process's trace and the file kept of it, by rank (0 for a test of one process).
Traces = Mapping[int, tuple[Trace, Path | None]]


class Judged(NamedTuple):
    """A test judged: its result, and under ``--gpuprof-update-baseline`` the entry to store
    for it and what storing it does to the entry's recorded runs."""

    result: TestResult
    entry: StoredEntry | None = None
    how: str = ""


@dataclass(frozen=True)
class Judge:
    """How this run judges (its options), the same for every test."""

    baseline_dir: Path
    backend: str  # "torch" or "nsys": what measured
    rules: Rules  # the run's; each test's marker goes on top
    update: bool = False  # --gpuprof-update-baseline: record, checking the thresholds only
    strict: bool = False  # a test with nothing to be judged against fails
    base_only: bool = False  # judged against the base revision alone, no stored baseline
    alongside: bool = False  # the base revision is measured alongside (--gpuprof-base)
    timeline_events: int = 0  # events of the timeline sample kept with a result
    baseline_runs: int = 1  # recorded runs an entry keeps
    keep_counters: bool = False  # a recording's later process: the first one's counters stay
    replay: bool = False  # the traces are kept ones replayed (--gpuprof-replay): no kernel ran here
    ncu: bool = False  # --gpuprof-ncu: every test asks for Nsight Compute unless its marker says ncu=False

    def rules_for(self, nodeid: str, arguments: Mapping[str, Any]) -> Rules:
        """The run's rules with the test's marker on top (``Rules.with_marker``)."""
        return self.rules.with_marker(arguments, nodeid)

    def judge(self, nodeid: str, arguments: Mapping[str, Any], load: Callable[[], Traces], *,
              distributed: bool = False, machine: dict[str, Any] | None = None,
              against_base: Callable[[TestResult], Entry | None] | None = None,
              probe_again: Callable[[], dict[str, Any] | None] | None = None,
              counters: bool = True) -> Judged:
        """Load, measure and judge one test (``arguments``: its marker's).  A test of one process
        is judged against its entry, or without one against the base revision (``against_base``);
        a regression a slower machine may explain is judged again once ``probe_again`` gave new
        readings.  A distributed test: each rank against its own entry and the skew against the
        recorded runs' (``compare.distributed``), one result.  ``machine``: this process's probes
        (for a distributed test, rank 0's GPU: they explain rank 0 alone).  Nsight Compute's
        counters are judged here unless the caller judges them once ncu ran (``counters``).
        A trace, a rank's file or a baseline that cannot be read makes an error result naming it."""
        try:
            return self._judged(nodeid, arguments, load, distributed, machine, against_base, probe_again, counters)
        except (GpuprofError, OSError, ValueError) as exc:  # a file unreadable or damaged, a move refused
            return Judged(TestResult.of_error(nodeid, str(exc)))

    def counters(self, result: TestResult, arguments: Mapping[str, Any]) -> None:
        """Judge the test's Nsight Compute counters (``result.counters``, none: its counter
        thresholds noted unchecked): after ncu ran for it, or in ``judge``."""
        judge_counters(result, self.rules_for(result.nodeid or "", arguments), self.update, self.replay,
                       asks_ncu(arguments, self.ncu))

    def _judged(self, nodeid: str, arguments: Mapping[str, Any], load: Callable[[], Traces], distributed: bool,
                machine: dict[str, Any] | None,
                against_base: Callable[[TestResult], Entry | None] | None,
                probe_again: Callable[[], dict[str, Any] | None] | None, counters: bool) -> Judged:
        if distributed and self.alongside and self.base_only:  # no stored baseline may stand in
            raise GpuprofError(f"{RANKS_NOT_ALONGSIDE}: --gpuprof-base-only would leave it unjudged")
        traces = load()
        measured = {rank: measure(trace) for rank, (trace, _) in traces.items()}
        file = baseline_file(self.baseline_dir, nodeid)
        rules = self.rules_for(nodeid, arguments)
        results = {}
        for rank, m in measured.items():
            results[rank] = of_measurement(nodeid, m, self.backend, self.timeline_events)
            results[rank].trace, results[rank].machine, results[rank].baseline_file = (
                traces[rank][1], machine if rank == min(measured) else None, file)
        first = results[min(results)]
        gpu = first.gpu or UNKNOWN_GPU  # (of_measurement names one)
        stored = None if self.base_only else BaselineFile(file).entry(nodeid, gpu)
        entry, mismatch = entry_for(stored, len(results) if distributed else 1)
        if distributed:
            for rank, m in measured.items():
                evaluate(results[rank], m, rank_entry(entry, rank), rank_rules(rules), update=self.update,
                         strict=False)
            result = combine(nodeid, results, rank_skew(measured), entry, rules, self.update)
        else:
            result, m = first, measured[min(measured)]
            own = entry if entry is None or "ranks" not in entry else None  # (a distributed one has 2 ranks or more)
            if own is None and against_base is not None:
                own = against_base(result)
            self._evaluate(result, m, own, rules)
            if result.slower_machine and probe_again is not None:
                readings = probe_again()
                if readings is not None:
                    result.machine = readings
                    self._evaluate(result, m, own, rules)
            note = (result.alongside or {}).get("note")
            if result.message and note:  # --gpuprof-strict: say why not against base
                result.message += f"; {note}"
        result.notes += [mismatch] if mismatch else []
        if counters:
            judge_counters(result, rules, self.update, self.replay, asks_ncu(arguments, self.ncu))
        if distributed:
            if self.alongside:
                result.notes.append(RANKS_NOT_ALONGSIDE)
            result = fail_unjudged(result, self.strict)
        if not self.update:
            return Judged(result)
        if distributed:
            return Judged(result, *new_distributed_entry(result, stored, self.baseline_runs))
        return Judged(result, *new_baseline_entry(result, own, self.baseline_runs, keep_counters=self.keep_counters))

    def _evaluate(self, result: TestResult, m: Any, entry: Entry | None, rules: Rules) -> None:
        evaluate(result, m, entry, rules, update=self.update, strict=self.strict, alongside=self.alongside)
