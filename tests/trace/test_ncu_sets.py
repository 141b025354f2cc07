"""Nsight Compute reports made the ways users make them (tests/data/record_ncu_sets.py, an
H200: ncu's default set, ``--set full``, gpuprof's own ``--metrics``) read as they are: each
kernel's duration, DRAM bytes and registers as ncu's own CSV page of the report says,
worked out here from its cells; what a report cannot give null, said once.  Each other way
of working a counter out (trace/ncu_report.py's ``COUNTERS``) is checked against the first on the
same launches (tests/data/record_ncu_alternatives.py)."""

import csv
import json
import lzma
import math
from pathlib import Path

import pytest

from pytest_gpuprof.cli.main import main
from pytest_gpuprof.errors import GpuprofError, TraceError
from pytest_gpuprof.metrics.counters import kernel_counters, memory_bandwidth_utilization, not_computed
from pytest_gpuprof.report.names import function_name
from pytest_gpuprof.trace.ncu_report import read_ncu_csv, read_ncu_report

DATA = Path(__file__).parents[1] / "data" / "ncu"
SETS = ("default", "full", "gpuprof")
#: What each report lacks the metrics of (docs/metrics.md, "Inside the kernels"): the default
#: set holds no DRAM bytes, local-memory traffic, hit rates, tensor pipe over active cycles nor
#: dram__throughput; --set full all but dram__throughput (it holds gpu__dram_throughput, another
#: quantity); gpuprof's list everything.
GAPS = {"default": {"dram_throughput_pct", "dram_bytes", "local_memory_bytes", "l1_hit_rate_pct", "l2_hit_rate_pct",
                    "tensor_pipe_pct", "memory_bandwidth_utilization"},
        "full": {"dram_throughput_pct"},
        "gpuprof": set()}


def cells(path: Path) -> list[dict[str, str]]:
    """The launches of ncu's CSV page as the csv module reads them (header, units, launches)."""
    rows = list(csv.reader(path.open()))
    return [dict(zip(rows[0], row)) for row in rows[2:]]


def number(text: str) -> float:
    return float(text.replace(",", ""))


def expected(cell: dict[str, str]) -> dict:
    """A launch's duration in us, DRAM bytes (read and written: dram__bytes.sum, else its
    two parts; None in neither) and registers, from its cells."""
    if "dram__bytes.sum" in cell:
        dram = int(number(cell["dram__bytes.sum"]))
    elif "dram__bytes_read.sum" in cell:
        dram = int(number(cell["dram__bytes_read.sum"]) + number(cell["dram__bytes_write.sum"]))
    else:
        dram = None
    return {"time_us": number(cell["gpu__time_duration.sum"]) / 1000, "dram_bytes": dram,
            "registers_per_thread": int(number(cell["launch__registers_per_thread"]))}


def held(doc: dict) -> dict[str, dict]:
    """Each kernel of ``gpuprof analyze --json``, by its function, with the medians compared."""
    return {k["function"]: {"launches": k["launches"], **{c: k[c]["median"] for c in
                                                          ("time_us", "dram_bytes", "registers_per_thread")}}
            for k in doc["kernels"].values()}


def by_csv(name: str) -> dict[str, dict]:
    return {function_name(c["Kernel Name"]): {"launches": 1, **expected(c)} for c in cells(DATA / f"{name}.raw.csv")}


def analyzed(capsys, *args: str) -> dict:
    assert main(["analyze", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sets")
    for name in SETS:
        (folder / f"{name}.ncu-rep").write_bytes(lzma.decompress((DATA / f"{name}.ncu-rep.xz").read_bytes()))
    return {name: folder / f"{name}.ncu-rep" for name in SETS}


@pytest.mark.parametrize("name", SETS)
def test_analyze_gives_each_kernel_what_the_report_holds_and_names_the_rest_once(name, capsys):
    doc = analyzed(capsys, str(DATA / f"{name}.raw.csv"))
    assert held(doc) == by_csv(name)
    assert set(doc["not_computed"]) == GAPS[name]
    for kernel in doc["kernels"].values():  # null, each statistic, where the report cannot give it
        assert {c for c, v in kernel.items() if isinstance(v, dict) and v["median"] is None} == \
            GAPS[name] - {"memory_bandwidth_utilization"}
    assert (doc["memory_bandwidth_utilization"] is None) == ("memory_bandwidth_utilization" in GAPS[name])
    assert main(["analyze", str(DATA / f"{name}.raw.csv")]) == 0
    out = capsys.readouterr().out.splitlines()
    for gap in GAPS[name]:  # once for the report, not once per kernel
        assert sum(line.startswith(f"  {gap} needs ") for line in out) == 1, gap
    assert ("not computed (n/a above): the report lacks the metrics they need" in out) == bool(GAPS[name])


def test_the_default_sets_gaps_name_every_way_to_fill_them(capsys):
    lacking = analyzed(capsys, str(DATA / "default.raw.csv"))["not_computed"]
    assert lacking["dram_bytes"] == ["dram__bytes.sum (or dram__bytes_read.sum + dram__bytes_write.sum)"]
    assert lacking["local_memory_bytes"] == [
        "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum (or l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum x 32)",
        "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum (or l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum x 32)"]
    # the bandwidth: only what the report lacks of what it needs (it holds durations and DRAM clocks)
    assert lacking["memory_bandwidth_utilization"] == [
        "dram__bytes.sum (or dram__bytes_read.sum + dram__bytes_write.sum)", "dram__bytes.sum.peak_sustained"]


def test_the_full_sets_bandwidth_is_its_dram_bytes_read_and_written_over_the_peak():
    launches = cells(DATA / "full.raw.csv")
    moved = sum(number(c["dram__bytes_read.sum"]) + number(c["dram__bytes_write.sum"]) for c in launches)
    possible = sum(number(c["dram__bytes.sum.peak_sustained"]) * number(c["dram__cycles_elapsed.avg.per_second"])
                   * number(c["gpu__time_duration.sum"]) / 1e9 for c in launches)
    assert memory_bandwidth_utilization(read_ncu_csv(DATA / "full.raw.csv")) == pytest.approx(moved / possible,
                                                                                            abs=1e-6)


@pytest.mark.parametrize("name", SETS)
def test_a_report_read_by_nvidias_module_holds_what_its_csv_page_says(name, reports, capsys):
    pytest.importorskip("ncu_report")
    from_report, from_csv = read_ncu_report(reports[name]), read_ncu_csv(DATA / f"{name}.raw.csv")
    assert from_report.isna().equals(from_csv.isna())  # the same counters given, and the same missing
    doc = analyzed(capsys, str(reports[name]))
    assert held(doc) == by_csv(name) and set(doc["not_computed"]) == GAPS[name]


def test_each_other_way_gives_what_the_first_gives_on_the_same_launches(tmp_path):
    """The report holds both ways of every counter: hidden, each first way's metric (renamed
    in the header) leaves the other to give the counter, on launches that read and wrote
    DRAM and loaded and stored local memory, full warps and a partial one."""
    source = DATA / "alternatives.raw.csv"
    both = read_ncu_csv(source)
    firsts = ("dram__bytes.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
              "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum")
    header, rest = source.read_text().split("\n", 1)
    for metric in firsts:
        header = header.replace(f'"{metric}"', f'"hidden {metric}"')
    others = tmp_path / "others.csv"
    others.write_text(header + "\n" + rest)
    other = read_ncu_csv(others)
    raw = cells(source)
    for key, metric in zip(("dram_bytes", "local_load_bytes", "local_store_bytes"), firsts):
        assert other[key].tolist() == both[key].tolist() == [int(number(c[metric])) for c in raw], key
    assert (both["local_load_bytes"] > 0).sum() == (both["local_store_bytes"] > 0).sum() == 2
    assert sum(number(c["dram__bytes_read.sum"]) > 0 and number(c["dram__bytes_write.sum"]) > 0 for c in raw) >= 3


def test_a_csv_in_ncus_display_units_is_refused_naming_the_column_and_its_unit(capsys):
    units = DATA / "default.units.csv"
    assert next(csv.reader(units.open()))[:5] == next(csv.reader((DATA / "default.raw.csv").open()))[:5]
    with pytest.raises(TraceError, match=rf"^{units}: gpu__time_duration.sum is in 'us', not 'ns': print the report "
                                         r"in ncu's base units \(ncu --import REPORT --csv --page raw --print-units "
                                         r"base"):
        read_ncu_csv(units)
    assert main(["analyze", str(units)]) == 2
    assert "gpu__time_duration.sum is in 'us'" in capsys.readouterr().err


def test_a_counter_one_launch_lacks_is_null_for_its_kernel_and_the_bandwidth():
    launches = read_ncu_csv(DATA / "gpuprof.raw.csv")
    launches.loc[2, "kernel"] = launches.loc[1, "kernel"]  # the GeLU twice
    launches.loc[2, "dram_bytes"] = math.nan  # one of its launches could not give its DRAM bytes
    counters = kernel_counters(launches)
    gelu = counters[launches.loc[1, "kernel"]]
    assert gelu["launches"] == 2 and gelu["dram_bytes"] == {"median": None, "min": None, "max": None}
    assert gelu["registers_per_thread"]["median"] is not None  # (31 and 18: a median of two)
    assert counters[launches.loc[0, "kernel"]]["dram_bytes"]["median"] == 8_410_112  # the GEMM's own
    assert memory_bandwidth_utilization(launches) is None
    assert not_computed(launches) == {
        "dram_bytes": ["dram__bytes.sum (or dram__bytes_read.sum + dram__bytes_write.sum)"],
        "memory_bandwidth_utilization": ["dram__bytes.sum (or dram__bytes_read.sum + dram__bytes_write.sum)"]}


@pytest.mark.gpu
@pytest.mark.parametrize("name", SETS)
def test_analyze_prints_a_report_through_ncu_as_its_committed_csv_page_says(name, reports, capsys):
    """On a machine with Nsight Compute: the report printed by ncu itself (no NVIDIA module)."""
    from pytest_gpuprof.capture.nsight_compute import find_ncu

    try:
        ncu = find_ncu(None)
    except GpuprofError:
        pytest.skip("needs Nsight Compute (ncu) to print a report")
    doc = analyzed(capsys, str(reports[name]), "--ncu", str(ncu))
    assert held(doc) == by_csv(name) and set(doc["not_computed"]) == GAPS[name]
    from_csv = analyzed(capsys, str(DATA / f"{name}.raw.csv"))
    assert doc["memory_bandwidth_utilization"] == from_csv["memory_bandwidth_utilization"]
