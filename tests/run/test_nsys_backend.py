"""The Nsight Systems backend without a GPU: the report loader on real reports
(recorded by tests/data/record_nsys.sh), checked against `nsys stats` and the
workloads' construction; finding nsys; the re-run under a stand-in nsys."""

import contextlib
import csv
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers.nsys import FAKE_NSYS, NSYS, alive, executable, patience, run, start, stop, unpack
from pytest_gpuprof.capture.nsys import check_report, find_nsys
from pytest_gpuprof.errors import GpuprofError, TraceError
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.trace.kineto import load_kineto
from pytest_gpuprof.trace.nsys_sqlite import for_range, load_nsys

DATA = Path(__file__).parents[1] / "data"
STEPS = 4


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The committed reports, unpacked: {workload: path of its .sqlite}."""
    folder = tmp_path_factory.mktemp("nsys")
    return {name: unpack(name, folder) for name in ("overlap", "sync", "graph")}


def stats(workload, report):
    with open(NSYS / f"{workload}_{report}.csv", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("workload", ["overlap", "sync", "graph"])
def test_kernel_totals_equal_nsys_stats_to_the_nanosecond(reports, workload):
    kernels = load_nsys(reports[workload]).kernels
    dur = kernels["end"] - kernels["start"]
    ours = dur.groupby(kernels["name"].astype(str)).agg(["count", "sum", "min", "max"])
    rows = stats(workload, "cuda_gpu_kern_sum")
    assert sorted(ours.index) == sorted(r["Name"] for r in rows)
    for r in rows:
        count, total, low, high = ours.loc[r["Name"]]
        assert (count, total, low, high) == (
            int(r["Instances"]), int(r["Total Time (ns)"]), int(r["Min (ns)"]), int(r["Max (ns)"]))


@pytest.mark.parametrize("workload", ["overlap", "sync"])
def test_memcpy_totals_equal_nsys_stats(reports, workload):
    copies = load_nsys(reports[workload]).copies
    words = {"htod": "Host-to-Device", "dtoh": "Device-to-Host", "dtod": "Device-to-Device"}
    times = {r["Operation"]: r for r in stats(workload, "cuda_gpu_mem_time_sum")}
    sizes = {r["Operation"]: r for r in stats(workload, "cuda_gpu_mem_size_sum")}
    assert len(times) == len(sizes) == copies["kind"].nunique()
    for kind, rows in copies.groupby(copies["kind"].astype(str), observed=True):
        op = f"[CUDA memcpy {words[kind]}]"
        assert len(rows) == int(times[op]["Count"]) == int(sizes[op]["Count"])
        assert int((rows["end"] - rows["start"]).sum()) == int(times[op]["Total Time (ns)"])
        # nsys prints sizes in MB (1e6 bytes) with three decimals
        assert f"{rows['bytes'].sum() / 1e6:.3f}" == sizes[op]["Total (MB)"]


def test_metrics_follow_the_workloads_construction(reports):
    m = measure(load_nsys(reports["overlap"]))
    assert m.step_source == "step_N" and list(m.steps["name"]) == [f"step_{i}" for i in range(STEPS)]
    assert m.per_step["kernel_count"] == [9] * STEPS  # 8 matmuls and an add
    assert m.per_step["memcpy_htod_bytes"] == [16 * 2**20] * STEPS
    assert m.metrics["overlap_efficiency"] > 0.9
    s = measure(load_nsys(reports["sync"]))
    assert s.per_step["sync_count"] == [2] * STEPS  # .item()'s stream sync and a device sync
    assert s.per_step["memcpy_dtoh_bytes"] == [4] * STEPS


def test_cuda_graph_kernels_are_traced_node_by_node_and_belong_to_their_step(reports):
    """record_traces.py's graph workload: a 3-kernel graph replayed twice plus one eager
    kernel per step.  Recorded with --cuda-graph-trace=node, each graph kernel is a row
    whose correlation id is its cudaGraphLaunch call's."""
    trace = load_nsys(reports["graph"])
    m = measure(trace)
    assert m.per_step["kernel_count"] == [7] * STEPS
    calls = trace.runtime.assign(name=trace.runtime["name"].astype(str))
    graph_launches = calls[calls["name"].str.startswith("cudaGraphLaunch")]
    in_steps = graph_launches[[any(s <= t <= e for s, e in zip(m.steps["start"], m.steps["end"]))
                               for t in graph_launches["start"]]]
    assert len(in_steps) == 2 * STEPS
    from_graphs = trace.kernels[trace.kernels["correlation"].isin(in_steps["correlation"])]
    assert len(from_graphs) == 3 * 2 * STEPS
    counts = sorted(row["count"] for row in m.metrics["kernels"].values())
    assert counts == [2 * STEPS, 2 * STEPS, 3 * STEPS]  # mul_, sin; add_ in the graph and eager


@pytest.mark.parametrize("workload", ["overlap", "sync", "graph"])
def test_counts_agree_with_the_torch_profiler_trace_of_the_same_workload(reports, workload):
    nsys = measure(load_nsys(reports[workload]))
    torch = measure(load_kineto(DATA / f"{workload}.pt.trace.json.gz"))
    for key in ("kernel_count", "memcpy_htod_count", "memcpy_htod_bytes", "memcpy_dtoh_count",
                "memcpy_dtoh_bytes", "memset_count", "sync_count", "step_count"):
        assert nsys.metrics[key] == torch.metrics[key], key


@pytest.mark.parametrize("workload", ["overlap", "sync", "graph"])
def test_host_speed_readings_follow_the_reports_own_rows(reports, workload):
    """Read with sqlite3 alone: the gpuprof domain's step_N ranges, and per step the first
    quartile (index floor(0.25 (n - 1)) of the sorted durations) of the kernel-launch
    runtime calls starting in it (nsys spells them with a version, cudaLaunchKernel_v7000)."""
    with contextlib.closing(sqlite3.connect(reports[workload])) as db:
        domain = db.execute("SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'gpuprof'").fetchone()[0]
        steps = sorted(db.execute(
            "SELECT n.start, n.end FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
            "WHERE n.domainId = ? AND s.value GLOB 'step_[0-9]*'", (domain,)))
        calls = db.execute("SELECT r.start, r.end, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                           "JOIN StringIds s ON s.id = r.nameId").fetchall()
    launches = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
    expected = []
    for first, last in steps:
        durations = sorted(e - b for b, e, name in calls if name.split("_v")[0] in launches and first <= b <= last)
        expected.append(round(durations[(len(durations) - 1) // 4] / 1000, 3) if durations else None)
    assert len(steps) == 4 and any(expected)
    assert measure(load_nsys(reports[workload])).per_step["launch_call_us"] == expected


def test_ranges_of_other_domains_are_not_steps(reports):
    trace = load_nsys(reports["sync"])
    names = set(trace.ranges["name"].astype(str))
    assert {"sync", "warmup", "step_0", "step_3"} <= names
    assert not any(n.startswith("step_10") for n in names)  # other_library's step_100..103


def test_a_test_range_is_cut_out_of_a_session_report(reports):
    trace = load_nsys(reports["overlap"])
    part = measure(for_range(trace, "overlap"))
    assert part.metrics["kernel_count"] == 9 * STEPS
    with pytest.raises(TraceError, match="no NVTX range named 'missing'"):
        for_range(trace, "missing")


def test_not_a_report_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.sqlite"
    bad.write_text("not sqlite")
    with pytest.raises(TraceError, match=str(bad)):
        load_nsys(bad)


def test_analyze_prints_the_same_metric_keys_for_a_report(reports):
    import json

    out = subprocess.run([sys.executable, "-m", "pytest_gpuprof", "analyze", str(reports["sync"]), "--json"],
                         capture_output=True, text=True, check=True)
    k = subprocess.run([sys.executable, "-m", "pytest_gpuprof", "analyze", str(DATA / "sync.pt.trace.json.gz"),
                        "--json"], capture_output=True, text=True, check=True)
    assert sorted(json.loads(out.stdout)["metrics"]) == sorted(json.loads(k.stdout)["metrics"])


# --- finding nsys -------------------------------------------------------------

def test_nsys_is_found_by_option_then_environment_then_path(tmp_path, monkeypatch):
    opt, env, on_path = (executable(tmp_path / d / "nsys") for d in ("opt", "env", "path"))
    monkeypatch.setenv("GPUPROF_NSYS", str(env))
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert find_nsys(str(opt)) == opt
    assert find_nsys(None) == env
    monkeypatch.delenv("GPUPROF_NSYS")
    assert find_nsys(None) == on_path


def test_missing_nsys_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("GPUPROF_NSYS", raising=False)
    with pytest.raises(GpuprofError) as err:
        find_nsys(None)
    text = str(err.value)
    for place in ("--gpuprof-nsys-path (not set)", "$GPUPROF_NSYS (not set)", "PATH",
                  "/opt/nvidia/nsight-systems/*/bin/nsys", "/usr/local/cuda/bin/nsys",
                  "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys"):
        assert place in text


def test_a_path_given_that_is_no_executable_is_an_error_naming_it(tmp_path, monkeypatch):
    """Not another nsys found instead: the one asked for would silently not be the one run."""
    monkeypatch.setenv("PATH", str(executable(tmp_path / "path" / "nsys").parent))
    monkeypatch.setenv("GPUPROF_NSYS", str(tmp_path / "typo"))
    with pytest.raises(GpuprofError, match=rf"^--gpuprof-nsys-path={tmp_path}/nope: not an executable file"):
        find_nsys(str(tmp_path / "nope"))
    with pytest.raises(GpuprofError, match=rf"^\$GPUPROF_NSYS={tmp_path}/typo: not an executable file"):
        find_nsys(None)
    monkeypatch.setenv("GPUPROF_NSYS", "nsys")  # a command name: found on PATH
    assert find_nsys(None) == tmp_path / "path" / "nsys"


def test_a_capture_left_as_qdstrm_reports_the_importers_words(tmp_path):
    report = tmp_path / "session.nsys-rep"
    report.with_suffix(".qdstrm").write_text("raw")
    tail = "Generating '/tmp/x.qdstrm'\nImporter error status: libdw.so.1: cannot open shared object file"
    with pytest.raises(GpuprofError, match="(?s)only .*session.qdstrm.*libdw.so.1: cannot open shared object file"):
        check_report(report, tail)


# --- the re-run, with a stand-in for nsys -------------------------------------

SUITE = textwrap.dedent("""\
    import os, time
    import pytest

    def test_plain():
        assert os.environ.get("GPUPROF_NSYS_INNER")   # runs inside the re-executed session

    @pytest.mark.gpuprof
    def test_profiled():
        pass

    def test_fails_when_asked():
        assert not os.environ.get("MAKE_IT_FAIL")

    def test_waits_when_asked():
        if os.environ.get("HANG"):
            with open(os.environ["HANG"] + ".tmp", "w") as fh:
                fh.write(str(os.getpid()))
            os.replace(os.environ["HANG"] + ".tmp", os.environ["HANG"])  # never seen half-written
            time.sleep(float(os.environ["HANG_S"]))
""")


@pytest.fixture
def suite(pytester, tmp_path):
    pytester.makepyfile(test_suite=SUITE)
    fake = executable(tmp_path / "bin" / "nsys", FAKE_NSYS.format(python=sys.executable))
    log = tmp_path / "nsys.log"
    env = {"NSYS_FAKE_LOG": str(log)}
    return pytester, fake, log, env


def wait_until(condition, what):
    deadline = time.monotonic() + patience()
    while not condition():
        assert time.monotonic() < deadline, f"{what} (waited {patience():.0f} s)"
        time.sleep(0.1)


def test_the_session_reruns_under_nsys_with_the_same_outcomes(suite):
    pytester, fake, log, env = suite
    done = run(pytester, fake, env)
    assert done.returncode == 0, done.stdout + done.stderr
    logged = log.read_text()
    for arg in ("--trace=cuda,nvtx,osrt", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node",
                "--capture-range=cudaProfilerApi"):
        assert arg in logged
    out = done.stdout
    assert "gpuprof: re-running this session under Nsight Systems" in out
    assert "3 passed, 1 skipped" in out  # the inner session's own report, streamed
    assert "PytestAssertRewriteWarning" not in out  # the plugin was imported before pytest (seen on H200s)
    assert "no CUDA GPU available" in out
    assert "gpuprof (nsys backend)" in out
    assert not list((pytester.path / ".gpuprof" / "nsys").iterdir())  # nothing kept unless asked


def test_a_failing_test_inside_gives_the_same_exit_status(suite):
    pytester, fake, log, env = suite
    done = run(pytester, fake, {**env, "MAKE_IT_FAIL": "1"})
    assert done.returncode == 1
    assert "1 failed, 2 passed, 1 skipped" in done.stdout


def test_repeated_runs_never_share_a_report_name(suite):
    pytester, fake, log, env = suite
    run(pytester, fake, env, "-k", "plain")
    time.sleep(1.1)
    run(pytester, fake, env, "-k", "plain")
    names = [line.split(" -o ")[1].split()[0] for line in log.read_text().splitlines()]
    assert len(names) == 2 and names[0] != names[1]


def test_ctrl_c_stops_nsys_and_the_session_under_it(suite, tmp_path):
    pytester, fake, log, env = suite
    pidfile, output = tmp_path / "inner.pid", tmp_path / "outer.log"
    # the inner test sleeps past every wait below, so that only the interrupt can end it
    env = {**env, "HANG": str(pidfile), "HANG_S": str(3 * patience())}
    with open(output, "w") as out:
        outer = start(pytester, fake, env, "-k", "waits", stdout=out, stderr=subprocess.STDOUT)
    inner = None
    try:
        wait_until(lambda: pidfile.exists() or outer.poll() is not None, "the inner test never started")
        assert pidfile.exists(), f"the inner test never started:\n{output.read_text()}"
        inner = int(pidfile.read_text())
        outer.send_signal(signal.SIGINT)
        outer.wait(timeout=patience())
        out = output.read_text()
        assert outer.returncode == 2, out  # pytest's "interrupted"
        assert "interrupted; nsys and the session under it were stopped" in out
        wait_until(lambda: not alive(inner), "the inner session outlived the interrupt")
    finally:
        stop(outer, inner)


def test_a_relative_nsys_path_is_taken_from_where_pytest_was_started(suite):
    pytester, fake, log, env = suite
    (pytester.path / "tools").mkdir()
    local = executable(pytester.path / "tools" / "nsys", fake.read_text())
    done = run(pytester, "./tools/nsys", env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert f"re-running this session under Nsight Systems ({local})" in done.stdout


# Stands in for nsys whose session under it ended without its results: it writes a damaged
# file where the session would write them, or says why it failed and writes none.
NSYS_WITHOUT_RESULTS = textwrap.dedent("""\
    #!{python}
    import os, sys
    if os.environ.get("NSYS_FAKE_DAMAGED"):
        with open(os.environ["GPUPROF_NSYS_INNER"], "w") as fh:
            fh.write('{{"tests": [')
        sys.exit(0)
    print("nsys: the importer failed")
    sys.exit(3)
""")


@pytest.mark.parametrize("damaged", [True, False])
def test_a_session_under_nsys_that_left_no_readable_results_is_an_error_naming_the_file(tmp_path, monkeypatch,
                                                                                        damaged):
    """A results file the session under nsys left damaged (killed while writing it) is said
    with its path, as a missing one is with how the session ended (it was a traceback)."""
    from helpers.session import session_settings
    from pytest_gpuprof.run.nsys_backend import run_outer

    fake = executable(tmp_path / "bin" / "nsys", NSYS_WITHOUT_RESULTS.format(python=sys.executable))
    if damaged:
        monkeypatch.setenv("NSYS_FAKE_DAMAGED", "1")
    settings = session_settings(tmp_path, backend="nsys", nsys_path=str(fake))
    with pytest.raises(GpuprofError) as err:
        run_outer(settings, ["-q"], tmp_path)
    results = next((tmp_path / "nsys").glob("session-*.tests.json"), None)
    if damaged:
        assert results is not None
        assert str(err.value).startswith(f"the session under nsys's results cannot be read: {results}: Expecting")
    else:
        assert results is None
        assert re.fullmatch(rf"the session under nsys measured nothing \(no results document\): "
                            rf"{tmp_path}/nsys/session-[0-9-]+\.tests\.json; it ended with exit 3:\n"
                            "nsys: the importer failed", str(err.value))


def test_a_test_that_left_its_steps_loop_unfinished_is_an_error_as_under_torch(tmp_path):
    from helpers.session import session_settings
    from pytest_gpuprof.run.backends import UNFINISHED_LOOP
    from pytest_gpuprof.run.nsys_backend import NsysReportBackend

    settings = session_settings(tmp_path, backend="nsys")
    backend = NsysReportBackend(tmp_path / "session.nsys-rep", None, None, {"test_a.py::test_broke_out": None})
    judged = settings.judge().judge("test_a.py::test_broke_out", {},
                                    lambda: {0: backend.trace("test_a.py::test_broke_out")})
    assert (judged.result.status, judged.result.message) == ("error", UNFINISHED_LOOP)
    assert judged.result.failed and judged.entry is None


# --- a distributed test's ranks inside nsys ---------------------------------------------

DIST = "test_dist.py::test_ddp"


def test_a_rank_inside_nsys_leaves_the_capture_range_to_its_tests_session(tmp_path, monkeypatch):
    """The first cudaProfilerStop ends nsys's capture (--capture-range-end=stop): a rank that
    closed a range of its own would end every rank's (seen on two H200s: a second process's
    range was not recorded).  The rank's backend calls neither; its test's session does."""
    import torch

    from pytest_gpuprof.run.backends import NsysInnerBackend

    calls = []
    monkeypatch.setattr(torch.cuda.profiler, "start", lambda: calls.append("start"))
    monkeypatch.setattr(torch.cuda.profiler, "stop", lambda: calls.append("stop"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    rank = NsysInnerBackend(tmp_path / "rank0.json", owns_capture=False)
    rank.start()
    rank.finish([{"nodeid": DIST, "marker": {}, "completed": True}], 0, None, {})
    assert calls == [] and json.loads((tmp_path / "rank0.json").read_text())["pid"] == os.getpid()
    session = NsysInnerBackend(tmp_path / "session.json")
    session.start()
    session.start()  # one range for the whole session
    session.finish([], 0, None, {})
    assert calls == ["start", "stop"]


def test_a_distributed_test_is_handed_to_the_outer_session_with_each_ranks_process(tmp_path):
    from pytest_gpuprof.run.nsys_backend import nsys_ranks
    from pytest_gpuprof.run.rank_processes import RankOutcome

    folder = tmp_path / "t.ranks"
    folder.mkdir()
    for rank, pid, completed in ((0, 4101, True), (1, 4102, True)):
        (folder / f"rank{rank}.json").write_text(json.dumps(
            {"tests": [{"nodeid": DIST, "marker": {}, "completed": completed}], "pid": pid}))
    outcomes = [RankOutcome(r, "passed", "", folder / f"rank{r}.json") for r in (1, 0)]  # the first to end first
    assert nsys_ranks(DIST, {"world_size": 2}, outcomes) == {
        "nodeid": DIST, "marker": {"world_size": 2}, "completed": True, "unfinished": [],
        "ranks": {"0": 4101, "1": 4102}}
    assert not folder.exists()  # read once: the outer session needs only the processes


def test_a_rank_that_named_no_process_fails_the_test_naming_the_rank(tmp_path):
    from pytest_gpuprof.run.nsys_backend import nsys_ranks
    from pytest_gpuprof.run.rank_processes import RankOutcome

    folder = tmp_path / "t.ranks"
    folder.mkdir()
    (folder / "rank0.json").write_text(json.dumps({"tests": [{"nodeid": DIST, "completed": False}], "pid": 4101}))
    outcomes = [RankOutcome(r, "passed", "", folder / f"rank{r}.json") for r in (0, 1)]
    with pytest.raises(GpuprofError, match=r"^rank 1 measured nothing \(no results document\): .*rank1\.json$"):
        nsys_ranks(DIST, {}, outcomes)
    assert not folder.exists()
    (folder).mkdir()
    (folder / "rank0.json").write_text(json.dumps({"tests": [{"nodeid": DIST, "completed": False}], "pid": 4101}))
    (folder / "rank1.json").write_text(json.dumps({"tests": [{"nodeid": DIST, "completed": True}], "pid": 4102}))
    assert nsys_ranks(DIST, {}, outcomes)["unfinished"] == [0]  # one rank left its loop unfinished
    folder.mkdir()
    (folder / "rank0.json").write_text("{damaged")
    with pytest.raises(GpuprofError, match=r"^rank 0's results cannot be read: .*rank0\.json: Expecting"):
        nsys_ranks(DIST, {}, outcomes)
