"""Record the small real traces the metric tests read (run on a CUDA GPU).

    python tests/data/record_traces.py [WORKLOAD ...]   # writes tests/data/*.pt.trace.json.gz
    python tests/data/record_traces.py --out tests/data/host host           # steady, stalled, slow_host
    python tests/data/record_traces.py --out tests/data/host --tag p0 launch   # one process per tag
    python tests/data/record_traces.py --out tests/data/host --tag busy --busy-cpu launch
    python tests/data/record_traces.py --out tests/data/host --tag overhead --host-overhead 2000 launch
    python tests/data/record_traces.py --out tests/data/clock clock         # power_capped
    tests/data/record_nsys.sh                     # the same workloads under Nsight Systems

Each workload has a structure known by construction, so the tests can check
counts and bytes against these numbers rather than against gpuprof's output:

overlap   per step: one 16 MiB pinned host-to-device copy on a side stream,
          concurrent with 8 fp32 1024x1024 matmuls on the compute stream, then
          the compute stream waits for the copy and runs one add (x += 1).
sync      per step: one fill kernel (torch.full), one .item() (a 4-byte
          device-to-host copy plus a stream synchronize), and one
          torch.cuda.synchronize() (a device synchronize).
graph     per step: a CUDA graph of 3 elementwise kernels (mul_, add_, sin),
          captured before recording, replayed twice, then one eager add_:
          7 kernels, 6 of them launched by the step's 2 cudaGraphLaunch calls.
flush     recorded through the plugin's own capture (GpuProf) with
          flush_l2=True: per step one sum over a 16 MiB tensor (1 kernel),
          after the L2 flush in its gpuprof_l2_flush range (not measured).
nested    per step: one long matmul (2048^3 fp32) on stream A while stream B
          runs 6 short elementwise kernels and stream C copies 8 MiB from pinned
          memory: kernels nested inside other kernels, on several streams.
steady, stalled, slow_host
          through the plugin's capture, 10 measured steps of 4 matmuls
          (1024^3 fp32) and one add each, launched one by one; "stalled" makes
          the host pause 20 ms in the middle of steps 3 and 7 (a stall of the
          machine), "slow_host" 2 ms in every step (a real host-side slowdown).
launch    through the plugin's capture: a small-batch decode loop, 6 layers of
          Linear-GeLU-Linear at batch 8, 4 positions per step (about 100 small
          kernels a step, launch-bound), 10 measured steps; recorded once per
          process with --tag (--busy-cpu: a process spinning on the same CPU core,
          a noisy neighbour), so the traces show what moves between processes;
          --host-overhead N: N iterations of a pure-Python loop before every layer
          (a host-side regression: the same kernels, launches and syncs).
          host/h100_*: on one H100 machine (2026-11-25), six processes p0-p5, of which
          p5 (the slowest host: its window 1.76x p4's) is h100_slow_host and p4
          h100_fast_host, and --host-overhead 2000 is h100_host_overhead.
clock     through the plugin's capture, with its NVML samples: power_capped, 40
          measured steps of 4, 8, 12, 16 or 20 bf16 8192x8192 matmuls in turn (5 to
          32 ms of GPU work a step, around the 20 ms sampling period), a device
          synchronize closing every fourth; on an H200
          (2026-11-28) the power cap lowered the SM clock from 1980 to 1515 MHz
          within the run.
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


def graph_body(x, y):
    x.mul_(1.0001)
    x.add_(1)
    torch.sin(x, out=y)


def graph_state():
    x, y = torch.randn(1024, 1024, device="cuda"), torch.empty(1024, 1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capturing stream, as torch.cuda.graph asks
        graph_body(x, y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graph_body(x, y)
    torch.cuda.synchronize()
    return graph, y


def graph_step(state):
    graph, y = state
    graph.replay()
    graph.replay()
    y.add_(1)


def record_flush(out: Path):
    """Through the plugin's capture, as ``@pytest.mark.gpuprof(flush_l2=True)`` runs it."""
    from pytest_gpuprof.capture.profiler import GpuProf, StepPlan

    path = out / "flush.pt.trace.json.gz"
    x = torch.randn(4 * 1024 * 1024, device="cuda")
    prof = GpuProf(StepPlan(wait=0, warmup=WARMUP, active=STEPS, flush_l2=True), path)
    for _ in prof.steps():
        x.sum()
    print(f"wrote {path} ({path.stat().st_size} bytes) on {torch.cuda.get_device_name()}")


def nested_state():
    a = torch.randn(2048, 2048, device="cuda")
    small = torch.randn(256, 256, device="cuda")
    host = torch.ones(2 * 1024 * 1024).pin_memory()
    return a, small, host, torch.empty_like(host, device="cuda"), torch.cuda.Stream(), torch.cuda.Stream()


def nested_step(state):
    a, small, host, dev, side, copy = state
    main = torch.cuda.current_stream()
    side.wait_stream(main)
    copy.wait_stream(main)
    a @ a  # one long kernel on the main stream
    with torch.cuda.stream(side):  # short kernels inside it, on another stream
        for _ in range(6):
            small.mul_(1.0001)
    with torch.cuda.stream(copy):
        dev.copy_(host, non_blocking=True)
    main.wait_stream(side)
    main.wait_stream(copy)


def record_through_plugin(name: str, out: Path, step, plan) -> None:
    """A workload captured by the plugin's own GpuProf, as ``@pytest.mark.gpuprof`` runs it."""
    from pytest_gpuprof.capture.profiler import GpuProf

    path = out / f"{name}.pt.trace.json.gz"
    prof = GpuProf(plan, path)
    for i in prof.steps():
        step(i - plan.wait - plan.warmup)
    torch.cuda.synchronize()
    print(f"wrote {path} ({path.stat().st_size} bytes) on {torch.cuda.get_device_name()}")


def record_host_family(out: Path) -> None:
    """steady, stalled and slow_host: the same GPU work, the host pausing differently."""
    import time

    from pytest_gpuprof.capture.profiler import StepPlan

    a = torch.randn(1024, 1024, device="cuda")
    plan = StepPlan(wait=0, warmup=3, active=10)

    def work(pause_s: float) -> None:
        b = a
        for k in range(4):
            b = a @ b
            if k == 1 and pause_s:
                time.sleep(pause_s)  # the host stops launching mid-step; the GPU runs dry
        b.add_(1)

    record_through_plugin("steady", out, lambda i: work(0), plan)
    record_through_plugin("stalled", out, lambda i: work(0.02 if i in (3, 7) else 0), plan)
    record_through_plugin("slow_host", out, lambda i: work(0.002 if i >= 0 else 0), plan)


def record_clock(out: Path) -> None:
    """power_capped: steps of a few heavy matmuls, long enough to hold the GPU at its power cap."""
    from pytest_gpuprof.capture.profiler import StepPlan

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def work(i: int) -> None:
        for _ in range((i % 5 + 1) * 4 if i >= 0 else 4):
            a @ b
        if i % 4 == 3:  # the host reads its clock after the GPU finished (docs/metrics.md: the alignment)
            torch.cuda.synchronize()

    record_through_plugin("power_capped", out, work, StepPlan(wait=0, warmup=3, active=40))


def record_launch(out: Path, tag: str, busy_cpu: bool, overhead: int = 0) -> None:
    """The launch-bound decode loop, in this process (pinned to one core, with a spinning
    neighbour on it when ``busy_cpu``; ``overhead`` Python iterations before each layer)."""
    import os
    import subprocess
    import sys

    from pytest_gpuprof.capture.profiler import StepPlan

    core = sorted(os.sched_getaffinity(0))[0]
    os.sched_setaffinity(0, {core})
    spin = f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
    hog = subprocess.Popen([sys.executable, "-c", spin]) if busy_cpu else None
    try:
        layers = [(torch.nn.Linear(256, 1024).cuda(), torch.nn.Linear(1024, 256).cuda()) for _ in range(6)]
        x = torch.randn(8, 256, device="cuda")

        def step(i: int) -> None:
            with torch.no_grad():
                h = x
                for _ in range(4):
                    for up, down in layers:
                        sum(k * k % 7 for k in range(overhead))
                        h = h + down(torch.nn.functional.gelu(up(h)))

        record_through_plugin(f"launch_{tag}", out, step, StepPlan(wait=0, warmup=5, active=10))
    finally:
        if hog is not None:
            hog.kill()


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
        measured = i >= WARMUP
        with record_function(f"step_{i - WARMUP}") if measured else torch.autograd.profiler.record_function("warmup"):
            step(state)
        prof.step()
    prof.stop()
    print(f"wrote {path} ({path.stat().st_size} bytes) on {torch.cuda.get_device_name()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--nvtx", metavar="WORKLOAD", choices=("overlap", "sync", "graph"),
                        help="emit NVTX ranges for nsys instead of recording with torch.profiler")
    parser.add_argument("--tag", default="p0", help="launch: the name of this process's trace (launch_TAG)")
    parser.add_argument("--busy-cpu", action="store_true", help="launch: a process spinning on the same core")
    parser.add_argument("--host-overhead", type=int, default=0, metavar="N",
                        help="launch: N iterations of Python work before each layer (a host-side regression)")
    parser.add_argument("only", nargs="*", metavar="WORKLOAD",
                        help="record only these of overlap, sync, graph, nested, flush, host, launch, clock "
                        "(default: overlap, sync, graph, nested, flush)")
    args = parser.parse_args()
    unknown = set(args.only) - {"overlap", "sync", "graph", "nested", "flush", "host", "launch", "clock"}
    if unknown:
        parser.error(f"unknown workload(s): {', '.join(sorted(unknown))}")
    torch.manual_seed(0)
    if "host" in args.only:
        record_host_family(args.out)
    if "launch" in args.only:
        record_launch(args.out, args.tag, args.busy_cpu, args.host_overhead)
    if "clock" in args.only:
        record_clock(args.out)
    workloads = {"overlap": (overlap_step, overlap_state), "sync": (sync_step, list),
                 "graph": (graph_step, graph_state), "nested": (nested_step, nested_state)}
    if args.nvtx:
        step, state = workloads[args.nvtx]
        record_nvtx(args.nvtx, step, state(), args.out)
        return
    for name, (step, state) in workloads.items():
        if name in args.only or not args.only:
            record(name, step, state(), args.out)
    if "flush" in args.only or not args.only:
        record_flush(args.out)


if __name__ == "__main__":
    main()
