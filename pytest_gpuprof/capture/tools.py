"""Finding a profiler's binary (nsys, ncu): one search, in one order, for each."""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from ..errors import GpuprofError


def find_tool(name: str, title: str, given: Sequence[tuple[str, str | None]], globs: Sequence[str]) -> Path:
    """The binary ``name`` as an absolute path (sessions run it from other directories): the
    first value ``given`` that is set (an option's, a variable's, by what names it: a path, or a
    command name on PATH), which must be an executable file (another binary found instead would
    run unasked), else PATH, then ``globs`` (the newest version folder first); an error saying
    where it looked."""
    looked: list[str] = []
    for origin, candidate in given:
        if candidate:
            found = candidate if os.sep in candidate else shutil.which(candidate)  # a bare name: on PATH
            if found and _runnable(Path(found)):
                return Path(found).absolute()
            raise GpuprofError(f"{origin}={candidate}: not an executable file ({title}, {name})")
        looked.append(f"{origin} (not set)")
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path).absolute()
    looked.append("PATH")
    for pattern in globs:
        hits = [Path(p) for p in sorted(glob.glob(pattern), reverse=True) if _runnable(Path(p))]
        if hits:
            return hits[0]
        looked.append(pattern)
    raise GpuprofError(f"{title} ({name}) not found; looked at: " + ", ".join(looked))


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
