"""Transformer blocks, forward and backward with an AdamW step, bf16 autocast.

Range names follow the transformer benchmark guide: warmup, step_N (from the
plugin), forward_pass, backward_pass, plus optimizer_step.
"""

import pytest
from conftest import activation, planted

LAYERS, DIM, HEADS, SEQ, BATCH = 4, 1024, 16, 512, 32


def make_blocks(torch):
    nn, F = torch.nn, torch.nn.functional
    gelu = activation(torch, "gelu")

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
            self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
            self.fc1, self.fc2 = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, DIM // HEADS).transpose(1, 3).unbind(2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, DIM))
            if planted("extra_kernel"):
                x = x * 1.0  # the bug: one extra elementwise kernel per layer
            return x + self.fc2(gelu(self.fc1(self.ln2(x))))

    return nn.Sequential(*[Block() for _ in range(LAYERS)])


# its heaviest kernels, cuBLAS's GEMMs, keep the tensor cores busy (Nsight Compute, --gpuprof-ncu)
@pytest.mark.gpuprof(thresholds=["kernels[nvjet].tensor_pipe_pct >= 70"])
def test_transformer_train_step(gpuprof):
    import torch

    model = make_blocks(torch).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(BATCH, SEQ, DIM, device="cuda")
    for _ in gpuprof.steps(warmup=3, active=10):
        with gpuprof.range("forward_pass"), torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        with gpuprof.range("backward_pass"):
            loss.backward()
        with gpuprof.range("optimizer_step"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    assert torch.isfinite(loss)
