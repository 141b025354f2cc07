"""Record Nsight Compute reports made the ways users make them (run on a machine with a GPU and ncu).

The workload of ``record_ncu.py`` (a bf16 GEMM, a GeLU and a transposing copy a step, in
gpuprof's NVTX step ranges), the kernels of ``step_1`` profiled three ways:

  python tests/data/record_ncu_sets.py OUT
      OUT/default.ncu-rep   ncu's default set (no --set, no --metrics)
      OUT/full.ncu-rep      --set full
      OUT/gpuprof.ncu-rep   --metrics trace.ncu_report.METRICS (what --gpuprof-ncu asks for)
      OUT/NAME.raw.csv      ncu --import OUT/NAME.ncu-rep --csv --page raw --print-units base
      OUT/default.units.csv ncu --import OUT/default.ncu-rep --csv --page raw (ncu's display units)
      OUT/ncu_version.txt   ncu --version

Always ``--clock-control none``: the card is measured as it is set.  The CSVs name the
process and host; the recorder scrubs both (``scrub``) before they are kept.
"""

import csv
import io
import subprocess
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]

from record_ncu import workload  # noqa: E402

#: Each report's name and the ncu options that choose what it holds.
SETS = {"default": (), "full": ("--set", "full")}
#: Columns naming the machine or process, blanked before a CSV is kept.
SCRUBBED = ("Process ID", "Process Name", "Host Name")


def scrub(text: str) -> str:
    """The CSV with the process and host columns blanked (their header kept)."""
    rows = list(csv.reader(io.StringIO(text)))
    drop = [i for i, name in enumerate(rows[0]) if name in SCRUBBED]
    for row in rows[2:]:
        for i in drop:
            row[i] = ""
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return out.getvalue()


def main(out: Path) -> None:
    from pytest_gpuprof.trace.ncu_report import METRICS

    out.mkdir(parents=True, exist_ok=True)
    sets = {**SETS, "gpuprof": ("--metrics", METRICS)}
    (out / "ncu_version.txt").write_text(subprocess.run(["ncu", "--version"], capture_output=True, text=True,
                                                        check=True).stdout)
    for name, args in sets.items():
        report = out / f"{name}.ncu-rep"
        subprocess.run(["ncu", "--clock-control", "none", "--nvtx", "--nvtx-include", "gpuprof@step_1/", *args,
                        "-f", "-o", str(report.with_suffix("")), sys.executable, __file__, "--workload"], check=True)
        for suffix, units in ((".raw.csv", ("--print-units", "base")), (".units.csv", ())):
            if units or name == "default":
                printed = subprocess.run(["ncu", "--import", str(report), "--csv", "--page", "raw", *units],
                                         capture_output=True, text=True, check=True).stdout
                (out / f"{name}{suffix}").write_text(scrub(printed))


if __name__ == "__main__":
    if sys.argv[1:] == ["--workload"]:
        workload()
    else:
        main(Path(sys.argv[1]))
