"""The one judge: a test's measurement (one process's, or each rank's of a distributed test),
its stored baseline entry and its rules in; its result, and the entry a recording stores, out.

Every path that judges goes through ``Judge.judge``: a test measured in this process, a
distributed test's ranks, the session the nsys backend re-ran, a replay.  It imports no
pytest: what the run stage adds (the base revision measured alongside, the machine probes
read again) comes in as functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import GpuprofError
from ..metrics.measure import Measurement, measure
from ..metrics.skew import rank_skew
from ..trace.model import Trace
from .baseline import Baselines, baseline_file
from .counter_verdicts import asks_ncu, judge_counters, unprofiled_notes
from .distributed import as_one, combine, entry_for, rank_entry, rank_rules
from .entry import Entry, StoredEntry
from .evaluate import Judgment, Measured, TestResult, evaluate
from .recording import new_baseline_entry, new_distributed_entry
from .rules import Rules

#: What a distributed test is judged against in an A/B run (``--gpuprof-base``).
RANKS_NOT_ALONGSIDE = ("a distributed test is judged against its stored baseline only, not against the base revision "
                       "measured alongside")
#: How the judge's errors name a test's marker: the error is the test's result, which names the
#: test (the plugin checked each marker when tests were collected, naming its test).
MARKER = "@pytest.mark.gpuprof"

#: Each measured process's trace and the file kept of it, by rank (0 for a test of one process).
Traces = Mapping[int, tuple[Trace, Path | None]]
#: The base revision measured for a test without a stored entry (``run.base_revision``), asked
#: with the test's node id and GPU: the entry it is judged against (None: the base did not
#: measure it) and what its result says of the base revision (``TestResult.alongside``).
AgainstBase = Callable[[str, str], tuple[Entry | None, dict[str, Any] | None]]


class Judged(NamedTuple):
    """A test judged: its result, and under ``--gpuprof-update-baseline`` the entry to store
    for it (stored over the file's at the end: ``recording.recorded_over``)."""

    result: TestResult
    entry: StoredEntry | None = None


@dataclass(frozen=True)
class Judge:
    """How this run judges (its options), the same for every test, and the baseline files it
    read (``baselines``: each file read once a session, whatever the number of its tests)."""

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
    baselines: Baselines = field(default_factory=Baselines, compare=False, repr=False)

    def rules_for(self, arguments: Mapping[str, Any]) -> Rules:
        """The run's rules with a test's marker (``arguments``) on top (``Rules.with_marker``)."""
        return self.rules.with_marker(arguments, MARKER)

    def judge(self, nodeid: str, arguments: Mapping[str, Any], load: Callable[[], Traces], *,
              distributed: bool = False, machine: dict[str, Any] | None = None,
              against_base: AgainstBase | None = None,
              probe_again: Callable[[], dict[str, Any] | None] | None = None,
              counters: bool = True) -> Judged:
        """Load, measure and judge one test (``arguments``: its marker's).  A test of one process
        is judged against its entry, or without one against the base revision (``against_base``);
        a regression a slower machine may explain is judged again once ``probe_again`` gave new
        readings.  A distributed test: each rank against its own entry and the skew against the
        recorded runs' (``compare.distributed``), one result.  ``machine``: this process's probes
        (for a distributed test, rank 0's GPU: they explain rank 0 alone).  Nsight Compute's
        counters are judged here unless the caller judges them once ncu ran (``counters``).
        A trace, a rank's file or a baseline that cannot be read makes an error result naming it.

        The judgment is made from what was measured, the stored entry and the rules alone; the
        node id only finds the entry, and names the result assembled from them at the end."""
        try:
            return self._judged(nodeid, arguments, load, distributed, machine, against_base, probe_again, counters)
        except (GpuprofError, OSError, ValueError) as exc:  # a file unreadable or damaged, a move refused
            return Judged(TestResult.of_error(nodeid, str(exc)))

    def counters(self, result: TestResult, arguments: Mapping[str, Any]) -> None:
        """Judge the test's Nsight Compute counters (``result.counters``, none: its counter
        thresholds noted unchecked) once ncu ran for it (``judge`` notes them unchecked: ncu
        profiles a test after it was judged)."""
        judge_counters(result, self.rules_for(arguments), self.update, self.replay, asks_ncu(arguments, self.ncu))

    def _judged(self, nodeid: str, arguments: Mapping[str, Any], load: Callable[[], Traces], distributed: bool,
                machine: dict[str, Any] | None, against_base: AgainstBase | None,
                probe_again: Callable[[], dict[str, Any] | None] | None, counters: bool) -> Judged:
        if distributed and self.alongside and self.base_only:  # no stored baseline may stand in
            raise GpuprofError(f"{RANKS_NOT_ALONGSIDE}: --gpuprof-base-only would leave it unjudged")
        measurements, runs = self._measured(load(), machine)
        first = runs[min(runs)]
        file = baseline_file(self.baseline_dir, nodeid)
        rules = self.rules_for(arguments)
        stored = None if self.base_only else self.baselines.entry(file, nodeid, first.gpu)
        entry, mismatch = entry_for(stored, len(runs) if distributed else 1)
        own: Entry | None = None
        alongside = None
        base_process = False  # judged against the base revision's one fresh process (``pairs.base_entry``)
        if distributed:
            run, judgment = self._ranks(measurements, runs, entry, rules)
        else:
            own = entry if entry is None or "ranks" not in entry else None  # (a distributed one has 2 ranks or more)
            if own is None and against_base is not None:
                own, alongside = against_base(nodeid, first.gpu)
                base_process = own is not None
            run, judgment = self._alone(measurements[min(runs)], first, own, rules, probe_again, base_process)
        judgment = judgment.adding(notes=[mismatch] if mismatch else [])
        if counters:  # none yet: ncu profiles a test after it was judged
            judgment = judgment.adding(notes=unprofiled_notes(rules, self.backend, self.replay,
                                                              asks_ncu(arguments, self.ncu)))
        if distributed and self.alongside:
            judgment = judgment.adding(notes=[RANKS_NOT_ALONGSIDE])
        strict = self.strict and (distributed or not self.update)  # (a recording of one process is never marked so)
        result = TestResult.of(nodeid, run, judgment, baseline_file=file, alongside=alongside, strict=strict)
        if not self.update:
            return Judged(result)
        if distributed:
            return Judged(result, new_distributed_entry(run, stored, self.baseline_runs)[0])
        return Judged(result, new_baseline_entry(run, own, self.baseline_runs, keep_counters=self.keep_counters)[0])

    def _measured(self, traces: Traces,
                  machine: dict[str, Any] | None) -> tuple[dict[int, Measurement], dict[int, Measured]]:
        """Each process's trace measured, and as its result keeps it: the session's probes go
        with the first rank's."""
        measurements = {rank: measure(trace) for rank, (trace, _) in traces.items()}
        return measurements, {rank: Measured.of(m, self.backend, self.timeline_events, trace=traces[rank][1],
                                                machine=machine if rank == min(measurements) else None)
                              for rank, m in measurements.items()}

    def _alone(self, m: Measurement, run: Measured, entry: Entry | None, rules: Rules,
               probe_again: Callable[[], dict[str, Any] | None] | None,
               base_process: bool = False) -> tuple[Measured, Judgment]:
        """A test of one process judged (``base_process``: ``entry`` is the base revision's one
        fresh process); where a slower machine may explain a regression, judged again with the
        probes read again (``probe_again``), when they were."""
        judgment = self._evaluate(run, m, entry, rules, base_process)
        if judgment.slower_machine and probe_again is not None:
            readings = probe_again()
            if readings is not None:
                run = replace(run, machine=readings)
                judgment = self._evaluate(run, m, entry, rules, base_process)
        return run, judgment

    def _ranks(self, measurements: Mapping[int, Measurement], runs: Mapping[int, Measured], entry: StoredEntry | None,
               rules: Rules) -> tuple[Measured, Judgment]:
        """A distributed test measured and judged as one: each rank against its own entry under
        a rank's rules, and the skew (``compare.distributed``)."""
        ranks = {rank: evaluate(runs[rank], m, rank_entry(entry, rank), rank_rules(rules), update=self.update)
                 for rank, m in measurements.items()}
        skew = rank_skew(measurements)
        return as_one(runs, skew), combine(ranks, skew, entry, rules, self.update)

    def _evaluate(self, run: Measured, m: Measurement, entry: Entry | None, rules: Rules,
                  base_process: bool = False) -> Judgment:
        return evaluate(run, m, entry, rules, update=self.update, alongside=self.alongside, base_process=base_process)
