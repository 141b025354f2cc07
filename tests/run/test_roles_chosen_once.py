"""Each process role is one plugin object (or a small strategy of one), chosen once where the
role is known (``plugin._register_roles``, ``plugin.pytest_cmdline_main``), never asked about
inside a hook: a pytest-xdist worker's events reach the controller by name, the ranks of a
distributed test are spawned, run or skipped by the role object of the process."""

import json
from types import SimpleNamespace

import pytest
from test_torchrun import launch, suite  # noqa: F401 (a fixture, asked for by name)

from helpers.session import session_settings
from pytest_gpuprof.errors import GpuprofError
from pytest_gpuprof.run.outcomes import Outcomes
from pytest_gpuprof.run.xdist_relay import Inbox, Outbox


def _relayed(outbox: Outbox) -> SimpleNamespace:
    """The test report a worker's outbox sends, with the events queued since the last."""
    hook = outbox.pytest_runtest_makereport(None, None)
    next(hook)
    report = SimpleNamespace()
    with pytest.raises(StopIteration):
        hook.send(report)
    return report


def test_each_event_a_worker_relays_reaches_the_controller_by_its_name(tmp_path):
    outbox = Outbox()
    worker = Outcomes(session_settings(tmp_path), None, relay=outbox.send)
    worker.add_skipped("t.py::t", "no CUDA GPU available")
    worker.add_failed_set_up("t.py::u")
    report = _relayed(outbox)
    assert [e["event"] for e in json.loads(report.gpuprof)] == ["skipped", "failed_set_up"]
    controller = Outcomes(session_settings(tmp_path), None)
    Inbox(controller).pytest_runtest_logreport(report)
    assert controller.skipped == {"t.py::t": "no CUDA GPU available"}
    assert controller.failed_set_up == ["t.py::u"]


def test_an_event_the_controller_does_not_know_fails_loudly_naming_it(tmp_path):
    """It was taken for a skipped test: a worker of another gpuprof version would have had its
    results listed as not measured."""
    controller = Outcomes(session_settings(tmp_path), None)
    report = SimpleNamespace(gpuprof=json.dumps([{"event": "counters", "arguments": {"nodeid": "t.py::t"}}]))
    with pytest.raises(GpuprofError, match=r"an event the controller does not know: 'counters' "
                                           r"\(it knows entry, failed_set_up, result, skipped\)"):
        Inbox(controller).pytest_runtest_logreport(report)
    assert controller.skipped == {} and controller.results == []


def test_under_torchrun_a_distributed_test_of_another_number_of_ranks_is_skipped_on_every_rank(request):
    """The rank's role object skips it before the session runs or replays its body: the
    session's marker form and replay came first, and a test of 3 ranks passed, judged from 2."""
    folder = request.getfixturevalue("suite")
    test = folder / "example_suite" / "test_distributed.py"
    test.write_text(test.read_text().replace("WORLD = 2", "WORLD = 3"))
    every = launch(folder, 2, ["example_suite/test_distributed.py", "-p", "no:cacheprovider", "--gpuprof",
                              "--gpuprof-replay=traces", "--gpuprof-rank-timeout=60", "-rs"])
    for rank in every:
        assert rank.returncode == 0 and "2 skipped" in rank.stdout, rank.stdout[-3000:]
        assert "gpuprof: a distributed test of 3 ranks; torchrun started 2" in rank.stdout


HOOK_FLAGS = {"judges_here", "in_process", "runs_tests", "needs_gpu", "measures_for_another", "place", "workerinput",
              "relay", "_relay", "replay_dir", "nsys_inner", "profiled_rank", "first", "confirming"}


def test_no_hook_method_asks_which_role_its_process_has():
    """A plugin object's hook methods (and the methods they call on it) read no flag of the
    process's role or of its backend's kind: the object, or a strategy of it, was picked once."""
    import ast
    from pathlib import Path

    import pytest_gpuprof

    package = Path(pytest_gpuprof.__file__).parent
    asked = []
    for path in [package / "plugin.py", *sorted((package / "run").glob("*.py"))]:
        for cls in [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]:
            methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
            hooks = [name for name in methods if name.startswith("pytest_")]
            called, seen = list(hooks), set()
            while called:  # the hooks and every method of the object they call
                name = called.pop()
                if name in seen or name not in methods:
                    continue
                seen.add(name)
                for node in ast.walk(methods[name]):
                    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                        called.append(node.attr)
                    if isinstance(node, ast.Attribute) and node.attr in HOOK_FLAGS:
                        asked.append(f"{path.name}: {cls.name}.{name} reads {node.attr}")
    assert asked == []
