"""Record the traces tests/run/test_alongside.py replays through the A/B decision: one small
test at two revisions, measured as ``--gpuprof-base`` measured them when they were
recorded (base then head in each pair; the pairs run in ABBA order since), in fresh pytest
processes, each keeping its torch.profiler trace.

    python tests/data/record_ab.py [--pairs 3] [--out tests/data/ab]

The base revision runs GeLU over 8M bf16 elements and a 2048^2 bf16 GEMM per step; head
"same" differs from it only in a comment; head "slow" runs the GeLU over 10% more
elements (the same kernels, the same launches).  Writes OUT/same_base0.pt.trace.json.gz,
OUT/same_head0..., OUT/slow_base0..., OUT/slow_head0..., and OUT/recorded.json (GPU,
driver, torch, clocks left as they were).  Each trace is scrubbed of the process's
environment by the capture itself (gpuprof keeps none).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REVISION = '''
import torch

ELEMENTS = {elements}  # {comment}

def test_step(gpuprof):
    x = torch.randn(ELEMENTS, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    for _ in gpuprof.steps(warmup=3, active=10):
        torch.nn.functional.gelu(x)
        a @ a
'''
BASE = 8 * 2**20
REVISIONS = {"base": (BASE, "base"), "same": (BASE, "head: only this comment differs"),
             "slow": (int(BASE * 1.1), "head: GeLU over 10% more elements")}


def measure(checkout: Path, keep: Path) -> Path:
    """One fresh pytest process of a checkout, its trace kept under ``keep``."""
    done = subprocess.run([sys.executable, "-m", "pytest", "test_ab.py", "-q", "-p", "no:cacheprovider", "--gpuprof",
                           f"--gpuprof-baseline-dir={keep / 'baselines'}", "--gpuprof-keep-traces",
                           f"--gpuprof-output-dir={keep}", "--gpuprof-timeline-events=0"],
                          cwd=checkout, capture_output=True, text=True)
    traces = sorted((keep / "traces").glob("*.json.gz"))
    if done.returncode not in (0, 1) or len(traces) != 1:
        sys.exit(f"{checkout.name}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return traces[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "ab")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, (elements, comment) in REVISIONS.items():
            (root / name).mkdir()
            (root / name / "test_ab.py").write_text(REVISION.format(elements=elements, comment=comment))
        for case in ("same", "slow"):
            for i in range(args.pairs):
                for side, checkout in (("base", "base"), ("head", case)):
                    trace = measure(root / checkout, root / f"keep-{case}-{side}-{i}")
                    shutil.copy(trace, args.out / f"{case}_{side}{i}.pt.trace.json.gz")
                    print(f"{case} pair {i}: {side} recorded", flush=True)
    import torch

    facts = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "pairs": args.pairs,
             "clocks": "as set (never changed)"}
    try:
        import pynvml

        pynvml.nvmlInit()
        facts["driver"] = pynvml.nvmlSystemGetDriverVersion()
    except Exception as exc:  # NVML is only a fact for the record
        facts["driver"] = f"unknown ({exc})"
    (args.out / "recorded.json").write_text(json.dumps(facts, indent=1) + "\n")


if __name__ == "__main__":
    main()
