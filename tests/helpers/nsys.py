"""Nsight Systems without nsys: the committed reports of tests/data/nsys unpacked, and a
pytest session run under a stand-in for nsys (a script that runs the command it is given),
left with nothing running whatever the test did."""

import contextlib
import functools
import gzip
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

NSYS = Path(__file__).parents[1] / "data" / "nsys"


def unpack(name: str, folder: Path) -> Path:
    """The committed report of workload NAME unpacked into FOLDER: the path of its .sqlite."""
    target = folder / f"{name}.sqlite"
    with gzip.open(NSYS / f"{name}.sqlite.gz", "rb") as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def executable(path: Path, body: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


FAKE_NSYS = textwrap.dedent("""\
    #!{python}
    # Stands in for `nsys profile ... -o REPORT COMMAND...`: runs COMMAND, as nsys would.
    import os, subprocess, sys
    args = sys.argv[1:]
    assert args[0] == "profile", args
    command = args[args.index("-o") + 2:]
    with open(os.environ["NSYS_FAKE_LOG"], "a") as log:
        log.write(" ".join(args) + "\\n")
    sys.exit(subprocess.call(command))
""")


@functools.cache
def patience() -> float:
    """Seconds allowed for a step that starts pytest sessions (outer, stand-in nsys, inner):
    30 times what `import torch` takes here and now, so a loaded machine gets longer; it is
    only ever waited out when something is wrong."""
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return max(60.0, 30 * (time.monotonic() - start))


# A test run started in the background inherits SIGINT ignored, and a Python started so
# never raises KeyboardInterrupt: the outer session starts with SIGINT's default restored.
DEFAULT_SIGINT = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]


def start(pytester, fake, env, *args, **popen):
    """The outer pytest in a session of its own, so that stop() finds all it started."""
    return subprocess.Popen(
        [*DEFAULT_SIGINT, "-m", "pytest", "-p", "no:cacheprovider", "--gpuprof-nsys", f"--gpuprof-nsys-path={fake}",
         *args], cwd=pytester.path, env={**os.environ, **env}, start_new_session=True, **popen)


def run(pytester, fake, env, *args):
    outer = start(pytester, fake, env, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = outer.communicate(timeout=patience())
    finally:
        stop(outer)
    return subprocess.CompletedProcess(outer.args, outer.returncode, out, err)


def stop(outer, inner=None):
    """Leave nothing running, whatever the test did.  While the outer runs, it and all under it
    (nsys's group is a session of its own) are frozen with SIGSTOP, so that none starts another
    or is orphaned out of sight, then killed; and the recorded inner session with its group."""
    if outer.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(outer.pid, signal.SIGSTOP)
        deadline = time.monotonic() + patience()
        while True:
            tree = processes_under(outer.pid)
            if all(state == "T" for state in tree.values()) or time.monotonic() > deadline:
                break
            for pid in tree:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
            time.sleep(0.05)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(outer.pid, signal.SIGKILL)
    if inner is not None and alive(inner):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(inner), signal.SIGKILL)
    outer.wait()


def processes_under(root):
    """{pid: state} of root and the live processes descended from it, by /proc's parent links."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            head, tail = stat.read_text().rsplit(")", 1)
            state, ppid = tail.split()[:2]
            if state != "Z":
                parents[int(head.split(" ", 1)[0])] = (int(ppid), state)
    found = {root: parents[root][1]} if root in parents else {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, state) in parents.items():
            if ppid == parent:
                found[pid] = state
                todo.append(pid)
    return found


def alive(pid):
    """Running (a zombie left for a parent that is gone is not running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")
