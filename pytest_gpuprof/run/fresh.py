"""A child pytest: the one way gpuprof starts a pytest process of its own, and hears back.

Each role's child is started here: a recording's later process (``record``), a confirmation
re-run (``confirm``), a side of an A/B comparison (``sides``), a distributed test's rank
(``rank_processes``), the test under Nsight Compute (``kernel_profiling``) and the session under
Nsight Systems (``nsys_backend``).  Its command is ``python -m pytest ARGS``, after a profiler's
command where one records it (``pytest_command``); its environment is this one's, less what the
parent leaves out, with the role's marks joined (``run.role``'s variables: ``child_environment``).
Each leads a process group of its own: past its time, or when this process is interrupted or
fails while it runs, the group is stopped whole (``stop``), so no process the test started
outlives it.  What the child measured comes back in a JSON file it writes (``child_results``).
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..capture.nsys import HELD_ENV, hold, restore_held, split_environment
from ..errors import GpuprofError

#: How a child whose variables are held out of a profiler's sight (``capture.nsys.hold``) runs
#: pytest: ``run_held`` puts them back first.
HELD_LAUNCH = "import sys; from pytest_gpuprof.run.fresh import run_held; sys.exit(run_held(sys.argv[1:]))"
#: Lines of a streamed child's output kept for an error message (``echo``).
TAIL_LINES = 60


def pytest_command(args: Sequence[str], python: str = sys.executable, under: Sequence[str] = (),
                   held: bool = False) -> list[str]:
    """``python -m pytest ARGS``, run by ``under`` (a profiler's command, which runs the command
    that follows it) when given; ``held``: through ``run_held`` (``HELD_LAUNCH``)."""
    return [*under, python, *(["-c", HELD_LAUNCH] if held else ["-m", "pytest"]), *args]


def run_held(args: list[str]) -> int:
    """(the child, under a profiler) The variables held out of the profiler's sight back
    (``capture.nsys.restore_held``), then pytest."""
    restore_held()
    return int(pytest.main(args))


def child_environment(mark: Mapping[str, str], without: Collection[str] = ()) -> dict[str, str]:
    """This process's environment less the variables ``without``, with ``mark`` joined: what the
    child is for (``run.role``'s variables, set by its parent)."""
    return {**{k: v for k, v in os.environ.items() if k not in without}, **mark}


@contextlib.contextmanager
def child_pytest(args: Sequence[str], where: Path, mark: Mapping[str, str], *, python: str = sys.executable,
                 under: Sequence[str] = (), without: Collection[str] = (), held: bool = False,
                 log: Path | None = None, merged: bool = False, grace_s: float = 0.0) -> Iterator[subprocess.Popen]:
    """A child pytest (``pytest_command``) started from ``where`` in ``child_environment``, the
    leader of a process group of its own.  ``held``: the variables a profiler must not record
    reach it through a private file (``capture.nsys.hold``), gone once it ends.  Its output is
    written to ``log``, or piped: stdout and stderr, or one stream when ``merged``.  On leaving,
    a child still running is stopped with its group (``stop``, ``grace_s``).  An error names
    the program when it cannot be started."""
    env = child_environment(mark, without)
    held_file = None
    if held:
        env, kept = split_environment(env)
        held_file = hold(kept)
        env[HELD_ENV] = str(held_file)
    command = pytest_command(args, python, under, held)
    try:
        with contextlib.ExitStack() as files:
            out = files.enter_context(open(log, "wb")) if log is not None else subprocess.PIPE
            err = subprocess.STDOUT if log is not None or merged else subprocess.PIPE
            try:
                process = subprocess.Popen(command, cwd=where, env=env, stdout=out, stderr=err,
                                           start_new_session=True)
            except OSError as exc:
                raise GpuprofError(f"{Path(command[0]).name} could not be started: {exc}") from None
        with process:
            try:
                yield process
            finally:
                stop(process, grace_s)
    finally:
        if held_file is not None:
            held_file.unlink(missing_ok=True)


def stop(process: subprocess.Popen, grace_s: float = 0.0) -> None:
    """A child still running, and everything in its process group: asked to end (SIGINT, then
    SIGTERM, each given ``grace_s`` seconds) when given grace, then killed; reaped either way."""
    if process.poll() is None:
        for sig in (signal.SIGINT, signal.SIGTERM) if grace_s > 0 else ():
            _signal_group(process, sig)
            try:
                process.wait(timeout=grace_s)
                break
            except subprocess.TimeoutExpired:
                pass
        _signal_group(process, signal.SIGKILL)  # what is left of the group once its leader ended
    process.wait()


def _signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def fresh_pytest(args: list[str], where: Path, mark: Mapping[str, str],
                 timeout_s: float | None = None, python: str = sys.executable) -> subprocess.CompletedProcess:
    """pytest with ``args`` in a child process of ``python`` (this interpreter) from ``where``
    (``child_pytest``), its output captured; ``mark`` joins its environment and says what the
    process is for (its plugin reads it).  Raises ``subprocess.TimeoutExpired`` past
    ``timeout_s``, once the child and all it started are stopped."""
    with child_pytest(args, where, mark, python=python) as process:
        out, err = process.communicate(timeout=timeout_s)
    return subprocess.CompletedProcess(process.args, process.returncode, out.decode(errors="replace"),
                                       err.decode(errors="replace"))


def echo(process: subprocess.Popen) -> str:
    """Copy a child's piped output to this process's as it comes; its last lines
    (``TAIL_LINES``, for an error message) once it ends."""
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    to = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    pending = b""
    stdout = process.stdout
    assert isinstance(stdout, io.BufferedReader)  # piped, at the default buffering
    for chunk in iter(lambda: stdout.read1(65536), b""):
        if to is not None:
            to.write(chunk)
            to.flush()
        else:
            sys.stdout.write(chunk.decode(errors="replace"))
        pending += chunk
        *lines, pending = pending.replace(b"\r", b"\n").split(b"\n")
        tail.extend(line.decode(errors="replace") for line in lines if line.strip())
    process.wait()
    return "\n".join(tail)


def read_results(path: Path, child: str, ended: str = "") -> dict[str, Any]:
    """The JSON object ``child`` (its name in a message: "rank 1") wrote to ``path``: its results
    document, or what a side's plugin or the session inside nsys writes.  An error naming the
    child and the file when it wrote none (``ended``: how it ended, said then) or one that
    cannot be read."""
    if not path.is_file():
        raise GpuprofError(f"{child} measured nothing (no results document): {path}" + (f"; {ended}" if ended else ""))
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise GpuprofError(f"{child}'s results cannot be read: {path}: {exc}") from None
    if not isinstance(doc, dict):
        raise GpuprofError(f"{child}'s results cannot be read: {path}: not a JSON object")
    return doc
