"""Nsight Compute's counters judged (compare/counter_verdicts.py) without a GPU: the counters of a real
H100 report (tests/data/ncu, recorded by tests/data/record_ncu.py) against thresholds and
against a baseline holding the same counters with one thing changed, each expected value
read from ncu's CSV cells here."""

import copy
import csv
import dataclasses
import json
import re
from pathlib import Path

import pytest

from pytest_gpuprof.compare.counter_verdicts import NCU_NOT_IN_REPLAY, NOT_PROFILED, NOT_STORED, judge_counters
from pytest_gpuprof.compare.entry import check_entry
from pytest_gpuprof.compare.evaluate import TestResult
from pytest_gpuprof.compare.recording import new_baseline_entry
from pytest_gpuprof.compare.rules import Rules, parse_threshold
from pytest_gpuprof.compare.verdict import Verdict
from pytest_gpuprof.errors import ConfigError
from pytest_gpuprof.metrics.counters import ncu_counters
from pytest_gpuprof.report.names import function_name
from pytest_gpuprof.trace.ncu_report import read_ncu_csv

CSV = Path(__file__).parents[1] / "data" / "ncu" / "small.raw.csv"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"


def cell(kernel_prefix: str, metric: str) -> float:
    """One number of ncu's CSV page, for the launch whose kernel name starts with the prefix."""
    rows = list(csv.reader(CSV.open()))
    row = next(dict(zip(rows[0], r)) for r in rows[2:] if r[rows[0].index("Kernel Name")].startswith(kernel_prefix))
    return float(row[metric].replace(",", ""))


def counters() -> dict:
    """The counters as run/kernel_profiling.py attaches them to a test's result."""
    return {**ncu_counters(read_ncu_csv(CSV), function_name), "profiled": "step_0, kernels regex:^(a)$, 3 launch(es)",
            "seconds": 12.5}


def kernel(c: dict, prefix: str) -> dict:
    return next(row for name, row in c["kernels"].items() if name.startswith(prefix))


def judged(now: dict | None, stored: dict | None, *thresholds: str, recording: bool = False,
           earlier: tuple[Verdict, ...] = ()) -> TestResult:
    """A test judged (``earlier``: its verdicts before the counters; ``recording``: it recorded
    its baseline), then its counters."""
    result = TestResult("t.py::t", gpu="NVIDIA H100 80GB HBM3", metrics={"step_count": 2}, verdicts=list(earlier),
                        baseline_entry=None if stored is False else {"metrics": {}, "counters": stored},
                        counters=now, recorded=recording)
    rules = Rules(thresholds=tuple(parse_threshold(t, "--gpuprof-threshold") for t in thresholds))
    judge_counters(result, rules, recording)
    return result


def broken(result: TestResult) -> list[tuple[str, str]]:
    return [(v.metric.split("].")[-1] if v.metric.startswith("kernels[") else v.metric, v.status)
            for v in result.verdicts if v.failed or v.status in ("new", "vanished")]


def test_unchanged_counters_pass_and_every_judged_counter_is_compared():
    result = judged(counters(), counters())
    assert result.status == "passed" and broken(result) == []
    # 3 kernels x 7 judged counters (time, DRAM bytes and the two hit rates are reported only),
    # then the bandwidth
    assert len(result.verdicts) == 3 * 7 + 1
    assert {v.status for v in result.verdicts} == {"ok"}


def test_a_changed_register_count_is_a_changed_kernel_and_a_spill_a_regression():
    now = counters()
    regs = cell(GEMM, "launch__registers_per_thread")
    assert regs == 168
    kernel(now, GEMM)["registers_per_thread"] = {"median": 200, "min": 200, "max": 200}
    result = judged(now, counters())
    assert result.status == "failed" and broken(result) == [("registers_per_thread", "changed")]
    v = next(v for v in result.verdicts if v.failed)
    assert (v.baseline, v.current, v.rule) == (168, 200, "must match exactly")
    spilled = counters()
    kernel(spilled, "void at::vec")["local_memory_bytes"] = {"median": 4096, "min": 4096, "max": 4096}
    assert broken(judged(spilled, counters())) == [("local_memory_bytes", "regressed")]
    assert judged(counters(), spilled).status == "improved"  # the spill gone


def test_a_percentage_fails_past_the_tolerance_below_the_baselines_launches():
    dram = cell("void at::vec", "dram__throughput.avg.pct_of_peak_sustained_elapsed")
    assert dram == 81.43
    for drop, status in ((4.9, "ok"), (5.2, "regressed")):  # the ratio tolerance 0.05: 5 points
        now = counters()
        kernel(now, "void at::vec")["dram_throughput_pct"] = {s: dram - drop for s in ("median", "min", "max")}
        got = [v for v in judged(now, counters()).verdicts if v.metric.endswith("].dram_throughput_pct")
               and v.metric.startswith("kernels[void at::vec")]
        assert [v.status for v in got] == [status], drop
    # launches that spread: the baseline's slowest launch is the edge
    stored = counters()
    kernel(stored, "void at::vec")["dram_throughput_pct"] = {"median": dram, "min": 70.0, "max": 85.0}
    now = counters()
    kernel(now, "void at::vec")["dram_throughput_pct"] = {"median": 66.0, "min": 66.0, "max": 66.0}
    assert broken(judged(now, stored)) == []  # 4 points under the slowest launch
    assert judged(now, stored, "kernels[vectorized].dram_throughput_pct >= 60").status == "passed"
    # a tolerance of the counter's own
    rules = Rules(tolerances={"dram_throughput_pct": 0.02})
    result = TestResult("t.py::t", metrics={"step_count": 2}, baseline_entry={"metrics": {}, "counters": stored},
                        counters=now)
    judge_counters(result, rules, False)
    assert broken(result) == [("dram_throughput_pct", "regressed")]


def test_a_hit_rate_is_judged_where_the_test_gives_it_a_tolerance_in_points_after_the_results_document():
    now = counters()
    kernel(now, GEMM)["l2_hit_rate_pct"] = {"median": 10.0, "min": 10.0, "max": 10.0}
    assert judged(now, counters()).status == "passed"  # it moves with where the data lie: reported only
    result = TestResult("t.py::t", metrics={"step_count": 2}, baseline_entry={"metrics": {}, "counters": counters()},
                        counters=now)
    judge_counters(result, Rules(tolerances={"l2_hit_rate_pct": 0.3}), False)
    assert broken(result) == [("l2_hit_rate_pct", "regressed")]  # 73.79 points down, 30 allowed
    doc = json.loads(json.dumps(result.to_json()))
    (v,) = [v for v in TestResult.from_json(doc).verdicts if v.failed]
    assert v.metric == f"kernels[{GEMM}].l2_hit_rate_pct" and v.change() == "-73.8 pp"  # -73.79 points


def test_thresholds_name_a_kernel_by_its_function_or_the_tests_bandwidth():
    gelu_dram = cell("void at::vec", "dram__throughput.avg.pct_of_peak_sustained_elapsed")
    result = judged(counters(), False, "kernels[^vectorized_elementwise].dram_throughput_pct >= 80")
    (v,) = result.verdicts
    assert result.status == "passed" and v.current == gelu_dram and v.metric.startswith("kernels[void at::vectorized")
    result = judged(counters(), False, "kernels[elementwise].dram_throughput_pct >= 80%")  # two functions match
    assert sorted(v.status for v in result.verdicts) == ["ok", "threshold"]
    assert result.status == "failed"
    low = next(v for v in result.verdicts if v.status == "threshold")
    assert low.current == cell("void at::ele", "dram__throughput.avg.pct_of_peak_sustained_elapsed") == 26.22
    # a pattern no profiled kernel's function matches checks nothing: it breaks, saying so
    result = judged(counters(), False, "kernels[softmax].registers_per_thread <= 64")
    (v,) = result.verdicts
    assert v.status == "threshold" and "no profiled kernel's function matches 'softmax'" in v.evidence
    assert "elementwise_kernel, nvjet_sm90" in v.evidence and "ncu={'kernels': PATTERN}" in v.evidence
    # the bandwidth: DRAM bytes over the peak times the kernels' time, 0.3523 for this report
    assert judged(counters(), False, "memory_bandwidth_utilization >= 0.35").status == "passed"
    assert judged(counters(), False, "memory_bandwidth_utilization >= 80%").status == "failed"


def test_without_counters_a_threshold_on_them_is_a_note_and_the_test_stands():
    improved = Verdict("kernel_time_us", "improved", 100.0, 80.0, "within ±10%")
    result = judged(None, False, "memory_bandwidth_utilization >= 0.8", "gpu_utilization >= 0.5", earlier=(improved,))
    assert result.status == "improved" and result.verdicts == [improved]
    assert result.notes == [f"memory_bandwidth_utilization >= 0.8: {NOT_PROFILED}"]
    result.backend, result.notes = "nsys", []  # ncu runs beside torch.profiler only: the note says so
    judge_counters(result, Rules(thresholds=(parse_threshold("memory_bandwidth_utilization >= 0.8", "t"),)), False)
    assert result.notes == ["memory_bandwidth_utilization >= 0.8: not checked: Nsight Compute does not run under "
                            "--gpuprof-nsys: profile the kernels with --gpuprof-ncu or the marker's ncu= on the torch "
                            "backend"]
    # a baseline recorded without counters: a note, nothing compared
    result = judged(counters(), None)
    assert result.status == "passed" and result.verdicts == [] and result.notes == [NOT_STORED]
    # recording checks thresholds only
    result = judged(counters(), None, "kernels[nvjet].tensor_pipe_pct > 90", recording=True)
    assert result.status == "failed" and broken(result) == [("tensor_pipe_pct", "threshold")]


def test_the_bandwidth_is_compared_over_the_same_kernels_only():
    now = counters()
    now["memory_bandwidth_utilization"] = 0.2  # from 0.352334: beyond 0.05
    assert broken(judged(now, counters())) == [("memory_bandwidth_utilization", "regressed")]
    del now["kernels"][GEMM]  # ncu picked other kernels: their share is another number
    (v,) = [v for v in judged(now, counters()).verdicts if v.metric == "memory_bandwidth_utilization"]
    assert v.status == "ok" and v.rule == "not compared: ncu profiled other kernels than the baseline's"


def test_a_counters_tolerance_is_set_per_test_by_its_name(tmp_path):
    from helpers.session import session_settings

    judge = session_settings(tmp_path).judge()
    rules = judge.rules_for({"tolerances": {"dram_throughput_pct": 0.02,
                                                         "memory_bandwidth_utilization": 0.2}})
    assert dict(rules.tolerances) == {"dram_throughput_pct": 0.02, "memory_bandwidth_utilization": 0.2}
    with pytest.raises(ConfigError, match="tolerances names unknown metric 'time_us'"):
        judge.rules_for({"tolerances": {"time_us": 0.1}})


def test_a_threshold_that_matched_no_kernel_says_why_in_every_report():
    from pytest_gpuprof.report.words import verdict_line

    (v,) = judged(counters(), False, "kernels[softmax].l2_hit_rate_pct >= 50").verdicts
    line = verdict_line(v.to_json())
    assert line.startswith("kernels[softmax].l2_hit_rate_pct: current n/a violates threshold "
                           "kernels[softmax].l2_hit_rate_pct >= 50 (no profiled kernel's function matches 'softmax' "
                           "(profiled: elementwise_kernel, nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT, "
                           "vectorized_elementwise_kernel;")


def test_a_bad_counter_threshold_names_the_option():
    with pytest.raises(ConfigError, match=r"^--gpuprof-threshold: the kernel pattern '\(gemm' in threshold"):
        parse_threshold("kernels[(gemm].dram_throughput_pct >= 80", "--gpuprof-threshold")
    with pytest.raises(ConfigError,
                       match=r"unknown metric 'kernels\[gemm\].dram_pct'.*kernels\[PATTERN\]\.\(sm_throughput_pct\|"):
        parse_threshold("kernels[gemm].dram_pct >= 80", "--gpuprof-threshold")
    with pytest.raises(ConfigError, match=r"unknown metric 'kernels\[gemm\].time_us'"):  # the timeline's
        parse_threshold("kernels[gemm].time_us < 10", "--gpuprof-threshold")
    assert parse_threshold("kernels[gemm].l1_hit_rate_pct >= 50", "x").metric == "kernels[gemm].l1_hit_rate_pct"
    t = parse_threshold("kernels[gemm|gelu].achieved_occupancy_pct>=50%", "x")
    assert (t.metric, t.op, t.value) == ("kernels[gemm|gelu].achieved_occupancy_pct", ">=", 50.0)  # in percent already
    assert parse_threshold("memory_bandwidth_utilization >= 80%", "x").value == 0.8


def test_the_baseline_keeps_the_counters_of_the_first_recording_process_and_checks_them():
    first = TestResult("t.py::t", recorded=True, gpu="H100",
                       metrics={"kernels": {}, "step_count": 2, "kernel_count": 2}, per_step={"kernels": {}},
                       distribution={}, counters=counters())
    entry, _ = new_baseline_entry(first, None, 3, counters=first.counters)
    assert entry["counters"] == counters()
    later = copy.deepcopy(first)
    later.counters = None  # a later process of the recording runs no ncu
    again, how = new_baseline_entry(later, entry, 3, keep_counters=True)
    assert how == "run 2 of at most 3 recorded" and again["counters"] == counters()
    replaced, _ = new_baseline_entry(later, entry, 1, keep_counters=True)  # one run kept: this one's
    assert "counters" not in replaced
    refreshed, how = new_baseline_entry(later, entry, 3)  # a refresh without --gpuprof-ncu: no stale counters
    assert how == "run 2 of at most 3 recorded" and "counters" not in refreshed
    stored = shipped_entry() | {"counters": counters()}
    check_entry(stored)
    del kernel(stored["counters"], GEMM)["l2_hit_rate_pct"]
    with pytest.raises(ValueError, match=rf"^counters.kernels\[{GEMM}\].l2_hit_rate_pct must be an object"):
        check_entry(stored)
    stored = shipped_entry() | {"counters": counters()}
    kernel(stored["counters"], GEMM)["registers_per_thread"]["min"] = 300
    with pytest.raises(ValueError, match=r"registers_per_thread must be ordered min <= median <= max"):
        check_entry(stored)
    # a counter no launch could give is stored as ncu_counters writes it: three nulls, and why
    stored = shipped_entry() | {"counters": counters()}
    kernel(stored["counters"], GEMM)["tensor_pipe_pct"] = {"median": None, "min": None, "max": None}
    stored["counters"]["no_value"] = {f"kernels[{GEMM}].tensor_pipe_pct": "needs sm__pipe_tensor_cycles_active"}
    check_entry(stored)
    kernel(stored["counters"], GEMM)["tensor_pipe_pct"] = {"median": None, "min": 1, "max": None}
    with pytest.raises(ValueError, match=r"tensor_pipe_pct.median must be a finite number in \[0, 2\*\*63\), got No"):
        check_entry(stored)
    stored["counters"]["no_value"] = ["why"]
    with pytest.raises(ValueError, match=r"^counters.no_value must be an object of why each null figure is null"):
        check_entry(stored)


def shipped_entry() -> dict:
    """A real entry: the example suite's CNN on an H200, as the repository ships it."""
    path = Path(__file__).parents[2] / "baselines" / "example_suite" / "test_cnn.json"
    (entry,) = json.loads(path.read_text())["tests"]["example_suite/test_cnn.py::test_cnn_train_step"].values()
    return entry


def test_every_report_shows_the_counters_and_what_broke(tmp_path):
    from pytest_gpuprof.report.document import results_document
    from pytest_gpuprof.report.html.page import render_html
    from pytest_gpuprof.report.junit import junit_properties
    from pytest_gpuprof.report.markdown import summary_markdown
    from pytest_gpuprof.report.words import failure_message

    now = counters()
    kernel(now, GEMM)["registers_per_thread"] = {"median": 200, "min": 200, "max": 200}
    result = judged(now, counters())
    result.baseline_file = tmp_path / "b.json"
    line = (f"kernels[{GEMM}].registers_per_thread: baseline 168, current 200 (+19.0%) "
            "[changed; rule: must match exactly]")
    assert line in failure_message(result).splitlines()[1]
    doc = json.loads(json.dumps(results_document([result], {}, "torch", tmp_path)))
    assert TestResult.from_json(doc["tests"][0]).baseline_entry["counters"] == counters()  # baseline_counters
    md = summary_markdown(doc)
    assert "### Inside the kernels (Nsight Compute)" in md
    assert "memory\\_bandwidth\\_utilization 35.2% (baseline 35.2%)" in md  # 0.352334 as a percentage
    assert "200 registers" in md
    assert "| 1 metric(s) broke: kernels\\[nvjet" in md and "\\].registers\\_per\\_thread 168 → 200 (+19.0%) |" in md
    props = junit_properties(result)
    name, _, words = line.partition(": ")
    assert (f"gpuprof.broken.{name}", words) in props
    assert dict(props)["gpuprof.ncu"].startswith("Nsight Compute (step_0")
    page = render_html(doc)
    at = page.index("Inside the kernels (Nsight Compute: step_0")
    assert '<td class="num m-fail">168 → 200</td>' in page[at:]
    # each counter in its unit, as the other reports say it: the bandwidth a percentage, not 0.352334
    assert "memory_bandwidth_utilization <span class=\"vd v-ok\">35.2% → 35.2%</span>" in page[at:]
    assert "0.352334" not in page
    row = page[at:][page[at:].index(f"{GEMM}</code>"):].split("</tr>")[0]
    cells = re.findall(r'<td class="num m-[a-z-]+">(.*?)</td>', row)
    assert cells == [f"{a} → {a}" for a in ("26.21 µs", "70.81%", "55.19%", "9.59%", "14.14%", "81.81%", "0%",
                                           "83.79%")] + ["168 → 200"] + [f"{a} → {a}" for a in ("0 B", "8.022 MiB")]
    assert "registers_per_thread 168 → 200 (+19.0%) [changed]" in page


def test_a_recording_session_stores_the_counters_ncu_read_with_the_tests_entry(tmp_path, monkeypatch):
    """The entry is made when the test is judged; ncu runs after: its counters join that entry."""
    from types import SimpleNamespace

    from helpers.session import session_settings
    from pytest_gpuprof.run import steps
    from pytest_gpuprof.run.outcomes import Outcomes

    outcomes = Outcomes(dataclasses.replace(session_settings(tmp_path), update_baseline=True), None)
    result = TestResult("t.py::t", recorded=True, gpu="H100",
                        metrics={"step_count": 2, "kernels": {GEMM: {"time_us": 9.0}}},
                        baseline_file=tmp_path / "t.json")
    outcomes.add_entry(str(result.baseline_file), "t.py::t", "H100", {"metrics": {}})
    monkeypatch.setattr(steps, "find_ncu", lambda path, option: Path("/usr/bin/ncu"))
    monkeypatch.setattr(steps, "profile_kernels", lambda *args: counters())
    lines = []
    monkeypatch.setattr(steps, "say", lambda config, line: lines.append(line))
    item = SimpleNamespace(nodeid="t.py::t", config=SimpleNamespace(
        rootpath=tmp_path, pluginmanager=SimpleNamespace(has_plugin=lambda name: False)))
    steps.KernelCounters(False, None, [], 60.0, outcomes).pytest_gpuprof_judged(item, result, {"ncu": True})
    assert outcomes._pending[tmp_path / "t.json"]["t.py::t"]["H100"]["counters"] == counters() == result.counters
    assert lines[-1] == ("gpuprof: t.py::t: Nsight Compute profiled 3 kernel(s) of step_0, kernels regex:^(a)$, "
                         "3 launch(es) in 12.5 s; memory_bandwidth_utilization 35.2%")  # 0.352334


def test_gpuprof_diff_compares_two_nsight_compute_reports_counter_by_counter(tmp_path, capsys):
    from pytest_gpuprof.cli.main import main

    header, units, *launches = CSV.read_text().splitlines()
    at = next(csv.reader([header])).index("launch__registers_per_thread")
    gemm = next(csv.reader([launches[0]]))
    assert gemm[at] == "168"
    gemm[at] = "200"  # the GEMM built with more registers
    changed = tmp_path / "changed.csv"
    changed.write_text("\n".join([header, units, ",".join(f'"{c}"' for c in gemm), *launches[1:]]) + "\n")
    assert main(["diff", str(CSV), str(CSV)]) == 0
    assert "no metric broke or improved (22 compared)" in capsys.readouterr().out  # 3 kernels x 7, the bandwidth
    assert main(["diff", str(CSV), str(changed), "--threshold", "memory_bandwidth_utilization >= 0.3"]) == 1
    out = capsys.readouterr().out
    assert f"  kernels[{GEMM}].registers_per_thread: baseline 168, current 200 (+19.0%) [changed; rule: must " \
           "match exactly]" in out.splitlines()
    assert "(Nsight Compute report, 3 kernel(s))" in out
    trace = Path(__file__).parents[1] / "data" / "ab" / "same_base0.pt.trace.json.gz"
    assert main(["diff", str(trace), str(trace), "--threshold", "memory_bandwidth_utilization >= 0.9"]) == 0
    assert "note: memory_bandwidth_utilization >= 0.9: not checked: B holds no Nsight Compute counters" in \
        capsys.readouterr().out
    assert main(["diff", str(CSV), str(trace)]) == 2
    assert "small.raw.csv is an Nsight Compute report: it compares with another one" in capsys.readouterr().err


DEFAULT_SET = CSV.parent / "default.raw.csv"  # ncu's default set: no DRAM bytes, hit rates, ... (test_ncu_sets.py)


def test_a_threshold_on_a_counter_the_report_cannot_give_breaks_naming_the_metrics_it_needs():
    lacking = ncu_counters(read_ncu_csv(DEFAULT_SET), function_name)
    result = judged(lacking, False, "kernels[nvjet].tensor_pipe_pct >= 60", "kernels[nvjet].registers_per_thread < 200")
    assert result.status == "failed" and broken(result) == [("tensor_pipe_pct", "threshold")]
    (v,) = [v for v in result.verdicts if v.failed]
    assert v.current is None and v.evidence == ("not checked: no value; tensor_pipe_pct needs "
                                                "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")
    (v,) = judged(lacking, False, "memory_bandwidth_utilization >= 0.5").verdicts
    assert v.status == "threshold" and v.evidence == (  # only what the default set lacks
        "not checked: no value; memory_bandwidth_utilization needs dram__bytes.sum (or dram__bytes_read.sum + "
        "dram__bytes_write.sum) and dram__bytes.sum.peak_sustained")


def test_a_counter_one_side_cannot_give_is_not_compared_and_says_so():
    lacking = ncu_counters(read_ncu_csv(DEFAULT_SET), function_name)
    full = ncu_counters(read_ncu_csv(CSV.parent / "full.raw.csv"), function_name)  # the same kernels, --set full
    for before, now in ((full, lacking), (lacking, full), (lacking, lacking)):
        result = judged(now, before)
        assert result.status == "passed", [(v.metric, v.status) for v in result.verdicts if v.status != "ok"]
        tensor = [v for v in result.verdicts if v.metric.endswith("].tensor_pipe_pct")]
        assert len(tensor) == 3 and {v.rule for v in tensor} == {"not compared: no value in one of the runs"}
    # what both hold is judged: the default set's achieved occupancy against --set full's
    occupancy = [v for v in judged(lacking, full).verdicts if v.metric.endswith("].achieved_occupancy_pct")]
    assert len(occupancy) == 3 and all(v.rule.startswith("within 5 points") for v in occupancy)


def test_a_replay_says_why_ncu_profiled_nothing(pytester):
    """Under --gpuprof-replay --gpuprof-ncu no kernel runs, so ncu profiles none: the note on a
    threshold naming a counter says a replay runs no kernels, not only that the option is missing."""
    from helpers.suites import MOE, TRACE, replay_dir

    pytester.makefile(".ini", pytest="[pytest]\n")
    (pytester.path / "example_suite").mkdir()
    (pytester.path / "example_suite" / "test_moe.py").write_text(
        "import pytest\n\n@pytest.mark.gpuprof(ncu=True)\ndef test_moe_forward():\n    pass\n")
    folder = replay_dir(pytester, {MOE: TRACE[MOE]})
    result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={folder}", "--gpuprof-ncu",
                                "--gpuprof-threshold=kernels[nvjet].tensor_pipe_pct >= 70")
    result.assert_outcomes(passed=1)
    assert (f"  {MOE}: kernels[nvjet].tensor_pipe_pct >= 70: not checked: a replay runs no kernels for Nsight "
            "Compute to profile (--gpuprof-replay)") in result.outlines


def test_a_replay_says_it_ran_no_nsight_compute_the_test_asked_for(pytester):
    """A replayed test whose marker asks for ncu, with no counter threshold to note, is told
    that a replay runs no kernels for ncu; without ncu= (and --gpuprof-ncu) nothing is said."""
    from helpers.suites import MOE, TRACE, replay_dir

    pytester.makefile(".ini", pytest="[pytest]\n")
    (pytester.path / "example_suite").mkdir()
    test = pytester.path / "example_suite" / "test_moe.py"
    folder = replay_dir(pytester, {MOE: TRACE[MOE]})
    note = f"  {MOE}: {NCU_NOT_IN_REPLAY}"
    for marker, options, said in (("ncu=True", [], True), ("", ["--gpuprof-ncu"], True), ("", [], False),
                                  ("ncu=False", ["--gpuprof-ncu"], False)):
        test.write_text(f"import pytest\n\n@pytest.mark.gpuprof({marker})\ndef test_moe_forward():\n    pass\n")
        result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={folder}", *options)
        result.assert_outcomes(passed=1)
        assert (note in result.outlines) is said, (marker, options, result.outlines)
