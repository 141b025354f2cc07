"""Copy bandwidth as gpuprof measures it, beside the same copies timed by hand (docs/benchmarks.md).

    python benchmarks/copy_bandwidth.py --out DIR [--mib 256]

Runs one profiled test (``pytest --gpuprof``) whose step copies MIB MiB host to device
(pinned), device to host (pinned) and device to device, keeps its trace in DIR (the fixture
``tests/data/copies_h100.pt.trace.json.gz`` was recorded so, with ``--mib 64``), then times the same copies with
CUDA events in this process, 10 of each after 3 unmeasured, and prints per kind gpuprof's
``memcpy_<kind>_gbps`` (the median step) beside the hand figure, and ``pcie_utilization``
with the PCIe link the trace recorded.  Needs a CUDA GPU and nvidia-ml-py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

TEST = '''
import pytest
import torch

N = {nbytes}


@pytest.mark.gpuprof(warmup=3, active=10)
def test_copies(gpuprof):
    host = torch.empty(N, dtype=torch.uint8).pin_memory()
    back = torch.empty(N, dtype=torch.uint8).pin_memory()
    dev, dev2 = (torch.empty(N, dtype=torch.uint8, device="cuda") for _ in range(2))
    for _ in gpuprof.steps():
        dev.copy_(host, non_blocking=True)
        back.copy_(dev, non_blocking=True)
        dev2.copy_(dev)
    torch.cuda.synchronize()
'''


def by_hand(nbytes: int) -> dict[str, float]:
    """GB/s of each copy kind timed with CUDA events: the median of 10 after 3 unmeasured."""
    import torch

    host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    back = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    dev, dev2 = (torch.empty(nbytes, dtype=torch.uint8, device="cuda") for _ in range(2))
    copies = {"htod": lambda: dev.copy_(host, non_blocking=True), "dtoh": lambda: back.copy_(dev, non_blocking=True),
              "dtod": lambda: dev2.copy_(dev)}
    out = {}
    for kind, copy in copies.items():
        times = []
        for i in range(13):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            copy()
            end.record()
            end.synchronize()
            if i >= 3:
                times.append(start.elapsed_time(end))  # ms
        out[kind] = nbytes / statistics.median(times) / 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mib", type=int, default=256)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    nbytes = args.mib << 20
    (args.out / "test_copies.py").write_text(TEST.format(nbytes=nbytes))
    results = args.out / "results.json"
    subprocess.run([sys.executable, "-m", "pytest", str(args.out / "test_copies.py"), "-p", "no:cacheprovider", "-q",
                    "--gpuprof", "--gpuprof-keep-traces", f"--gpuprof-output-dir={args.out}",
                    f"--gpuprof-baseline-dir={args.out / 'baselines'}", f"--gpuprof-json={results}"], check=False)
    test = json.loads(results.read_text())["tests"][0]
    hand = by_hand(nbytes)
    print(f"{'kind':<6} {'gpuprof (median step)':>22} {'by hand (CUDA events)':>22}")
    for kind, gbps in hand.items():
        shown = test["distribution"].get(f"memcpy_{kind}_gbps", {}).get("median")
        print(f"{kind:<6} {shown:>17.3f} GB/s {gbps:>17.3f} GB/s")
    from pytest_gpuprof.trace.kineto import load_kineto

    link = load_kineto(next((args.out / "traces").glob("*test_copies*"))).metadata.get("pcie_link")
    print(f"pcie_utilization {test['distribution'].get('pcie_utilization', {}).get('median')} (median step), "
          f"{test['metrics'].get('pcie_utilization')} over the window; link {link}")


if __name__ == "__main__":
    main()
