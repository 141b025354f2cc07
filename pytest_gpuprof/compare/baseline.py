"""Baseline files: JSON made to be read in a pull-request diff.

One file per test module, mirroring its path under the baseline directory
(``tests/test_moe.py`` -> ``baselines/tests/test_moe.json``).  Inside, entries
are keyed by test node id, then by GPU model: a run is only ever compared with
a baseline recorded on the same model.  Keys are sorted and indented, so a
refreshed baseline shows as a small diff.

``BaselineFile`` owns one file: ``load`` reads it, refuses what it cannot read (a file
that gives a name twice in one object, a test or an entry that is not an object, a
``schema_version`` other than this gpuprof's) and migrates the entries of older forms
(``entry.migrated``), so that the rest of the package reads one form, ``entry.Entry``.
The entry a test is judged against is checked where it is read (``BaselineFile.entry``,
``entry.check_entry``): one that cannot be trusted (a metric of the wrong type, negative
or NaN; a ratio over 1; a missing part; an unknown backend) is an error naming the file
and the test, never a weaker gate.  A session reads each file once (``Baselines``, the
judge's): a module of hundreds of tests parses its file once, not once a test.  A file that
cannot be read is never written: an update
re-reads every file under an exclusive lock on the baseline directory just before it
writes, and writes all its files as one step (``files.write_all_atomic``): every file new,
or none, even when the process is killed.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..errors import BaselineError
from ..files import recover, write_all_atomic
from .entry import StoredEntry, check_entry, migrated, shown

SCHEMA_VERSION = 1


#: The baseline file of tests whose module lies outside the rootdir (node id ``::test_x``).
OUTSIDE_ROOTDIR = "outside_rootdir"


#: Entries to set in one file: node id -> GPU model -> entry.
Entries = dict[str, dict[str, StoredEntry]]


def baseline_file(baseline_dir: Path, nodeid: str) -> Path:
    """The file that holds a test's baseline: its module path with ``.json``, kept under
    ``baseline_dir`` (a ``..`` in the path becomes ``__``)."""
    parts = ["__" if part == ".." else part for part in nodeid.split("::", 1)[0].split("/") if part not in ("", ".")]
    return baseline_dir / Path(*(parts or [OUTSIDE_ROOTDIR])).with_suffix(".json")


@dataclass(frozen=True)
class BaselineFile:
    """One baseline file: read, checked and migrated here; written through ``update_all``."""

    path: Path

    def load(self, migrate: bool = True) -> dict[str, Any]:
        """The file's content, ``{"schema_version", "tests"}``, with its entries migrated
        (``migrated``; as stored without ``migrate``: what an update keeps) and not yet
        checked (``entry`` checks the one a test is judged against); an absent file is empty.
        A file that cannot be read, or of another ``schema_version``, is an error naming it."""
        path = self.path
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {"schema_version": SCHEMA_VERSION, "tests": {}}
        except UnicodeDecodeError as exc:
            raise BaselineError(f"baseline file {path} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
                                "fix or delete it") from None
        except OSError as exc:
            raise BaselineError(f"cannot read baseline file {path}: {exc}") from exc
        try:
            doc = json.loads(text, object_pairs_hook=_object)
        except RecursionError:
            raise BaselineError(f"baseline file {path} is not valid JSON (nested too deeply); "
                                "fix or delete it") from None
        except _Twice as exc:
            raise BaselineError(f"baseline file {path} gives the name {shown(exc.args[0])} twice in one object; "
                                "fix or delete it") from None
        except ValueError as exc:
            raise BaselineError(f"baseline file {path} is not valid JSON ({exc}); fix or delete it") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("tests"), dict):
            raise BaselineError(f"baseline file {path} has no 'tests' object; fix or delete it")
        version = doc.get("schema_version")
        if type(version) is not int or version != SCHEMA_VERSION:
            newer = type(version) is int and version > SCHEMA_VERSION
            why = ": a newer gpuprof wrote it, upgrade to read it" if newer else ""
            raise BaselineError(f"baseline file {path} has schema_version {version!r}; this gpuprof reads "
                                f"{SCHEMA_VERSION}{why}")
        for nodeid, by_gpu in doc["tests"].items():
            if not isinstance(by_gpu, dict):
                raise BaselineError(f"baseline file {path}: test {nodeid} must map GPU models to entries, "
                                    f"got {shown(by_gpu)}; fix or delete it")
            for gpu, found in by_gpu.items():  # else a null entry, or a test without its GPU level, reads as none
                if not isinstance(found, dict):
                    raise _entry_error(path, nodeid, gpu, f"entry must be an object, got {shown(found)}")
                if migrate:
                    by_gpu[gpu] = migrated(found)
        return doc

    def entry(self, nodeid: str, gpu: str) -> StoredEntry | None:
        """The entry this test is judged against on this GPU model, if any, checked
        (``check_entry``): one that cannot be trusted is an error naming the file and the test."""
        return self.checked(nodeid, gpu, self.load()["tests"].get(nodeid, {}).get(gpu))

    def checked(self, nodeid: str, gpu: str, found: dict[str, Any] | None) -> StoredEntry | None:
        """``found``, an entry of this file as read (migrated), checked: the one check of an entry
        before it is judged against or recorded over (the session's copy, the file under the lock)."""
        if found is None:
            return None
        try:
            check_entry(found)
        except ValueError as exc:
            raise _entry_error(self.path, nodeid, gpu, exc) from None
        return cast(StoredEntry, found)

    def update(self, entries: Entries) -> None:
        """Set ``entries[nodeid][gpu]`` in the file as given, keeping every other entry (``update_all``)."""
        update_all(self.path.parent, {self.path: entries})


class Baselines:
    """The baseline files of one session, each read (parsed, refused or migrated:
    ``BaselineFile.load``) once, then kept by path: what the judge reads each test's entry
    from (``Judge.baselines``), so that judging a module's tests costs the same per test
    however many share its file.  Each entry is checked (``check_entry``) every time it is
    asked for, and is the caller's own copy; a file that cannot be read is the same error,
    naming it, for each of its tests.  A file this process writes through ``update_all`` is
    read again when next asked for; one another process changes meanwhile is judged as it
    was read (an update reads every file again under the directory's lock: ``update_all``)."""

    def __init__(self) -> None:
        self._read: dict[Path, dict[str, Any] | str] = {}  # path -> its tests, or why it cannot be read

    def entry(self, path: Path, nodeid: str, gpu: str) -> StoredEntry | None:
        """The entry this test is judged against on this GPU model in the file at ``path``, if
        any, checked as ``BaselineFile.entry`` checks it."""
        tests = self._read.get(path)
        if tests is None:
            try:
                tests = self._read[path] = BaselineFile(path).load()["tests"]
            except BaselineError as exc:
                tests = self._read[path] = str(exc)
        if isinstance(tests, str):
            raise BaselineError(tests)
        return BaselineFile(path).checked(nodeid, gpu, copy.deepcopy(tests.get(nodeid, {}).get(gpu)))

    def update_all(self, baseline_dir: Path, changes: dict[Path, Entries],
                   recorder: Recorder | None = None) -> dict[Path, list[str]]:
        """``update_all``, the files it was given read again when next asked for (also when
        it wrote none of them: it may have failed midway)."""
        try:
            return update_all(baseline_dir, changes, recorder)
        finally:
            for path in changes:
                self._read.pop(path, None)


class _Twice(ValueError):
    """A name given twice in one JSON object."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object of a baseline file, refused when it gives a name twice (a merge or an
    edit gone wrong): a reviewer sees both values, the reader would take the last, and the
    next update would drop the other."""
    found: dict[str, Any] = {}
    for name, value in pairs:
        if name in found:
            raise _Twice(name)
        found[name] = value
    return found


def _entry_error(path: Path, nodeid: str, gpu: str, problem: Any) -> BaselineError:
    return BaselineError(f"baseline file {path}: entry of {nodeid} on {gpu}: {problem}; fix or delete "
                         "the entry (an update does not overwrite it)")


#: How a recording's entry is stored over the one its file holds now (``recording.recorded_over``):
#: the entry to store, and what it did to the recorded runs.
Recorder = Callable[[StoredEntry, StoredEntry | None], tuple[StoredEntry, str]]


def update_all(baseline_dir: Path, changes: dict[Path, Entries],
               recorder: Recorder | None = None) -> dict[Path, list[str]]:
    """Set the entries of several files under ``baseline_dir`` as one step, every other entry
    kept as stored (a pull request's diff shows only what was recorded): when one of them
    cannot be read (BaselineError naming it), none is written.  Each entry is stored over the
    one its file holds under the lock (``recorder``), so that a run another process recorded
    since this one read the file is kept; what each did, by file.  Without ``recorder`` each
    entry is set as given (``BaselineFile.update``)."""
    baseline_dir.mkdir(parents=True, exist_ok=True)
    hows: dict[Path, list[str]] = {}
    with _locked(baseline_dir):
        recover(baseline_dir)
        texts = {}
        for path, entries in sorted(changes.items()):
            file = BaselineFile(path)
            doc = file.load(migrate=False)
            for nodeid, by_gpu in entries.items():
                stored = doc["tests"].setdefault(nodeid, {})
                for gpu, entry in by_gpu.items():
                    if recorder is None:
                        stored[gpu] = entry
                        continue
                    found = stored.get(gpu)
                    now = file.checked(nodeid, gpu, None if found is None else migrated(found))
                    stored[gpu], how = recorder(entry, now)
                    hows.setdefault(path, []).append(how)
            texts[path] = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        write_all_atomic(texts, baseline_dir)
    return hows


def clean(baseline_dir: Path) -> list[Path]:
    """Finish or undo what an update killed midway left (``files.recover``); the temporary
    files deleted.  Nothing to do where the directory does not exist."""
    if not baseline_dir.is_dir():
        return []
    with _locked(baseline_dir):
        return recover(baseline_dir)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Serialize read-modify-write across processes (concurrent runs) by locking the
    baseline directory, which leaves no lock file behind."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
