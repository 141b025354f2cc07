"""The pytest plugin of one side's fresh process in an A/B comparison (``sides``), and
of one rank of a distributed test (``rank_processes``).

It runs only the tests asked for (``GPUPROF_SIDE_NODEIDS``, a JSON list), records how
each ended (a failure's text too), and on the base side lists the modules imported from the head's checkout
(``GPUPROF_SIDE_FORBID``): a base process that imported them measured the head's code.
It writes all that as JSON to ``GPUPROF_SIDE_OUT``.

Only the standard library and pytest: the file is copied beside the process and loaded
with ``-p``, since the base side imports the base's copy of everything else, gpuprof too
when the project under test is gpuprof.
"""

from __future__ import annotations

import json
import os
import site
import sys
import time
from pathlib import Path

#: The name the plugin is loaded under (``-p``), in the folder ``install`` copies it to.
NAME = "_gpuprof_side"

_ended: dict[str, str] = {}  # nodeid -> passed | failed | error | skipped: REASON
_messages: dict[str, str] = {}  # nodeid -> the failure's text
_failed_at: dict[str, float] = {}  # nodeid -> when it failed (epoch seconds): which rank failed first
_ran: list[str] = []


def install(folder: Path, nodeids: list[str], out: Path) -> dict[str, str]:
    """Copy this plugin into ``folder`` (which the process must have first on ``PYTHONPATH``)
    and return what its environment tells it: the tests to run and where to write; the job's
    summary is the main process's, not this one's."""
    (folder / f"{NAME}.py").write_bytes(Path(__file__).read_bytes())
    return {"GPUPROF_SIDE_NODEIDS": json.dumps(nodeids), "GPUPROF_SIDE_OUT": str(out), "GITHUB_STEP_SUMMARY": ""}


def pytest_collection_modifyitems(config, items) -> None:
    wanted = set(json.loads(os.environ["GPUPROF_SIDE_NODEIDS"]))
    deselected = [item for item in items if item.nodeid not in wanted]
    items[:] = [item for item in items if item.nodeid in wanted]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    _ran.extend(item.nodeid for item in items)


def pytest_runtest_logreport(report) -> None:
    if report.failed:
        _ended[report.nodeid] = "failed" if report.when == "call" else "error"
        _messages.setdefault(report.nodeid, report.longreprtext)
        _failed_at.setdefault(report.nodeid, time.time())
    elif report.skipped and report.nodeid not in _ended:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _ended[report.nodeid] = f"skipped: {reason.removeprefix('Skipped: ')}"
    elif report.when == "call" and report.nodeid not in _ended:
        _ended[report.nodeid] = "passed"


def pytest_sessionfinish(session) -> None:
    out = os.environ.get("GPUPROF_SIDE_OUT")
    if out:
        Path(out).write_text(json.dumps({"ran": _ran, "ended": _ended, "messages": _messages,
                                         "failed_at": _failed_at, "from_head": from_head()}))


def from_head() -> list[str]:
    """``MODULE from FILE`` for each module this process imported from the head's checkout
    (``GPUPROF_SIDE_FORBID``), leaving out installed packages (a virtual environment inside
    the checkout) and the folders of ``GPUPROF_SIDE_ALLOW`` (a path list: the base's checkout,
    which may lie inside the head's, and this file's)."""
    forbid = os.environ.get("GPUPROF_SIDE_FORBID")
    if not forbid:
        return []
    head = Path(forbid).resolve()
    allowed = [Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages(),
                                           site.getusersitepackages(),
                                           *os.environ.get("GPUPROF_SIDE_ALLOW", "").split(os.pathsep)} if p]
    found = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file:
            continue
        path = Path(file).resolve()
        if path.is_relative_to(head) and not any(path.is_relative_to(a) for a in allowed if a != Path("/")):
            found.append(f"{name} from {path}")
    return sorted(found)
