"""The real example suite and its committed baselines, run by pytest in a process of its own
as CI would run it, replaying the shipped traces with one planted bug: the MoE test's
``.item()`` (tests/data/planted/item)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pytest_gpuprof.run.kept_traces import trace_name

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "example_suite" / "traces"
PLANTED = ROOT / "tests" / "data" / "planted" / "item"
MOE = "example_suite/test_moe.py::test_moe_forward"
ITEM_TRACE = PLANTED / trace_name(MOE)


def replay_dir(folder: Path) -> Path:
    """The shipped good traces, with the MoE test's replaced by the planted-bug one."""
    folder.mkdir(parents=True, exist_ok=True)
    for trace in TRACES.glob("*.json.gz"):
        shutil.copyfile(trace, folder / trace.name)
    shutil.copyfile(ITEM_TRACE, folder / ITEM_TRACE.name)
    return folder


def run_suite(cwd: Path, replay: Path, *args, env=None):
    """pytest on the real example suite and baselines, as CI would run it."""
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "example_suite"), "--rootdir", str(ROOT),
         "-p", "no:cacheprovider", f"--gpuprof-replay={replay}", *args],
        cwd=cwd, env=env, capture_output=True, text=True,
    )
