"""A launch-bound step: a small-batch MLP decode loop, many tiny kernels per step.

Batch 8, width 256, 12 layers of Linear-GeLU-Linear with residual adds, run for 8
decode positions per step: about 500 kernels of a few microseconds each, so the
GPU waits on the CPU's launches most of the time (gpu_utilization far below 1).
The gate must not cry wolf on it even though its window and utilization move with
the host; the planted slowdown (GPUPROF_EXAMPLE_SLOWDOWN) slows its GeLU kernels, and
the planted ``host_overhead`` bug adds Python work to every block: a host-side
regression, with the same kernels, launches and synchronizations.
"""

import pytest
from conftest import activation, planted

BATCH, WIDTH, LAYERS, POSITIONS = 8, 256, 12, 8
#: Iterations of the host_overhead bug's Python loop per block: on H100s 300 added 12% to the
#: step at the baseline host's speed on one machine, 640 added 33% and 35% on two others
#: (benchmarks/results/history.md): about a third more time a step on those hosts; on the
#: H200 of 2026-11-27 the window grew 139% (docs/benchmarks.md, "Planted bugs").
BOOKKEEPING = 640


def bookkeeping(n: int) -> int:
    """Pure-Python work, as a per-layer statistic kept in Python would be: it runs at the
    host's speed and launches nothing."""
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def make_mlp(torch):
    nn = torch.nn
    gelu = activation(torch, "gelu")
    overhead = BOOKKEEPING if planted("host_overhead") else 0

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, x):
            if overhead:
                bookkeeping(overhead)
            return x + self.down(gelu(self.up(x)))

    return nn.Sequential(*(Block() for _ in range(LAYERS)))


@pytest.mark.gpuprof(warmup=5, active=20)
def test_small_batch_decode(gpuprof):
    import torch

    model = make_mlp(torch).cuda().eval()
    x = torch.randn(BATCH, WIDTH, device="cuda")
    with torch.no_grad():
        for _ in gpuprof.steps():
            with gpuprof.range("decode_step"):
                h = x
                for _ in range(POSITIONS):
                    h = model(h)
    assert torch.isfinite(h).all()
