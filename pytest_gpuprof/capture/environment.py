"""What a measurement ran on; recorded with every trace and baseline."""

from __future__ import annotations

import platform
import subprocess
from typing import Any

from .. import __version__


def gpu_environment(device_index: int = 0) -> dict[str, Any]:
    """GPU model, driver, CUDA and torch versions of the current process (torch imported)."""
    import torch

    props = torch.cuda.get_device_properties(device_index)
    return {
        "gpu": torch.cuda.get_device_name(device_index),
        "gpu_memory_bytes": int(props.total_memory),
        "compute_capability": f"{props.major}.{props.minor}",
        "driver": _driver_version(device_index),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "gpuprof": __version__,
    }


def visible_gpu() -> str:
    """The name of the GPU the tests will use (torch's current device), or why there is
    none; asks CUDA for its properties only, allocating nothing on the GPU."""
    import torch

    if not torch.cuda.is_available():
        return "none visible (torch.cuda.is_available() is False)"
    try:
        return torch.cuda.get_device_name()
    except (RuntimeError, AssertionError) as exc:  # the tests will meet it too, and report it there
        return f"unknown ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"


def _driver_version(device_index: int) -> str | None:
    """NVIDIA driver release: through NVML when nvidia-ml-py is installed, else nvidia-smi."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", f"--id={device_index}"],
            capture_output=True, text=True, timeout=10, check=True,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
