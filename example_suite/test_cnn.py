"""A small CNN training step (conv-BN-ReLU stages, SGD), bf16 autocast, channels_last."""

import pytest
from conftest import activation, planted, slowdown

BATCH, SIZE, CLASSES = 512, 64, 100


def make_cnn(torch):
    nn = torch.nn
    relu = activation(torch, "relu")

    class PaddedReLU(nn.Module):  # GPUPROF_EXAMPLE_SLOWDOWN only
        def forward(self, x):
            return relu(x)

    def act():
        return nn.ReLU(inplace=True) if slowdown() is None else PaddedReLU()

    def stage(cin, cout):
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), act(),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), act(),
            nn.MaxPool2d(2),
        )

    return nn.Sequential(
        stage(3, 64), stage(64, 128), stage(128, 256), stage(256, 512),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, CLASSES),
    )


# its heaviest kernel, batch-norm statistics, keeps the SMs busy (Nsight Compute, --gpuprof-ncu)
@pytest.mark.gpuprof(thresholds=["kernels[batch_norm_collect_statistics].achieved_occupancy_pct >= 50"])
def test_cnn_train_step(gpuprof):
    import torch

    model = make_cnn(torch).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
    images = torch.randn(BATCH, 3, SIZE, SIZE, device="cuda").to(memory_format=torch.channels_last)
    labels = torch.randint(0, CLASSES, (BATCH,), device="cuda")
    precision = torch.float32 if planted("fp32") else torch.bfloat16
    for _ in gpuprof.steps(warmup=3, active=10):
        with gpuprof.range("forward_pass"), torch.autocast("cuda", dtype=precision, enabled=precision != torch.float32):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        with gpuprof.range("backward_pass"):
            loss.backward()
        with gpuprof.range("optimizer_step"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    assert torch.isfinite(loss)
