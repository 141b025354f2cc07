"""What a measurement ran on, when, and from which revision; recorded with every trace and baseline."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import __version__
from .nvml import device_uuid, nvml_session

#: When and from which revision, beside what: two runs differ in them as a rule (``recorded``)
RECORDED = ("datetime", "commit")


def gpu_environment(device_index: int = 0) -> dict[str, Any]:
    """GPU model, driver, CUDA and torch versions of the current process (torch imported),
    with the time and revision of the measurement (``recorded``)."""
    import torch

    props = torch.cuda.get_device_properties(device_index)
    return {
        "gpu": torch.cuda.get_device_name(device_index),
        "gpu_memory_bytes": int(props.total_memory),
        "compute_capability": f"{props.major}.{props.minor}",
        "driver": _driver_version(),
        **card(device_index),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "gpuprof": __version__,
        **recorded(Path.cwd()),
    }


def card(device_index: int) -> dict[str, str]:
    """``gpu_id``: which card this is, the first 12 hex digits of the SHA-256 of its UUID (the
    UUID itself is not kept): whether a run measured the card its baseline was recorded on
    decides how much its kernel times may move (``compare.machine.on_recorded_card``).  Empty
    where neither torch nor the CUDA driver gives the UUID."""
    try:
        return {"gpu_id": hashlib.sha256(device_uuid(device_index).encode()).hexdigest()[:12]}
    except (OSError, AttributeError, RuntimeError):
        return {}


def recorded(directory: Path) -> dict[str, Any]:
    """``datetime``: now, in UTC (ISO 8601); ``commit``: the git commit checked out in
    ``directory`` (``commit_info``), left out outside a git work tree or without git."""
    out: dict[str, Any] = {"datetime": datetime.now(UTC).isoformat(timespec="seconds")}
    commit = commit_info(directory.resolve())
    if commit is not None:
        out["commit"] = commit
    return out


def git(directory: Path, *args: str) -> str:
    """A git command's output in ``directory``; raises ``OSError`` without git and
    ``subprocess.SubprocessError`` when it fails (outside a work tree)."""
    return subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True, timeout=10,
                          check=True).stdout.strip()


@functools.lru_cache(maxsize=8)
def commit_info(directory: Path) -> dict[str, Any] | None:
    """``{"id", "branch", "dirty"}`` of the git work tree holding ``directory``, as
    pytest-benchmark's ``commit_info`` has them: the full commit id, the branch (None when
    detached), whether a tracked file differs from the commit.  None outside a git work
    tree, before the first commit or without git.  Read once per directory and process."""
    try:
        branch = git(directory, "rev-parse", "--abbrev-ref", "HEAD")
        return {"id": git(directory, "rev-parse", "HEAD"), "branch": None if branch == "HEAD" else branch,
                "dirty": bool(git(directory, "status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return None


#: Where a GPU that torch calls CUDA shows itself on Linux: NVIDIA's kernel driver, its
#: control device, WSL's GPU paravirtualization, ROCm's compute device (ROCm's torch says cuda).
GPU_DRIVER_NODES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg", "/dev/kfd")


def no_cuda() -> str | None:
    """Why this process can use no CUDA GPU, or None when it can.  On Linux without any GPU
    driver (none of ``GPU_DRIVER_NODES``) that is known without importing torch, which costs
    about 3 s of CPU a process (every pytest --gpuprof of a CPU-only CI); otherwise torch says."""
    if sys.platform == "linux" and not any(os.path.exists(node) for node in GPU_DRIVER_NODES):
        return f"no GPU driver: {GPU_DRIVER_NODES[0]} does not exist"
    import torch

    return None if torch.cuda.is_available() else "torch.cuda.is_available() is False"


def visible_gpu() -> str:
    """The name of the GPU the tests will use (torch's current device), or why there is
    none; asks CUDA for its properties only, allocating nothing on the GPU."""
    why = no_cuda()
    if why is not None:
        return f"none visible ({why})"
    import torch

    try:
        return torch.cuda.get_device_name()
    except (RuntimeError, AssertionError) as exc:  # the tests will meet it too, and report it there
        return f"unknown ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"


def _driver_version() -> str | None:
    """NVIDIA driver release (one for all the machine's GPUs): through NVML when nvidia-ml-py
    is installed, else nvidia-smi."""
    try:
        with nvml_session() as nvml:
            if nvml is not None:
                version = nvml.nvmlSystemGetDriverVersion()
                return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True)
        return out.stdout.partition("\n")[0].strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
