"""Each process role is one plugin object (or a small strategy of one), chosen once where the
role is known (``plugin._register_roles``, ``plugin.pytest_cmdline_main``), never asked about
inside a hook: a pytest-xdist worker's events reach the controller by name, the ranks of a
distributed test are spawned, run or skipped by the role object of the process."""

import json
from types import SimpleNamespace

import pytest
from test_gate import session_settings

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
    report = _relayed(outbox)
    assert [e["event"] for e in json.loads(report.gpuprof)] == ["skipped"]
    controller = Outcomes(session_settings(tmp_path), None)
    Inbox(controller).pytest_runtest_logreport(report)
    assert controller.skipped == {"t.py::t": "no CUDA GPU available"}


def test_an_event_the_controller_does_not_know_fails_loudly_naming_it(tmp_path):
    """It was taken for a skipped test: a worker of another gpuprof version would have had its
    results listed as not measured."""
    controller = Outcomes(session_settings(tmp_path), None)
    report = SimpleNamespace(gpuprof=json.dumps([{"event": "counters", "arguments": {"nodeid": "t.py::t"}}]))
    with pytest.raises(GpuprofError, match=r"an event the controller does not know: 'counters' "
                                           r"\(it knows entry, result, skipped\)"):
        Inbox(controller).pytest_runtest_logreport(report)
    assert controller.skipped == {} and controller.results == []
