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
from pytest_gpuprof.trace.ncu_report import COUNTERS, WHOLE, read_ncu_csv, read_ncu_report

DATA = Path(__file__).parents[1] / "data" / "ncu"
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
        for key, ways in COUNTERS.items():  # the report holds each counter's first way: one metric
            (metric,) = ways[0].metrics
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
    assert "memory_bandwidth_utilization 35.2%:" in out  # 0.352334 as a percentage
    assert "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT" in out.splitlines()[-1]


def test_bad_input_is_an_error_naming_the_file_and_the_fix(tmp_path, monkeypatch):
    text = CSV.read_text()
    no_kernel = tmp_path / "plain.csv"
    no_kernel.write_text("a,b\n1,2\n")
    with pytest.raises(TraceError, match=rf"^{no_kernel} is not Nsight Compute's raw CSV page"):
        read_ncu_csv(no_kernel)
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


# --- a test's kernels profiled under ncu (run/kernel_profiling.py), with a stand-in for ncu ----------

FAKE_NCU = """#!{python}
# Stands in for ncu: `ncu --import REPORT ...` prints the committed report's CSV page;
# `ncu ... -o NAME COMMAND...` logs its arguments, runs COMMAND as ncu would and writes NAME.ncu-rep,
# or says what a machine without counter permission says.
import os, subprocess, sys
args = sys.argv[1:]
if args[0] == "--import":
    sys.stdout.write(open(os.environ["NCU_FAKE_CSV"]).read())
    sys.exit(0)
with open(os.environ["NCU_FAKE_LOG"], "w") as log:
    log.write("\\n".join(args))
if os.environ.get("NCU_FAKE_DENY"):
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
name = args[args.index("-o") + 1]
command = args[args.index("-o") + 2:]
code = subprocess.call(command)
if not os.environ.get("NCU_FAKE_NONE"):
    open(name + ".ncu-rep", "w").write("report")
else:
    print("==WARNING== No kernels were profiled.")
sys.exit(code)
"""

CHILD = """
import os, time

def test_under_ncu():
    with open("child.txt", "w") as fh:
        fh.write(os.environ.get("GPUPROF_NSYS_INNER", ""))
    if os.environ.get("CHILD_HANGS"):
        with open("child.pid", "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(600)
"""


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    ncu = tmp_path / "bin" / "ncu"
    ncu.parent.mkdir()
    ncu.write_text(FAKE_NCU.format(python=sys.executable))
    ncu.chmod(0o755)
    (tmp_path / "test_child.py").write_text(CHILD)
    monkeypatch.setenv("NCU_FAKE_CSV", str(CSV))
    monkeypatch.setenv("NCU_FAKE_LOG", str(tmp_path / "ncu.log"))
    return ncu


# a test's metrics' kernels, as measure() keeps them (not by time): the heaviest are the copy,
# the GeLU and the GEMM
HEAVIEST = {"void at::native::reduce_kernel<512, 1>(...)": {"count": 10, "time_us": 50.0},
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT": {"count": 10, "time_us": 262.1},
            "void at::native::elementwise_kernel<128, 2, (lambda)>(int, (lambda))": {"count": 10, "time_us": 1389.4},
            "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(...)>(int, ...)":
                {"count": 10, "time_us": 417.0}}


def test_a_tests_heaviest_kernels_of_its_first_step_are_profiled_and_read_back(tmp_path, fake_ncu):
    from pytest_gpuprof.run.kernel_profiling import NcuPlan, profile_kernels

    got = profile_kernels("test_child.py::test_under_ncu", HEAVIEST, NcuPlan(), fake_ncu, tmp_path,
                          ["--gpuprof-active=2"], timeout_s=120)
    args = (tmp_path / "ncu.log").read_text().splitlines()
    assert args[:4] == ["--clock-control", "none", "--nvtx", "--nvtx-include"]
    assert args[4] == "gpuprof@step_0"  # a process-wide range
    assert args[args.index("-k") + 1] == "regex:^(elementwise_kernel|vectorized_elementwise_kernel|" \
                                         "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT)$"  # the 3 heaviest
    assert args[args.index("--launch-count") + 1] == "50"
    command = args[args.index("-o") + 2:]
    assert command[1:4] == ["-m", "pytest", "test_child.py::test_under_ncu"]
    assert "--gpuprof-nsys" in command and "--gpuprof-active=2" in command  # NVTX only, the test's steps
    assert (tmp_path / "child.txt").read_text().endswith("inner.json")  # it ran, as a session inside a profiler
    launches = read_ncu_csv(CSV)
    assert got["memory_bandwidth_utilization"] == memory_bandwidth_utilization(launches)
    functions = {name[:12]: row.pop("function") for name, row in got["kernels"].items()}
    assert functions == {"nvjet_sm90_t": "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",  # as ncu -k matches them
                         "void at::vec": "vectorized_elementwise_kernel", "void at::ele": "elementwise_kernel"}
    assert got["kernels"] == kernel_counters(launches)
    assert got["profiled"].startswith("step_0, kernels regex:^(elementwise_kernel|")
    assert got["profiled"].endswith(", 3 launch(es)")
    assert "-n0" not in command and "--junitxml" in " ".join(command)  # no xdist here; its own JUnit file


def test_ncu_without_counter_permission_or_without_a_kernel_says_why(tmp_path, fake_ncu, monkeypatch):
    from pytest_gpuprof.errors import GpuprofError
    from pytest_gpuprof.run.kernel_profiling import NcuPlan, profile_kernels

    monkeypatch.setenv("NCU_FAKE_DENY", "1")
    with pytest.raises(GpuprofError, match=r"ERR_NVGPUCTRPERM\): run the tests as root, or let every user read them"):
        profile_kernels("test_child.py::test_under_ncu", HEAVIEST, NcuPlan(), fake_ncu, tmp_path, [], 120)
    monkeypatch.delenv("NCU_FAKE_DENY")
    monkeypatch.setenv("NCU_FAKE_NONE", "1")
    with pytest.raises(GpuprofError,
                       match=r"^ncu profiled no kernel of step_0: ==WARNING== No kernels were profiled\.$"):
        profile_kernels("test_child.py::test_under_ncu", HEAVIEST, NcuPlan(step=0), fake_ncu, tmp_path, [], 120)


def test_a_report_of_the_test_without_a_metric_gpuprof_judges_is_an_error_naming_it(tmp_path, fake_ncu, monkeypatch):
    """ncu was asked for every counter's metric (METRICS): one it did not give would leave a
    gate unchecked, so the counters are not taken (the session notes the error)."""
    from pytest_gpuprof.errors import GpuprofError
    from pytest_gpuprof.run.kernel_profiling import NcuPlan, profile_kernels

    monkeypatch.setenv("NCU_FAKE_CSV", str(DATA / "full.raw.csv"))  # --set full: no dram__throughput
    with pytest.raises(GpuprofError,
                       match=r"^ncu's report of the test lacks metrics gpuprof judges: "
                             r"dram_throughput_pct needs dram__throughput.avg.pct_of_peak_sustained_elapsed$"):
        profile_kernels("test_child.py::test_under_ncu", HEAVIEST, NcuPlan(), fake_ncu, tmp_path, [], 120)


def test_kernels_are_chosen_by_function_name_as_ncu_matches_them():
    from pytest_gpuprof.errors import GpuprofError
    from pytest_gpuprof.report.names import function_name
    from pytest_gpuprof.run.kernel_profiling import NcuPlan, kernel_filter

    assert function_name("void (anonymous namespace)::softmax_warp_forward<float, 10>(float*, int)") == \
        "softmax_warp_forward"
    assert function_name("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)") == "ncclDevKernel_SendRecv"
    assert function_name("_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastIZZZNS0_23direct_"
                         "copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE5_clEvEUlfE_EEvS4_RKT_EUliE_"
                         "EEviT1_") == "elementwise_kernel"  # a mangled name, demangled first
    # two kernels of one function count once; a plan's own expression wins
    by_time = {"y": {"time_us": 1.0}, "void a::k<1>(int)": {"time_us": 9.0}, "z": {"time_us": 5.0},
               "void b::k<2>(int)": {"time_us": 7.0}}
    assert kernel_filter(NcuPlan(top=2), by_time) == "regex:^(k|z)$"
    assert kernel_filter(NcuPlan(kernels="gemm|gelu"), HEAVIEST) == "regex:gemm|gelu"
    with pytest.raises(GpuprofError, match="no kernel to profile under ncu"):
        kernel_filter(NcuPlan(), {})


def test_the_counters_travel_with_the_result_and_the_terminal_shows_them():
    from pytest_gpuprof.compare.evaluate import TestResult
    from pytest_gpuprof.report.terminal import ncu_lines

    launches = read_ncu_csv(CSV)
    counters = {"memory_bandwidth_utilization": memory_bandwidth_utilization(launches),
                "kernels": kernel_counters(launches), "profiled": "step_0, kernels regex:^(a)$", "seconds": 9.5}
    doc = TestResult("t.py::t", counters=counters).to_json()
    assert json.loads(json.dumps(doc))["counters"] == counters
    assert TestResult.from_json(doc).counters == counters
    lines = ncu_lines(doc)
    assert lines[0] == "Nsight Compute (step_0, kernels regex:^(a)$): memory_bandwidth_utilization 35.2%"
    # 26.208 us to 4 significant digits
    assert lines[3] == ("  nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT: 26.21 µs, DRAM 9.59%, SM 70.81%, "
                        "occupancy 14.14%, 168 registers, 0 B local (1 launch(es))")
    assert ncu_lines(TestResult("t.py::t").to_json()) == []


def test_the_marker_chooses_the_plan():
    from pytest_gpuprof.run.kernel_profiling import NcuPlan, ncu_plan

    assert ncu_plan({}, every=False) is None and ncu_plan({}, every=True) == NcuPlan()
    assert ncu_plan({"ncu": False}, every=True) is None  # a test left out of --gpuprof-ncu
    assert ncu_plan({"ncu": True}, every=False) == NcuPlan()
    assert ncu_plan({"ncu": {"top": 1, "step": 2, "launches": 5}}, every=False) == NcuPlan(top=1, step=2, launches=5)


@pytest.mark.parametrize("bad", [1, "yes", {"top": 0}, {"top": True}, {"kernels": 3}, {"kernels": " "}, {"steps": 1},
                                 {"step": -1}, {"launches": 0}])
def test_a_bad_ncu_marker_argument_names_what_it_takes(bad):
    from types import SimpleNamespace

    from pytest_gpuprof.capture.marker import read_marker
    from pytest_gpuprof.errors import ConfigError

    marker = SimpleNamespace(args=(), kwargs={"ncu": bad})
    item = SimpleNamespace(nodeid="t.py::t", get_closest_marker=lambda name: marker)
    with pytest.raises(ConfigError,
                       match=r"^@pytest.mark.gpuprof on t.py::t: ncu must be True, False or a dict of top"):
        read_marker(item)


def test_a_csv_without_its_id_column_or_with_a_bad_cell_is_a_clear_error(tmp_path):
    text = CSV.read_text().replace('"ID",', '"Launch",', 1)
    no_id = tmp_path / "no_id.csv"
    no_id.write_text(text)
    with pytest.raises(TraceError, match=r"no 'ID' and 'Kernel Name' columns in its first row"):
        read_ncu_csv(no_id)
    assert main(["analyze", str(no_id)]) == 2  # said, not a traceback


def test_ncu_past_its_time_is_stopped_with_the_test_under_it(tmp_path, fake_ncu, monkeypatch):
    import os
    import time

    from pytest_gpuprof.errors import GpuprofError
    from pytest_gpuprof.run.kernel_profiling import NcuPlan, profile_kernels

    monkeypatch.setenv("CHILD_HANGS", "1")
    with pytest.raises(GpuprofError, match=r"^ncu ran over 5 s \(--gpuprof-confirm-timeout\) and was stopped, with the "
                                           r"test under it$"):
        profile_kernels("test_child.py::test_under_ncu", HEAVIEST, NcuPlan(), fake_ncu, tmp_path, [], timeout_s=5)
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the test's process {child} outlived ncu's timeout")


def test_a_workers_result_goes_to_the_controller_as_it_is_when_the_test_ends(tmp_path):
    """Under pytest-xdist: the counters are set after the test is judged (and sent)."""
    from types import SimpleNamespace

    from helpers.session import session_settings
    from pytest_gpuprof.compare.evaluate import TestResult
    from pytest_gpuprof.run.outcomes import Outcomes
    from pytest_gpuprof.run.xdist_relay import Inbox, Outbox

    outbox = Outbox()
    worker = Outcomes(session_settings(tmp_path), None, relay=outbox.send)
    result = TestResult("t.py::t")
    worker.add_result(result)
    result.counters = {"memory_bandwidth_utilization": 0.5, "kernels": {}, "profiled": "step_0", "seconds": 1.0}
    hook = outbox.pytest_runtest_makereport(None, None)
    next(hook)
    report = SimpleNamespace()
    with pytest.raises(StopIteration):
        hook.send(report)
    controller = Outcomes(session_settings(tmp_path), None)
    Inbox(controller).pytest_runtest_logreport(report)
    assert controller.results[0].counters == result.counters


@pytest.mark.parametrize("side, process_wide", [("ncu", True), ("rank", False), (None, False)])
def test_only_the_process_ncu_profiles_opens_each_step_as_a_process_wide_range(tmp_path, monkeypatch, side,
                                                                                process_wide):
    """ncu's filter gpuprof@step_N (no slash) selects start/end ranges: the child process that
    profile_kernels starts (GPUPROF_SIDE=ncu) must open them; nsys's inner sessions not."""
    from pytest_gpuprof.capture.profiler import StepPlan
    from pytest_gpuprof.compare.rules import Rules
    from pytest_gpuprof.run.nsys_backend import NsysInnerSession
    from pytest_gpuprof.run.role import SIDE, this_process
    from pytest_gpuprof.run.settings import Settings

    if side is None:
        monkeypatch.delenv(SIDE, raising=False)
    else:
        monkeypatch.setenv(SIDE, side)
    settings = Settings(update_baseline=False, strict=False, baseline_dir=tmp_path, output_dir=tmp_path,
                        keep_traces=False, replay_dir=None, plan=StepPlan(), rules=Rules(),
                        nsys_inner=tmp_path / "inner.json", process=this_process())
    prof = NsysInnerSession(settings).backend.profiler("t.py::t", StepPlan())
    assert prof._process_steps is process_wide
