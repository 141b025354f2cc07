"""The backend interface (run/backends.py) is whole: every backend has every member, and the
session asks what a backend can do, never which one it holds."""

import ast
import inspect
from pathlib import Path

import pytest

from pytest_gpuprof.run.backends import Backend, NsysInnerBackend, ReplayBackend, TorchBackend
from pytest_gpuprof.run.nsys_backend import NsysReportBackend

RUN = Path(__file__).parents[2] / "pytest_gpuprof" / "run"
BACKENDS = (TorchBackend, ReplayBackend, NsysInnerBackend, NsysReportBackend)


def _members(cls) -> set[str]:
    """The protocol's members: its methods, properties and annotated attributes."""
    own = {name for name, value in vars(cls).items() if not name.startswith("_") and
           (callable(value) or isinstance(value, property))}
    return own | set(cls.__annotations__)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
def test_every_backend_has_every_member_of_the_interface(backend):
    missing = [name for name in sorted(_members(Backend)) if not hasattr(backend, name)]
    assert missing == []
    for name in sorted(_members(Backend)):  # methods take the protocol's parameters
        expected = getattr(Backend, name, None)  # None: an annotated attribute
        if callable(expected):
            assert list(inspect.signature(getattr(backend, name)).parameters)[:len(
                inspect.signature(expected).parameters)] == list(inspect.signature(expected).parameters), name


def test_no_module_of_the_run_stage_asks_which_backend_it_holds():
    asked = []
    for path in sorted(RUN.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and any(
                    isinstance(n, ast.Name) and n.id in {b.__name__ for b in BACKENDS}
                    for n in ast.walk(node.args[1])):
                asked.append(f"{path.name}:{node.lineno}")
    assert asked == []
