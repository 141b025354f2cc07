"""The one value of each metric that every report shows: the value its verdict judged.

A time or ratio is judged on its median step where the run kept per-step samples,
a count or byte total per step (total / steps); the terminal table, the Markdown
summary, the HTML report, the JUnit properties, the benchmark file and ``gpuprof
analyze`` all show those numbers, so that no output shows a mean where the
verdict says a median (``VALUES_NOTE`` says so beside each table).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..compare.distributed import rank_nodeid
from ..compare.samples import judged_values
from ..compare.verdict import shown_value
from ..metrics.specs import METRICS
from .words import change

#: Which value per step a verdict judges.
AS_JUDGED = "as the verdicts judge it: times and ratios the median step, counts and bytes total / steps"
#: What the values of a summary table are, printed with it.
VALUES_NOTE = f"per step, {AS_JUDGED}; (change) against the baseline"


class Shown(NamedTuple):
    """A metric as every report shows it: baseline value, current value, and the change
    in the verdict's words (``""`` when a side has no value)."""

    baseline: float | None
    current: float | None
    change: str


def per_step_text(metric: str, value: float | None) -> str:
    """A scalar metric's value in its unit (``compare.verdict.shown_value``), ``/step`` after
    it where it is a total per step: ``14.82 ms/step``, ``95/step``, ``75.6%``."""
    text = shown_value(metric, value)
    return f"{text}/step" if value is not None and METRICS[metric].per_step else text


def shown_values(test: Mapping[str, Any]) -> dict[str, Shown]:
    """Each scalar metric of a results document's test (``TestResult.to_json()``): the
    numbers of its comparison verdict where there is one; else each run's judged
    values (``compare.samples.judged_values``: the median step where it kept samples),
    as its threshold verdicts take them.  Empty for a test without metrics."""
    if not test.get("metrics"):
        return {}
    now = judged_values(test["metrics"], test.get("distribution"))
    before = (judged_values(test["baseline_metrics"], test.get("baseline_distribution"))
              if test.get("baseline_metrics") else {})
    out = {}
    for name in METRICS:
        b, c = before.get(name), now.get(name)
        out[name] = Shown(b, c, "" if b is None or c is None else change(name, c, b))
    for v in test.get("verdicts") or ():
        if v["metric"] in METRICS and v.get("threshold") is None and v.get("rank") is None \
                and (v["baseline"] is not None or v["current"] is not None):
            out[v["metric"]] = Shown(v["baseline"], v["current"], v["change"])
    return out


def rank_sections(t: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """How every report shows a test: as it is; a distributed test as itself (its status and
    the verdicts that name their rank, no metrics of its own) followed by each rank as a test
    of its own, ``NODEID [rank N]``, with that rank's metrics, verdicts and timeline."""
    ranks = t.get("ranks")
    if not ranks:
        return [t]
    return [{**t, "metrics": None}] + [{**r, "nodeid": rank_nodeid(t["nodeid"], int(n))} for n, r in ranks.items()]
