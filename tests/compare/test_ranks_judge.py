"""A distributed test judged as one (compare/distributed.py), on real two-GPU traces recorded on
two H100s (tests/data/ranks, tests/data/record_ranks.py): each rank's communication metrics
worked out by hand from the raw trace, both backends' counts per rank, every rank against
its own baseline entry, the skew against the recorded runs', and the entry's checks."""

import copy
import dataclasses
import gzip
import json
import re
import sqlite3
import statistics
from pathlib import Path

import pytest

from helpers.naive import Naive
from pytest_gpuprof.compare import baseline
from pytest_gpuprof.compare import entry as entries
from pytest_gpuprof.compare.baseline import BaselineFile
from pytest_gpuprof.compare.distributed import SKEW_SPREADS, as_one, combine, judge_skew, rank_entry, rank_rules
from pytest_gpuprof.compare.evaluate import Measured, TestResult, evaluate
from pytest_gpuprof.compare.recording import new_distributed_entry
from pytest_gpuprof.compare.rules import Rules, parse_threshold
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.metrics.skew import rank_skew
from pytest_gpuprof.report.words import failure_message
from pytest_gpuprof.trace.kineto import load_kineto
from pytest_gpuprof.trace.nsys_sqlite import cuda_processes, load_nsys

DATA = Path(__file__).parents[1] / "data" / "ranks"
WORKLOADS = ("ddp", "moe")
#: The rules a test is judged by when it sets none (Rules is frozen: one instance serves every call).
DEFAULT_RULES = Rules()


def trace(workload: str, rank: int) -> Path:
    return DATA / f"{workload}_rank{rank}.pt.trace.json.gz"


@pytest.fixture(scope="module")
def measured():
    return {w: {r: measure(load_kineto(trace(w, r))) for r in (0, 1)} for w in WORKLOADS}


def judged(ms, entry, rules=DEFAULT_RULES, update=False):
    runs = {r: Measured.of(m, "torch") for r, m in ms.items()}
    ranks = {r: evaluate(runs[r], m, rank_entry(entry, r), rank_rules(rules), update=update) for r, m in ms.items()}
    skew = rank_skew(ms)
    return TestResult.of("t.py::test_d", as_one(runs, skew), combine(ranks, skew, entry, rules, update))


def recorded(ms, runs=1):
    entry = None
    for _ in range(runs):
        entry = json.loads(json.dumps(new_distributed_entry(judged(ms, entry, update=True), entry, 3)[0]))
    return entry


# --- each rank's communication, worked out from the raw trace ------------------------

@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("rank", (0, 1))
def test_communication_metrics_match_a_hand_reading_of_the_trace(measured, workload, rank):
    naive = Naive(trace(workload, rank))
    comm = [(s, e) for name, s, e, _, _ in naive.kernels if name.startswith("nccl")]
    others = [(s, e) for name, s, e, _, _ in naive.all_kernels if not name.startswith("nccl")]
    union = naive.union(comm, float("-inf"), float("inf"))
    hidden = sum(max(0, min(e, oe) - max(s, os_)) for s, e in union
                 for os_, oe in naive.union(others, float("-inf"), float("inf")))
    union_ns = sum(e - s for s, e in union)
    m = measured[workload][rank].metrics
    assert m["comm_kernel_count"] == len(comm) > 0
    assert m["comm_time_us"] == pytest.approx(sum(e - s for s, e in comm) / 1000, abs=1e-3)
    assert m["exposed_comm_us"] == pytest.approx((union_ns - hidden) / 1000, abs=1e-3)
    assert m["comm_compute_overlap"] == pytest.approx(hidden / union_ns, abs=1e-6)
    # by construction: DDP all-reduces each of its 8 layers' gradients a step, the MoE layer
    # sends its tokens to the experts and back (one all-to-all each way)
    assert m["comm_kernel_count"] == {"ddp": 8, "moe": 2}[workload] * m["step_count"]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_rank_skew_is_worked_out_from_each_ranks_step_annotations(measured, workload):
    medians = []
    for rank in (0, 1):
        naive = Naive(trace(workload, rank))
        starts = [s for s, _ in naive.steps] + [naive.w[1]]
        medians.append(statistics.median(b - a for a, b in zip(starts, starts[1:])))
    mean = sum(medians) / 2
    assert rank_skew(measured[workload]) == pytest.approx((max(medians) - mean) / mean, abs=1e-6)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_both_backends_count_the_same_on_every_rank(workload, tmp_path):
    """One nsys report held both ranks' processes, recorded beside the Kineto traces."""
    report = tmp_path / f"{workload}.sqlite"
    report.write_bytes(gzip.decompress((DATA / f"{workload}.sqlite.gz").read_bytes()))
    processes = dict(cuda_processes(report))  # pid -> the device of most of its work
    assert len(processes) == 2
    with sqlite3.connect(report) as db:  # which process ran on which GPU, read here: its kernels' device
        device = {pid: db.execute("SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE "
                                  "(globalPid >> 24) & 0xFFFFFF = ?", (pid,)).fetchall() for pid in processes}
    assert {pid: rows for pid, rows in device.items()} == {pid: [(d,)] for pid, d in processes.items()}
    by_rank = {d: pid for pid, d in processes.items()}  # one process a GPU: its device is its rank
    assert sorted(by_rank) == [0, 1]
    counts = [k for k, v in measure(load_kineto(trace(workload, 0))).metrics.items() if k.endswith("_count")]
    for rank, pid in by_rank.items():
        nsys = measure(load_nsys(report, process=pid)).metrics
        torch = measure(load_kineto(trace(workload, rank))).metrics
        assert {k: nsys[k] for k in counts} == {k: torch[k] for k in counts}, rank


# --- judged as one test -------------------------------------------------------------

def test_each_rank_is_judged_against_its_own_entry_and_named(measured):
    ms = measured["ddp"]
    entry = recorded(ms)
    again = judged(ms, entry)
    assert again.status == "passed" and sorted(again.ranks) == ["0", "1"]
    assert {v.rank for v in again.verdicts} == {None, 0, 1}  # the skew's, then each rank's
    # rank 1's entry recorded one kernel fewer a step: only rank 1 fails, and says so
    edited = copy.deepcopy(entry)
    own = edited["ranks"]["1"]
    own["metrics"]["kernel_count"] -= own["metrics"]["step_count"]
    own["per_step"]["kernel_count"] = [n - 1 for n in own["per_step"]["kernel_count"]]
    for run in own["runs"]:
        run["per_step"]["kernel_count"] = [n - 1 for n in run["per_step"]["kernel_count"]]
    broken = judged(ms, edited)
    assert broken.status == "failed" and broken.ranks["0"].status == "passed" and broken.ranks["1"].status == "failed"
    [v] = [v for v in broken.verdicts if v.failed]
    assert (v.rank, v.metric, v.baseline, v.current) == (1, "kernel_count", 85, 86)
    assert "  rank 1 kernel_count: baseline 85, current 86 (+1.2%) [changed; rule: must match exactly per step]" \
        in failure_message(broken).splitlines()


def test_a_threshold_must_hold_on_every_rank(measured):
    ms = measured["ddp"]
    overlaps = [m.metrics["comm_compute_overlap"] for m in ms.values()]
    between = (min(overlaps) + max(overlaps)) / 2  # one rank above it, the other below
    rules = Rules(thresholds=(parse_threshold(f"comm_compute_overlap >= {between}", "test"),))
    result = judged(ms, None, rules)
    low = overlaps.index(min(overlaps))
    broken = [(v.rank, v.metric) for v in result.verdicts if v.failed]
    assert result.status == "failed" and broken == [(low, "comm_compute_overlap")]


def test_the_skew_is_judged_against_the_recorded_runs_spread():
    rules = Rules()
    entry = {"rank_skew": [0.02, 0.05, 0.03]}
    tolerance = rules.ratio_tolerance
    assert max(tolerance, SKEW_SPREADS * 0.03) == pytest.approx(0.09)
    [ok] = judge_skew(0.05 + 0.09 - 1e-6, entry, rules, update=False)
    [bad] = judge_skew(0.05 + 0.09 + 1e-6, entry, rules, update=False)
    assert ok.status == "ok" and bad.status == "regressed" and bad.baseline == 0.05
    assert "recorded runs' rank_skew: 0.02, 0.05, 0.03" in bad.evidence
    # two recorded runs that agree: the ratio tolerance alone
    [two] = judge_skew(0.02 + tolerance + 1e-6, {"rank_skew": [0.02, 0.02]}, rules, update=False)
    assert two.status == "regressed"
    # one recorded run says nothing of the spread: an unchanged four-H200 run went 0.386 -> 0.576
    [one] = judge_skew(0.576, {"rank_skew": [0.386]}, rules, update=False)
    assert one.status == "ok" and one.rule.startswith("not compared: one recorded run cannot say")
    assert (one.baseline, one.current) == (0.386, 0.576)
    # a threshold on the skew is the test's, not a rank's
    rules = Rules(thresholds=(parse_threshold("rank_skew <= 0.1", "test"),))
    assert rank_rules(rules).thresholds == ()
    [threshold] = judge_skew(0.2, None, rules, update=True)
    assert threshold.status == "threshold"


def test_recording_twice_keeps_both_runs_per_rank_and_their_skews(measured):
    ms = measured["moe"]
    entry = recorded(ms, runs=2)
    assert entry["rank_skew"] == [rank_skew(ms)] * 2
    assert all(len(entry["ranks"][r]["runs"]) == 2 for r in ("0", "1"))
    entries.check_entry(entry)


@pytest.mark.parametrize("edit, where", [
    (lambda e: e.update(ranks={}), "ranks must be an object of an entry per rank"),
    (lambda e: e["ranks"].update(one=e["ranks"]["0"]), "ranks must be an object of an entry per rank"),
    (lambda e: e["ranks"]["1"]["metrics"].update(kernel_count=-1), "ranks.1.metrics.kernel_count must be"),
    (lambda e: e.update(rank_skew=[]), "rank_skew must be a non-empty list"),
    (lambda e: e.update(rank_skew=[float("nan")]), "rank_skew must be a non-empty list"),
    # one rank (gpuprof writes none): it judged the test run in one process as if its metrics were rank_skew alone
    (lambda e: e.update(ranks={"0": e["ranks"]["0"]}, world_size=1), "ranks must be the entries of two ranks or more"),
])
def test_a_damaged_distributed_entry_is_refused_naming_the_part(measured, edit, where, tmp_path):
    entry = recorded(measured["moe"])
    edit(entry)
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"schema_version": 1, "tests": {"t.py::test_d": {"GPU": entry}}}))
    with pytest.raises(baseline.BaselineError, match=where):
        BaselineFile(path).entry("t.py::test_d", "GPU")


# --- collectives ---------------------------------------------------------------------

@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("rank", (0, 1))
def test_collectives_are_the_record_param_comms_calls_of_the_steps(measured, workload, rank):
    """Each ``record_param_comms`` CPU op in a profiled step, read from the raw JSON: its
    collective and its input's bytes (elements times the dtype's size)."""
    with gzip.open(trace(workload, rank), "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("name") == "record_param_comms"]
    naive = Naive(trace(workload, rank))
    calls = [e["args"] for e in events if naive.step_of(round(e["ts"] * 1000)) is not None]
    size = {"BFloat16": 2, "Float": 4}
    expected = {}
    for args in calls:
        name = {"allreduce": "all_reduce", "all_to_allv": "all_to_all"}[args["Collective name"]]
        row = expected.setdefault(name, {"count": 0, "bytes": 0})
        row["count"] += 1
        row["bytes"] += args["In msg nelems"] * size[args["dtype"]]
    assert measured[workload][rank].metrics["collectives"] == expected
    # by construction: DDP all-reduces each layer's 32 MiB of bf16 gradients (4096 x 4096), the
    # MoE layer sends 8 experts x 1280 slots x 1024 bf16 values each way
    steps = measured[workload][rank].metrics["step_count"]
    assert expected == {"ddp": {"all_reduce": {"count": 8 * steps, "bytes": 8 * steps * 4096 * 4096 * 2}},
                        "moe": {"all_to_all": {"count": 2 * steps, "bytes": 2 * steps * 8 * 1280 * 1024 * 2}}}[workload]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_nccl_nvtx_ranges_count_the_same_collectives(workload, tmp_path):
    """nsys records each call as a range of NCCL's own NVTX domain (``ncclAllReduce``), without its size."""
    report = tmp_path / f"{workload}.sqlite"
    report.write_bytes(gzip.decompress((DATA / f"{workload}.sqlite.gz").read_bytes()))
    for pid, device in cuda_processes(report):
        nsys = measure(load_nsys(report, process=pid)).metrics["collectives"]
        torch = measure(load_kineto(trace(workload, device))).metrics["collectives"]
        assert {n: r["count"] for n, r in nsys.items()} == {n: r["count"] for n, r in torch.items()}
        assert all(r["bytes"] is None for r in nsys.values())


def test_a_collective_changed_is_a_changed_count_on_its_rank(measured):
    ms = measured["moe"]
    entry = recorded(ms)
    own = entry["ranks"]["0"]["metrics"]["collectives"]
    own["all_to_all"]["bytes"] //= 2  # recorded with half the tokens sent
    own["all_reduce"] = {"count": own["all_to_all"]["count"], "bytes": 4096}  # and one all-reduce a step more
    result = judged(ms, entry)
    broken = sorted((v.rank, v.metric, v.baseline, v.current) for v in result.verdicts if v.failed)
    sent = ms[0].metrics["collectives"]["all_to_all"]["bytes"] / ms[0].metrics["step_count"]
    assert broken == [(0, "collectives[all_reduce].count", 2.0, 0.0),
                      (0, "collectives[all_to_all].bytes", sent / 2, sent)]
    assert "  rank 0 collectives[all_reduce].count: baseline 2, current 0 (-100.0%) [changed; rule: count per step " \
           "must match exactly]" in failure_message(result).splitlines()


def test_an_entry_of_another_number_of_processes_judges_nothing(measured):
    from pytest_gpuprof.compare.distributed import entry_for

    entry = recorded(measured["moe"])
    assert entry["world_size"] == 2 and entry_for(entry, 2) == (entry, "")
    for size, recorded_with in ((1, 2), (4, 2)):
        none, why = entry_for(entry, size)
        assert none is None and f"recorded with {recorded_with} process(es) (world_size), this run has {size}" in why
    single = {"metrics": {}, "backend": "torch"}  # a single-process test's entry
    assert entry_for(single, 2)[0] is None and "recorded with 1 process(es)" in entry_for(single, 2)[1]
    # an update over an entry of another shape replaces it
    again, how = new_distributed_entry(judged(measured["moe"], None, update=True), single, 3)
    assert how == "first run recorded" and again["rank_skew"] == [again["metrics"]["rank_skew"]]


def test_collectives_are_compared_across_backends_by_count(measured):
    from pytest_gpuprof.compare.verdicts import judge

    now = measured["ddp"][0].metrics
    nsys_like = copy.deepcopy(now) | {"collectives": {"all_reduce": {"count": 16, "bytes": None}}}  # 2 a step fewer
    verdicts = judge(now, nsys_like, Rules(), same_backend=False)
    broken = [(v.metric, v.baseline, v.current) for v in verdicts if v.failed]
    assert broken == [("collectives[all_reduce].count", 16 / 3, 8.0)]  # bytes: not recorded by nsys, not compared


@pytest.mark.parametrize("edit, where", [
    (lambda e: e.update(world_size=3), "world_size must be the number of ranks"),
    (lambda e: e["ranks"]["0"]["metrics"]["collectives"]["all_to_all"].pop("bytes"),
     "ranks.0.metrics.collectives[all_to_all].bytes is missing"),
])
def test_a_distributed_entry_with_a_wrong_count_or_a_collective_without_bytes_is_refused(measured, edit, where,
                                                                                         tmp_path):
    entry = recorded(measured["moe"])
    edit(entry)
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"schema_version": 1, "tests": {"t.py::test_d": {"GPU": entry}}}))
    with pytest.raises(baseline.BaselineError, match=re.escape(where)):
        BaselineFile(path).entry("t.py::test_d", "GPU")


# --- under --gpuprof-nsys: one report, each rank's process ------------------------------

NODEID = "test_dist.py::test_ddp"


def with_test_range(report: Path) -> dict[int, int]:
    """The report as the session under nsys leaves it: in each rank's process, the test's NVTX
    range (the plugin's domain, its node id) around that process's gpuprof ranges, as the
    rank's session pushes it; returns each rank's process id (rank: its device)."""
    with sqlite3.connect(report) as db:
        domains = db.execute("SELECT globalTid, domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'gpuprof'")
        for tid, domain in domains.fetchall():
            start, end = db.execute("SELECT MIN(start), MAX(end) FROM NVTX_EVENTS WHERE globalTid = ? AND domainId = ? "
                                    "AND eventType = 59", (tid, domain)).fetchone()
            db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                       "VALUES (?, ?, 59, ?, ?, ?)", (start - 1, end + 1, NODEID, tid, domain))
    return {device: pid for pid, device in cuda_processes(report)}


def test_a_distributed_test_under_nsys_is_judged_from_each_ranks_process(tmp_path):
    from helpers.session import session_settings
    from pytest_gpuprof.run.nsys_backend import NsysReportBackend
    from pytest_gpuprof.run.outcomes import Outcomes

    report = tmp_path / "ddp.sqlite"
    report.write_bytes(gzip.decompress((DATA / "ddp.sqlite.gz").read_bytes()))
    pids = with_test_range(report)
    assert sorted(pids) == [0, 1]
    backend = NsysReportBackend(tmp_path / "session.nsys-rep", None, report, {},
                                {NODEID: {rank: load_nsys(report, process=pid) for rank, pid in pids.items()}})
    recording = dataclasses.replace(session_settings(tmp_path, backend="nsys"), update_baseline=True)
    outcomes = Outcomes(recording, None)
    result = outcomes.add(recording.judge().judge(NODEID, {}, lambda: backend.rank_traces(NODEID), distributed=True))
    assert result.status == "updated" and sorted(result.ranks) == ["0", "1"]
    counts = [k for k in result.ranks["0"].metrics if k.endswith("_count")]
    for rank in (0, 1):  # each rank's own process: what the Kineto trace of that rank counts
        torch = measure(load_kineto(trace("ddp", rank))).metrics
        assert {k: result.ranks[str(rank)].metrics[k] for k in counts} == {k: torch[k] for k in counts}, rank
        assert result.ranks[str(rank)].trace == report
    outcomes.finish(None, records_again=False, writes_reports=False)  # written at the end; a second run judges by it
    again = session_settings(tmp_path, backend="nsys").judge()
    assert again.judge(NODEID, {}, lambda: backend.rank_traces(NODEID), distributed=True).result.status == "passed"


def test_a_rank_whose_process_lacks_the_tests_range_is_an_error_naming_the_rank(tmp_path):
    from helpers.session import session_settings
    from pytest_gpuprof.run.nsys_backend import NsysReportBackend

    report = tmp_path / "ddp.sqlite"
    report.write_bytes(gzip.decompress((DATA / "ddp.sqlite.gz").read_bytes()))
    pids = {device: pid for pid, device in cuda_processes(report)}  # no test range was pushed
    backend = NsysReportBackend(tmp_path / "session.nsys-rep", None, None, {},
                                {NODEID: {rank: load_nsys(report, process=pid) for rank, pid in pids.items()}})
    result = session_settings(tmp_path, backend="nsys").judge().judge(
        NODEID, {}, lambda: backend.rank_traces(NODEID), distributed=True).result
    assert result.status == "error"
    assert result.message == f"{tmp_path / 'session.nsys-rep'}: rank 0: no NVTX range named {NODEID!r} in the report"


def test_a_rank_without_its_process_or_its_steps_is_that_tests_error_naming_the_rank(tmp_path):
    from helpers.session import session_settings
    from pytest_gpuprof.run.backends import UNFINISHED_LOOP
    from pytest_gpuprof.run.nsys_backend import NsysReportBackend, _rank_process

    report = tmp_path / "ddp.sqlite"
    report.write_bytes(gzip.decompress((DATA / "ddp.sqlite.gz").read_bytes()))
    pids = with_test_range(report)
    processes = set(pids.values())
    gone = max(processes) + 1  # a pid nsys never recorded (another pid namespace, say)
    ranks = {NODEID: {0: _rank_process(report, pids[0], processes), 1: _rank_process(report, gone, processes)}}
    judge = session_settings(tmp_path, backend="nsys").judge()
    lost = NsysReportBackend(tmp_path / "s.nsys-rep", None, None, {}, ranks)
    result = judge.judge(NODEID, {}, lambda: lost.rank_traces(NODEID), distributed=True).result
    assert (result.status, result.message) == (
        "error", f"{tmp_path / 's.nsys-rep'}: rank 1: its process {gone} ran no GPU work the report holds")
    unfinished = NsysReportBackend(tmp_path / "s.nsys-rep", None, None, {NODEID: [1]}, {})
    result = judge.judge(NODEID, {}, lambda: unfinished.rank_traces(NODEID), distributed=True).result
    assert (result.status, result.message) == ("error", f"rank 1: {UNFINISHED_LOOP}")
