"""Record the small real traces the metric tests read (run on a CUDA GPU).

    python tests/data/record_traces.py            # writes tests/data/*.pt.trace.json.gz
    tests/data/record_nsys.sh                     # the same workloads under Nsight Systems

Each workload has a structure known by construction, so the tests can check
counts and bytes against these numbers rather than against gpuprof's output:

overlap   per step: one 16 MiB pinned host-to-device copy on a side stream,
          concurrent with 8 fp32 1024x1024 matmuls on the compute stream, then
          the compute stream waits for the copy and runs one add (x += 1).
sync      per step: one fill kernel (torch.full), one .item() (a 4-byte
          device-to-host copy plus a stream synchronize), and one
          torch.cuda.synchronize() (a device synchronize).
"""

import argparse
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

STEPS, WARMUP = 4, 2


def overlap_step(state):
    copy_stream, host, dev, a = state
    with torch.cuda.stream(copy_stream):
        dev.copy_(host, non_blocking=True)
    b = a
    for _ in range(8):
        b = a @ b
    torch.cuda.current_stream().wait_stream(copy_stream)
    dev.add_(1)


def overlap_state():
    host = torch.ones(4 * 1024 * 1024, dtype=torch.float32).pin_memory()
    dev = torch.empty_like(host, device="cuda")
    a = torch.randn(1024, 1024, device="cuda") / 32
    return torch.cuda.Stream(), host, dev, a


def sync_step(state):
    x = torch.full((1024,), 2.0, device="cuda")
    state.append(x[0].item())
    torch.cuda.synchronize()


def record_nvtx(name, step, state, out: Path):
    """For nsys: NVTX ranges as the gpuprof fixture emits them, inside a
    cudaProfilerStart/Stop capture range, plus a range of another domain named
    like a step (it must not be taken for one)."""
    import nvtx

    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    with nvtx.annotate(name, domain="gpuprof"):
        with nvtx.annotate("warmup", domain="gpuprof"):
            for _ in range(WARMUP):
                step(state)
        for i in range(STEPS):
            with nvtx.annotate(f"step_{i}", domain="gpuprof"), nvtx.annotate(f"step_{i + 100}", domain="other_library"):
                step(state)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"ran {name} under NVTX ranges on {torch.cuda.get_device_name()}")


def record(name, step, state, out: Path):
    path = out / f"{name}.pt.trace.json.gz"
    prof = profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=0, warmup=WARMUP, active=STEPS, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    )
    prof.start()
    for i in range(WARMUP + STEPS):
        with record_function(f"step_{i - WARMUP}") if i >= WARMUP else torch.autograd.profiler.record_function("warmup"):
            step(state)
        prof.step()
    prof.stop()
    print(f"wrote {path} ({path.stat().st_size} bytes) on {torch.cuda.get_device_name()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--nvtx", metavar="WORKLOAD", choices=("overlap", "sync"),
                        help="emit NVTX ranges for nsys instead of recording with torch.profiler")
    args = parser.parse_args()
    torch.manual_seed(0)
    workloads = {"overlap": (overlap_step, overlap_state), "sync": (sync_step, list)}
    if args.nvtx:
        step, state = workloads[args.nvtx]
        record_nvtx(args.nvtx, step, state(), args.out)
        return
    for name, (step, state) in workloads.items():
        record(name, step, state(), args.out)


if __name__ == "__main__":
    main()
