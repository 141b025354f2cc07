"""Record the Nsight Compute report that checks each counter's other ways (run on a machine
with a GPU, ncu and CuPy).

trace/ncu_report.py works a counter out by the first of its ways (``COUNTERS``) that a report
holds.  This report holds every way of every counter at once, so that tests can check each
other way against the first on the same launch:

  python tests/data/record_ncu_alternatives.py OUT
      OUT/alternatives.ncu-rep   --metrics: every metric of every way (9 MB: not committed)
      OUT/alternatives.raw.csv   ncu --import OUT/alternatives.ncu-rep --csv --page raw --print-units base
                                 (committed: tests/data/ncu/alternatives.raw.csv, an H200, ncu 2025.3.1)

The workload: record_ncu.py's step (a bf16 GEMM, a GeLU and a transposing copy) once, then
a kernel that keeps an array indexed at run time in local memory (loads and stores through
L1TEX's local path, which no kernel of the step makes), launched with full warps and with a
partial one.  Every kernel of the process is profiled, torch's random fills too.  Always
``--clock-control none``; the CSV's process and host columns are blanked
(``record_ncu_sets.scrub``).
"""

import subprocess
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]

from record_ncu_sets import scrub  # noqa: E402

#: A kernel whose array, indexed by a value known only at run time, lives in local memory.
LOCAL_ARRAY = r"""
extern "C" __global__ void local_array(float* out, int k) {
    float a[64];
    for (int i = 0; i < 64; ++i) a[i] = threadIdx.x + i;
    for (int i = 0; i < 64; ++i) a[(i * k) & 63] += a[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = a[k & 63];
}
"""


def workload() -> None:
    import cupy
    import torch

    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4096, 4096, device="cuda")
    a @ a
    torch.nn.functional.gelu(x)
    x.t().contiguous()
    torch.cuda.synchronize()
    kernel = cupy.RawKernel(LOCAL_ARRAY, "local_array")
    out = cupy.zeros(1024 * 96, dtype=cupy.float32)
    for threads in (96, 48):  # three full warps; one and a half
        kernel((1024,), (threads,), (out, cupy.int32(7)))
    cupy.cuda.Device().synchronize()


def main(out: Path) -> None:
    from pytest_gpuprof.trace.ncu_report import COUNTERS

    out.mkdir(parents=True, exist_ok=True)
    every = ",".join(dict.fromkeys(m for ways in COUNTERS.values() for way in ways for m in way.metrics))
    report = out / "alternatives.ncu-rep"
    subprocess.run(["ncu", "--clock-control", "none", "--metrics", every, "-f", "-o", str(report.with_suffix("")),
                    sys.executable, __file__, "--workload"], check=True)
    printed = subprocess.run(["ncu", "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"],
                             capture_output=True, text=True, check=True).stdout
    (out / "alternatives.raw.csv").write_text(scrub(printed))


if __name__ == "__main__":
    if sys.argv[1:] == ["--workload"]:
        workload()
    else:
        main(Path(sys.argv[1]))
