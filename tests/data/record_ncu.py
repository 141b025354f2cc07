"""Record the Nsight Compute report the ncu tests read (run on a machine with a GPU and ncu).

A small program profiled as gpuprof profiles a test's steps (its NVTX ranges, no
torch.profiler): one warm-up and three measured steps, each a bf16 GEMM, a GeLU and a
transposing copy; ncu profiles the kernels of the range ``step_1`` of the ``gpuprof`` domain:

  python tests/data/record_ncu.py OUT
      OUT/small.ncu-rep    the report (committed xz-compressed: tests/data/ncu/small.ncu-rep.xz)
      OUT/small.raw.csv    ncu --import OUT/small.ncu-rep --csv --page raw --print-units base

Recorded on an H100 (80GB HBM3, driver 580.159.04, ncu 2025.3.1) with the card's clocks as set
(``--clock-control none``).  A report holds no environment: the process's name and id, the
host's name (127.0.0.1 in a VM) and the kernels' machine code; check before committing one.
"""

import subprocess
import sys
from pathlib import Path

#: The metrics of the committed report: gpuprof's counters (trace.ncu_report.COUNTERS) and a few more.
METRICS = ("gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,"
           "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,"
           "dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,dram__bytes_read.sum,"
           "dram__bytes_write.sum,dram__bytes.sum.peak_sustained,dram__cycles_elapsed.avg.per_second,"
           "dram__bytes.sum.per_second,sm__warps_active.avg.pct_of_peak_sustained_active,"
           "l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,"
           "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,"
           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,"
           "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,"
           "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,"
           "l1tex__data_bank_conflicts_pipe_lsu.sum,smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct")


def workload() -> None:
    import torch

    from pytest_gpuprof.capture.profiler import GpuProf, StepPlan

    prof = GpuProf(StepPlan(wait=0, warmup=1, active=3), nvtx_only=True)
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4096, 4096, device="cuda")
    for _ in prof.steps():
        a @ a
        torch.nn.functional.gelu(x)
        x.t().contiguous()
    torch.cuda.synchronize()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    report = out / "small.ncu-rep"
    subprocess.run(["ncu", "--clock-control", "none", "--nvtx", "--nvtx-include", "gpuprof@step_1/",
                    "--metrics", METRICS, "-f", "-o", str(report.with_suffix("")),
                    sys.executable, __file__, "--workload"], check=True)
    with open(out / "small.raw.csv", "w") as csv:
        subprocess.run(["ncu", "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"],
                       stdout=csv, check=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--workload"]:
        workload()
    else:
        main(Path(sys.argv[1]))
