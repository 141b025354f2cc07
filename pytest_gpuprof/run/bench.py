"""pytest-benchmark alongside gpuprof, through its public fixture API only.

Under ``--gpuprof`` a test's ``benchmark`` fixture is handed over wrapped: the
timed function is followed by ``torch.cuda.synchronize()``, so the times
pytest-benchmark records are GPU work, not launch time; once timing is done the
function runs again for gpuprof's steps (torch.profiler), and the metrics go
into ``benchmark.extra_info["gpuprof"]``, which ``--benchmark-json`` and
``--benchmark-autosave`` store and ``--benchmark-compare`` leaves alone.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

from ..capture.marker import is_profiled
from ..capture.profiler import GpuProf
from ..compare.evaluate import TestResult

#: Metrics copied into extra_info: the scalars of docs/metrics.md.
EXTRA_INFO_KEY = "gpuprof"
#: A gated test judged while pytest-benchmark timed it: the session reports this result.
JUDGED = pytest.StashKey[TestResult]()
#: The test's own ``benchmark`` fixture while the wrapped one stands in (put back after the call).
ORIGINAL = pytest.StashKey[Any]()


class BenchmarkGate:
    """A plugin object for a run that profiles in this process on a CUDA machine with
    pytest-benchmark loaded: a test's ``benchmark`` (pytest-benchmark's, not a fixture of that
    name of the suite's own) is handed over GPU-aware, and a gated test is judged once, from
    the steps the wrapped fixture profiled."""

    def __init__(self, profiler_of: Callable[[pytest.Item], GpuProf],
                 judge: Callable[[pytest.Item, GpuProf], TestResult],
                 measure: Callable[[pytest.Item, GpuProf], dict[str, Any]]) -> None:
        self.profiler_of = profiler_of
        self.judge = judge  # a gated test: judged and remembered as the session judges it
        self.measure = measure  # a test gpuprof does not gate: its metrics only

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        if not isinstance(item, pytest.Function) or "benchmark" not in item.fixturenames or not _cuda():
            return (yield)
        original = item.stash[ORIGINAL] = item.funcargs["benchmark"]
        prof = self.profiler_of(item)
        item.funcargs["benchmark"] = GpuBenchmark(original, prof, lambda p: self._metrics(item, p))
        try:
            return (yield)
        finally:  # pytest-benchmark reports from its own
            item.funcargs["benchmark"] = original

    def _metrics(self, item: pytest.Item, prof: GpuProf) -> dict[str, Any]:
        if not is_profiled(item):
            return self.measure(item, prof)
        item.stash[JUDGED] = self.judge(item, prof)
        return item.stash[JUDGED].metrics or {}


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


class GpuBenchmark:
    """Stands in for pytest-benchmark's ``benchmark`` fixture; everything else is forwarded."""

    def __init__(self, benchmark: Any, profiler: GpuProf, measure: Callable[[GpuProf], dict[str, Any]]) -> None:
        self._benchmark = benchmark
        self._profiler = profiler
        self._measure = measure

    def __call__(self, function: Callable, *args: Any, **kwargs: Any) -> Any:
        result = self._benchmark(_synchronized(function), *args, **kwargs)
        self._profile(lambda: function(*args, **kwargs))
        return result

    def pedantic(self, target: Callable, args: tuple = (), kwargs: dict | None = None,
                 setup: Callable | None = None, **options: Any) -> Any:
        result = self._benchmark.pedantic(_synchronized(target), args=args, kwargs=kwargs, setup=setup, **options)

        def once() -> None:
            a, k = setup() or (args, kwargs) if setup else (args, kwargs)
            target(*a, **(k or {}))

        self._profile(once)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._benchmark, name)

    def _profile(self, run_once: Callable[[], Any]) -> None:
        for _ in self._profiler.steps():
            run_once()
        metrics = self._measure(self._profiler)
        self._benchmark.extra_info[EXTRA_INFO_KEY] = {
            k: v for k, v in metrics.items() if not isinstance(v, (dict, list))
        }


def _synchronized(function: Callable) -> Callable:
    import torch

    def timed(*args: Any, **kwargs: Any) -> Any:
        out = function(*args, **kwargs)
        torch.cuda.synchronize()
        return out

    return timed
