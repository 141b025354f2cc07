"""How far a value may move: each kind's tolerance against the baseline, and thresholds.

* time: within a relative tolerance and more than an absolute floor away before it
  counts (``--gpuprof-time-floor-us``).  Kernel times (``kernel_time_us`` and each
  kernel name's time) have their own tolerance; copy times and the window, which move
  more from run to run (PCIe, host-side launch gaps), a wider one (defaults: ``options``).
* rate: within a relative tolerance; a copy bandwidth is not judged where the baseline's
  copies of its kind are too short to show one (``RATE_FLOORS``).
* ratio: within an absolute tolerance (``--gpuprof-ratio-tolerance``) in the bad direction.
* threshold: an absolute requirement on this run's value (``rules.Threshold``), whatever
  the baseline.

``tolerance_verdict`` judges one value per step this way; ``time_rules`` applies the same
tolerance (``beyond``) to the medians of per-step samples before it asks whether the steps
differ.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.specs import MetricSpec
from ..numbers import format_number, format_time_us
from . import host
from .rules import Rules, Threshold, beyond_time_rule
from .samples import Series
from .status import State
from .verdict import Verdict, shown_value


def tolerance_verdict(spec: MetricSpec, b: float, c: float, rules: Rules) -> Verdict:
    """A time, rate or ratio per step against the baseline's, without samples: ok within its
    tolerance (``beyond``), else improved or regressed by its better direction."""
    relative = spec.kind != "ratio"
    rule = within(spec, rules, " per step" if spec.per_step else "")
    if not beyond(spec, c - b, b, rules):
        return Verdict(spec.name, State.OK, b, c, rule, relative)
    return Verdict(spec.name, direction(spec, c - b), b, c, rule, relative)


def within(spec: MetricSpec, rules: Rules, per: str = "") -> str:
    """What a time, rate or ratio must stay within, in words: a time's relative tolerance
    and floor, a rate's relative tolerance, a ratio's absolute one in its bad direction."""
    tol = rules.tolerance(spec)
    if spec.kind == "time":
        return f"within ±{tol:.0%}{per} (changes under {format_time_us(rules.time_floor_us)} ignored)"
    if spec.kind == "rate":
        return f"within ±{tol:.0%}{per}"
    return f"must not {'drop' if spec.better == 'higher' else 'rise'} by more than {format_number(tol)}"


def beyond(spec: MetricSpec, delta: float, before: float, rules: Rules) -> bool:
    """A change beyond the metric's tolerance: relative and past the floor for times,
    relative for rates, absolute for ratios."""
    if spec.kind == "time":
        return beyond_time_rule(delta, before, rules.tolerance(spec), rules.time_floor_us)
    if spec.kind == "rate":
        return abs(delta) > rules.tolerance(spec) * abs(before)
    return abs(delta) > rules.tolerance(spec) + 1e-12


def direction(spec: MetricSpec, delta: float) -> State:
    """A change beyond the tolerance by the metric's better direction: regressed or improved."""
    worse = delta > 0 if spec.better == "lower" else delta < 0
    return State.REGRESSED if worse else State.IMPROVED


#: Copies too short for their bandwidth to be judged: the baseline's copies of the kind take
#: under this many time floors a step (10 x 5 us by default), and then a copy's duration is
#: its latency, and a 4-byte copy 0.2 us slower reads 13% less bandwidth.
RATE_FLOORS = 10
RATE_UNJUDGED = (f"not judged: the baseline's copies of this kind take under {RATE_FLOORS} time floors a step "
                 "(--gpuprof-time-floor-us), where a copy's duration is its latency, not its bandwidth")


def latency_bound(name: str, before: Mapping[str, float | None], rules: Rules) -> bool:
    """Whether the baseline's copies of a bandwidth metric's kind are too short to judge it (``RATE_FLOORS``)."""
    kind = name.removeprefix("memcpy_").removesuffix("_gbps")
    return (before.get(f"memcpy_{kind}_time_us") or 0) < RATE_FLOORS * rules.time_floor_us


def check_threshold(t: Threshold, value: float | None, pair: tuple[Series, Series] | None = None,
                    speeds: tuple[float, float] | None = None) -> Verdict:
    """A threshold on this run's value.  One on a ratio over the window (``pair``: its series
    at the baseline host's speed, given when only the host's speed moved the window) that
    is broken only because the host ran slower than the baseline's, and holds at the
    baseline host's speed, is ``unstable``, not broken."""
    if value is None:
        return Verdict(t.metric, State.OK, None, None, f"{t.text} (not applicable: no value)", threshold=t)
    if t.holds(value):
        return Verdict(t.metric, State.OK, None, value, t.text, threshold=t)
    if pair is not None and speeds is not None and speeds[0] > speeds[1] and t.holds(pair[1].summary["median"]):
        return Verdict(t.metric, State.UNSTABLE, None, value, t.text, threshold=t, evidence=(
            f"broken only because {host.slower(*speeds)}: {shown_value(t.metric, pair[1].summary['median'])} "
            "at the baseline host's speed"))
    return Verdict(t.metric, State.THRESHOLD, None, value, t.text, threshold=t)
