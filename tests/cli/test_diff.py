"""``gpuprof diff A B`` on real H200 traces and on results files of the example suite."""

import gzip
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.run.kept_traces import trace_name
from pytest_gpuprof.trace.kineto import load_kineto

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TRACES = ROOT / "example_suite" / "traces"
MOE = "example_suite/test_moe.py::test_moe_forward"
GOOD = TRACES / trace_name(MOE)
ITEM = DATA / "planted" / "item" / trace_name(MOE)

SYNC_LINE = "sync_count: baseline 0, current 8 (+8) [regressed; rule: must match exactly per step (lower is better)]"
RATIOS = ("gpu_utilization", "copy_utilization", "overlap_efficiency", "sync_wait_fraction")
DTOH_LINE = "memcpy_dtoh_count: baseline 0, current 8 (+8) [changed; rule: must match exactly per step]"


def diff(*args):
    return subprocess.run([sys.executable, "-m", "pytest_gpuprof", "diff", *map(str, args)],
                          capture_output=True, text=True)


def plugin_failure_lines(replay: Path) -> list[str]:
    """The broken-metric lines the plugin prints for the MoE test replayed from ``replay``,
    each less the words of its marker threshold (a threshold of the marker is the plugin's
    only): the lines the diff prints for the metrics broken against the baseline."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "example_suite"), "--rootdir", str(ROOT), "-p", "no:cacheprovider",
         f"--gpuprof-replay={replay}", "-k", "test_moe"], capture_output=True, text=True, cwd=replay)
    lines = out.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("gpuprof: ") and "metric(s) broke" in line)
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ") or lines[i].startswith("  ("))
    against_baseline = [re.sub(r"^(\S+): current \S+ violates threshold [^;]*(; |$)", r"\1: ", line[2:])
                        for line in lines[start + 1:end]]
    return [line for line in against_baseline if not line.endswith(": ")]


def test_planted_item_trace_regresses_naming_sync_and_dtoh_copies(tmp_path):
    out = diff(GOOD, ITEM)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert SYNC_LINE in [line.strip() for line in lines]
    assert DTOH_LINE in [line.strip() for line in lines]
    head = next(i for i, line in enumerate(lines) if "metric(s) broke" in line)
    count = int(lines[head].split()[0])
    assert lines[head] == f"{count} metric(s) broke on NVIDIA H200 (baseline {GOOD}):"
    assert all(line.startswith("  ") for line in lines[head + 1:head + 1 + count])
    assert not lines[head + 1 + count].startswith("  ")  # the header counts the lines under it
    # the same words as the plugin's failure message: the committed baseline is the good trace
    shutil.copyfile(ITEM, tmp_path / ITEM.name)
    gated = plugin_failure_lines(tmp_path)
    assert SYNC_LINE in gated
    for line in gated:
        # times and ratios: the plugin also weighs the baseline's recorded runs, which a trace lacks
        metric = line.split(":")[0]
        if not metric.endswith("time_us") and metric not in ("window_us", *RATIOS):
            assert f"  {line}" in lines, line
    assert out.stdout.rstrip().endswith("regression: a metric broke (exit 1)")


def test_a_trace_without_a_gpu_name_is_said_to_run_on_an_unknown_gpu(tmp_path):
    """``gpuprof diff`` of a trace whose header names no GPU: never ``None``."""
    with gzip.open(GOOD, "rt") as fh:
        doc = json.load(fh)
    del doc["deviceProperties"]
    nameless = tmp_path / "nameless.pt.trace.json.gz"
    with gzip.open(nameless, "wt") as fh:
        json.dump(doc, fh)
    out = diff(GOOD, nameless)
    assert out.returncode == 0, out.stdout + out.stderr  # the same steps: nothing changed
    assert "None" not in out.stdout
    assert "note: A ran on NVIDIA H200, B on unknown GPU (" in out.stdout
    assert f"B (current):  {nameless} (unknown GPU, " in out.stdout


def kernel_rows(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("kernels, per step"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("  ") or line.startswith("  ..."):
            break
        rows.append(line.split(None, 6))
    return rows


def test_kernel_table_lists_new_and_changed_kernels_biggest_first():
    out = diff(GOOD, ITEM)
    rows = kernel_rows(out.stdout)
    assert [r[0] for r in rows] == ["new", "new", "count"]
    assert [r[1:3] for r in rows] == [["n/a", "8"], ["n/a", "8"], ["1", "9"]]
    deltas = [abs(float(r[5])) for r in rows]
    assert deltas == sorted(deltas, reverse=True)
    assert "reduce_kernel" in rows[0][6] and "compare_scalar_kernel" in rows[2][6]
    assert "(3 changed, 23 unchanged)" in out.stdout


def test_reversed_the_fix_improves_syncs_and_the_kernels_vanish():
    out = diff(ITEM, GOOD, "--top", "1")
    assert out.returncode == 1  # a changed count per step is a changed program, either way
    assert ("sync_count: baseline 8, current 0 (-100.0%) [improved; rule: must match exactly per step "
            "(lower is better)]") in out.stdout
    rows = kernel_rows(out.stdout)
    assert len(rows) == 1 and rows[0][0] == "vanished" and rows[0][2] == "n/a"
    assert "... 2 more changed kernel(s) (--top 0 shows all)" in out.stdout


def test_identical_inputs_exit_0():
    out = diff(GOOD, GOOD)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no metric broke or improved" in out.stdout
    assert "kernels: no kernel new, vanished or changed (24 compared)" in out.stdout
    assert out.stdout.rstrip().endswith("no regression (exit 0)")


def test_tolerance_options_work_like_the_plugins():
    assert "  memcpy_dtoh_time_us: baseline 0 µs, current 12." in diff(GOOD, ITEM).stdout
    wide = diff(GOOD, ITEM, "--time-floor-us", "20", "--threshold", "sync_count == 0")
    assert "memcpy_dtoh_time_us" not in wide.stdout  # 12.8 us per step is under the floor now
    assert "sync_count: current 8 violates threshold sync_count == 0" in wide.stdout
    ok = diff(GOOD, GOOD, "--threshold", "gpu_utilization >= 0.99")
    per_step = measure(load_kineto(GOOD)).per_step  # thresholds hold for the median step (no stall here)
    assert not any(per_step["stalled"])
    util = f"{statistics.median(per_step['gpu_utilization']):.1%}"  # a ratio as a percentage
    assert ok.returncode == 1 and f"gpu_utilization: current {util} violates threshold" in ok.stdout
    bad = diff(GOOD, GOOD, "--threshold", "nonsense >= 1")
    assert bad.returncode == 2 and "--threshold" in bad.stderr


def test_trace_against_an_nsys_report_compares_counts_only(tmp_path):
    report = tmp_path / "sync.sqlite"
    report.write_bytes(gzip.decompress((DATA / "nsys" / "sync.sqlite.gz").read_bytes()))
    out = diff(DATA / "sync.pt.trace.json.gz", report)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "only counts and bytes are compared" in out.stdout
    assert "kernels, per step" not in out.stdout  # kernel names are spelled differently


# --- results files ------------------------------------------------------------

@pytest.fixture(scope="module")
def results(tmp_path_factory, item_replay):
    """results.json of the example suite: all good traces, and with the planted .item() (the
    run's one such replay, tests/conftest.py)."""
    out = tmp_path_factory.mktemp("results")
    replay = out / "good"
    replay.mkdir()
    for trace in TRACES.glob("*.json.gz"):
        shutil.copyfile(trace, replay / trace.name)
    subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "example_suite"), "--rootdir", str(ROOT),
                    "-p", "no:cacheprovider", f"--gpuprof-replay={replay}", f"--gpuprof-json={out / 'good.json'}"],
                   capture_output=True, cwd=out)
    files = {"good": out / "good.json", "item": item_replay[0] / "results.json"}
    assert all(f.is_file() for f in files.values())
    return files


def test_results_files_are_compared_test_by_test(results):
    out = diff(results["good"], results["item"])
    assert out.returncode == 1, out.stdout + out.stderr
    sections = out.stdout.split("=== ")[1:]
    assert [s.split(" ===")[0] for s in sections][0] == MOE  # the regression first
    assert len(sections) == 6 + 2 * 2  # the six single-GPU tests, each rank of the two distributed ones
    assert SYNC_LINE in sections[0] and DTOH_LINE in sections[0]
    assert all("no metric broke or improved" in s for s in sections[1:])


def test_results_files_judge_times_on_their_samples_as_the_plugin_does(results, tmp_path):
    def dtoh_time(out):
        return next(line.strip() for line in out.stdout.splitlines() if line.strip().startswith("memcpy_dtoh_time_us:"))

    line = dtoh_time(diff(results["good"], results["item"], "--test", MOE))
    assert "[regressed; rule: median per step" in line and " vs baseline 0 µs (IQR 0–0 µs, n=10); " in line
    assert "Mann-Whitney U p=" in line
    # a results file written before samples were kept: times compared per step from the totals
    doc = json.loads(results["item"].read_text())
    for t in doc["tests"]:
        del t["per_step"], t["distribution"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    line = dtoh_time(diff(results["good"], old, "--test", MOE))
    assert line.endswith("[regressed; rule: within ±10% per step (changes under 5 µs ignored)]")


def test_same_results_file_exits_0(results):
    out = diff(results["item"], results["item"])
    assert out.returncode == 0 and out.stdout.count("no metric broke or improved") == 6 + 2 * 2


def test_results_file_against_a_trace_needs_one_test(results):
    out = diff(GOOD, results["item"])
    assert out.returncode == 2
    assert str(results["item"]) in out.stderr and "--test" in out.stderr
    out = diff(GOOD, results["item"], "--test", MOE)
    assert out.returncode == 1 and SYNC_LINE in out.stdout
    out = diff(results["good"], ITEM, "--test", "example_suite/test_cnn.py::test_cnn_train_step")
    assert out.returncode == 1 and "kernel_count: baseline 172, current 95" in out.stdout


def test_a_test_that_errored_in_b_is_a_regression(results, tmp_path):
    doc = json.loads(results["good"].read_text())
    doc["tests"][0].update(status="error", metrics=None, message="cannot read trace x.json.gz")
    doc["tests"][0]["facts"]["error"] = True  # a document's facts decide a test's status
    broken = tmp_path / "errored.json"
    broken.write_text(json.dumps(doc))
    out = diff(results["good"], broken)
    assert out.returncode == 1
    assert "B has no metrics (error): gpuprof: cannot read trace x.json.gz" in out.stdout
    assert diff(broken, results["good"]).returncode == 0  # nothing to compare against: not judged


# --- bad input ----------------------------------------------------------------

def bad_files(tmp_path):
    missing = tmp_path / "missing.json"
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": "world"}))
    future = tmp_path / "future.json"
    future.write_text(json.dumps({"schema_version": 99, "tests": []}))
    no_id = tmp_path / "no_id.json"
    no_id.write_text(json.dumps({"schema_version": 1, "tests": [{"status": "passed"}]}))
    gz = tmp_path / "truncated.pt.trace.json.gz"
    gz.write_bytes(ITEM.read_bytes()[:5000])
    return [missing, broken, other, future, no_id, gz]


@pytest.mark.parametrize("which", range(6), ids=["missing", "not-json", "other-json", "schema-version",
                                                  "no-nodeid", "truncated-gzip"])
@pytest.mark.parametrize("side", ["A", "B"])
def test_bad_input_exits_2_naming_the_file(tmp_path, which, side):
    bad = bad_files(tmp_path)[which]
    out = diff(bad, GOOD) if side == "A" else diff(GOOD, bad)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.startswith("gpuprof: ") and str(bad) in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_kernel_names_reach_the_terminal_escaped(tmp_path):
    """A name from a trace may hold a line break or a terminal's control sequence: shown escaped."""
    text = gzip.decompress(ITEM.read_bytes()).decode()
    hostile = text.replace('"name": "void at::native::reduce_kernel',
                           '"name": "\\n\\u001b[2Jvoid at::native::reduce_kernel')
    assert hostile != text
    (tmp_path / "item.json").write_text(hostile)
    out = diff(GOOD, tmp_path / "item.json")
    assert out.returncode == 1, out.stderr
    assert "\x1b" not in out.stdout
    assert [line for line in out.stdout.splitlines() if "reduce_kernel" in line] == [
        line for line in out.stdout.splitlines() if "\\n\\x1b[2Jvoid at::native::reduce_kernel" in line]


def test_a_results_file_that_is_not_json_is_refused_from_its_first_bytes(tmp_path):
    """gpuprof diff and merge read results files: a sparse GiB of zeros is refused, naming it,
    without reading it whole (memory stays far below the file's size)."""
    import tracemalloc

    from pytest_gpuprof.cli.inputs import read_results
    from pytest_gpuprof.errors import GpuprofError

    zeros = tmp_path / "zeros.json"
    with open(zeros, "wb") as fh:
        fh.truncate(1 << 30)
    tracemalloc.start()
    try:
        with pytest.raises(GpuprofError, match=f"{zeros} is neither a results file .* not valid JSON"):
            read_results(zeros)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


@pytest.mark.parametrize("args, said", [
    (["--kernel-time-tolerance", "nan"], "argument --kernel-time-tolerance: expected a finite number, got 'nan'"),
    (["--ratio-tolerance", "inf"], "argument --ratio-tolerance: expected a finite number, got 'inf'"),
    (["--top", "-1"], "argument --top: must not be negative, got -1"),
])
def test_a_rule_option_out_of_range_is_a_usage_error(args, said):
    out = diff(str(ITEM), str(ITEM), *args)
    assert out.returncode == 2 and out.stderr.splitlines()[-1] == f"gpuprof diff: error: {said}"
