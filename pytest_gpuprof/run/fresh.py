"""A pytest command run again in a fresh process: what a multi-process recording
(``record``), a confirmation (``confirm``) and each side of an A/B comparison
(``sides``) do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def fresh_pytest(args: list[str], where: Path, mark: dict[str, str],
                 timeout_s: float | None = None, python: str = sys.executable) -> subprocess.CompletedProcess:
    """pytest with ``args`` in a new process of ``python`` (this interpreter) from ``where``,
    its output captured; ``mark`` joins its environment and says what the process is for
    (its plugin reads it).  Raises ``subprocess.TimeoutExpired`` past ``timeout_s``."""
    return subprocess.run([python, "-m", "pytest", *args], cwd=where, env={**os.environ, **mark},
                          capture_output=True, text=True, timeout=timeout_s)
