"""Under pytest-xdist, what a worker's session finds goes to the controller's session with
each test report: a worker measures and judges, the controller writes the baselines and
reports.  One small plugin object for each of the two roles, registered by ``plugin.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from typing import Any

import pytest


class Outbox:
    """(a worker) What its session found since the last test report, sent with the next."""

    def __init__(self) -> None:
        self._parts: list[tuple[str, Callable[[], Any]]] = []

    def send(self, kind: str, content: Callable[[], Any]) -> None:
        """Queue a part; it is made when the report goes (``content()``): a result is still
        changed after it is judged (confirmed, measured against the base, its kernels under
        Nsight Compute)."""
        self._parts.append((kind, content))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Generator[None, Any, Any]:
        report = yield
        if self._parts:
            report.gpuprof = json.dumps([{"kind": kind, "content": content()} for kind, content in self._parts])
            self._parts = []
        return report


class Inbox:
    """(the controller) Each part a worker sent, handed to ``receive(kind, content)``."""

    def __init__(self, receive: Callable[[str, Any], None]) -> None:
        self._receive = receive

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        message = getattr(report, "gpuprof", None)
        if message is not None:
            for part in json.loads(message):
                self._receive(part["kind"], part["content"])
