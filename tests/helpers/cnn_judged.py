"""The CNN's recorded trace, altered and judged as the plugin judges it: one kernel's launches
made longer (everything else as measured), baselines recorded from altered copies, and the
judge's result against them.  Shared by the tests of the margin and of the GPU's clock."""

import copy
from pathlib import Path

from pytest_gpuprof.compare.judge import Judge
from pytest_gpuprof.compare.rules import Rules

ROOT = Path(__file__).resolve().parents[2]
NODE = "example_suite/test_cnn.py::test_cnn_train_step"
TRACE = ROOT / "example_suite" / "traces" / "example_suite_test_cnn.py_test_cnn_train_step.pt.trace.json.gz"
#: A 2% minimum effect on kernel times (``--gpuprof-kernel-time-tolerance=0.02``; the default is 5%).
RULES = Rules(kernel_time_tolerance=0.02)
#: The card the traces are said to run on (``environment.gpu_id``): the recorded runs' and the
#: judged run's alike, unless a test says otherwise.
CARD = "0123456789ab"


def on_card(trace, card: str):
    """The trace as measured on the card ``card``."""
    out = copy.copy(trace)
    out.metadata = {**trace.metadata, "environment": {**trace.metadata["environment"], "gpu_id": card}}
    return out


def heaviest(trace) -> str:
    """The kernel name with the most time in the trace, from its table."""
    k = trace.kernels
    return str((k.end - k.start).groupby(k.name).sum().idxmax())


def slowed(trace, factor: float, name: str | None = None):
    """The trace with every launch of kernel ``name`` (the heaviest) ``factor`` times as long."""
    out = copy.copy(trace)
    k = trace.kernels.copy()
    hit = k.name == (name or heaviest(trace))
    k.loc[hit, "end"] = k.start[hit] + ((k.end[hit] - k.start[hit]) * factor).round().astype("int64")
    out.kernels = k
    return out


def record(tmp_path: Path, traces) -> Path:
    """A baseline of these traces, one recorded run each, as --gpuprof-update-baseline keeps them."""
    from pytest_gpuprof.compare.baseline import BaselineFile, baseline_file

    for t in traces:  # each in a process of its own, whose judge reads the file as the last one left it
        judge = Judge(tmp_path, "torch", RULES, update=True, baseline_runs=len(traces))
        judged = judge.judge(NODE, {}, lambda t=t: {0: (t, TRACE)})
        BaselineFile(baseline_file(tmp_path, NODE)).update({NODE: {judged.result.gpu: judged.entry}})
    return tmp_path


def judged(baselines: Path, run):
    """The result of the test whose trace is ``run``, against the baselines in ``baselines``."""
    return Judge(baselines, "torch", RULES).judge(NODE, {}, lambda: {0: (run, TRACE)}).result


def kernel_verdict(result, name: str):
    return next(v for v in result.verdicts if v.metric == f"kernels[{name}].time_us")
