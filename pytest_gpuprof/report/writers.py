"""The report files: which are asked for, where they go, and writing each from the document."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..files import NotJson, json_text, write_atomic
from .benchmark_json import write_benchmark
from .html import write_html
from .markdown import write_summary


def write_json(doc: dict[str, Any], path: Path) -> None:
    """The results document, strict JSON (``files.json_text``: nothing that is not finite)."""
    write_atomic(path, json_text(doc, indent=2, sort_keys=True) + "\n")


#: Report files: the option's name (after --gpuprof-) -> function writing the document
#: there, called as ``write(doc, path)``.
REPORTS: dict[str, Callable[..., None]] = {
    "json": write_json,
    "summary": write_summary,
    "html": write_html,
    "benchmark-json": write_benchmark,
}

#: Reports that, when their option is not given, go to the file an environment variable
#: names, appended to: kind -> variable.  Their writer is called ``write(doc, path, append=True)``.
FROM_ENVIRONMENT: dict[str, str] = {"summary": "GITHUB_STEP_SUMMARY"}


def report_targets(reports: dict[str, Path | None]) -> list[tuple[str, Path, bool]]:
    """(kind, path, append) of every report to write: the options given, then the
    environment's files for those not given."""
    out = [(kind, path, False) for kind, path in reports.items() if path is not None]
    for kind, variable in FROM_ENVIRONMENT.items():
        value = os.environ.get(variable)
        if reports.get(kind) is None and value:
            out.append((kind, Path(value), True))
    return out


def write_reports(doc: dict[str, Any], reports: dict[str, Path | None]) -> tuple[list[str], bool]:
    """Write every report file asked for (the options' paths, then the environment's): one
    line each for the terminal, and whether all were written.  A report asked for and not
    written fails the run (its callers say so): a gate whose artifact or pull-request
    summary went missing is a gate nobody can read."""
    lines, written = [], True
    for kind, path, append in report_targets(reports):
        try:
            if append:
                REPORTS[kind](doc, path, append=True)
            else:
                REPORTS[kind](doc, path)
        except (OSError, NotJson) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            lines.append(f"{kind} report not written: {path}: {why}: {NOT_WRITTEN_FAILS}")
            written = False
            continue
        lines.append(f"{kind} report: {'appended to ' if append else ''}{path}")
    return lines, written


#: What a report not written does to the run.
NOT_WRITTEN_FAILS = "the run fails"
