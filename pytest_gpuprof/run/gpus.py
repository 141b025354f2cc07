"""One pytest-xdist worker per GPU: ``pytest -n auto --gpuprof`` starts a worker for each GPU
the controller sees, and each worker sees only its own (``CUDA_VISIBLE_DEVICES``), so that
tests measured at once never share a GPU.  More workers than GPUs share them round-robin;
the NVML sampler then sees the other process and the run says so (docs/metrics.md)."""

from __future__ import annotations

import os
from typing import Any, Mapping

#: The controller's visible GPUs, handed to each worker in its ``workerinput``.
WORKER_KEY = "gpuprof_gpus"


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` names them (indices or
    UUIDs): its entries where it is set, else every GPU CUDA counts (none without CUDA)."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [entry.strip() for entry in given.split(",") if entry.strip()]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # no torch, or a CUDA that cannot count
        return []


def worker_gpu(worker_id: str, gpus: list[str]) -> str | None:
    """The GPU of xdist worker ``gw<k>``: the k-th visible one, round-robin; None without GPUs."""
    if not gpus or not worker_id.startswith("gw") or not worker_id[2:].isdigit():
        return None
    return gpus[int(worker_id[2:]) % len(gpus)]


def pin_worker(workerinput: Mapping[str, Any]) -> None:
    """Show this xdist worker its own GPU only (``worker_gpu`` of the controller's list); a
    worker that was handed no list (no GPU, an xdist run without --gpuprof) is left alone."""
    gpu = worker_gpu(workerinput.get("workerid", ""), list(workerinput.get(WORKER_KEY) or []))
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu

