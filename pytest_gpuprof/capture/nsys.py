"""Running Nsight Systems: find it, the command that profiles another under it, export its
report, and keep the environment out of what it records.

The profiled session is started as any child pytest is (``run.fresh``): in a process group of
its own, stopped whole (nsys given ``STOP_GRACE_S`` to end) when the session outside is
interrupted, so no nsys process is left behind.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import GpuprofError
from .tools import find_tool

ENV_NSYS = "GPUPROF_NSYS"
#: Where nsys is looked for after the option, the environment variable and PATH.
INSTALL_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)
#: Capture only what the metrics need: CUDA and NVTX (osrt for the CPU side), no
#: sampling, no context switches, between cudaProfilerStart and cudaProfilerStop.
#: CUDA graphs are traced node by node (nsys's default records a graph launch as one
#: activity), so graph kernels are counted and timed like the rest.
PROFILE_ARGS = (
    "--trace=cuda,nvtx,osrt", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node",
    "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
)
#: Seconds nsys gets to end after SIGINT, then after SIGTERM, when the session outside is
#: interrupted; then it is killed with everything it launched.
STOP_GRACE_S = 10.0


def find_nsys(explicit: str | None, option: str = "--gpuprof-nsys-path") -> Path:
    """The nsys binary: the option, then $GPUPROF_NSYS (relative to the current directory),
    then PATH, then the usual install places."""
    return find_tool("nsys", "Nsight Systems", ((option, explicit), (f"${ENV_NSYS}", os.environ.get(ENV_NSYS))),
                     INSTALL_GLOBS)


def profile_command(nsys: Path, report: Path) -> list[str]:
    """``nsys profile`` of the command that follows it, writing ``report`` (.nsys-rep), never
    overwriting."""
    return [str(nsys), "profile", *PROFILE_ARGS, "--force-overwrite=false", "-o", str(report.with_suffix(""))]


def check_report(report: Path, output_tail: str) -> None:
    """A capture whose importer failed leaves only a .qdstrm: say so with nsys's own words."""
    if report.is_file():
        return
    qdstrm = report.with_suffix(".qdstrm")
    said = "\n".join(line for line in output_tail.splitlines() if "rror" in line or "fail" in line.lower())
    if qdstrm.is_file():
        raise GpuprofError(
            f"nsys left only {qdstrm}: its importer failed to make {report.name}. nsys said:\n"
            f"{said or output_tail}\n(On machines that lack libdw.so.1 and libelf.so.1, install them "
            "(Debian/Ubuntu: libdw1, libelf1) or put them on LD_LIBRARY_PATH.)"
        )
    raise GpuprofError(f"nsys wrote no report {report}. nsys said:\n{said or output_tail}")


def export_sqlite(nsys: Path, report: Path, target: Path | None = None) -> Path:
    """``nsys export --type sqlite`` to ``target`` (default: beside the report); returns it."""
    target = target or report.with_suffix(".sqlite")
    cmd = [str(nsys), "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(target), str(report)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0 or not target.is_file():
        raise GpuprofError(f"nsys export of {report} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    return target


# --- the environment: nsys records it, so it is kept out of what nsys sees, and scrubbed ---

#: Variables nsys and the session under it are started with, because a process needs them
#: before Python runs (interpreter, libraries, locale, GPUs; nsys's own settings).  nsys
#: stores this launch environment in its report; every other variable reaches the session
#: through a private file.
LAUNCH_VARIABLES = re.compile(
    r"PATH|HOME|USER|LOGNAME|SHELL|TERM|TZ|TMPDIR|LANG|LANGUAGE|LC_\w+|LD_LIBRARY_PATH|LD_PRELOAD"
    r"|PYTHON\w*|VIRTUAL_ENV|CONDA_PREFIX|CUDA_\w+|NVIDIA_\w+|NSYS_\w+|GPUPROF_\w+")
#: Names that look like a secret never go into the launch environment, whatever their prefix.
SECRET_NAMES = re.compile(r"TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH|COOKIE|PRIVATE|SESSION", re.IGNORECASE)


def split_environment(environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(launch, held): the variables nsys may see, and those the session gets another way."""
    launch: dict[str, str] = {}
    held: dict[str, str] = {}
    for name, value in environ.items():
        seen = LAUNCH_VARIABLES.fullmatch(name) and not SECRET_NAMES.search(name)
        (launch if seen else held)[name] = value
    return launch, held


#: Names the private file (mode 0600) holding the variables kept out of nsys's sight.
HELD_ENV = "GPUPROF_NSYS_HELD"

def hold(held: Mapping[str, str]) -> Path:
    """Write the held variables to a file only this user can read, for ``restore_held``."""
    fd, name = tempfile.mkstemp(prefix="gpuprof-env-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(dict(held), fh)
    return Path(name)


def restore_held() -> None:
    """In the process nsys launched: put the held variables back into this process (never
    into its launch environment, which nsys has recorded by now) and delete their file."""
    held = os.environ.pop(HELD_ENV, None)
    if held:
        os.environ.update(json.loads(Path(held).read_text(encoding="utf-8")))
        Path(held).unlink()


#: What replaces a scrubbed string.
SCRUBBED = "[scrubbed]"
#: Values shorter than this ("1", "x86_64", "CUDA") occur everywhere in a report and are
#: no secret; longer ones are replaced wherever the trace loader does not read.
MIN_SCRUBBED_LEN = 8
#: META_DATA_CAPTURE rows of the launched process that say where and how it ran (blanked).
_LAUNCH_ROWS = ("%:WORKING_DIR", "%:COMMAND", "%:ARGUMENT_%", "%:USER_NAME")
#: TARGET_INFO_SYSTEM_ENV rows that describe the machine: its environment, name, install
#: directory and GPU UUIDs (blanked).
_MACHINE_ROWS = ("DeviceEnvironment", "Hostname", "TargetInstallDir", "GpuInfo", "SystemUID", "NicInfo")
#: Text the trace loader reads, never rewritten: kernel, runtime and NVTX names, GPU names.
_READ_TABLES = ("NVTX_EVENTS", "TARGET_INFO_GPU")
_READ_STRING_IDS = (("CUPTI_ACTIVITY_KIND_KERNEL", ("demangledName", "shortName", "mangledName")),
                    ("CUPTI_ACTIVITY_KIND_RUNTIME", ("nameId",)), ("NVTX_EVENTS", ("textId",)))
_ASSIGNMENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*=")


@dataclass
class Scrubbed:
    """What ``scrub_sqlite`` removed from one export."""

    environment_rows: int = 0  # META_DATA_CAPTURE ...:ENVIRONMENT_VARIABLE rows deleted
    environment_blocks: int = 0  # StringIds holding a process's whole environment, blanked
    machine_rows: int = 0  # TARGET_INFO_SYSTEM_ENV and launch rows blanked
    uuids: int = 0  # GPU UUID cells blanked
    values: int = 0  # distinct environment values (of MIN_SCRUBBED_LEN or more) looked for
    replaced: int = 0  # other text cells in which such a value was replaced


def scrub_sqlite(path: Path, environ: Iterable[str] = ()) -> Scrubbed:
    """Remove the environment and machine identity from an nsys SQLite export, in place.

    nsys stores the profiled processes' whole environments (and the machine's) in its
    report.  The environment rows and strings go, the rows naming the machine are blanked,
    and every value of those environments or of ``environ`` (values) is replaced wherever
    else it occurs, except in the names the trace loader reads.
    """
    if not path.is_file():
        raise GpuprofError(f"cannot scrub {path}: no such file")
    try:
        con = sqlite3.connect(path, isolation_level=None)
        try:
            con.text_factory = bytes
            tables = {r[0].decode() for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "StringIds" not in tables:
                raise GpuprofError(f"cannot scrub {path}: not an Nsight Systems SQLite export (no StringIds table)")
            con.execute("PRAGMA secure_delete=ON")
            con.execute("BEGIN")
            done = Scrubbed()
            values = _scrubbed({v.encode() for v in environ} | _drop_environment(con, tables, done))
            _blank_machine(con, tables, done)
            done.values = len(values)
            _replace_values(con, tables, values, done)
            con.execute("COMMIT")
            con.execute("VACUUM")  # no freed page keeps the old text
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise GpuprofError(f"cannot scrub {path}: not a readable SQLite file: {exc}") from None
    return done


def scrub_report(path: Path, environ: Iterable[str]) -> int:
    """Overwrite, in place, each value of ``environ`` (of MIN_SCRUBBED_LEN or more) found
    in an ``.nsys-rep`` with as many ``*``: the variables the session got back inside nsys
    (``hold``) are recorded there when CUDA starts.  Same-length bytes keep the file
    readable by nsys; its format is undocumented, so the scrubbed SQLite export is what to
    share.  Returns the occurrences replaced."""
    data = path.read_bytes()
    found = 0
    for value in _scrubbed({v.encode() for v in environ}):
        found += data.count(value)
        data = data.replace(value, b"*" * len(value))
    if found:
        path.write_bytes(data)
    return found


def _scrubbed(values: set[bytes]) -> set[bytes]:
    """The values worth looking for: shorter ones ("1", "C") would match any text."""
    return {v for v in values if len(v) >= MIN_SCRUBBED_LEN}


def _drop_environment(con: sqlite3.Connection, tables: set[str], done: Scrubbed) -> set[bytes]:
    """Delete the environment rows and strings; returns the values they held."""
    values: set[bytes] = set()
    if "META_DATA_CAPTURE" in tables:
        where = "FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT_VARIABLE%'"
        for (row,) in con.execute(f"SELECT value {where}"):
            value = (row or b"").partition(b"=")[2]
            values.add(value[1:-1] if value[:1] == value[-1:] == b'"' else value)
        done.environment_rows = con.execute(f"DELETE {where}").rowcount
    if "TARGET_INFO_SYSTEM_ENV" in tables:
        for (row,) in con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'"):
            values |= {part.partition(b"=")[2] for part in (row or b"").split(b";")}
    for string_id, row in con.execute("SELECT id, value FROM StringIds WHERE instr(value, char(0)) > 0").fetchall():
        parts = [p for p in row.split(b"\0") if p]
        if 2 * sum(bool(_ASSIGNMENT.match(p)) for p in parts) >= len(parts):
            values |= {p.partition(b"=")[2] for p in parts}
            con.execute("UPDATE StringIds SET value = '' WHERE id = ?", (string_id,))
            done.environment_blocks += 1
    return values


def _blank_machine(con: sqlite3.Connection, tables: set[str], done: Scrubbed) -> None:
    """Blank the rows naming the machine and the launch, and the GPUs' UUIDs."""
    if "META_DATA_CAPTURE" in tables:
        for pattern in _LAUNCH_ROWS:
            done.machine_rows += con.execute("UPDATE META_DATA_CAPTURE SET value = ? WHERE name LIKE ? AND value != ''",
                                             (SCRUBBED, pattern)).rowcount
    if "TARGET_INFO_SYSTEM_ENV" in tables:
        marks = ",".join("?" * len(_MACHINE_ROWS))
        done.machine_rows += con.execute(f"UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name IN ({marks}) "
                                         "AND value != ''", (SCRUBBED, *_MACHINE_ROWS)).rowcount
    for table in sorted(tables):
        for column in _columns(con, table):
            if column.lower() in ("uuid", "guid"):
                done.uuids += con.execute(f'UPDATE "{table}" SET "{column}" = NULL WHERE "{column}" IS NOT NULL '
                                          f"AND \"{column}\" != ''").rowcount


def _replace_values(con: sqlite3.Connection, tables: set[str], values: set[bytes], done: Scrubbed) -> None:
    """Replace each value wherever it occurs, outside the text the trace loader reads."""
    if not values:
        return
    pattern = re.compile(b"|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))
    read: set[int] = set()
    for table, columns in _READ_STRING_IDS:
        for column in set(columns) & set(_columns(con, table) if table in tables else ()):
            read |= {r[0] for r in con.execute(f'SELECT DISTINCT "{column}" FROM "{table}"')}
    for table in sorted(tables - set(_READ_TABLES)):
        if table.startswith("ENUM_"):
            continue
        key = "id" if table == "StringIds" else "rowid"
        for column in _columns(con, table):
            cells = con.execute(f'SELECT {key}, "{column}" FROM "{table}" WHERE typeof("{column}") = \'text\'')
            for row, old in cells.fetchall():
                new = pattern.sub(SCRUBBED.encode(), old)
                if new != old and not (table == "StringIds" and row in read):
                    con.execute(f'UPDATE "{table}" SET "{column}" = CAST(? AS TEXT) WHERE {key} = ?', (new, row))
                    done.replaced += 1


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1].decode() for r in con.execute(f'PRAGMA table_info("{table}")')]
