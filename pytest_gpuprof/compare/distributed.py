"""A distributed test judged as one (``@pytest.mark.gpuprof(world_size=N)``): each rank's
measurement against that rank's baseline, as any test's, and how far the slowest rank runs
behind the others (``rank_skew``) against the recorded runs' skews; one status for the test.

A distributed test's baseline entry (one per GPU model, as any test's) holds an entry per
rank under ``ranks`` and the skew of each recorded run under ``rank_skew``
(docs/metrics.md "Several ranks"; a recording stores it: ``recording.new_distributed_entry``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..metrics.specs import TEST_METRICS
from ..numbers import format_number
from .entry import Entry, StoredEntry
from .evaluate import Judgment, Measured
from .rules import Rules
from .status import State
from .threshold_rules import check_threshold
from .verdict import Verdict


def rank_nodeid(nodeid: str, rank: int) -> str:
    """How a rank of a distributed test is named where it is shown or kept on its own (its
    row in the reports, its kept trace's file name)."""
    return f"{nodeid} [rank {rank}]"


def rank_rules(rules: Rules) -> Rules:
    """A rank's rules: the thresholds on the test as a whole (``rank_skew``) are not its."""
    return replace(rules, thresholds=tuple(t for t in rules.thresholds if t.metric not in TEST_METRICS))


def entry_for(entry: StoredEntry | None, world_size: int) -> tuple[StoredEntry | None, str]:
    """The stored entry a run of ``world_size`` processes is judged against, or None with why
    not: an entry of another shape (a distributed test's for one process, or the reverse)
    or recorded with another number of ranks judges nothing."""
    if entry is None:
        return None, ""
    recorded = entry.get("world_size", len(entry["ranks"])) if "ranks" in entry else 1
    if recorded == world_size:
        return entry, ""
    return None, (f"the baseline entry was recorded with {recorded} process(es) (world_size), this run has "
                  f"{world_size}: not judged against it; refresh it with --gpuprof-update-baseline")


def rank_entry(entry: StoredEntry | None, rank: int) -> Entry | None:
    """The baseline entry of one rank (None: that rank has none, or the test no entry)."""
    return entry["ranks"].get(str(rank)) if entry is not None and "ranks" in entry else None


#: How many times the recorded runs' range of ``rank_skew`` a run may exceed their largest by.
SKEW_SPREADS = 3

#: Why a skew is not judged against one recorded run: unchanged four-rank runs on four H200s
#: moved it 0.26 -> 0.64, 0.39 -> 0.58 and 0.58 -> 0.85 between processes (docs/metrics.md).
ONE_SKEW = ("not compared: one recorded run cannot say how far rank_skew moves between processes "
            "(record the test in more: --gpuprof-record-processes)")


def judge_skew(skew: float | None, entry: StoredEntry | None, rules: Rules, update: bool) -> list[Verdict]:
    """``rank_skew``'s thresholds, then (not while recording) the skew against the recorded
    runs': worse when it exceeds the largest of them by more than the ratio tolerance or
    ``SKEW_SPREADS`` times their range, whichever is larger; against one recorded run, whose
    range says nothing, not compared (``ONE_SKEW``).  The skew is one number a run,
    of CPU step spans: where the ranks' hosts run ahead of their GPUs it moves from process
    to process as their launch queues fill, and the recorded runs' range says by how much."""
    spec = TEST_METRICS["rank_skew"]
    verdicts = [check_threshold(t, skew) for t in rules.thresholds if t.metric == spec.name]
    recorded = recorded_skews(entry)
    if update or entry is None:
        return verdicts
    if skew is None or not recorded:
        return verdicts + [Verdict(spec.name, State.OK, max(recorded, default=None), skew,
                                   "not compared: no value in one of the runs", relative=False)]
    if len(recorded) < 2:
        return verdicts + [Verdict(spec.name, State.OK, recorded[0], skew, ONE_SKEW, relative=False)]
    worst, allowed = max(recorded), max(rules.tolerance(spec), SKEW_SPREADS * (max(recorded) - min(recorded)))
    rule = (f"at most the recorded runs' largest {spec.name} + max({format_number(rules.tolerance(spec))}, "
            f"{SKEW_SPREADS} x their range) = {format_number(worst + allowed)}")
    status = State.REGRESSED if skew > worst + allowed else State.OK
    return verdicts + [Verdict(spec.name, status, worst, skew, rule, relative=False,
                               evidence=f"recorded runs' {spec.name}: {', '.join(map(format_number, recorded))}")]


def as_one(ranks: Mapping[int, Measured], skew: float | None) -> Measured:
    """A distributed test measured as one: its ``rank_skew`` and each rank's measurement; its
    GPU, backend, environment, kept trace and machine probes are its first rank's (rank 0's
    probes explain rank 0 alone)."""
    first = ranks[min(ranks)]
    return Measured(first.gpu, first.backend, {"rank_skew": skew}, first.environment, trace=first.trace,
                    machine=first.machine, ranks={str(r): run for r, run in sorted(ranks.items())})


def combine(ranks: Mapping[int, Judgment], skew: float | None, entry: StoredEntry | None, rules: Rules,
            update: bool) -> Judgment:
    """The test's one judgment from its judged ranks: the skew's verdicts, then each rank's
    (with its rank); what each rank's measurement showed, said with its rank.  Its status is
    the worst of its ranks' and the skew's (``TestResult.status``)."""
    ordered = sorted(ranks.items())

    def said(field: str) -> tuple[str, ...]:
        return tuple(f"rank {r}: {line}" for r, j in ordered for line in getattr(j, field))

    verdicts = [*judge_skew(skew, entry, rules, update), *(replace(v, rank=r) for r, j in ordered for v in j.verdicts)]
    return Judgment(tuple(verdicts), baseline=None if entry is None else {
        "rank_skew": max(recorded_skews(entry), default=None)}, health=said("health"),
        slower_machine=said("slower_machine"), notes=said("notes"), recorded=update,
        has_baseline=entry is not None, ranks={str(r): j for r, j in ordered})


def recorded_skews(entry: StoredEntry | None) -> list[float]:
    """The recorded runs' ``rank_skew`` values (a run of one rank with steps has none; a
    test of one process's entry, none)."""
    return [s for s in stored_skews(entry) if s is not None]


def stored_skews(entry: StoredEntry | None) -> list[float | None]:
    """The recorded runs' ``rank_skew`` as stored: null where a run had none."""
    return entry["rank_skew"] if entry is not None and "rank_skew" in entry else []
