"""Two-GPU workloads modelled on the guides: data-parallel training whose gradient all-reduce
overlaps the backward pass, and an expert-parallel MoE layer whose tokens cross to the
experts on the other GPU and back (all-to-all).  Each runs in one process per GPU
(``world_size=2``: the ``gpuprof_rank`` fixture joins the NCCL process group) and is judged
rank by rank.  NVTX range names follow the guides: ``forward_pass``, ``backward_pass``,
``GPU_to_GPU_Transfer``, ``Expert_Forward``.

Planted bugs (``GPUPROF_EXAMPLE_BUG``, conftest.py):
  ddp_after_backward  gradients all-reduced by hand after the whole backward pass, not by DDP
                      as each layer's gradient is ready: nothing left to hide the communication
  split_tolist        the expert-parallel layer reads its all-to-all split sizes to the host
                      every step (``.tolist()``), a host synchronization per step
"""

import math

import pytest
from conftest import planted

WORLD = 2
LAYERS, WIDTH, BATCH = 8, 4096, 8192  # DDP: 8 bf16 Linear layers of 32 MB each, one bucket each
TOKENS, DIM, HIDDEN, EXPERTS = 32768, 2048, 4096, 8  # per rank; experts split evenly between the ranks


def ddp_training(torch, world, device):
    """One training step of 8 bf16 Linear-GeLU layers under DDP (16 MB buckets: one all-reduce
    per layer, launched as its gradient is ready, hidden behind the rest of the backward);
    ``step(rng)`` runs one."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    layers = [torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)]
    model = torch.nn.Sequential(*[m for layer in layers for m in (layer, torch.nn.GELU())]).to(device, torch.bfloat16)
    by_hand = planted("ddp_after_backward")
    if not by_hand:
        model = DistributedDataParallel(model, device_ids=[device.index], bucket_cap_mb=16,
                                        gradient_as_bucket_view=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(BATCH, WIDTH, device=device, dtype=torch.bfloat16)

    def step(rng):
        with rng("forward_pass"):
            loss = model(x).float().square().mean()
        with rng("backward_pass"):
            loss.backward()
            if by_hand:  # the bug: every gradient exchanged after the backward pass has ended
                for p in model.parameters():
                    p.grad.div_(world)
                    dist.all_reduce(p.grad)
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        return loss

    return step


@pytest.mark.gpuprof(world_size=WORLD, thresholds=["comm_compute_overlap >= 0.5"])
def test_ddp_training(gpuprof_rank, gpuprof):
    import torch

    step = ddp_training(torch, gpuprof_rank.world_size, torch.device(gpuprof_rank.device))
    for _ in gpuprof.steps(warmup=3, active=8):
        loss = step(gpuprof.range)
    assert torch.isfinite(loss)


def expert_parallel_moe(torch, world, device):
    """Router (top-1, a fixed capacity per expert, as Switch does: no host synchronization),
    all-to-all dispatch to the rank holding each expert, its Linear-GeLU-Linear, all-to-all
    back, combine."""
    import torch.distributed as dist

    nn = torch.nn
    local = EXPERTS // world
    capacity = math.ceil(TOKENS / EXPERTS * 1.25)
    router = nn.Linear(DIM, EXPERTS, bias=False).to(device, torch.bfloat16)
    fc1 = nn.ModuleList(nn.Linear(DIM, HIDDEN) for _ in range(local)).to(device, torch.bfloat16)
    fc2 = nn.ModuleList(nn.Linear(HIDDEN, DIM) for _ in range(local)).to(device, torch.bfloat16)

    def forward(x, rng):
        tokens = x.shape[0]
        weight, expert = router(x).softmax(dim=-1).max(dim=-1)
        position = (torch.nn.functional.one_hot(expert, EXPERTS).cumsum(0) - 1).gather(1, expert[:, None]).squeeze(1)
        slot = torch.where(position < capacity, expert * capacity + position, EXPERTS * capacity)
        token_of_slot = torch.full((EXPERTS * capacity + 1,), tokens, device=device)
        token_of_slot.scatter_(0, slot, torch.arange(tokens, device=device))
        weight_of_slot = torch.zeros(EXPERTS * capacity + 1, device=device, dtype=x.dtype).scatter_(0, slot, weight)
        padded = torch.cat([x, x.new_zeros(1, DIM)])
        send = padded[token_of_slot[:-1]]  # (EXPERTS * capacity, DIM), ordered by expert, so by rank
        splits = None
        if planted("split_tolist"):  # the bug: split sizes computed on the GPU, read to the host
            splits = torch.full((world,), local * capacity, device=device).tolist()
        received = torch.empty_like(send)
        with rng("GPU_to_GPU_Transfer"):
            dist.all_to_all_single(received, send, splits, splits)
        chunks = received.view(world, local, capacity, DIM)
        done = torch.empty_like(chunks)
        for e in range(local):
            with rng("Expert_Forward"):
                h = chunks[:, e].reshape(world * capacity, DIM)
                h = fc2[e](torch.nn.functional.gelu(fc1[e](h)))
                done[:, e] = h.view(world, capacity, DIM)
        back = torch.empty_like(send)
        with rng("GPU_to_GPU_Transfer"):
            dist.all_to_all_single(back, done.view(-1, DIM), splits, splits)
        out = torch.zeros_like(padded)
        out.index_add_(0, token_of_slot[:-1], back * weight_of_slot[:-1, None])
        return out[:tokens]

    return forward


@pytest.mark.gpuprof(world_size=WORLD, thresholds=["sync_count == 0"])
def test_expert_parallel_moe(gpuprof_rank, gpuprof):
    import torch

    device = torch.device(gpuprof_rank.device)
    moe = expert_parallel_moe(torch, gpuprof_rank.world_size, device)
    torch.manual_seed(1 + gpuprof_rank.rank)  # each rank its own tokens
    x = torch.randn(TOKENS, DIM, device=device, dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in gpuprof.steps(warmup=3, active=10):
            y = moe(x, gpuprof.range)
    assert y.shape == x.shape and torch.isfinite(y).all()
