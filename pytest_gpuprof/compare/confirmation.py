"""What fresh processes say of a failure (``--gpuprof-confirm N``): the judgment of a test's
re-runs, each measured and judged as the run judges, against the failures it had.

The run stage measures the re-runs (``run.confirm``); which failures stand is decided here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..numbers import format_number
from .evaluate import TestResult, fails_on_timing_alone
from .status import BROKEN, State
from .verdict import Verdict

#: A re-run that measured nothing: why (it ran over its time, wrote no results, ...).
Rerun = TestResult | str


def needs_confirmation(result: TestResult) -> bool:
    """Failed on time or ratio regressions alone (a count, a threshold or a kernel change needs none)."""
    return fails_on_timing_alone(result)


def broken_metrics(result: TestResult) -> list[str]:
    """The metrics of a result's broken verdicts, in order."""
    return [v.metric for v in result.verdicts if v.status in BROKEN]


def upheld(verdicts: Sequence[Verdict], reruns: Sequence[Rerun]) -> tuple[list[Verdict], str]:
    """The verdicts once the re-runs are weighed, and what they showed (the result's
    ``confirmation``): a regression stays when every re-run that measured the test and
    decided that metric regressed too; otherwise it is ``unconfirmed``.  A re-run that
    measured nothing (its reason is a string), or whose verdict on a metric is ``unstable``
    (it saw the change on an unhealthy or slower machine), neither confirms nor clears that
    metric: when no re-run decides, the failure stands, since a broken or unsteady re-run is
    no evidence of noise.  Each verdict's evidence says what the re-runs showed."""
    results = [r for r in reruns if isinstance(r, TestResult)]
    measured = [{v.metric: v for v in r.verdicts} for r in results]
    unsteady = "; ".join(dict.fromkeys(why for r in results for why in r.unstable))
    reasons = [r for r in reruns if isinstance(r, str)]
    confirmed = undecided = 0
    out = []
    for v in verdicts:
        if v.status != State.REGRESSED:
            out.append(v)
            continue
        seen = [again.get(v.metric) for again in measured]
        deciding = [again for again in seen if again is None or again.status != State.UNSTABLE]
        missed = sum(1 for again in deciding if again is None or again.status != State.REGRESSED)
        if not deciding:
            undecided += 1
            out.append(replace(v, evidence=v.evidence + (
                f"; no fresh process decided ({len(measured)} saw it unstable: {unsteady})" if measured else "")))
        elif not missed:  # every deciding re-run measured it, regressed
            confirmed += 1
            values = ", ".join(a.change() or format_number(a.current) for a in deciding if a is not None)
            out.append(replace(v, evidence=f"{v.evidence}; confirmed in {len(deciding)} fresh process(es): {values}"))
        else:
            out.append(replace(v, status=State.UNCONFIRMED, evidence=f"{v.evidence}; not reproduced in {missed} of "
                                                                          f"{len(deciding)} fresh process(es)"))
    parts = [f"{confirmed} failure(s) reproduced in every re-run that decided"] if confirmed else []
    parts += [f"{undecided} failure(s) that no re-run could decide stand"] if undecided else []
    outcome = ", ".join(parts) or "the failures did not reproduce"
    said = f"{len(reruns)} re-run(s) in fresh processes: {outcome}" + (f" ({'; '.join(reasons)})" if reasons else "")
    return out, said


def confirm(result: TestResult, reruns: Sequence[Rerun]) -> None:
    """The result judged again with its re-runs (``upheld``): its verdicts and ``confirmation``."""
    result.verdicts, result.confirmation = upheld(result.verdicts, reruns)
