"""gpuprof's hooks, for its own steps and for plugins and conftest files of a suite.

A ``conftest.py`` or plugin implements them by name, as any pytest hook::

    def pytest_gpuprof_judged(item, result, arguments):
        if result.failed:
            ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # it loads pandas: a plain pytest run loads none
    from .compare.evaluate import TestResult


@pytest.hookspec
def pytest_gpuprof_judged(item: pytest.Item, result: TestResult, arguments: dict[str, Any]) -> None:
    """A profiled test measured in this process was judged; called before it passes or fails
    on ``result`` (``pytest_gpuprof.compare.evaluate.TestResult``).  ``arguments``: its marker's.

    gpuprof's own steps after judging implement it: the base revision measured alongside
    deciding a failure on times alone (``run.base_revision``, first), a failure re-measured in
    fresh processes (``run.steps.Confirmation``), its heaviest kernels under Nsight Compute
    (``run.steps.KernelCounters``, last).  An implementation may change the result's verdicts
    and notes; the test's status follows from them.  Not called in a process that measures for
    another (an A/B side, a distributed test's rank, the process under ncu), nor for a test
    judged elsewhere (under nsys, across torchrun's ranks)."""
