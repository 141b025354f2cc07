"""Record the two-GPU traces the distributed tests read (run on a machine with two GPUs).

Each of the example suite's two-GPU workloads (``example_suite/test_distributed.py``: DDP
training and the expert-parallel MoE layer) runs in two processes joined by NCCL, NVLink
multicast off, through the plugin's own capture (``GpuProf``), as a distributed test's ranks
run it under ``--gpuprof``:

  python tests/data/record_ranks.py OUT torch [WORKLOAD ...]
      OUT/WORKLOAD/rank{0,1}.pt.trace.json.gz: one Kineto trace per rank
  nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none -o OUT/WORKLOAD \\
      python tests/data/record_ranks.py OUT nvtx WORKLOAD
      one report holding both ranks' processes (steps as NVTX ranges, as under --gpuprof-nsys);
      tests/data/record_ranks.sh exports and scrubs it

WORKLOAD: ddp, moe (default both); GPUPROF_EXAMPLE_BUG plants the suite's bugs as it does there.
Few, small steps: the traces are committed.
"""

import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "example_suite"))

WORLD = 2
WARMUP, STEPS = 2, 3
TOKENS, DIM, HIDDEN = 8192, 1024, 2048  # the MoE layer's, per rank: a small trace to commit


def rank_main(rank: int, mode: str, workload: str, out: str, store: str) -> None:
    import test_distributed as workloads

    from pytest_gpuprof.capture.profiler import GpuProf, StepPlan

    workloads.TOKENS, workloads.DIM, workloads.HIDDEN = TOKENS, DIM, HIDDEN  # smaller than the suite's

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    device = torch.device("cuda", rank)
    torch.manual_seed(0)
    plan = StepPlan(wait=0, warmup=WARMUP, active=STEPS)
    path = Path(out) / workload / f"rank{rank}.pt.trace.json.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    prof = GpuProf(plan, nvtx_only=True) if mode == "nvtx" else GpuProf(plan, path)
    if workload == "ddp":
        step = workloads.ddp_training(torch, WORLD, device)
    else:
        moe = workloads.expert_parallel_moe(torch, WORLD, device)
        x = torch.randn(TOKENS, DIM, device=device, dtype=torch.bfloat16)
        step = lambda rng: moe(x, rng)  # noqa: E731
    with torch.no_grad() if workload == "moe" else torch.enable_grad():
        for _ in prof.steps():
            step(prof.range)
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    if mode == "torch":
        print(f"rank {rank}: wrote {path} ({path.stat().st_size} bytes) on {torch.cuda.get_device_name()}")


def main() -> None:
    out, mode, *workloads = sys.argv[1:]
    if mode not in ("torch", "nvtx"):
        raise SystemExit(f"mode must be torch or nvtx, got {mode!r}")
    os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    for workload in workloads or ["ddp", "moe"]:
        with tempfile.TemporaryDirectory() as tmp:
            mp.spawn(rank_main, args=(mode, workload, out, str(Path(tmp) / "store")), nprocs=WORLD)


if __name__ == "__main__":
    main()
