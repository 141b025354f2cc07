"""A distributed test judged as one (``@pytest.mark.gpuprof(world_size=N)``): each rank's
measurement against that rank's baseline, as any test's, and how far the slowest rank runs
behind the others (``rank_skew``) against the recorded runs' skews; one status for the test.

A distributed test's baseline entry (one per GPU model, as any test's) holds an entry per
rank under ``ranks`` and the skew of each recorded run under ``rank_skew``
(docs/metrics.md "Several ranks").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..metrics.specs import TEST_METRICS
from ..numbers import format_number
from .entry import DistributedEntry, Entry, StoredEntry
from .evaluate import TestResult, new_baseline_entry
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
    return dataclasses.replace(rules, thresholds=tuple(t for t in rules.thresholds if t.metric not in TEST_METRICS))


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


def judge_skew(skew: float | None, entry: StoredEntry | None, rules: Rules, update: bool) -> list[Verdict]:
    """``rank_skew``'s thresholds, then (not while recording) the skew against the recorded
    runs': worse when it exceeds the largest of them by more than the ratio tolerance or
    ``SKEW_SPREADS`` times their range, whichever is larger.  The skew is one number a run,
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
    worst, allowed = max(recorded), max(rules.tolerance(spec), SKEW_SPREADS * (max(recorded) - min(recorded)))
    rule = (f"at most the recorded runs' largest {spec.name} + max({format_number(rules.tolerance(spec))}, "
            f"{SKEW_SPREADS} x their range) = {format_number(worst + allowed)}")
    status = State.REGRESSED if skew > worst + allowed else State.OK
    return verdicts + [Verdict(spec.name, status, worst, skew, rule, relative=False,
                               evidence=f"recorded runs' {spec.name}: {', '.join(map(format_number, recorded))}")]


def combine(nodeid: str, ranks: Mapping[int, TestResult], skew: float | None, entry: StoredEntry | None,
            rules: Rules, update: bool) -> TestResult:
    """The test's one result from its judged ranks: each rank's verdicts (with its rank), the
    skew's; what each rank's measurement showed, said with its rank.  Its status is the worst
    of its ranks' and the skew's (``TestResult.status``)."""
    skew_verdicts = judge_skew(skew, entry, rules, update)
    verdicts = skew_verdicts + [dataclasses.replace(v, rank=r) for r, t in sorted(ranks.items()) for v in t.verdicts]
    first = ranks[min(ranks)]
    said = {field: [f"rank {r}: {line}" for r, t in sorted(ranks.items()) for line in getattr(t, field)]
            for field in ("health", "slower_machine", "notes")}
    return TestResult(
        nodeid, gpu=first.gpu, metrics={"rank_skew": skew}, verdicts=verdicts,
        baseline=None if entry is None else {"rank_skew": max(recorded_skews(entry), default=None)},
        baseline_file=first.baseline_file, trace=first.trace, backend=first.backend, environment=first.environment,
        message="; ".join(f"rank {r}: {t.message}" for r, t in sorted(ranks.items()) if t.message),
        machine=first.machine, health=said["health"], slower_machine=said["slower_machine"], notes=said["notes"],
        ranks={str(r): t for r, t in sorted(ranks.items())}, recorded=update, has_baseline=entry is not None,
    )


def recorded_skews(entry: StoredEntry | None) -> list[float]:
    """The recorded runs' ``rank_skew`` values (a run of one rank with steps has none; a
    test of one process's entry, none)."""
    return [s for s in _skews(entry) if s is not None]


def _skews(entry: StoredEntry | None) -> list[float | None]:
    return entry["rank_skew"] if entry is not None and "rank_skew" in entry else []


def new_distributed_entry(result: TestResult, previous: StoredEntry | None,
                          keep_runs: int) -> tuple[DistributedEntry, str]:
    """The entry ``--gpuprof-update-baseline`` stores for a distributed test: each rank's as
    any test's (``new_baseline_entry``), and the skews of the runs the ranks keep."""
    previous, _ = entry_for(previous, len(result.ranks or {}))  # another shape: replaced
    ranks, hows = {}, []
    for r, t in (result.ranks or {}).items():
        ranks[r], how = new_baseline_entry(t, rank_entry(previous, int(r)), keep_runs)
        hows.append(how)
    kept = min(len(e["runs"]) for e in ranks.values())
    skews = [*_skews(previous), (result.metrics or {}).get("rank_skew")][-kept:]
    how = hows[0] if len(set(hows)) == 1 else "; ".join(f"rank {r}: {h}" for r, h in zip(ranks, hows))
    entry: DistributedEntry = {"backend": result.backend, "environment": result.environment,
                               "metrics": {"rank_skew": skews[-1]}, "rank_skew": skews, "ranks": ranks,
                               "world_size": len(ranks)}
    return entry, how
