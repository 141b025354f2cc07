"""Rules: the tolerances and absolute thresholds a test is judged by.

Defaults come from ``options`` (the same values the command-line options show).
Thresholds such as ``gpu_utilization >= 0.85`` are parsed here, without ``eval``,
into data (metric, operator, value) that travels as it is to every report.  Only the
standard library and the metrics' names (``metrics.specs``): the plugin checks every
marker's rules when tests are collected, in every mode, without loading pandas.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError
from ..metrics.specs import (
    METRICS,
    NAMED_COUNTERS,
    TEST_METRICS,
    TOLERATED_COUNTERS,
    MetricSpec,
    counter_spec,
    kernel_counter,
    metric_spec,
)
from ..numbers import format_number
from ..options import RULE_OPTIONS, default

OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq, "!=": operator.ne,
}
_THRESHOLD = re.compile(
    r"^\s*(?P<metric>[a-z_]+|kernels\[[^\]]+\]\.[a-z0-9_]+)\s*(?P<op>>=|<=|==|!=|>|<)\s*"
    r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<pct>%?)\s*$"
)

@dataclass(frozen=True)
class Threshold:
    """An absolute requirement on one metric, e.g. ``gpu_utilization >= 0.85``."""

    metric: str
    op: str
    value: float
    text: str

    def holds(self, current: float) -> bool:
        return OPS[self.op](current, self.value)


def parse_threshold(text: str, origin: str) -> Threshold:
    """Parse ``METRIC OP NUMBER[%]``; ``origin`` names the option or marker in errors.  METRIC
    may be an Nsight Compute counter: ``memory_bandwidth_utilization``, or
    ``kernels[PATTERN].COUNTER`` (PATTERN a regular expression, without ``]``, searched in each
    profiled kernel's function name; a ``_pct`` counter is in percent already: ``80`` and
    ``80%`` alike)."""
    m = _THRESHOLD.match(text) if isinstance(text, str) else None
    if not m:
        raise ConfigError(
            f"{origin}: cannot parse threshold {text!r}; expected METRIC OP NUMBER, "
            f"e.g. 'gpu_utilization >= 0.85' or 'kernels[gemm].dram_throughput_pct >= 80' (OP one of {', '.join(OPS)})"
        )
    metric = m["metric"]
    spec = metric_spec(metric) or counter_spec(metric)
    counter = kernel_counter(metric)
    if spec is None or spec.kind == "info" and metric != "peak_memory_allocated_bytes" and not counter:
        known = ", ".join([n for n, s in (METRICS | TEST_METRICS).items() if s.kind != "info"]
                          + ["memory_bandwidth_utilization", f"kernels[PATTERN].({'|'.join(NAMED_COUNTERS)})"])
        raise ConfigError(f"{origin}: unknown metric {metric!r} in threshold {text!r}; known: {known}")
    pattern = (counter or ("",))[0]
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"{origin}: the kernel pattern {pattern!r} in threshold {text!r} is no regular "
                          f"expression: {exc}") from None
    value = float(m["value"]) / (100 if m["pct"] and spec.unit != "%" else 1)
    if not math.isfinite(value):
        raise ConfigError(f"{origin}: threshold {text!r}: its number must be finite")
    if spec.kind == "ratio" and not 0 <= value <= 1 and not counter and metric not in TEST_METRICS:  # (skew: >1)
        raise ConfigError(f"{origin}: threshold {text!r}: {metric} is a ratio from 0 to 1, which this threshold "
                          f"always passes or always fails; in percent, write '{metric} {m['op']} {m['value']}%' "
                          f"(the same as '{metric} {m['op']} {format_number(value / 100)}')")
    return Threshold(metric, m["op"], value, f"{metric} {m['op']} {format_number(value)}")


@dataclass(frozen=True)
class Rules:
    """Tolerances and thresholds in force for one test."""

    kernel_time_tolerance: float = default("kernel-time-tolerance")  # kernel_time_us and kernels[NAME].time_us
    time_tolerance: float = default("time-tolerance")  # the other time metrics: memcpy_*_time_us, window_us
    time_floor_us: float = default("time-floor-us")
    ratio_tolerance: float = default("ratio-tolerance")
    alpha: float = 0.01  # chance of a false time alarm per test (Bonferroni over its time series)
    tolerances: Mapping[str, float] = field(default_factory=dict)
    thresholds: tuple[Threshold, ...] = ()

    @classmethod
    def from_options(cls, values: Mapping[str, float], thresholds: tuple[Threshold, ...],
                     origin: Callable[[str], str]) -> Rules:
        """Rules from the rule options' values by option name (``options.RULE_OPTIONS``);
        ``origin(name)`` names an option in the error about a negative value."""
        for name in (o.name for o in RULE_OPTIONS):
            if values[name] < 0:
                raise ConfigError(f"{origin(name)}: must not be negative, got {values[name]}")
        fields: dict[str, Any] = {o.name.replace("-", "_"): values[o.name] for o in RULE_OPTIONS}
        return cls(**fields, thresholds=thresholds)

    def option_values(self) -> dict[str, Any]:
        """These rules as the options that give them (``from_options``' reverse), by option
        name: what a fresh process judging as this run does is told (``options.option_args``)."""
        return {**{o.name: getattr(self, o.name.replace("-", "_")) for o in RULE_OPTIONS},
                "threshold": [t.text for t in self.thresholds]}

    def with_marker(self, marker_kwargs: Mapping[str, Any], origin: str) -> Rules:
        """These rules with a test's ``@pytest.mark.gpuprof`` thresholds and tolerances on top
        (a marker's threshold replaces the one on its metric): ``thresholds`` a string or a list
        of strings, ``tolerances`` a dict of metric name to a finite number >= 0.  Every
        mistake in them is one ``ConfigError``, a line each after ``origin`` (the plugin names
        the test: ``@pytest.mark.gpuprof on NODEID``).  Light enough for the plugin to check
        every marker when tests are collected, in every mode."""
        problems: list[str] = []
        given = marker_kwargs.get("thresholds", ())
        texts = (given,) if isinstance(given, str) else given
        mine = []
        if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
            problems.append(f"{origin}: thresholds must be a string or a list of strings such as "
                            f"'gpu_utilization >= 0.85', got {given!r}")
            texts = ()
        for text in texts:
            try:
                mine.append(parse_threshold(text, origin))
            except ConfigError as exc:
                problems.append(str(exc))
        tolerances = dict(self.tolerances)
        given = marker_kwargs.get("tolerances", {})
        if not isinstance(given, dict) or not all(isinstance(metric, str) for metric in given):
            problems.append(f"{origin}: tolerances must be a dict of metric name to tolerance, got {given!r}")
            given = {}
        for metric, value in given.items():
            if metric_spec(metric) is None and metric not in TOLERATED_COUNTERS:
                problems.append(f"{origin}: tolerances names unknown metric {metric!r}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                problems.append(f"{origin}: tolerances[{metric!r}] must be a finite number >= 0, got {value!r}")
            else:
                tolerances[metric] = float(value)
        if problems:
            raise ConfigError("\n".join(problems))
        overridden = {t.metric for t in mine}
        thresholds = tuple(t for t in self.thresholds if t.metric not in overridden) + tuple(mine)
        return replace(self, tolerances=tolerances, thresholds=thresholds)

    def tolerance(self, spec: MetricSpec) -> float:
        """The tolerance of one metric; a kernel name's time follows ``kernel_time_us``."""
        name = "kernel_time_us" if spec.name.startswith("kernels[") else spec.name
        if name in self.tolerances:
            return self.tolerances[name]
        if spec.kind in ("ratio", "percent"):  # a percentage's, over 100 (compare.counter_verdicts)
            return self.ratio_tolerance
        return self.kernel_time_tolerance if name == "kernel_time_us" else self.time_tolerance


def beyond_time_rule(delta: float, before: float, tolerance: float, floor_us: float) -> bool:
    """A time change that counts: beyond the relative tolerance and the absolute floor."""
    return abs(delta) > tolerance * abs(before) and abs(delta) > floor_us


def same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
