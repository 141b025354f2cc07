"""What ``--gpuprof-update-baseline`` stores: a test's entry made from what this run measured
and the entry stored before it (``entry.Entry``; a distributed test's ``DistributedEntry``),
and what storing it does to the entry's recorded runs.  The judge records from what was
measured (``evaluate.Measured``); the base revision's results read back are recorded as
one (``pairs.base_entry``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .distributed import entry_for, rank_entry, stored_skews
from .entry import DistributedEntry, Entry, RecordedRun, StoredEntry
from .evaluate import Measured, TestResult
from .exact_rules import same_program
from .samples import distribution, pooled


def new_baseline_entry(run: Measured | TestResult, previous: Entry | None, keep_runs: int,
                       keep_counters: bool = False, counters: dict[str, Any] | None = None) -> tuple[Entry, str]:
    """The entry ``--gpuprof-update-baseline`` stores for this run, and what it did: this run
    is added to the previous entry's runs (the last ``keep_runs`` kept) when both did the
    same GPU work per step, else it replaces them.  Runs whose kernel samples share no
    kernel name (the previous ones edited by hand) did not: pooled, they would leave the
    entry no kernel to judge, which ``entry.check_entry`` refuses; nor did runs recorded
    before per-step samples were kept, which have none to pool.  A run without Nsight
    Compute's ``counters`` drops the previous ones (a kernel rebuilt under its name would keep
    its old registers), unless ``keep_counters`` (a later process of one recording).  ``run``:
    what one process measured, or its result read back."""
    assert run.metrics is not None and run.per_step is not None and run.distribution is not None, \
        "one process's measurement (evaluate.Measured.of)"
    this: RecordedRun = {"per_step": run.per_step, "distribution": run.distribution, "environment": run.environment}
    if run.machine:
        this["machine"] = run.machine
    runs = [*(previous["runs"] if previous else []), this][-keep_runs:]
    sampled = all("per_step" in r for r in runs)
    samples = pooled([r["per_step"] for r in runs]) if sampled else {}
    if previous and keep_runs > 1 and sampled and same_program(previous["metrics"], run.metrics) \
            and previous.get("backend", "torch") == run.backend \
            and (samples.get("kernels") or not run.per_step.get("kernels")):
        how = f"run {len(runs)} of at most {keep_runs} recorded"
    else:
        how = "first run recorded" if not previous else "replaced (one run kept)" if keep_runs <= 1 else (
            "replaced: the GPU work per step changed" if sampled
            else "replaced: the recorded runs kept no per-step samples")
        runs = [this]
        samples = pooled([this["per_step"]])
    entry: Entry = {
        "backend": run.backend,
        "environment": run.environment,
        "metrics": run.metrics,
        "per_step": samples,
        "distribution": distribution(samples),
        "runs": runs,
        "step_source": run.step_source,
    }
    if run.timeline is not None:
        entry["timeline"] = run.timeline
    # Nsight Compute's counters: this run's; in a later process of one recording (``keep_counters``:
    # the first process alone runs ncu, run.kernel_profiling) the previous entry's, while its runs are kept
    kept = (previous or {}).get("counters") if keep_counters and len(runs) > 1 else None
    counters = counters or kept
    if counters:
        entry["counters"] = counters
    return entry, how


def new_distributed_entry(test: Measured | TestResult, previous: StoredEntry | None,
                          keep_runs: int) -> tuple[DistributedEntry, str]:
    """The entry ``--gpuprof-update-baseline`` stores for a distributed test (``test``: measured
    as one, ``distributed.as_one``): each rank's as any test's (``new_baseline_entry``), and
    the skews of the runs the ranks keep."""
    previous, _ = entry_for(previous, len(test.ranks or {}))  # another shape: replaced
    ranks, hows = {}, []
    for r, run in (test.ranks or {}).items():
        ranks[r], how = new_baseline_entry(run, rank_entry(previous, int(r)), keep_runs)
        hows.append(how)
    kept = min(len(e["runs"]) for e in ranks.values())
    skews = [*stored_skews(previous), (test.metrics or {}).get("rank_skew")][-kept:]
    how = hows[0] if len(set(hows)) == 1 else "; ".join(f"rank {r}: {h}" for r, h in zip(ranks, hows))
    entry: DistributedEntry = {"backend": test.backend, "environment": test.environment,
                               "metrics": {"rank_skew": skews[-1]}, "rank_skew": skews, "ranks": ranks,
                               "world_size": len(ranks)}
    return entry, how


def recorded_over(entry: StoredEntry, stored: StoredEntry | None, keep_runs: int) -> tuple[StoredEntry, str]:
    """The entry a recording stores where its file now holds ``stored`` (read again under the
    baseline directory's lock, ``baseline.update_all``), and what it did: ``entry`` was made
    against the entry read when the test was judged; another process that recorded the test
    since (two updaters at once) left runs that this one must keep.  This run, the last of
    ``entry``'s runs, is added to ``stored``'s as ``new_baseline_entry`` adds it; where nobody
    wrote in between, the entry made again is ``entry``."""
    if "ranks" in entry:
        ranks = {r: _last_run(e) for r, e in entry["ranks"].items()}
        test = Measured(entry["environment"].get("gpu", ""), entry["backend"],
                        {"rank_skew": entry["rank_skew"][-1]}, entry["environment"], ranks=ranks)
        return new_distributed_entry(test, stored, keep_runs)
    own = stored if stored is None or "ranks" not in stored else None  # a distributed entry is replaced
    return new_baseline_entry(_last_run(entry), own, keep_runs, counters=entry.get("counters"))


def _last_run(entry: Entry) -> Measured:
    """The run a recording added to ``entry`` (its last), as measured."""
    last = entry["runs"][-1]
    return Measured(entry["environment"].get("gpu", ""), entry["backend"], entry["metrics"], last["environment"],
                    last["per_step"], last["distribution"], entry.get("step_source"), entry.get("timeline"),
                    machine=last.get("machine"))


def not_stored(result: TestResult, why: str) -> TestResult:
    """A test this run recorded whose entry was not written (the update refused, every file
    left as it was: ``why``): an error, not ``updated``."""
    return dataclasses.replace(result, error=True, message=f"recorded, but no baseline written: {why}")
