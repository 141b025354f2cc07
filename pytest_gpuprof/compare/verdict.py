"""One metric's verdict, and how a metric's values are said.

Every rule family makes ``Verdict`` objects (``exact_rules``, ``threshold_rules``,
``time_rules``, composed by ``verdicts.judge``), and every report says their values
the one way ``shown_value`` does: kept apart from the rules so that the reports read a
verdict without importing how it was reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..metrics.specs import METRICS, TEST_METRICS, counter_spec
from ..numbers import format_change, format_quantity
from .rules import Threshold
from .status import FAILING, State

#: Why an ``ok`` verdict let a median that moved beyond its tolerance through (``Verdict.let_through``):
#: the Mann-Whitney p not under the corrected level; the median inside the prediction interval
#: of the baseline's recorded runs; the host's speed (changed as measured, not at the baseline host's).
NOT_SIGNIFICANT, WITHIN_RUNS, HOST_SPEED = "not significant", "within the baseline's runs", "host speed"
#: How the rule of an ``ok`` verdict that compared nothing starts (no value in one of the runs).
NOT_COMPARED = "not compared"
#: What ends the evidence of a ``provisional`` regression (``Verdict.provisional``).
FOR_THE_PAIRS = "not significant against one base process: the pairs decide"


@dataclass
class Verdict:
    """One metric's outcome.  Values are per step for per-step metrics."""

    metric: str
    status: State
    baseline: float | None
    current: float | None
    rule: str
    relative: bool = True  # change shown in percent (False: ratios and percentages, in percentage points)
    evidence: str = ""  # time metrics judged on samples: medians and spreads, the test and its p-value
    threshold: Threshold | None = None  # the absolute requirement this verdict checked, as data
    by_host: bool = False  # changed as measured, not at the baseline host's speed (the window: ``host``)
    rank: int | None = None  # the rank of a distributed test whose metric this is (``compare.distributed``)
    p_value: float | None = None  # the Mann-Whitney U test's p on the samples, where it ran
    p_level: float | None = None  # what p had to get under: alpha / the series judged (Bonferroni)
    let_through: str = ""  # an ok whose median moved beyond the tolerance: why (NOT_SIGNIFICANT, ...)
    # a series judged on samples: the change in the bad direction it had to pass (relative for times and
    # rates, absolute for ratios), where that margin came from, and the smallest such change its steps
    # could show (``time_rules.Margin``)
    margin: float | None = None
    margin_source: str = ""
    detectable: float | None = None
    # a regression not significant against the base revision's one fresh process (``pairs.base_entry``):
    # a failure only until the base revision's pairs decide it (``pairs.upheld_by_pairs``); without them, ok
    provisional: bool = False

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    def change(self) -> str:
        """Change from baseline to current, relative where that means something."""
        if self.baseline is None or self.current is None:
            return ""
        return format_change(self.current, self.baseline, *shown_as(self.metric), self.relative)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metric": self.metric, "status": str(self.status), "baseline": self.baseline,
            "current": self.current, "change": self.change(), "rule": self.rule, "evidence": self.evidence,
        }
        if self.threshold is not None:
            out["threshold"] = {"op": self.threshold.op, "value": self.threshold.value}
        if self.rank is not None:
            out["rank"] = self.rank
        if self.p_level is not None:
            out["p_level"] = self.p_level
        if self.p_value is not None:
            out["p_value"] = self.p_value
        if self.let_through:
            out["let_through"] = self.let_through
        if self.margin is not None:
            out |= {"margin": self.margin, "margin_source": self.margin_source, "detectable": self.detectable}
        if self.provisional:
            out["provisional"] = True
        return out


def shown_as(metric: str) -> tuple[str, str]:
    """(kind, unit) a metric's values are shown in (``numbers.format_quantity``): its spec's; a
    kernel's time (``kernels[NAME].time_us``) a time, a collective's bytes bytes, other
    per-name values (``kernels[NAME].count``) counts."""
    spec = METRICS.get(metric) or TEST_METRICS.get(metric) or counter_spec(metric)
    if spec is not None:
        return spec.kind, spec.unit
    if metric.endswith(".time_us"):
        return "time", "us"
    return ("bytes", "B") if metric.endswith(".bytes") else ("count", "")


def shown_value(metric: str, value: float | None, signed: bool = False) -> str:
    """A metric's value in its unit, as every verdict and report says it (``shown_as``)."""
    return format_quantity(value, *shown_as(metric), signed=signed)
