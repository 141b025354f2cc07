"""Which process this is (run/role.py): read from the variables its parent set, in one module."""

import ast
from pathlib import Path

import pytest

from pytest_gpuprof.run import role
from pytest_gpuprof.run.role import Place, Process, this_process

PACKAGE = Path(__file__).parents[2] / "pytest_gpuprof"
#: The variables that say what a process is for.
ROLE_VARIABLES = {role.SIDE, role.RECORDING, role.CONFIRMING, role.RANK, role.PROFILED, role.STORE, role.INSIDE_NSYS,
                  role.TORCHRUN, role.ERROR_FILE, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                  "TORCHELASTIC_RESTART_COUNT"}


@pytest.mark.parametrize("environ, process", [
    ({}, Process()),
    ({"GPUPROF_SIDE": "base"}, Process(side="base")),
    ({"GPUPROF_SIDE": "ncu", "GPUPROF_NSYS_INNER": "/tmp/inner.json"},
     Process(side="ncu", inside_nsys=Path("/tmp/inner.json"))),
    ({"GPUPROF_RECORDING": "2"}, Process(recording=True)),
    ({"GPUPROF_CONFIRMING": "1"}, Process(confirming=True)),
    # a distributed test's profiled rank 1 of 2, as ranks._start marks it
    ({"GPUPROF_RANK": "1", "GPUPROF_RANK_PROFILED": "1", "GPUPROF_SIDE": "rank", "RANK": "1", "LOCAL_RANK": "1",
      "WORLD_SIZE": "2", "GPUPROF_RANK_STORE": "/tmp/store"},
     Process(side="rank", rank=1, profiled_rank=True, store=Path("/tmp/store"), place=Place(1, 2, 1, 2))),
    # torchrun's rank 3 of 4 on one node: its launch told apart by the attempt's error-file folder
    ({"TORCHELASTIC_RUN_ID": "none", "RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4",
      "TORCHELASTIC_ERROR_FILE": "/tmp/torchelastic_x/attempt_0/3/error.json"},
     Process(torchrun="/tmp/torchelastic_x/attempt_0", place=Place(3, 4, 3, 4))),
    ({"TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_RESTART_COUNT": "1", "RANK": "0", "WORLD_SIZE": "2"},
     Process(torchrun="abc-1", place=Place(0, 2, 0, 2))),
    # torchrun with one process is no distributed session
    ({"TORCHELASTIC_RUN_ID": "abc", "RANK": "0", "WORLD_SIZE": "1"}, Process()),
])
def test_each_role_is_read_from_what_its_parent_set(environ, process):
    assert this_process(environ) == process


@pytest.mark.parametrize("process, first, profiles", [
    (Process(), True, True),
    (Process(side="head"), False, True),
    (Process(confirming=True), False, True),
    (Process(recording=True), False, True),
    (Process(rank=0, place=Place(0, 2, 0, 2)), True, False),  # a rank its test's process does not profile
    (Process(side="rank", rank=0, profiled_rank=True, place=Place(0, 2, 0, 2)), False, True),
])
def test_what_a_role_may_do(process, first, profiles):
    assert (process.first, process.profiles) == (first, profiles)


def test_only_the_role_module_reads_the_variables_that_say_what_a_process_is():
    """Parents set them (constants imported from run.role); no other module reads one, by
    name or through a constant of its own."""
    readers = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "role.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            literal = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
            if literal in ROLE_VARIABLES:
                readers.setdefault(str(path.relative_to(PACKAGE)), set()).add(literal)
    # ranks._start sets a rank's own place, as torchrun would: the only names written outside role.py
    assert readers == {"run/rank_processes.py": {"RANK", "LOCAL_RANK", "WORLD_SIZE"}}
