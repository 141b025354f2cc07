"""What several test modules read, made once for the whole run, under pytest-xdist too."""

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import run_folder


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str,
                 make: Callable[[Path], subprocess.CompletedProcess]) -> tuple[Path, subprocess.CompletedProcess]:
    """The folder NAME, filled by ``make(folder)`` once for the whole run, and the process it
    ran: under pytest-xdist by the first worker that asks, the others waiting for it (a lock
    in the run's common temporary folder), then reading what it left.  The tests read the
    folder and write nothing there.  A ``make`` that returns a failed process is done like any
    other (each test then sees the failure); one that raises leaves nothing done: the next
    worker that asks tries again, and fails alike.  What was done is written whole or not at
    all (a temporary file renamed)."""
    root = run_folder(tmp_path_factory)
    folder, done = root / f"once-{name}", root / f"once-{name}.json"
    with open(root / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            proc = make(folder)
            partial = done.with_suffix(".partial")
            partial.write_text(json.dumps({"args": [str(a) for a in proc.args], "returncode": proc.returncode,
                                           "stdout": proc.stdout, "stderr": proc.stderr}))
            os.replace(partial, done)
    said = json.loads(done.read_text())
    return folder, subprocess.CompletedProcess(said["args"], said["returncode"], said["stdout"], said["stderr"])

