"""One pytest-xdist worker per GPU: ``pytest -n auto --gpuprof`` starts a worker for each GPU
the controller sees, and each worker sees only its own (``CUDA_VISIBLE_DEVICES``), so that
tests measured at once never share a GPU.  More workers than GPUs share them round-robin;
the NVML sampler then sees the other process and the run says so (docs/metrics.md).

The controller hands its GPUs to the workers in the environment they inherit (``GPUS``): a
worker reads it when the plugin loads, before any conftest can start CUDA."""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: The controller's visible GPUs, comma-separated, for the workers it starts.
GPUS = "GPUPROF_XDIST_GPUS"


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


def hand_over(environ: MutableMapping[str, str]) -> None:
    """In the controller of an xdist run under --gpuprof: its GPUs, for the workers."""
    environ[GPUS] = ",".join(visible_gpus())


def pin_worker(environ: MutableMapping[str, str]) -> None:
    """In an xdist worker whose controller handed over its GPUs: show it its own only."""
    gpu = worker_gpu(environ.get("PYTEST_XDIST_WORKER", ""), [g for g in environ.get(GPUS, "").split(",") if g])
    if gpu is not None:
        environ["CUDA_VISIBLE_DEVICES"] = gpu
