"""Nsight Compute's counters without a GPU: a real report (tests/data/record_ncu.py, an H100)
read through ncu's CSV and through NVIDIA's ncu_report module, the per-kernel counters and
memory_bandwidth_utilization checked against the report's own numbers, worked out here."""

import csv
import json
import lzma
import sys
from pathlib import Path

import pytest

from pytest_gpuprof.cli.main import main
from pytest_gpuprof.errors import TraceError
from pytest_gpuprof.metrics.counters import kernel_counters, memory_bandwidth_utilization
from pytest_gpuprof.trace.ncu import COUNTERS, WHOLE, read_ncu_csv, read_ncu_report

DATA = Path(__file__).parent / "data" / "ncu"
CSV = DATA / "small.raw.csv"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ncu") / "small.ncu-rep"
    path.write_bytes(lzma.decompress((DATA / "small.ncu-rep.xz").read_bytes()))
    return path


def cells() -> list[dict[str, str]]:
    """The CSV's launches as the csv module reads them (header row, units row, launches)."""
    rows = list(csv.reader(CSV.open()))
    return [dict(zip(rows[0], row)) for row in rows[2:]]


def number(text: str) -> float:
    return float(text.replace(",", ""))


def test_the_csv_page_is_read_cell_for_cell():
    launches = read_ncu_csv(CSV)
    raw = cells()
    assert len(launches) == len(raw) == 3
    for (_, row), cell in zip(launches.iterrows(), raw):
        assert row["kernel"] == cell["Kernel Name"] and row["id"] == int(cell["ID"])
        assert row["step"] == "step_1"  # the one range ncu was told to profile
        for key, metric in COUNTERS.items():
            assert row[key] == number(cell[metric]), metric
    assert launches["time_ns"].tolist() == [26208, 41696, 138944]  # integer nanoseconds
    assert all(str(launches[key].dtype) == "int64" for key in WHOLE)


def test_the_report_read_by_nvidias_module_holds_what_ncu_printed(report):
    pytest.importorskip("ncu_report")
    from_report, from_csv = read_ncu_report(report), read_ncu_csv(CSV)
    assert from_report["id"].tolist() == from_csv["id"].tolist()
    assert from_report["step"].tolist() == from_csv["step"].tolist()
    for key in COUNTERS:
        if key in WHOLE:
            assert from_report[key].tolist() == from_csv[key].tolist(), key
        elif key.endswith("_pct"):  # ncu prints percentages to two decimals
            assert from_report[key].round(2).tolist() == from_csv[key].tolist(), key
        else:
            assert from_report[key].tolist() == pytest.approx(from_csv[key].tolist(), abs=0.01), key
    # one kernel, whatever demangler names it: the report's mangled name, the CSV's demangled one
    assert [n.startswith("_Z") for n in from_report["kernel"]] == [False, True, True]
    assert from_report["kernel"][0] == from_csv["kernel"][0] == "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"


def test_memory_bandwidth_utilization_is_dram_bytes_over_the_peak_times_the_kernels_time():
    # the three launches' numbers as ncu printed them: DRAM bytes; 1280 bytes a DRAM cycle at
    # peak, at each launch's DRAM cycles a second, over its duration in ns
    moved = 8_411_648 + 113_683_712 + 122_065_920
    possible = 1280 * (2_615_262_515.26 * 26_208 + 2_615_963_161.93 * 41_696 + 2_618_148_318.75 * 138_944) / 1e9
    assert memory_bandwidth_utilization(read_ncu_csv(CSV)) == pytest.approx(moved / possible, abs=1e-6)
    # one launch alone is ncu's own dram__throughput (% of peak sustained elapsed), to its print
    gelu = read_ncu_csv(CSV).iloc[[1]]
    assert memory_bandwidth_utilization(gelu) == pytest.approx(81.43 / 100, abs=0.0005)


def test_each_kernel_has_its_counters_median_min_and_max_heaviest_first():
    counters = kernel_counters(read_ncu_csv(CSV))
    names = list(counters)
    assert [counters[n]["time_us"]["median"] for n in names] == [138.944, 41.696, 26.208]
    gemm = counters["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"]
    assert gemm["launches"] == 1 and gemm["registers_per_thread"] == {"median": 168, "min": 168, "max": 168}
    assert gemm["tensor_pipe_pct"]["median"] == 81.81 and gemm["local_memory_bytes"]["median"] == 0
    # several launches of one kernel: the median and the spread
    twice = read_ncu_csv(CSV)
    twice.loc[2, ["kernel", "time_ns"]] = [twice.loc[1, "kernel"], 51696]
    gelu = kernel_counters(twice)[twice.loc[1, "kernel"]]
    assert gelu["launches"] == 2 and gelu["time_us"] == {"median": 46.696, "min": 41.696, "max": 51.696}


def test_analyze_prints_a_report_and_its_json(report, capsys):
    pytest.importorskip("ncu_report")
    assert main(["analyze", str(report), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["memory_bandwidth_utilization"] == memory_bandwidth_utilization(read_ncu_csv(CSV))
    assert len(doc["kernels"]) == 3
    assert main(["analyze", str(CSV)]) == 0
    out = capsys.readouterr().out
    assert "memory_bandwidth_utilization 0.3523 (35.23%)" in out
    assert "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT" in out.splitlines()[-1]


def test_bad_input_is_an_error_naming_the_file_and_the_fix(tmp_path, monkeypatch):
    text = CSV.read_text()
    no_kernel = tmp_path / "plain.csv"
    no_kernel.write_text("a,b\n1,2\n")
    with pytest.raises(TraceError, match=rf"^{no_kernel} is not Nsight Compute's raw CSV page"):
        read_ncu_csv(no_kernel)
    lacking = tmp_path / "lacking.csv"
    lacking.write_text(text.replace('"launch__registers_per_thread"', '"launch__something_else"'))
    with pytest.raises(TraceError, match=r"lacks the metric\(s\) launch__registers_per_thread: profile with --metrics"):
        read_ncu_csv(lacking)
    header, units, first, *rest = text.splitlines()
    damaged = tmp_path / "damaged.csv"
    at = next(i for i, h in enumerate(next(csv.reader([header]))) if h == "gpu__time_duration.sum")
    row = next(csv.reader([first]))
    row[at] = "n/a"
    damaged.write_text("\n".join([header, units, ",".join(f'"{c}"' for c in row), *rest]) + "\n")
    with pytest.raises(TraceError, match=rf"^{damaged}, line 3: gpu__time_duration.sum is 'n/a', not a number$"):
        read_ncu_csv(damaged)
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # not installed
    with pytest.raises(TraceError, match=r"install NVIDIA's reader \(pip install 'pytest-gpuprof\[ncu\]'"):
        read_ncu_report(tmp_path / "x.ncu-rep")
