"""JUnit XML: each profiled test's metrics and verdict as ``<properties>`` (pytest's ``--junitxml``).

Every name is ``gpuprof.`` and dotted words (docs/results.md): what CI dashboards plot, so
each value is the raw number in the unit its metric's name says, never scaled for reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..compare.evaluate import TestResult
from ..metrics.specs import METRICS
from ..numbers import format_number
from .escaping import visible
from .names import full_name, in_metric
from .values import shown_values
from .words import broken_metrics, ncu_lines, verdict_words

#: What starts every property's name.
PREFIX = "gpuprof."


def junit_properties(result: TestResult) -> list[tuple[str, str]]:
    """A profiled test's JUnit XML properties (``item.user_properties``): status, GPU,
    every scalar metric as its verdict judged it (``values.shown_values``) with the
    baseline's beside it, each rank's of a distributed test (``gpuprof.rankN.METRIC``),
    and each broken metric in the words of the failure message, one property each."""
    test = result.to_json()
    props: list[tuple[str, Any]] = [(f"{PREFIX}status", result.status)]
    if result.gpu:
        props.append((f"{PREFIX}gpu", result.gpu))
    if result.message:
        props.append((f"{PREFIX}message", result.message))
    if result.baseline_file is not None:
        props.append((f"{PREFIX}baseline_file", str(result.baseline_file)))
    props += _metric_properties(PREFIX, test)
    for rank, section in (test.get("ranks") or {}).items():
        props += _metric_properties(f"{PREFIX}rank{rank}.", section)
    ncu = [line.strip() for line in ncu_lines(test)]
    if ncu:
        props.append((f"{PREFIX}ncu", "; ".join(ncu)))
    props += [(f"{PREFIX}broken.{_broken_name(vs[0])}", "; ".join(map(verdict_words, vs)))
              for vs in broken_metrics(test["verdicts"]).values()]
    # XML 1.0 holds no control character, not even escaped: each is written visibly (a kernel's
    # name can carry any), and pytest writes both as attributes
    return [(visible(name), visible(value)) for name, value in props]


def _metric_properties(prefix: str, test: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``PREFIX METRIC`` and ``PREFIX METRIC.baseline`` of each scalar metric with a value."""
    shown = shown_values(test)
    out = []
    for name in METRICS if shown else ():
        for suffix, value in (("", shown[name].current), (".baseline", shown[name].baseline)):
            if value is not None:
                out.append((f"{prefix}{name}{suffix}", format_number(value)))
    return out


def _broken_name(v: Mapping[str, Any]) -> str:
    """A broken verdict's metric as a property's name: ``kernel_count``, ``rank1.kernel_time_us``."""
    name = in_metric(v["metric"], full_name)
    return name if v.get("rank") is None else f"rank{v['rank']}.{name}"
