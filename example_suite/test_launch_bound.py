"""A launch-bound step: a small-batch MLP decode loop, many tiny kernels per step.

Batch 8, width 256, 12 layers of Linear-GeLU-Linear with residual adds, run for 8
decode positions per step: about 500 kernels of a few microseconds each, so the
GPU waits on the CPU's launches most of the time (gpu_utilization far below 1).
The gate must not cry wolf on it even though its window and utilization move with
the host; the planted slowdown (GPUPROF_EXAMPLE_SLOWDOWN) slows its GeLU kernels.
"""

import pytest
from conftest import activation

BATCH, WIDTH, LAYERS, POSITIONS = 8, 256, 12, 8


def make_mlp(torch):
    nn = torch.nn
    gelu = activation(torch, "gelu")

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, x):
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
