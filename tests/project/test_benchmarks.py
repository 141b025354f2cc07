"""The benchmark scripts' smoke modes, so that the scripts behind docs/benchmarks.md cannot rot,
and the GPU figures of docs/benchmarks.md (and of the older runs' log,
benchmarks/results/history.md) derived again from the archived results."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.trace.kineto import load_kineto

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
SMALLEST = ROOT / "example_suite/traces/example_suite_test_weight_streaming.py_test_weight_streaming.pt.trace.json.gz"


def run_script(name: str, *args: str) -> str:
    """A script of benchmarks/ in a subprocess of this Python; its standard output (it must succeed)."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / name), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def source_metrics(path: Path) -> dict:
    """What ``gpuprof analyze PATH --json`` reports, computed here."""
    return json.loads(json.dumps(measure(load_kineto(path)).to_json()))


def doc_text() -> str:
    """docs/benchmarks.md with its line breaks and runs of spaces as single spaces."""
    return " ".join((ROOT / "docs/benchmarks.md").read_text().split())


def history_text() -> str:
    """benchmarks/results/history.md (the older runs' log, superseded by docs/benchmarks.md), as doc_text."""
    return " ".join((BENCHMARKS / "results/history.md").read_text().split())


def test_make_big_trace_smoke_reads_back_every_event_and_distinct_steps():
    out = run_script("make_big_trace.py", "--smoke")
    written = re.search(r": ([\d,]+) events \(2 copies of ", out)
    check = re.search(
        r"smoke passed: ([\d,]+) events read back as JSON, (\d+) distinct steps \(2 x the source's (\d+)\)", out)
    assert written and check, out
    assert written[1] == check[1]
    assert int(check[2]) == 2 * int(check[3]) == 2 * source_metrics(SMALLEST)["steps"]["count"]


def test_bench_analyze_smoke_times_a_run_and_passes_the_scaling_check():
    out = run_script("bench_analyze.py", "--smoke")
    built = re.search(r"built \S+: ([\d,]+) events, 2 copies of " + re.escape(SMALLEST.name), out)
    counted = re.search(r"trace: \S+, [\d,]+ bytes \(\d+ MB\), ([\d,]+) events", out)
    run = re.search(r"run 1: (\d+\.\d+) s, peak RSS (\d+) MiB", out)
    assert built and counted and run, out
    assert built[1] == counted[1]
    assert float(run[1]) > 0 and int(run[2]) > 0
    source = source_metrics(SMALLEST)["metrics"]
    assert f"metrics: {2 * source['kernel_count']:,} kernels over {2 * source['step_count']} steps" in out
    assert "check passed: counts, bytes, times and per-step lists are exactly 2 x the source's" in out
    kept = re.search(r"source: ([\d,]+) events, of which the loader keeps ([\d,]+) \(\d+%\)", out)
    assert kept, out
    assert 0 < int(kept[2].replace(",", "")) < int(kept[1].replace(",", ""))


def test_bench_analyze_check_names_what_is_not_scaled(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from bench_analyze import scaled_mismatches

    source = source_metrics(SMALLEST)
    assert scaled_mismatches(source, source, 1) == []
    changed = json.loads(json.dumps(source))
    kernel = next(iter(changed["per_step"]["kernels"]))
    changed["per_step"]["kernels"][kernel][3] += 0.001
    changed["metrics"]["sync_count"] += 1
    bad = scaled_mismatches(source, changed, 1)
    assert len(bad) == 2
    assert bad[0].startswith("sync_count: ")
    assert bad[1] == f"per_step kernel {kernel[:60]} is not the source's repeated 1 times"


def test_bench_hta_smoke_without_hta_still_runs_gpuprof_and_says_hta_was_skipped():
    if importlib.util.find_spec("hta"):
        pytest.skip("this Python imports hta: the smoke runs HTA instead of skipping it")
    out = run_script("bench_hta.py", "--smoke")
    assert f"HTA skipped: {sys.executable} cannot import hta (ModuleNotFoundError: No module named 'hta')" in out
    assert "hta run" not in out
    source = source_metrics(SMALLEST)
    assert re.search(r"gpuprof run 1: \d+\.\d+ s, peak RSS \d+ MiB", out), out
    assert f"kernel_time_us {source['metrics']['kernel_time_us']:,} over {source['steps']['count']} steps" in out


@pytest.mark.skipif(not os.environ.get("GPUPROF_HTA_PYTHON"), reason="GPUPROF_HTA_PYTHON (a Python with HTA) not set")
def test_bench_hta_smoke_with_hta_reports_its_version_and_kernel_breakdown():
    out = run_script("bench_hta.py", "--smoke", "--hta-python", os.environ["GPUPROF_HTA_PYTHON"])
    assert re.search(r"HTA: HolisticTraceAnalysis \d+\.\d+", out), out
    assert re.search(r"hta run 1: \d+\.\d+ s, peak RSS \d+ MiB .* load \d+\.\d+ s, kernel breakdown .*COMPUTATION", out)
    assert "gpuprof median of 1: " in out


def test_compare_backends_smoke_matches_the_committed_baselines():
    out = run_script("compare_backends.py", "--smoke")
    compared = 0
    for path in sorted((ROOT / "baselines/example_suite").glob("*.json")):
        for nodeid, by_gpu in json.loads(path.read_text())["tests"].items():
            metrics = next(iter(by_gpu.values()))["metrics"]
            row = re.search(rf"^{re.escape(nodeid)} +equal +([\d.]+) +([\d.]+) +([+-]\d+\.\d\d)%$", out, re.M)
            if row is None:  # a test newer than the archive
                only = rf"^only in {re.escape(str(ROOT / 'baselines'))}: {re.escape(nodeid)}$"
                assert re.search(only, out, re.M), out
                continue
            compared += 1
            assert row[1] == f"{metrics['kernel_time_us'] / metrics['step_count']:.3f}"
            assert abs(float(row[2]) / float(row[1]) - 1) < 0.05
    assert compared == 4 and "count mismatches: 0;" in out


#: One row of ``gate_noise.py table``: series, test, the tallies ("S/N" or "S/N +F"), the slowed kernel's change.
TABLE_ROW = re.compile(r"^(\S+) +(test_\w+) +(.*?)  +(\S+ / \S+ / \S+|n/a) ", re.M)


def gate_table(folder: Path, *tolerances: str) -> dict[tuple[str, str], tuple[list[str], str]]:
    """(series, test) -> (tallies as run and with each tolerance pair, the slowed kernel's min / median / max)."""
    out = run_script("gate_noise.py", "table", str(folder), *(a for t in tolerances for a in ("--tolerances", t)))
    rows = {(m[1], m[2]): (re.findall(r"\d+/\d+(?: \+\d+)?", m[3]), m[4]) for m in TABLE_ROW.finditer(out)}
    assert rows, out
    return rows


def test_gate_noise_smoke_judges_archived_runs_again():
    out = run_script("gate_noise.py", "--smoke")
    rows = {(m[1], m[2]): re.findall(r"\d+/\d+(?: \+\d+)?", m[3]) for m in TABLE_ROW.finditer(out)}
    assert len(rows) == 8, out
    for (series, test), tallies in rows.items():
        assert len(tallies) == 2  # as run, and 5%/10%
        if series == "aa":
            assert tallies == ["0/3", "0/3"]
        elif test != "test_weight_streaming":
            assert tallies[1] == "3/3"  # a planted 10% in the compute-bound workloads


#: The doc's names of the example tests, and the slowdowns of the sweep.
WORKLOADS = {"test_cnn_train_step": "CNN training step", "test_transformer_train_step": "transformer training step",
             "test_moe_forward": "MoE forward", "test_weight_streaming": "weight streaming"}
SLOWDOWNS = {"3%": "slowdown0.03", "5%": "slowdown0.05", "7%": "slowdown0.07", "10%": "slowdown0.10",
             "20%": "slowdown0.20"}


def test_gate_figures_in_the_docs_follow_from_the_archived_results(tmp_path):
    for archive in sorted((BENCHMARKS / "results").glob("*.tgz")):
        with tarfile.open(archive) as tar:
            tar.extractall(tmp_path, filter="data")
    aa = gate_table(tmp_path / "aa", "0.05/0.10", "0.03/0.10")
    sweep = gate_table(tmp_path / "sweep", "0.05/0.10", "0.03/0.10")
    doc = history_text()  # single-run baselines: superseded, kept in the log

    # A/A: no time regression in 20 runs, today and as run; the sweep's s = 0 as run: 2
    assert {tuple(aa["aa", test][0]) for test in WORKLOADS} == {("0/20", "0/20", "0/20")}
    assert "| shipped example suite against its own baselines | 20 (80 tests) | **0** |" in doc
    zero = [sweep["slowdown0.00", test][0] for test in WORKLOADS]
    assert {(today, low) for _, today, low in zero} == {("0/20", "0/20")}
    as_run = sum(int(m[1]) for run, _, _ in zero if (m := re.search(r"\+(\d+)$", run)))
    assert f"| 20 (80 tests) | **0** (as run: {as_run}, below) |" in doc

    # the smallest slowdown caught, per workload, under today's rules
    for test, name in WORKLOADS.items():
        caught = {pct: sweep[series, test][0][1] for pct, series in SLOWDOWNS.items()}
        smallest = next(pct for pct, tally in caught.items() if tally.split("/")[0] == tally.split("/")[1])
        median = sweep[SLOWDOWNS[smallest], test][1].split(" / ")[1]
        assert f"| {name} | {' | '.join(caught.values())} | **{smallest}** (kernel {median}) |" in doc

    # A/B rows of a planted 10% and 3%: the kernel's change and the catches
    for pct in ("10%", "3%"):
        for test, name in WORKLOADS.items():
            (_, today, _), spread = sweep[SLOWDOWNS[pct], test]
            row = re.search(rf"\| {pct} \| {name.split()[0]}[^|]*\| {re.escape(spread)} \| ([^|]*)\|", doc)
            assert row, (pct, name, spread)
            assert today.replace("/", " of ") in row[1]

    # a 3% kernel-time tolerance
    cnn, transformer = (sweep["slowdown0.03", t][0][2].replace("/", " of ")
                        for t in ("test_cnn_train_step", "test_transformer_train_step"))
    assert f"caught in {cnn} CNN runs and {transformer} transformer runs" in doc


def test_gate_figures_of_multi_run_baselines_follow_from_their_archive(tmp_path):
    with tarfile.open(BENCHMARKS / "results" / "gate_h200_2026-11-23.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    doc = history_text()  # the first session's sweep: superseded, kept in the log
    for folder, runs, rejudged in (("machine_a/aa", 10, {}),
                                   ("machine_b/xm", 8, {"test_transformer_train_step": "+1"})):
        rows = gate_table(tmp_path / folder, "0.05/0.10")
        assert len(rows) == 5  # the four workloads and the launch-bound test
        for (_, test), (tallies, _) in rows.items():  # the transformer's slower host: no longer unstable
            assert tuple(tallies) == (f"0/{runs}", f"0/{runs}" + (f" {rejudged[test]}" if test in rejudged else ""))
    sweep = gate_table(tmp_path / "machine_a/sweep", "0.05/0.10")
    for test, name in WORKLOADS.items():
        (as_run, today), spread = sweep["slowdown0.10", test]
        caught = today.replace("/", " of ")
        as_run_words = as_run.replace("/", " of ")
        row = re.search(rf"\| {name} \| {re.escape(spread)} \| {as_run_words} \| (\*\*)?{caught}(\*\*)? \|", doc)
        assert row, (name, spread, as_run, today)
    planted = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "machine_a/planted").glob("*.json")}
    assert len(planted) == 5
    for bug, results in planted.items():  # one failed test each, no collateral failure
        assert results["counts"]["failed"] == 1 and sum(results["counts"].values()) == 5, bug


def test_gate_figures_of_the_final_rules_follow_from_their_archive(tmp_path):
    with tarfile.open(BENCHMARKS / "results" / "gate_h200_2026-11-23b.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    doc = doc_text()
    for folder in ("lease1/sweep", "lease3/aa_vs_lease1"):  # unchanged runs: no regression, as run or re-judged
        rows = gate_table(tmp_path / folder, "0.05/0.10")
        aa = {test: tallies for (series, test), (tallies, _) in rows.items() if series == "slowdown0.00"}
        assert set(aa) == set(WORKLOADS) and all(t == ["0/10", "0/10"] for t in aa.values()), aa
    sweep = gate_table(tmp_path / "lease1/sweep", "0.05/0.10")
    for test, name in WORKLOADS.items():
        (as_run, today), spread = sweep["slowdown0.10", test]
        assert as_run == today, test
        caught = today.split()[0].replace("/", " of ")
        assert re.search(rf"\| {name} \| {re.escape(spread)} \| (\*\*)?{caught}(\*\*)?", doc), (name, spread, today)
    for lease, status in (("lease1", "unconfirmed"), ("lease2", "unconfirmed"),
                          ("lease3", "failed"), ("lease4", "failed")):
        confirmed = json.loads((tmp_path / lease / "confirm.json").read_text())
        tests = {t["nodeid"].split("::")[-1]: t for t in confirmed["tests"]}
        assert [tests[t]["status"] for t in ("test_cnn_train_step", "test_moe_forward",
                                             "test_transformer_train_step")] == [status] * 3, lease
        assert tests["test_weight_streaming"]["status"] == "passed"
    assert {t["confirmation"] for t in json.loads((tmp_path / "lease4/confirm.json").read_text())["tests"]} == {
        "", "2 re-run(s) in fresh processes: 1 failure(s) reproduced in every re-run that decided"}


PLANTED = {"item": "test_moe_forward", "compute_stream": "test_weight_streaming", "pageable": "test_weight_streaming",
           "extra_kernel": "test_transformer_train_step", "fp32": "test_cnn_train_step"}


def test_third_session_figures_follow_from_their_archive(tmp_path):
    with tarfile.open(BENCHMARKS / "results" / "gate_h200_2026-11-23c.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    runs, doc, history = tmp_path / "gate_h200_2026-11-23c", doc_text(), history_text()
    final = (runs / "gpu-final.log").read_text().splitlines()[-1]
    assert re.fullmatch(r"10 passed, 684 deselected in 199\.58s \(0:03:19\)", final)
    assert "10 passed, 684 deselected in 199.58s" in history
    for bug, culprit in PLANTED.items():
        results = json.loads((runs / "planted" / f"{bug}.json").read_text())
        tests = {t["nodeid"].split("::")[-1]: t for t in results["tests"]}
        assert [name for name, t in tests.items() if t["status"] == "failed"] == [culprit], bug
        assert all(t["status"] in ("passed", "improved") for name, t in tests.items() if name != culprit), bug
        assert f"| `{bug}` | 1 failed, 4 passed | {WORKLOADS[culprit]} |" in history, bug
    aa = gate_table(runs / "aa_vs_shipped", "0.05/0.10")
    assert {test for series, test in aa} == {*WORKLOADS, "test_small_batch_decode"}
    assert all(tallies == ["0/10", "0/10"] for tallies, _ in aa.values()), aa
    statuses = {t["status"] for path in (runs / "aa_vs_shipped").glob("aa-*.json")
                for t in json.loads(path.read_text())["tests"]}
    assert statuses == {"passed"}
    assert "| 2026-11-23 | one H200, the shipped baselines | 10 | 0; 0 time or ratio regressions, as run and " \
        "re-judged |" in doc
    sweep = gate_table(runs / "sweep_weight_streaming")
    for series, cell in (("slowdown0.15", "5 of 8"), ("slowdown0.20", "**14 of 14**")):
        (as_run,), spread = sweep[series, "test_weight_streaming"]
        assert as_run.split()[0].replace("/", " of ") == cell.strip("*")
        assert f"| {series[-2:]}% | {spread} | {cell}" in doc, (series, spread)
    probes = [json.loads(line) for line in (runs / "probes.jsonl").read_text().splitlines()]
    assert len(probes) == 5
    for name, row, digits in (("h2d_pinned_gbps", "host-to-device, pinned", 2),
                              ("h2d_pageable_gbps", "host-to-device, pageable", 2), ("gemm_us", "4096³ bf16 GEMM", 1),
                              ("launch_us", "kernel launch (host)", 2), ("sm_clock_mhz", "SM clock under load", 0)):
        values = [p[name] for p in probes]
        assert f"| {row} | {min(values):.{digits}f}-{max(values):.{digits}f} " in doc, name


def test_observer_effect_smoke_prints_cost_against_no_profiler():
    out = run_script("observer_effect.py", "--smoke")
    assert re.search(r"no profiler +100\.0 us/step +trace holds: -", out), out
    assert re.search(r"as gpuprof records +150\.0 us/step +\+50\.0% +trace holds: kernel, cuda_runtime, "
                     r"user_annotation, ProfilerStep#", out), out


def test_many_tests_smoke_records_then_judges_a_module_of_parametrized_tests():
    out = run_script("many_tests.py", "--smoke")
    rows = re.findall(r"^\| (\d+) \| (\d+\.\d) \| (\d+\.\d) \| (\d+\.\d{3}) \| (-?[\d.]*) \| (\d+) / (\d+) \| "
                      r"(\d+\.\d\d) \| (\d+\.\d\d) \| (\d+\.\d\d) \| "
                      r"not opened \| \| \|$", out, re.M)  # in Chromium: not in a smoke run
    assert [int(r[0]) for r in rows] == [1, 2], out
    assert rows[0][4] == "" and rows[1][4]  # what one more test costs: from N = 2 on (noise may make it negative)
    assert all(float(r[7]) > 0 and float(r[8]) > 0 and float(r[9]) > 0 for r in rows), out
    assert "smoke passed: every test recorded, then passed" in out


def test_fuzz_loaders_smoke_tries_every_probe_without_a_traceback_or_a_wrong_number():
    out = run_script("fuzz_loaders.py", "--smoke")
    rows = re.findall(r"^\| (kineto|nsys) ([a-zA-Z ]+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$",
                      out, re.M)
    assert len(rows) == 13, out  # 8 Kineto probes, 5 nsys probes
    for *_, tried, errors, accepted, tracebacks, wrong, disagree in rows:
        assert int(tried) == 3 == int(errors) + int(accepted) and tracebacks == wrong == disagree == "0", out
    assert re.search(r"smoke fuzz passed: 39 inputs, \d+ clean errors, 0 tracebacks, 0 silently wrong, "
                     r"0 parser disagreements", out), out


def test_fuzz_baselines_smoke_tries_every_probe_without_a_traceback_or_a_wrong_judgement():
    out = run_script("fuzz_baselines.py", "--smoke")
    rows = re.findall(r"^\| ((?!all )[a-zA-Z0-9 -]+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", out, re.M)
    assert len(rows) == 17, out  # 10 probes of the structure, 7 of the bytes
    for *_, tried, errors, accepted, tracebacks, wrong in rows:
        assert int(tried) == 3 == int(errors) + int(accepted) and tracebacks == wrong == "0", out
    assert re.search(r"smoke fuzz passed: 51 inputs, \d+ clean errors, 0 tracebacks, 0 silently wrong$", out, re.M), out


def fuzz_baselines():
    """benchmarks/fuzz_baselines.py as a module (its imports need benchmarks/ on the path)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    import fuzz_baselines as fuzz
    return fuzz


def an_update_with_another_gpu(fuzz, other: dict):
    """The weight-streaming test's shipped file with OTHER as its entry on an A100, updated
    on the H200 (``fuzz_baselines.py --seed 1 --per-class 300``, input 2855, wrote
    ``{"metrics": null}``)."""
    src = next(s for s in fuzz.sources() if s.name == "test_weight_streaming.json")
    doc = json.loads(src.path.read_text())
    doc["tests"][src.nodeid]["NVIDIA A100"] = other
    return fuzz.Altered("test and GPU level", src, "another GPU, in an update", fuzz.written(doc), src.traces[0],
                        update=True)


def test_fuzz_baselines_expects_an_update_to_keep_an_old_form_entry_as_stored(tmp_path):
    """An entry of before runs were kept, on another GPU: an update writes it back as stored
    (docs/results.md, "Baseline files"); the fuzzer expected it in today's form (with
    ``"runs": [{}]``) and called the update silently wrong."""
    fuzz = fuzz_baselines()
    for other in ({"metrics": None}, {"metrics": {"kernel_count": 1}, "distribution": {}}):
        assert fuzz.judge(an_update_with_another_gpu(fuzz, other), tmp_path) == ("accepted", ""), other
        written = json.loads(next((tmp_path / "baselines").rglob("*.json")).read_text())
        assert next(iter(written["tests"].values()))["NVIDIA A100"] == other


def test_fuzz_baselines_tells_where_an_update_changed_what_it_does_not_record(tmp_path):
    fuzz = fuzz_baselines()
    before = {"schema_version": 1, "tests": {"t": {"A100": {"metrics": None}}}}
    assert fuzz.changed(before, copy.deepcopy(before)) is None
    assert fuzz.changed(before, {**before, "tests": {"t": {"A100": {"metrics": None, "runs": [{}]}}}}) \
        == "['tests']['t']['A100']['runs'] added: [{}]"
    assert fuzz.changed(before, {**before, "tests": {"t": {"A100": {"metrics": 5}}}}) \
        == "['tests']['t']['A100']['metrics'] was None, written 5"
    assert fuzz.changed(before, {"tests": before["tests"]}) == "['schema_version'] left out (was 1)"


def test_fuzz_failures_are_told_with_their_number_probe_file_alteration_and_reason():
    fuzz = fuzz_baselines()
    item = an_update_with_another_gpu(fuzz, {"metrics": None})
    from fuzz_loaders import told
    assert told(2855, item, "traceback", "Traceback (most recent call last):\n  File x\nKeyError: 'a'\n") == (
        "traceback: input 2855, test and GPU level of baselines/example_suite/test_weight_streaming.json, judged on "
        f"{item.trace.relative_to(ROOT)}: another GPU, in an update\n"
        "    Traceback (most recent call last):\n      File x\n    KeyError: 'a'")


def test_nsight_compute_figures_follow_from_their_archive(tmp_path):
    """docs/benchmarks.md, "Nsight Compute: counters recorded on one machine, judged on another":
    re-judged from the archived results, every unchanged run passes against the baselines
    recorded on the other machine, and the planted spill fails on exactly its registers and
    local memory, with the sizes the section gives."""
    with tarfile.open(BENCHMARKS / "results" / "ncu_2026-11-26c.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    runs, doc = tmp_path / "ncu_2026-11-26c", doc_text()
    for model, local in (("h200", 16757952), ("h100", 16770176)):
        results = [runs / f"ncu_{model}_judge" / f"{name}.json" for name in ("rerun_1", "rerun_2", "spill")]
        results.append(runs / f"ncu_{model}_judge3" / "rerun_3.json")
        done = subprocess.run([sys.executable, str(BENCHMARKS / "judge_against.py"),
                               str(runs / f"ncu_{model}_rec" / "B"), *map(str, results)],
                              capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            "rerun_1: passed", "rerun_2: passed",
            "spill: test_fused_add_rmsnorm: kernels[add_rmsnorm_kernel].registers_per_thread, "
            "kernels[add_rmsnorm_kernel].local_memory_bytes", "rerun_3: passed"], model
        (spill,) = json.loads((runs / f"ncu_{model}_judge" / "spill.json").read_text())["tests"]
        (kernel,) = spill["counters"]["kernels"].values()
        assert kernel["registers_per_thread"]["median"] == 28 and kernel["local_memory_bytes"]["median"] == local
        assert f"0 -> {local:,}" in doc
    done = subprocess.run([sys.executable, str(BENCHMARKS / "judge_against.py"), str(runs / "ncu_h200_rec" / "B"),
                           *(str(runs / "ncu_h200_judge4" / f"rerun_{i}.json") for i in (4, 5))],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.splitlines() == ["rerun_4: passed", "rerun_5: passed"], done.stderr
    assert "| `spill` | registers 40 -> 28, local memory 0 -> 16,757,952 B | registers 40 -> 28, local memory 0 -> " \
        "16,770,176 B |" in doc


#: The planted bugs of 2026-11-27 (archive issue34_2026-11-27b.tar.xz): the test each fails, as docs/benchmarks.md
#: names it.
PLANTED_FINAL = {"item": ("test_moe.py::test_moe_forward", "MoE forward"),
                 "compute_stream": ("test_weight_streaming.py::test_weight_streaming", "weight streaming"),
                 "pageable": ("test_weight_streaming.py::test_weight_streaming", "weight streaming"),
                 "extra_kernel": ("test_transformer.py::test_transformer_train_step", "transformer training step"),
                 "fp32": ("test_cnn.py::test_cnn_train_step", "CNN training step"),
                 "host_overhead": ("test_launch_bound.py::test_small_batch_decode", "launch-bound decode"),
                 "spill": ("test_fused_norm.py::test_fused_add_rmsnorm", "Triton fused norm"),
                 "dist_ddp_after_backward": ("test_distributed.py::test_ddp_training", "DDP, two GPUs"),
                 "dist_split_tolist": ("test_distributed.py::test_expert_parallel_moe",
                                       "expert-parallel MoE, two GPUs")}


def test_planted_bug_figures_follow_from_their_archive(tmp_path):
    """docs/benchmarks.md, "Planted bugs" and "Unchanged code": from the logs of 2026-11-27, each bug
    failed its own test and no other, with as many broken metrics as the table says, and the three
    unchanged runs on a fresh H200 passed."""
    with tarfile.open(BENCHMARKS / "results" / "issue34_2026-11-27b.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    runs, doc = tmp_path / "issue34_2026-11-27b", doc_text()
    for bug, (nodeid, name) in PLANTED_FINAL.items():
        log = (runs / ("b_record" if bug.startswith("dist_") else "d_judge") / f"{bug}.log").read_text()
        failed = re.findall(r"^FAILED example_suite/(\S+) ", log, re.M)
        assert failed == [nodeid], bug
        assert re.search(r"^1 failed, [15] passed in ", log.splitlines()[-1]), bug
        (broke,) = re.findall(r"^gpuprof: (\d+) metric\(s\) broke on NVIDIA H200", log, re.M)
        bug = bug.removeprefix("dist_")
        assert f"| `{bug}` | {name} | {broke}: " in doc, bug
    for i in (1, 2, 3):
        assert (runs / "d_judge" / f"rerun{i}.log").read_text().splitlines()[-1].startswith("6 passed in "), i
    assert "| 2026-11-27 | a fresh H200, baselines recorded on another H200 | 3 | 0 |" in doc


def test_profiling_cost_figures_follow_from_their_archive(tmp_path):
    """docs/benchmarks.md, "What profiling costs" and "The observer effect", from the logs of 2026-11-27."""
    with tarfile.open(BENCHMARKS / "results" / "overhead_h200_2026-11-27.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    runs, doc = tmp_path / "overhead_h200_2026-11-27", doc_text()

    def seconds(name: str) -> str:
        last = (runs / "logs" / f"{name}.log").read_text().splitlines()[-1]
        match = re.fullmatch(r"6 passed in (\d+\.\d+)s", last)
        assert match, (name, last)
        return f"{float(match[1]):.1f}"

    plain = ", ".join(seconds(f"plain{i}") for i in (1, 2, 3))
    profiled = ", ".join(seconds(f"gp{i}") for i in (1, 2, 3))
    assert f"| the whole run | {plain} s | {profiled} s |" in doc
    for log, rounds in (("logs/observer.log", 7), ("observer15.log", 15)):
        lines = (runs / log).read_text().splitlines()
        for workload, row in (("example launch-bound decode", "decode"), ("small batch", "small batch")):
            at = next(i for i, line in enumerate(lines) if line.startswith(workload))
            base = re.search(r"(\d+\.\d) us/step", lines[at + 1])[1]
            costs = [re.search(r"([+-]\d+\.\d%)", line)[1] for line in lines[at + 2:at + 5]]
            cells = " | ".join(costs)
            assert f" {rounds} | {base} µs | {cells} |" in doc, (row, rounds, base, costs)
            assert re.search(rf"\| {row}[^|]*, {rounds} \| {base} ", doc), (row, rounds)


def test_alongside_power_figures_follow_from_their_archive():
    """docs/benchmarks.md "Against the base revision measured alongside": each row of the table
    as power_table.py --alongside reads the archive, and the same counts read here from the
    results documents by hand (a failing test; the pairs' decision on the slowed kernel)."""
    archive = BENCHMARKS / "results" / "alongside_h200_x4_2026-11-28.tar.xz"
    out = run_script("power_table.py", "--alongside", str(archive))
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in out.splitlines()[2:] if line.strip()}
    assert rows[("test_cnn_train_step", "0%")][:2] == ["0/12", "0/12"]
    assert rows[("test_cnn_train_step", "3%")] == ["11/11", "11/11", "3-3", "1.029-1.034"]
    assert rows[("test_transformer_train_step", "0%")][:2] == ["0/12", "0/12"]
    assert rows[("test_transformer_train_step", "3%")] == ["3/11", "3/11", "0-3", "1.027-1.033"]
    counts: dict[tuple[str, str], list[int]] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            match = re.search(r"/s([0-9.]+)-\d+\.json$", member.name)
            if not match:
                continue
            for test in json.load(tar.extractfile(member))["tests"]:
                cell = counts.setdefault((test["nodeid"].split("::")[-1], match[1]), [0, 0, 0])
                decisions = (test.get("alongside") or {}).get("decisions") or []
                cell[0] += test["status"] == "failed"
                cell[1] += any(d["outcome"] == "worse" for d in decisions)
                cell[2] += 1
    assert counts == {("test_cnn_train_step", "0"): [0, 0, 12], ("test_cnn_train_step", "0.03"): [11, 11, 11],
                      ("test_transformer_train_step", "0"): [0, 0, 12],
                      ("test_transformer_train_step", "0.03"): [3, 3, 11]}
    docs = doc_text()
    assert "| CNN | 3% | 11/11 | **11/11** | 3 | 1.029-1.034 |" in docs
    assert "| transformer | 3% | 3/11 | 3/11 | 0-3 | 1.027-1.033 |" in docs
