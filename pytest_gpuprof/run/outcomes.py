"""What a run found, and what it writes at its end: one per run, whatever its role.

The results judged, the profiled tests not measured and the baseline entries to store are
kept here as they come (a pytest-xdist worker relays each to its controller's, ``relay``);
``finish`` writes the baselines, all files or none, records them again in fresh processes,
and writes the reports, each rendered from one results document (``report.document``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..compare.baseline import Baselines, Entries
from ..compare.entry import StoredEntry
from ..compare.evaluate import TestResult
from ..compare.judge import Judged
from ..compare.recording import not_stored, recorded_over
from ..errors import GpuprofError
from ..report.document import results_document
from ..report.escaping import terminal_text
from ..report.terminal import session_lines
from ..report.words import refused_line, unrecorded_line, updated_line
from ..report.writers import write_reports
from .record import record_again, replay_recorded

if TYPE_CHECKING:
    import pytest

    from .settings import Settings

#: A pytest-xdist worker's relay to its controller: an event of what the run found, by its
#: name, and a function making its keyword arguments when it goes (``xdist_relay``: the
#: controller hands them to its ``worker_<name>`` method).
Relay = Callable[[str, Callable[[], dict[str, object]]], None]


def kept_here(event: str, arguments: Callable[[], dict[str, object]]) -> None:
    """The relay of a process that is no pytest-xdist worker: what it finds stays here."""


class Outcomes:
    """The run's results, tests not measured, entries to store, and lines about what it wrote."""

    def __init__(self, settings: Settings, kept_traces: Path | None, relay: Relay = kept_here,
                 baselines: Baselines | None = None) -> None:
        self.settings = settings
        # the files the judge read: what this run writes there is read again (``Judge.baselines``)
        self.baseline_files = baselines or Baselines()
        self.kept_traces = kept_traces  # where the backend keeps the traces results name, if it does
        self._relay = relay  # a pytest-xdist worker's: each part goes to the controller
        self.results: list[TestResult] = []
        self.skipped: dict[str, str] = {}  # nodeid -> why it was not measured
        self.failed_set_up: list[str] = []  # the profiled tests whose set-up failed: never measured
        self.written: list[str] = []  # lines about the files written at the end (baselines, reports)
        self._pending: dict[Path, Entries] = {}
        # the baselines this run wrote at its end (the results document's ``baselines``)
        self.baselines: dict[str, Any] = {"updated": [], "refused": None}

    def add(self, judged: Judged) -> TestResult:
        """A test judged, with the entry its recording stores; its result."""
        result = judged.result
        self.add_result(result)
        if judged.entry is not None and result.baseline_file is not None and result.nodeid and result.gpu:
            self.add_entry(str(result.baseline_file), result.nodeid, result.gpu, judged.entry)
        return result

    def add_result(self, result: TestResult) -> None:
        self._relay("result", lambda: {"result": result.to_json()})
        self.results.append(result)

    def add_entry(self, file: str, nodeid: str, gpu: str, entry: StoredEntry) -> None:
        """A baseline entry to write at the end."""
        self._relay("entry", lambda: {"file": file, "nodeid": nodeid, "gpu": gpu, "entry": entry})
        self._pending.setdefault(Path(file), {}).setdefault(nodeid, {})[gpu] = entry

    def add_counters(self, result: TestResult) -> None:
        """Nsight Compute's counters of a test just recorded join its entry (relayed with it:
        parts are made when they go)."""
        if result.counters and result.baseline_file and result.nodeid and result.gpu:
            entry = self._pending.get(result.baseline_file, {}).get(result.nodeid, {}).get(result.gpu)
            if entry is not None and "ranks" not in entry:  # (ncu profiles a test of one process)
                entry["counters"] = result.counters

    def add_skipped(self, nodeid: str, reason: str) -> None:
        """A profiled test not measured, and why."""
        self._relay("skipped", lambda: {"nodeid": nodeid, "reason": reason})
        self.skipped[nodeid] = reason

    def add_failed_set_up(self, nodeid: str) -> None:
        """A profiled test whose set-up failed (a mistake in its marker, a fixture that raised)."""
        self._relay("failed_set_up", lambda: {"nodeid": nodeid})
        self.failed_set_up.append(nodeid)

    def document(self) -> dict[str, Any]:
        """The results document of the run so far (report.document)."""
        s = self.settings
        return results_document(self.results, self.skipped, s.backend, s.baseline_dir, s.replay_dir,
                                self.kept_traces, self.baselines)

    def lines(self, inside_nsys: bool = False) -> list[str]:
        """The gpuprof section of the terminal, rendered from the results document."""
        return session_lines(self.document(), (r.to_json() for r in self.results), self.written,
                             inside_nsys=inside_nsys, failed_set_up=len(self.failed_set_up))

    def finish(self, config: pytest.Config | None, records_again: bool, writes_reports: bool) -> bool:
        """End of run: write the pending baselines, all files or none, then record them again
        in fresh processes (``records_again``), then the report files (``writes_reports``);
        ``written`` gets one line per file.  False when the baselines were refused (every file
        left as it was), when a fresh process recorded nothing, when a strict gate left
        profiled tests unmeasured, or when a report asked for could not be written."""
        s = self.settings
        refused = False
        recorded = bool(self._pending)
        recorded_runs: dict[Path, list[str]] = {}
        try:
            if self._pending:
                recorded_runs = self.baseline_files.update_all(
                    s.baseline_dir, self._pending, lambda entry, now: recorded_over(entry, now, s.baseline_runs))
        except (GpuprofError, OSError) as exc:
            self.baselines["refused"] = str(exc)
            self.written.append(refused_line(str(exc)))
            refused = True
            pending = {nodeid for entries in self._pending.values() for nodeid in entries}
            self.results = [not_stored(r, str(exc)) if r.nodeid in pending else r for r in self.results]
        else:
            for file, entries in sorted(self._pending.items()):
                hows = Counter(recorded_runs.get(file, ()))
                update = {"file": str(file), "tests": len(entries),
                          "how": "; ".join(how if n == len(entries) else f"{n}: {how}" for how, n in hows.items())}
                self.baselines["updated"].append(update)
                self.written.append(updated_line(update))
            if recorded and s.replay_dir is not None:
                self.written.append(replay_recorded(s.replay_dir, s.record_processes))
        if s.update_baseline and self.skipped:
            self.written.append(unrecorded_line(len(self.skipped)))
        self._pending.clear()
        if recorded and not refused and config is not None and records_again:
            problems = record_again(list(config.invocation_params.args), config.invocation_params.dir,
                                    s.record_processes, s.baseline_runs, lambda line: say(config, line))
            self.written += [f"--gpuprof-record-processes: {p}" for p in problems]
            refused = bool(problems)
        unmeasured = s.strict and bool(self.skipped)
        if unmeasured:
            self.written.append(f"--gpuprof-strict: {len(self.skipped)} of {len(self.skipped) + len(self.results)} "
                                "profiled test(s) were not measured (skipped, see above): the gate fails")
        if writes_reports:
            lines, reported = write_reports(self.document(), s.reports)
            self.written += lines
            refused = refused or not reported
        return not (refused or unmeasured)


def say(config: pytest.Config, line: str) -> None:
    """A line on the terminal now, while a test runs (its output is being captured); printed
    where pytest has no terminal (the nsys backend's outer session)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        print(terminal_text(line), flush=True)
        return
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        reporter.write_line(terminal_text(line))
