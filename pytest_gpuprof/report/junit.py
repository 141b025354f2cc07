"""JUnit XML: each profiled test's metrics and verdict as ``<properties>`` (pytest's ``--junitxml``)."""

from __future__ import annotations

from typing import Any

from ..compare.evaluate import TestResult
from ..metrics.specs import METRICS
from ..numbers import format_number
from .values import shown_values
from .words import broken_lines, ncu_lines


def junit_properties(result: TestResult) -> list[tuple[str, Any]]:
    """A profiled test's JUnit XML properties (``item.user_properties``): status, GPU,
    every scalar metric as its verdict judged it (``values.shown_values``) and each
    broken metric in the words of the failure message (``words.broken_lines``)."""
    props: list[tuple[str, Any]] = [("gpuprof_status", result.status)]
    if result.gpu:
        props.append(("gpuprof_gpu", result.gpu))
    if result.message:
        props.append(("gpuprof_message", result.message))
    if result.baseline_file is not None:
        props.append(("gpuprof_baseline_file", str(result.baseline_file)))
    if result.metrics:
        shown = shown_values(result.to_json())
        props += [(f"gpuprof.{name}", format_number(shown[name].current)) for name in METRICS
                  if shown[name].current is not None]
    props += [("gpuprof_ncu", line.strip()) for line in ncu_lines(result.to_json())]
    props += [("gpuprof_broken", line) for line in broken_lines(v.to_json() for v in result.verdicts)]
    return props
