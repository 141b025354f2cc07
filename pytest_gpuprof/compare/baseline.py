"""Baseline files: JSON made to be read in a pull-request diff.

One file per test module, mirroring its path under the baseline directory
(``tests/test_moe.py`` -> ``baselines/tests/test_moe.json``).  Inside, entries
are keyed by test node id, then by GPU model: a run is only ever compared with
a baseline recorded on the same model.  Keys are sorted and indented, so a
refreshed baseline shows as a small diff.

A file that cannot be read is never written: an update re-reads every file
under an exclusive lock on the baseline directory just before it writes, and
writes all its files as one step (``files.write_all_atomic``): every file new,
or none, even when the process is killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any, Iterator

from ..errors import BaselineError
from ..files import recover, write_all_atomic

SCHEMA_VERSION = 1


#: The baseline file of tests whose module lies outside the rootdir (node id ``::test_x``).
OUTSIDE_ROOTDIR = "outside_rootdir"


def baseline_file(baseline_dir: Path, nodeid: str) -> Path:
    """The file that holds a test's baseline: its module path with ``.json``, kept under
    ``baseline_dir`` (a ``..`` in the path becomes ``__``)."""
    parts = ["__" if part == ".." else part for part in nodeid.split("::", 1)[0].split("/") if part not in ("", ".")]
    return baseline_dir / Path(*(parts or [OUTSIDE_ROOTDIR])).with_suffix(".json")


def read(path: Path) -> dict[str, Any]:
    """A baseline file's content; an absent file is empty, an unreadable one an error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {"schema_version": SCHEMA_VERSION, "tests": {}}
    except OSError as exc:
        raise BaselineError(f"cannot read baseline file {path}: {exc}") from exc
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise BaselineError(f"baseline file {path} is not valid JSON ({exc}); fix or delete it") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("tests"), dict):
        raise BaselineError(f"baseline file {path} has no 'tests' object; fix or delete it")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise BaselineError(
            f"baseline file {path} has schema_version {version!r}; this gpuprof reads {SCHEMA_VERSION}"
        )
    return doc


def lookup(doc: dict[str, Any], nodeid: str, gpu: str) -> dict[str, Any] | None:
    """The entry recorded for this test on this GPU model, if any."""
    return doc["tests"].get(nodeid, {}).get(gpu)


def update(path: Path, entries: dict[str, dict[str, dict[str, Any]]]) -> None:
    """Set ``entries[nodeid][gpu]`` in the file, keeping every other entry as it was."""
    update_all(path.parent, {path: entries})


def update_all(baseline_dir: Path, changes: dict[Path, dict[str, dict[str, dict[str, Any]]]]) -> None:
    """``update`` several files under ``baseline_dir`` as one step: when one of them cannot be
    read (BaselineError naming it), none is written."""
    baseline_dir.mkdir(parents=True, exist_ok=True)
    with _locked(baseline_dir):
        recover(baseline_dir)
        texts = {}
        for path, entries in sorted(changes.items()):
            doc = read(path)
            for nodeid, by_gpu in entries.items():
                doc["tests"].setdefault(nodeid, {}).update(by_gpu)
            doc["schema_version"] = SCHEMA_VERSION
            texts[path] = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        write_all_atomic(texts, baseline_dir)


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
