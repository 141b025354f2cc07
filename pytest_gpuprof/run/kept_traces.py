"""How a kept trace is named, and how a replay finds a test's trace in a folder of them.

A trace is kept under its test's node id (``unique_trace_name``), and a node id is relative
to the rootdir: a folder kept on a GPU machine is replayed where the rootdir may differ (the
tests run from a subdirectory, the project checked out under another folder), and each node
id there has leading directories more or fewer.  ``KeptTraces`` finds a test's trace under
its own name first, then under the names its node id had under another rootdir, checked by
the digest in the name: it never takes another test's trace, and says so when two files, or
two of the run's tests, could be one.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import GpuprofError

TRACE_SUFFIX = ".pt.trace.json.gz"
READABLE_CHARS = 160  # of a trace name's node-id part: the whole name stays under 255 bytes
DIGEST_CHARS = 10  # of the node id's SHA-256, in hexadecimal
#: At most this many ``_`` in the directories a kept name has before this run's node id are
#: tried each way (``/`` or ``_``) to check its digest: 2**N digests.
MAX_TRIED_SEPARATORS = 12


def safe_name(nodeid: str) -> str:
    """The node id with every run of unsafe characters replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_")


def trace_name(nodeid: str) -> str:
    """The node id made safe for a file name: readable, but ``a/b``, ``a_b`` and ``a b``
    share it.  Replay finds traces under it (example_suite/traces)."""
    return safe_name(nodeid) + TRACE_SUFFIX


def digest(nodeid: str) -> str:
    """What tells a node id's kept trace from the others that share its readable part."""
    return hashlib.sha256(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]


def readable_part(nodeid: str) -> str:
    """The node id as a kept trace's name shows it: ``safe_name``, not hidden, cut to
    ``READABLE_CHARS``."""
    return safe_name(nodeid).lstrip("._")[:READABLE_CHARS]


def unique_trace_name(nodeid: str) -> str:
    """File name of a test's kept trace: ``readable_part``, then the node id's ``digest``, so
    that no two node ids share it."""
    return f"{readable_part(nodeid)}.{digest(nodeid)}{TRACE_SUFFIX}".lstrip(".")


@dataclass(frozen=True)
class KeptName:
    """A file of the folder named as ``unique_trace_name`` names one: its readable part and digest."""

    path: Path
    readable: str
    digest: str

    @classmethod
    def parse(cls, path: Path) -> KeptName | None:
        """The kept name of a file named ``*TRACE_SUFFIX``; None for a name without a digest."""
        readable, _, tail = path.name.removesuffix(TRACE_SUFFIX).rpartition(".")
        return cls(path, readable, tail) if re.fullmatch(f"[0-9a-f]{{{DIGEST_CHARS}}}", tail) else None


def ids_below(nodeid: str) -> list[str]:
    """The node id under a rootdir below this one: its path without its first directory,
    without its first two, and so on."""
    path, sep, rest = nodeid.partition("::")
    parts = path.split("/")
    return ["/".join(parts[k:]) + sep + rest for k in range(1, len(parts))]


def ids_above(kept: KeptName, nodeid: str) -> list[str]:
    """The node ids ``kept`` may be the trace of under a rootdir above this one (``nodeid``
    with directories before it) whose digest is its own: its readable part is theirs (cut to
    ``READABLE_CHARS``), and each ``_`` in the directories may have been a ``/``."""
    own, readable = safe_name(nodeid), kept.readable
    if len(readable) < READABLE_CHARS:
        ends = [len(readable) - len(own) - 1] if readable.endswith("_" + own) else []
    else:  # cut: this run's node id may be cut too
        ends = [k for k in range(1, len(readable) - 1) if readable[k] == "_" and own.startswith(readable[k + 1:])]
    found = []
    for end in (k for k in ends if k > 0):
        words = readable[:end].split("_")
        if len(words) - 1 > MAX_TRIED_SEPARATORS:
            continue
        for seps in itertools.product("/_", repeat=len(words) - 1):
            kept_id = words[0] + "".join(s + word for s, word in zip(seps, words[1:])) + "/" + nodeid
            if digest(kept_id) == kept.digest:
                found.append(kept_id)
    return found


def related(a: str, b: str) -> bool:
    """Two node ids of one test under two rootdirs: one is the other with directories before it."""
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


class KeptTraces:
    """A folder of kept traces, as a replay reads it: each test's trace found by name."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._tests: list[str] = []  # the run's profiled tests
        self._sharing: dict[str, list[str]] = {}  # trace_name -> the profiled tests that share it
        self._names: list[KeptName] | None = None  # the folder's files named with a digest, read once

    def expect(self, nodeids: list[str]) -> None:
        """The run's profiled tests: a trace two of them could have is replayed for neither."""
        self._tests = list(nodeids)
        self._sharing = {}
        for nodeid in nodeids:
            self._sharing.setdefault(trace_name(nodeid), []).append(nodeid)

    def missing(self, nodeid: str) -> str:
        """Why a test has no trace here: the folder and the names looked for."""
        return (f"no trace to replay in {self.folder}: looked for {unique_trace_name(nodeid)}, "
                f"{trace_name(nodeid)}, and the names its node id has under another rootdir (directories before "
                "it, or fewer)")

    def find(self, nodeid: str) -> Path | None:
        """The test's trace (a distributed test's rank: ``rank_nodeid``): its own name, else its
        ``trace_name`` unless another test shares that, else the one file kept under the node
        id it had under another rootdir; None when there is none, an error naming the files
        when two could be it, or the tests when another of the run's could have it."""
        own, shared = self.folder / unique_trace_name(nodeid), self.folder / trace_name(nodeid)
        if own.exists():
            return own
        if shared.exists():
            others = [n for n in self._sharing.get(shared.name, ()) if n != nodeid]
            if others:
                raise GpuprofError(f"trace {shared} could be the trace of {nodeid} or of {', '.join(others)}: "
                                   f"rename it {own.name}")
            return shared
        return self._under_another_rootdir(nodeid)

    def _under_another_rootdir(self, nodeid: str) -> Path | None:
        candidates = {kept_id: self.folder / unique_trace_name(kept_id) for kept_id in ids_below(nodeid)
                      if (self.folder / unique_trace_name(kept_id)).exists()}
        for kept in self._kept_names():
            candidates.update((kept_id, kept.path) for kept_id in ids_above(kept, nodeid))
        tests = self._with_tail(nodeid)
        candidates = {kept_id: path for kept_id, path in candidates.items() if kept_id not in tests}  # another's own
        if len(candidates) > 1:
            listed = "; ".join(f"{path.name} (kept as {kept_id})" for kept_id, path in sorted(candidates.items()))
            raise GpuprofError(f"{len(candidates)} traces in {self.folder} could be the trace of {nodeid}, kept "
                               f"under other rootdirs: {listed}; keep one, or rename it {unique_trace_name(nodeid)}")
        if not candidates:
            return None
        ((kept_id, path),) = candidates.items()
        others = [n for n in tests if n != nodeid and related(n, kept_id) and not self._own(n)]
        if others:
            raise GpuprofError(f"trace {path}, kept as {kept_id} under another rootdir, could be the trace of "
                               f"{nodeid} or of {', '.join(others)}: rename it as its test's own (for {nodeid}: "
                               f"{unique_trace_name(nodeid)})")
        return path

    def _own(self, nodeid: str) -> bool:
        """The test has a trace under its own name here."""
        return (self.folder / unique_trace_name(nodeid)).exists() or (self.folder / trace_name(nodeid)).exists()

    def _with_tail(self, nodeid: str) -> list[str]:
        """The run's tests as ``nodeid`` names its test: a rank's node id gives each test's
        node id that rank's tail."""
        test = max((t for t in self._tests if nodeid.startswith(t)), key=len, default=nodeid)
        tail = nodeid[len(test):]
        return [t + tail for t in self._tests]

    def _kept_names(self) -> list[KeptName]:
        if self._names is None:
            files = sorted(self.folder.glob(f"*{TRACE_SUFFIX}"))
            self._names = [kept for kept in map(KeptName.parse, files) if kept is not None]
        return self._names
