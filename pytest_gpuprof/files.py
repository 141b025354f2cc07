"""Files gpuprof writes (baselines, reports): whole or not at all.

Shared by every stage that writes; imports only the standard library and ``errors``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from .errors import GpuprofError

#: How ``write_all_atomic`` names its journal, in the folder it writes under.
JOURNAL = ".gpuprof-journal.json"
#: Temporary files are ``.NAME.RANDOM.tmp`` beside their target.
TEMP_GLOB = ".*.tmp"


def _file_mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _write_temp(path: Path, text: str) -> Path:
    """``text`` in a new temporary file beside ``path``, synced to disk.  A lone surrogate
    (a name read from a ``\\ud800`` JSON escape), which UTF-8 cannot hold, is written as
    that escape: in a JSON file it reads back as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, _file_mode(path))  # mkstemp makes 0600; give the file the mode it has or would get
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return Path(tmp)


class NotJson(ValueError):
    """A value that strict JSON cannot hold: a number that is not finite."""


def json_text(value: object, indent: int | None = None, sort_keys: bool = False) -> str:
    """``value`` as JSON that every reader takes (``json.dumps``): a number
    that is not finite (NaN, Infinity), which Python writes and no strict reader reads, is a
    NotJson error, never written."""
    try:
        return json.dumps(value, indent=indent, sort_keys=sort_keys, allow_nan=False)
    except ValueError:
        raise NotJson("it holds a number that is not finite (NaN or Infinity), which JSON cannot hold") from None


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file renamed into place: readers never see half a file."""
    tmp = _write_temp(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_all_atomic(texts: dict[Path, str], folder: Path) -> None:
    """Write several files under ``folder`` as one step, all or none, even when the process
    is killed: every text goes to a temporary file first, then a journal listing the renames
    is written (atomically), then the renames are made.  Killed before the journal exists,
    every file is as it was and ``recover`` deletes the temporary files; killed after,
    ``recover`` finishes the renames.  Callers serialize writers and ``recover``."""
    temps: dict[Path, Path] = {}
    try:
        for path, text in texts.items():
            temps[path] = _write_temp(path, text)
        renames = [[str(tmp.relative_to(folder)), str(path.relative_to(folder))] for path, tmp in temps.items()]
        write_atomic(folder / JOURNAL, json.dumps(renames))
    except BaseException:
        for tmp in temps.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    recover(folder)


def recover(folder: Path) -> list[Path]:
    """Finish the renames of a ``write_all_atomic`` that was interrupted after its journal,
    then delete every temporary file left under ``folder`` (by a killed writer).  Returns the
    files deleted."""
    journal = folder / JOURNAL
    try:
        renames = json.loads(journal.read_text(encoding="utf-8"))
        if not (isinstance(renames, list) and all(isinstance(r, list) and len(r) == 2 and
                                                  all(isinstance(n, str) for n in r) for r in renames)):
            raise ValueError("not a list of [temporary file, target] pairs")
    except FileNotFoundError:
        renames = []
    except (OSError, ValueError) as exc:
        raise GpuprofError(f"cannot read {journal}, the record of an interrupted update ({exc}); "
                           "check the files it names, then delete it") from exc
    for tmp, target in renames:
        if (folder / tmp).exists():
            os.replace(folder / tmp, folder / target)
    if journal.exists():  # (only then: a read-only checkout judges, it has nothing to finish)
        journal.unlink()
    stale = sorted(folder.rglob(TEMP_GLOB)) if folder.is_dir() else []
    for tmp in stale:
        tmp.unlink(missing_ok=True)
    return stale
