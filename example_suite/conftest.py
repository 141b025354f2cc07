"""Shared set-up of the example suite: real GPU workloads modeled on our users' profiling guides.

``GPUPROF_EXAMPLE_BUG`` plants one classic performance bug:
  item            MoE layer reads a per-expert statistic with .item() inside the loop
  compute_stream  weight streaming issues its weight copies on the compute stream
  pageable        weight streaming keeps its weights in pageable (not pinned) host memory
  extra_kernel    transformer block runs one extra elementwise kernel per layer
  fp32            CNN trains in fp32 instead of bf16 autocast
  host_overhead   decode step does pure-Python bookkeeping in every block (a third more time
                  a step on two H100 hosts, +139% on an H200's), with no extra launch or synchronization
  ddp_after_backward  (two GPUs) gradients all-reduced after the whole backward pass, not as
                  each layer's gradient is ready: the communication no longer overlaps compute
  split_tolist    (two GPUs) the expert-parallel layer reads its all-to-all split sizes to the
                  host every step (``.tolist()``)
  spill           the Triton add+RMSNorm kernel compiled with too few registers a thread: it
                  spills to local memory at about the same speed (only Nsight Compute's
                  counters catch it)

``GPUPROF_EXAMPLE_SLOWDOWN=0.10`` plants a controlled slowdown instead, in every
workload but the Triton kernel's (``test_fused_norm.py``): its activation kernel (GeLU; ReLU in the CNN) runs over 10% more
elements, with the same kernels and launches (see ``activation``).  Record the
baselines with ``GPUPROF_EXAMPLE_SLOWDOWN=0``: that runs the same code with
nothing added (benchmarks/gate_noise.py does so).
"""

import math
import os
from pathlib import Path

import pytest

BUGS = ("item", "compute_stream", "pageable", "extra_kernel", "fp32", "host_overhead", "ddp_after_backward",
        "split_tolist", "spill")
TRACES = Path(__file__).parent / "traces"


def planted(bug: str) -> bool:
    """True when GPUPROF_EXAMPLE_BUG names this bug."""
    value = os.environ.get("GPUPROF_EXAMPLE_BUG", "")
    if value and value not in BUGS:
        raise pytest.UsageError(f"GPUPROF_EXAMPLE_BUG={value!r}: expected one of {', '.join(BUGS)}")
    return value == bug


def slowdown() -> float | None:
    """The fraction of extra work GPUPROF_EXAMPLE_SLOWDOWN asks for; None when it is unset."""
    value = os.environ.get("GPUPROF_EXAMPLE_SLOWDOWN")
    if value is None:
        return None
    try:
        fraction = float(value)
    except ValueError:
        fraction = -1.0
    if not 0 <= fraction <= 10:
        raise pytest.UsageError(f"GPUPROF_EXAMPLE_SLOWDOWN={value!r}: expected a fraction such as 0.1")
    return fraction


def activation(torch, name: str):
    """The workload's activation, ``"gelu"`` or ``"relu"``.

    Under GPUPROF_EXAMPLE_SLOWDOWN=s its input is first copied into the head of a
    zero-padded buffer (1 + s) times as long as the input, and the activation kernel runs
    over the whole buffer: one kernel does s more work, while every kernel name and
    launch count stays what it is at s = 0.  (The copy is one more kernel per call,
    at s = 0 too, which is why baselines for this mode are recorded with s = 0.)"""
    F = torch.nn.functional
    forward = {"gelu": F.gelu, "relu": torch.relu}[name]
    extra = slowdown()
    if extra is None:
        return forward
    buffers: dict = {}  # (numel, dtype, device) -> padded buffer, zeroed once

    class Padded(torch.autograd.Function):
        @staticmethod
        def forward(ctx, u):
            key = (u.numel(), u.dtype, u.device)
            if key not in buffers:
                buffers[key] = torch.zeros(u.numel() + math.ceil(u.numel() * extra), dtype=u.dtype, device=u.device)
            buf = buffers[key]
            torch.as_strided(buf, u.size(), u.stride()).copy_(u)  # same layout as u: one plain copy
            out = torch.as_strided(forward(buf), u.size(), u.stride())
            ctx.save_for_backward(u if name == "gelu" else out)
            return out

        @staticmethod
        def backward(ctx, grad):
            (saved,) = ctx.saved_tensors
            if name == "gelu":
                return torch.ops.aten.gelu_backward(grad, saved)
            return torch.ops.aten.threshold_backward(grad, saved, 0)

    return Padded.apply


class PlainLoops:
    """With pytest-gpuprof disabled (``-p no:gpuprof``), its fixture and marker are not
    declared: the tests still run, their ``gpuprof.steps()`` loops as plain loops."""

    @pytest.fixture
    def gpuprof(self):
        from pytest_gpuprof.capture.profiler import GpuProf, StepPlan

        return GpuProf(StepPlan())


def pytest_configure(config):
    if not config.pluginmanager.has_plugin("gpuprof"):
        config.addinivalue_line("markers", "gpuprof: pytest-gpuprof's marker (the plugin is disabled)")
        config.pluginmanager.register(PlainLoops(), "example-suite-plain-loops")


@pytest.fixture(autouse=True)
def _cuda_or_skip(request):
    """The workloads need a CUDA GPU, except when gpuprof replays kept traces."""
    if request.config.getoption("gpuprof_replay", None):
        return
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU available (torch.cuda.is_available() is False)")
    torch.manual_seed(0)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, config):
    """With no GPU, show what gpuprof reports on a real trace shipped with the project;
    nothing when pytest-gpuprof is disabled (``-p no:gpuprof``)."""
    stats = terminalreporter.stats
    if stats.get("passed") or stats.get("failed") or not stats.get("skipped"):
        return
    if not config.pluginmanager.has_plugin("gpuprof") or config.getoption("gpuprof_replay", None):
        return
    trace = TRACES / "example_suite_test_moe.py_test_moe_forward.pt.trace.json.gz"
    if not trace.exists():
        return
    from pytest_gpuprof.trace.kineto import load_kineto
    from pytest_gpuprof.metrics.measure import measure
    from pytest_gpuprof.report.terminal import analysis_lines

    tr = terminalreporter
    tr.write_sep("=", "gpuprof on a shipped trace (no GPU here)")
    tr.write_line("The GPU tests were skipped: this machine has no CUDA GPU. This is what gpuprof")
    tr.write_line("reports for a real trace of this suite's MoE test, recorded on a GPU:")
    tr.write_line("")
    for line in analysis_lines(str(trace.relative_to(config.rootpath)), measure(load_kineto(trace)), top=5):
        tr.write_line(line)
    tr.write_line("")
    tr.write_line("Judge all shipped traces against the baselines, still without a GPU:")
    tr.write_line("  pytest example_suite --gpuprof --gpuprof-replay=example_suite/traces")
