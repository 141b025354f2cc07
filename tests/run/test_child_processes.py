"""The child pytest processes gpuprof starts (run/fresh.py): started one way, in one module,
each stopped with all it started past its time, heard back through the file it wrote."""

import ast
import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pytest_gpuprof.errors import GpuprofError
from pytest_gpuprof.run.fresh import child_environment, fresh_pytest, read_results

PACKAGE = Path(__file__).parents[2] / "pytest_gpuprof"


def starts_a_child(node: ast.AST) -> str | None:
    """What in ``node`` starts a pytest process, or one gpuprof watches: a ``-m pytest``
    command, ``pytest.main`` (pytest in a process started another way), ``subprocess.Popen``."""
    if isinstance(node, ast.List | ast.Tuple):
        words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
        if any(pair == ("-m", "pytest") for pair in zip(words, words[1:])):
            return "-m pytest"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
        called = f"{node.func.value.id}.{node.func.attr}"
        return called if called in ("pytest.main", "subprocess.Popen") else None
    return None


def test_only_run_fresh_starts_a_child_pytest():
    """Every role's child (recording, confirmation, A/B side, rank, ncu, nsys) is started by
    run/fresh.py; a module that built its own command would bypass its group stop and reader."""
    starters: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            found = starts_a_child(node)
            if found:
                starters.setdefault(str(path.relative_to(PACKAGE)), set()).add(found)
    assert starters == {"run/fresh.py": {"-m pytest", "pytest.main", "subprocess.Popen"}}


# Stands in for the child's interpreter: a test that started a helper process of its own, then hangs.
HANGING_PYTHON = """#!/bin/sh
sleep 600 &
echo $! > helper.pid
wait
"""


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan may wait a while for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_child_past_its_time_is_stopped_with_all_it_started(tmp_path):
    """A confirmation re-run or an A/B side that runs over --gpuprof-confirm-timeout is stopped
    with the processes its test started: left running, they would hold the GPU while the next
    tests are measured."""
    python = tmp_path / "python"
    python.write_text(HANGING_PYTHON)
    python.chmod(0o755)
    with pytest.raises(subprocess.TimeoutExpired):
        fresh_pytest(["t.py"], tmp_path, {}, timeout_s=3, python=str(python))
    helper = int((tmp_path / "helper.pid").read_text())
    try:
        deadline = time.monotonic() + 10
        while running(helper) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(helper), "the test's own process outlived its child pytest"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, signal.SIGKILL)


def test_a_child_that_cannot_be_started_is_an_error_naming_its_program(tmp_path):
    """--gpuprof-base-python with a typo: the side's error names the interpreter, no traceback."""
    missing = tmp_path / "venv" / "bin" / "pythno"
    with pytest.raises(GpuprofError, match=rf"^pythno could not be started: .*No such file or directory: "
                                           rf"'{missing}'$"):
        fresh_pytest(["t.py"], tmp_path, {}, python=str(missing))


def test_a_childs_environment_is_this_ones_with_its_role_marked_and_less_what_its_parent_leaves_out(monkeypatch):
    monkeypatch.setenv("GPUPROF_RECORDING", "2")
    monkeypatch.setenv("KEPT", "as it was")
    env = child_environment({"GPUPROF_RANK": "1", "KEPT": "marked"}, without={"GPUPROF_RECORDING"})
    assert env["GPUPROF_RANK"] == "1" and env["KEPT"] == "marked" and "GPUPROF_RECORDING" not in env
    assert env["PATH"] == os.environ["PATH"]


def test_a_childs_results_are_read_back_or_the_error_names_the_child_and_the_file(tmp_path):
    results = tmp_path / "results.json"
    with pytest.raises(GpuprofError, match=rf"^rank 1 measured nothing \(no results document\): {results}; "
                                           r"it ended with exit 3$"):
        read_results(results, "rank 1", ended="it ended with exit 3")
    results.write_text('{"tests": [')
    with pytest.raises(GpuprofError, match=rf"^rank 1's results cannot be read: {results}: Expecting value"):
        read_results(results, "rank 1")
    results.write_text("[]")
    with pytest.raises(GpuprofError, match=rf"^rank 1's results cannot be read: {results}: not a JSON object$"):
        read_results(results, "rank 1")
    results.write_text(json.dumps({"tests": [{"nodeid": "t.py::t"}], "pid": 41}))
    assert read_results(results, "rank 1") == {"tests": [{"nodeid": "t.py::t"}], "pid": 41}
