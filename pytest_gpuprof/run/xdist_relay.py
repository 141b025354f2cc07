"""Under pytest-xdist, what a worker's session finds goes to the controller's session with
each test report: a worker measures and judges, the controller writes the baselines and
reports.  One small plugin object for each of the two roles, registered by ``plugin.py``.

As pytest-xdist's own controller does with its workers' events, the controller hands each
event, by its name, to its method ``worker_<name>``; an event it has no method for is an
error naming it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator

import pytest

from ..compare.baseline import StoredEntry
from ..compare.evaluate import TestResult
from ..errors import GpuprofError
from .outcomes import Outcomes


class Outbox:
    """(a worker) What its session found since the last test report, sent with the next."""

    def __init__(self) -> None:
        self._events: list[tuple[str, Callable[[], dict[str, object]]]] = []

    def send(self, event: str, arguments: Callable[[], dict[str, object]]) -> None:
        """Queue an event (``outcomes.Relay``); its arguments are made when the report goes: a
        result is still changed after it is judged (confirmed, measured against the base, its
        kernels under Nsight Compute)."""
        self._events.append((event, arguments))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if self._events:
            report.gpuprof = json.dumps([{"event": event, "arguments": arguments()}  # type: ignore[attr-defined]
                                         for event, arguments in self._events])
            self._events = []
        return report


class Inbox:
    """(the controller) Each event a worker sent, handed by its name to ``worker_<name>``: what
    the worker found joins the controller's ``Outcomes``, written at the end."""

    def __init__(self, outcomes: Outcomes) -> None:
        self.outcomes = outcomes

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        message = getattr(report, "gpuprof", None)
        if message is not None:
            for event in json.loads(message):
                self.dispatch(event["event"], event["arguments"])

    def dispatch(self, event: str, arguments: dict[str, object]) -> None:
        """An event a worker sent, to ``worker_<event>``; an error naming an event no method takes."""
        method = getattr(self, f"worker_{event}", None)
        if method is None:
            known = sorted(name.removeprefix("worker_") for name in dir(self) if name.startswith("worker_"))
            raise GpuprofError(f"a pytest-xdist worker relayed an event the controller does not know: {event!r} "
                               f"(it knows {', '.join(known)})")
        method(**arguments)

    def worker_result(self, result: dict[str, object]) -> None:
        """A test the worker judged."""
        self.outcomes.add_result(TestResult.from_json(result))

    def worker_entry(self, file: str, nodeid: str, gpu: str, entry: StoredEntry) -> None:
        """A baseline entry the worker recorded, written at the end with the others."""
        self.outcomes.add_entry(file, nodeid, gpu, entry)

    def worker_skipped(self, nodeid: str, reason: str) -> None:
        """A profiled test the worker did not measure, and why."""
        self.outcomes.add_skipped(nodeid, reason)

    def worker_failed_set_up(self, nodeid: str) -> None:
        """A profiled test whose set-up failed in the worker."""
        self.outcomes.add_failed_set_up(nodeid)
