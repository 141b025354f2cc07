"""Small suites that pytester runs under ``--gpuprof-replay``: modules of example_suite/
whose node ids are those of the real H200 traces shipped in ``example_suite/traces``, so
that replaying those traces judges them through the whole pipeline without a GPU; and the
gpuprof section of their terminal output, and their baseline files."""

import json
import os
import re
import shutil
import sys
from pathlib import Path

from pytest_gpuprof.capture.environment import GPU_DRIVER_NODES
from pytest_gpuprof.run.kept_traces import trace_name

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "example_suite" / "traces"
GPU = "NVIDIA H200"
MOE = "example_suite/test_moe.py::test_moe_forward"
CNN = "example_suite/test_cnn.py::test_cnn_train_step"
TRACE = {
    MOE: TRACES / "example_suite_test_moe.py_test_moe_forward.pt.trace.json.gz",
    CNN: TRACES / "example_suite_test_cnn.py_test_cnn_train_step.pt.trace.json.gz",
}
#: Why gpuprof finds no CUDA GPU on this machine: without any GPU driver (a Linux machine with
#: none of its GPU_DRIVER_NODES) it says so without importing torch; otherwise torch says.
WHY_NO_GPU = ("no GPU driver: /proc/driver/nvidia does not exist"
              if sys.platform == "linux" and not any(os.path.exists(node) for node in GPU_DRIVER_NODES)
              else "torch.cuda.is_available() is False")
NO_GPU = f"no CUDA GPU available ({WHY_NO_GPU})"


HEADER = '''\
import os
import pytest

LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "calls.log")


def log(word):
    with open(LOG, "a") as fh:
        fh.write(word + " ")
'''


def fixture_test(name, marker=""):
    """A fixture-form test that logs its body and each loop iteration."""
    return f'''

{marker}
def {name}(gpuprof):
    log("{name}:body")
    for _ in gpuprof.steps(warmup=1, active=2):
        log("{name}:step")
'''


def marker_test(name, marker="@pytest.mark.gpuprof(warmup=1, active=2)"):
    """A marker-form test (no fixture) that logs each call."""
    return f'''

{marker}
def {name}():
    log("{name}:body")
'''


def write_module(pytester, module, *tests):
    path = pytester.path / "example_suite" / f"{module}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(HEADER + "".join(tests))


def replay_dir(pytester, traces=None):
    """A replay directory holding a copy of a real trace for each node id."""
    folder = pytester.path / "replay"
    folder.mkdir(exist_ok=True)
    for nodeid, source in (traces or TRACE).items():
        shutil.copyfile(source, folder / trace_name(nodeid))
    return folder


def section(result):
    """The lines of the ``gpuprof`` terminal summary section."""
    lines = result.outlines
    starts = [i for i, line in enumerate(lines) if re.fullmatch(r"=+ gpuprof =+", line)]
    assert len(starts) == 1, result.stdout.str()
    out = []
    for line in lines[starts[0] + 1:]:
        if line.startswith("==="):
            break
        out.append(line)
    return out


def baseline_path(pytester, module, root="baselines"):
    return pytester.path / root / "example_suite" / f"{module}.json"


def load(path):
    return json.loads(path.read_text())


def save(path, doc, indent=2):
    path.write_text(json.dumps(doc, indent=indent, sort_keys=True) + "\n")
