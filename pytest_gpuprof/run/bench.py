"""pytest-benchmark alongside gpuprof, through its public fixture API only.

Under ``--gpuprof`` a test's ``benchmark`` fixture is handed over wrapped: the
timed function is followed by ``torch.cuda.synchronize()``, so the times
pytest-benchmark records are GPU work, not launch time; once timing is done the
function runs again for gpuprof's steps (torch.profiler), and the metrics go
into ``benchmark.extra_info["gpuprof"]``, which ``--benchmark-json`` and
``--benchmark-autosave`` store and ``--benchmark-compare`` leaves alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..capture.profiler import GpuProf

#: Metrics copied into extra_info: the scalars of docs/metrics.md.
EXTRA_INFO_KEY = "gpuprof"


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
