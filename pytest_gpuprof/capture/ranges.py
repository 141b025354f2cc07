"""What a capture leaves in the trace besides the GPU work: the names of its ranges
and marks.  Later stages read the trace by these names."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

#: The NVTX domain of every range gpuprof emits (Nsight Systems shows it by this name).
NVTX_DOMAIN = "gpuprof"

#: Range around the warm-up steps, and the prefix of each measured step's range (``step_0``, ...).
WARMUP_RANGE = "warmup"
STEP_RANGE_PREFIX = "step_"

#: Range around the L2 flush between steps (``flush_l2``): the GPU work launched inside
#: it, and the calls that launched it, belong to no measurement.
L2_FLUSH_RANGE = "gpuprof_l2_flush"

#: Under nsys the capture writes a test's metadata (peak memory, environment) as an
#: NVTX mark ``gpuprof:{json}`` inside the test's range, so the report reproduces it.
METADATA_MARK = "gpuprof:"


@contextlib.contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """An NVTX push/pop range in the ``gpuprof`` domain."""
    import nvtx  # 0.15 s to import: only once profiling is on

    nvtx.push_range(name, domain=NVTX_DOMAIN)
    try:
        yield
    finally:
        nvtx.pop_range(domain=NVTX_DOMAIN)


@contextlib.contextmanager
def nvtx_process_range(name: str) -> Iterator[None]:
    """An NVTX start/end range in the ``gpuprof`` domain.  Unlike a push/pop range it belongs
    to the process, not to the thread that opened it: ncu's filter ``gpuprof@NAME`` (no
    slash) holds the kernels every thread launches inside it, autograd's backward pass too."""
    import nvtx

    handle = nvtx.start_range(name, domain=NVTX_DOMAIN)
    try:
        yield
    finally:
        nvtx.end_range(handle)
