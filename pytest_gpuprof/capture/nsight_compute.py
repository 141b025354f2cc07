"""Running Nsight Compute: find it, and print a report's raw page as CSV (``trace.ncu_report``
reads it).  Never with its own clock control: gpuprof measures the card as it is set."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..errors import GpuprofError
from .tools import find_tool

#: Where ncu is looked for after the option and PATH.
INSTALL_GLOBS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")
#: How gpuprof prints a report: every metric in its base unit, kernels by their mangled name.
EXPORT_ARGS = ("--csv", "--page", "raw", "--print-units", "base", "--print-kernel-base", "mangled")


def find_ncu(explicit: str | None, option: str = "--ncu") -> Path:
    """The ncu binary: the option, then PATH, then the usual install places."""
    return find_tool("ncu", "Nsight Compute", ((option, explicit),), INSTALL_GLOBS)


def export_csv(ncu: Path, report: Path, timeout_s: float | None = None) -> str:
    """The report's raw page, as gpuprof prints it (``EXPORT_ARGS``)."""
    try:
        done = subprocess.run([str(ncu), "--import", str(report), *EXPORT_ARGS], capture_output=True, text=True,
                              errors="replace", timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GpuprofError(f"ncu could not read {report}: {exc}") from None
    if done.returncode != 0:
        raise GpuprofError(f"ncu could not read {report} (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout
