"""What torch.profiler costs a launch-bound step, measured against CUDA-event timing without it.

    python benchmarks/observer_effect.py [--steps 30] [--json OUT]     (on a CUDA GPU)
    python benchmarks/observer_effect.py --smoke                      (no GPU: the summary code)

Each workload runs its steps (each in a ``record_function`` range, as gpuprof's
are) with a CUDA event recorded at the start of every step and after the last; a step's
time is the GPU-side time between two events, so it includes every gap the GPU waited on
the host.  The same loop runs without any
profiler, under torch.profiler with torch's defaults (CPU and CUDA activities),
as gpuprof configures it (CPU and CUDA activities without the external correlation
that gpuprof does not read), and with CUDA activity only (which loses the step
ranges the metrics need), each in a fresh warm-up; the table gives the
median step time (the median of the configuration's rounds, which run in turn)
and the cost against no profiler, and which of the event
categories gpuprof's metrics need each configuration's trace still holds.
Figures: docs/benchmarks.md ("The observer effect").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

#: What the metrics read from a Kineto trace (trace/kineto.py CATEGORIES) and the step ranges.
NEEDED = ("kernel", "cuda_runtime", "user_annotation", "ProfilerStep#")


def workloads(torch):
    """name -> (step function): launch-bound loops of many small kernels."""
    def decode(batch: int, width: int, layers: int, positions: int):
        blocks = [(torch.nn.Linear(width, 4 * width).cuda(), torch.nn.Linear(4 * width, width).cuda())
                  for _ in range(layers)]
        x = torch.randn(batch, width, device="cuda")

        def step():
            with torch.no_grad():
                h = x
                for _ in range(positions):
                    for up, down in blocks:
                        h = h + down(torch.nn.functional.gelu(up(h)))
        return step

    return {
        # example_suite/test_launch_bound.py's shape
        "example launch-bound decode (batch 8, width 256)": decode(8, 256, 12, 8),
        "small batch (batch 1, width 64)": decode(1, 64, 12, 8),
    }


def configs(torch):
    """name -> a profile() factory, or None for no profiler."""
    from torch.profiler import ProfilerActivity, profile

    def plain(**kw):
        return lambda: profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **kw)

    from pytest_gpuprof.capture.profiler import _lighter_recording

    return {
        "no profiler": None,
        "torch.profiler, CPU + CUDA, torch's defaults": plain(),
        "torch.profiler, CPU + CUDA as gpuprof records": plain(**_lighter_recording()),
        "torch.profiler, CUDA only": lambda: profile(activities=[ProfilerActivity.CUDA]),
    }


def run(torch, step, make_profiler, steps: int, warmup: int = 5) -> dict:
    """Median GPU-side step time (us) over ``steps`` steps, and the trace's categories."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    prof = make_profiler() if make_profiler else None
    if prof is not None:
        prof.start()
    for i in range(steps):
        events[i].record()
        with torch.profiler.record_function(f"step_{i}"):  # as gpuprof's steps do
            step()
        if prof is not None:
            prof.step()
    events[steps].record()
    torch.cuda.synchronize()
    categories: list[str] = []
    if prof is not None:
        prof.stop()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "t.json"
            prof.export_chrome_trace(str(path))
            trace = json.loads(path.read_text())
        cats = {e.get("cat") for e in trace["traceEvents"]}
        names = any(str(e.get("name", "")).startswith("ProfilerStep#") for e in trace["traceEvents"])
        categories = [c for c in NEEDED if c in cats or (c == "ProfilerStep#" and names)]
    times = [events[i].elapsed_time(events[i + 1]) * 1000 for i in range(steps)]
    return {"median_us": statistics.median(times), "categories": categories}


def table(results: dict) -> list[str]:
    """One line per workload and configuration: median step time, cost against no profiler,
    the needed event categories the trace holds."""
    lines = []
    for workload, by_config in results.items():
        base = by_config["no profiler"]["median_us"]
        lines.append(workload)
        for config, r in by_config.items():
            cost = f"{r['median_us'] / base - 1:+.1%}" if config != "no profiler" else ""
            held = ", ".join(r["categories"]) if r["categories"] else ("-" if config == "no profiler" else "none")
            lines.append(f"  {config:<48} {r['median_us']:>10.1f} us/step {cost:>8}   trace holds: {held}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3, help="times each configuration runs, in turn")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--smoke", action="store_true", help="the summary on made-up figures, no GPU needed")
    args = parser.parse_args()
    if args.smoke:
        made_up = {"w": {"no profiler": {"median_us": 100.0, "categories": []},
                         "torch.profiler, CPU + CUDA as gpuprof records": {"median_us": 150.0,
                                                                           "categories": list(NEEDED)}}}
        print("\n".join(table(made_up)))
        return 0
    import torch

    if not torch.cuda.is_available():
        print("observer_effect.py needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    results: dict = {}
    for name, step in workloads(torch).items():
        runs: dict[str, list[dict]] = {}
        for _ in range(args.rounds):  # configurations in turn, round after round: drift hits them alike
            for config, make in configs(torch).items():
                runs.setdefault(config, []).append(run(torch, step, make, args.steps))
        results[name] = {config: {"median_us": statistics.median(r["median_us"] for r in rs),
                                  "categories": rs[0]["categories"]} for config, rs in runs.items()}
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("\n".join(table(results)))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
