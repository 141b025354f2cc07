"""Machine-readable results (docs/results.md): the JSON document, the Markdown summary,
$GITHUB_STEP_SUMMARY, the benchmark file and the JUnit properties, from the real example
suite replayed with one planted bug (``.item()`` in the MoE test) against the committed
baselines."""

import html
import json
import re
import statistics
import subprocess
import sys
import xml.etree.ElementTree as ET
from functools import partial
from pathlib import Path

import pytest

from helpers.example_suite import ITEM_TRACE, MOE, ROOT, replay_dir, run_suite
from pytest_gpuprof.compare.machine import on_recorded_card
from pytest_gpuprof.compare.rules import Rules, parse_threshold
from pytest_gpuprof.compare.verdicts import judge
from pytest_gpuprof.report.markdown import KERNEL_WIDTH, summary_markdown
from pytest_gpuprof.report.names import in_metric, short_name

DOCS = ROOT / "docs" / "results.md"
OTHERS = sorted([
    "example_suite/test_cnn.py::test_cnn_train_step",
    "example_suite/test_distributed.py::test_ddp_training",
    "example_suite/test_distributed.py::test_expert_parallel_moe",
    "example_suite/test_fused_norm.py::test_fused_add_rmsnorm",
    "example_suite/test_launch_bound.py::test_small_batch_decode",
    "example_suite/test_transformer.py::test_transformer_train_step",
    "example_suite/test_weight_streaming.py::test_weight_streaming",
])
#: The summary tables' rows after the failing test: a distributed test's ranks follow it.
ROWS = [row for n in OTHERS for row in [n] + ([f"{n} [rank 0]", f"{n} [rank 1]"] if "distributed" in n else [])]


def failure_lines(stdout: str) -> list[str]:
    """The broken-metric lines of the one gpuprof failure message in the output: indented,
    up to the notes in brackets and the next steps."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"gpuprof: \d+ metric\(s\) broke", line))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ") or lines[i].startswith("  ("))
    return [line[2:] for line in lines[start + 1:end]]


@pytest.fixture(scope="module")
def run(item_replay):
    """One run writing every report (made once for the run: tests/conftest.py); returns
    (output dir, completed process)."""
    out, proc = item_replay
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the planted bug fails its test
    return out, proc


@pytest.fixture(scope="module")
def planted_analysis():
    out = subprocess.run([sys.executable, "-m", "pytest_gpuprof", "analyze", "--json", str(ITEM_TRACE)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def planted_metrics(planted_analysis):
    return planted_analysis["metrics"]


@pytest.fixture(scope="module")
def planted_per_step(planted_analysis):
    return planted_analysis["per_step"]


# --- the results document ---------------------------------------------------

def test_json_document_puts_the_regression_first_with_its_numbers(run, planted_metrics):
    out, proc = run
    doc = json.loads((out / "results.json").read_text())
    assert doc["schema_version"] == 1 and doc["backend"] == "torch"
    assert doc["baseline_dir"] == str(ROOT / "baselines")
    assert doc["counts"] == {"failed": 1, "passed": len(OTHERS), "skipped": 0}
    assert [t["nodeid"] for t in doc["tests"]] == [MOE] + OTHERS  # regressions first, then by node id
    assert [t["status"] for t in doc["tests"]] == ["failed"] + ["passed"] * len(OTHERS)
    assert doc["skipped"] == []

    moe = doc["tests"][0]
    assert moe["gpu"] == "NVIDIA H200" and moe["backend"] == "torch" and moe["message"] == ""
    assert moe["trace"] == str(out / "replay" / ITEM_TRACE.name)
    assert moe["metrics"] == planted_metrics  # what `gpuprof analyze` computes from the trace
    stored = json.loads((ROOT / "baselines" / "example_suite" / "test_moe.json").read_text())
    entry = stored["tests"][MOE]["NVIDIA H200"]
    assert moe["baseline_file"] == str(ROOT / "baselines" / "example_suite" / "test_moe.json")
    assert moe["baseline_metrics"] == entry["metrics"]
    assert moe["baseline_backend"] == "torch" and moe["baseline_environment"] == entry["environment"]
    assert moe["environment"]["gpu"] == "NVIDIA H200"
    assert moe["timeline"]["events"] and moe["timeline"]["kinds"][0] == "kernel"

    by_metric = {(v["metric"], v["rule"]): v for v in moe["verdicts"]}
    sync = by_metric[("sync_count", "must match exactly per step (lower is better)")]
    assert sync == {**sync, "status": "regressed", "baseline": 0.0, "current": 8.0, "change": "+8"}
    dtoh = by_metric[("memcpy_dtoh_count", "must match exactly per step")]
    assert (dtoh["status"], dtoh["baseline"], dtoh["current"]) == ("changed", 0.0, 8.0)
    new = [v for v in moe["verdicts"] if v["status"] == "new"]
    assert len(new) == 2 and all(v["metric"].startswith("kernels[") and v["current"] == 8 for v in new)
    # the failure message printed is made from these verdicts
    shown = failure_lines(proc.stdout)
    # one line for the metric, its marker threshold's words and its baseline verdict's
    assert ("sync_count: current 8 violates threshold sync_count == 0; baseline 0, current 8 (+8) [regressed; "
            "rule: must match exactly per step (lower is better)]") in shown
    assert all(t["verdicts"] and all(v["status"] in ("ok", "improved") for v in t["verdicts"])
               for t in doc["tests"][1:])


def test_json_document_carries_both_runs_samples_and_distributions(run, planted_per_step):
    """Enough to judge the time verdicts again from the document alone."""
    out, _ = run
    doc = json.loads((out / "results.json").read_text())
    moe = doc["tests"][0]
    assert moe["per_step"] == planted_per_step  # 10 steps: under the cap, all kept
    steps = planted_per_step["kernel_time_us"]
    q1, median, q3 = statistics.quantiles(steps, n=4, method="inclusive")  # numpy's linear interpolation
    assert moe["distribution"]["kernel_time_us"] == pytest.approx(
        {"n": 10, "median": median, "q1": q1, "q3": q3, "min": min(steps), "max": max(steps)}, abs=1e-3)
    assert set(moe["distribution"]["kernels"]) == set(planted_per_step["kernels"])
    # the baseline's samples and summaries as stored (10 steps: its summaries are of all of them)
    stored = json.loads((ROOT / "baselines" / "example_suite" / "test_moe.json").read_text())
    entry = stored["tests"][MOE]["NVIDIA H200"]
    assert moe["baseline_per_step"] == entry["per_step"] and moe["baseline_distribution"] == entry["distribution"]
    assert moe["baseline_distribution"]["window_us"]["median"] == pytest.approx(
        statistics.median(entry["per_step"]["window_us"]), abs=1e-3)
    assert moe["baseline_distribution"]["window_us"]["n"] == len(entry["per_step"]["window_us"])

    # every verdict again, from the document and the test's marker thresholds alone
    marker = ("sync_count == 0", "gpu_utilization >= 0.85")  # example_suite/test_moe.py
    rules = Rules(thresholds=tuple(parse_threshold(t, "marker") for t in marker))
    again = judge(moe["metrics"], moe["baseline_metrics"], rules, True, (moe["per_step"], moe["baseline_per_step"]),
                  (moe["distribution"], moe["baseline_distribution"]),
                  moe["baseline_runs"], other_card=not on_recorded_card(moe["environment"], moe["baseline_runs"]))
    assert len(moe["baseline_runs"]) == len(entry["runs"]) == 3  # recorded in 3 processes
    assert [v.to_json() for v in again] == moe["verdicts"]
    assert any("Mann-Whitney U p=" in v["evidence"] for v in moe["verdicts"])


def stored_entry(nodeid):
    module = nodeid.split("::")[0].removeprefix("example_suite/").removesuffix(".py")
    return json.loads((ROOT / "baselines" / "example_suite" / f"{module}.json").read_text())["tests"][nodeid][
        "NVIDIA H200"]


def test_json_document_keeps_of_each_recorded_run_what_judges_it_not_its_steps(run):
    """A baseline's recorded runs, the history its entry keeps (3 runs each here, 5 by
    default), cost a test's document a few numbers a run: each summary's median, the probes,
    the environment and its host series' medians at the baseline host's speed; not the runs'
    steps, nor their summaries' quartiles.  Judged again from the runs so kept, or from the
    runs as stored (a document of before 2026-11-28 kept their steps), every test of one
    process gets the same verdicts."""
    out, _ = run
    doc = json.loads((out / "results.json").read_text())
    host_medians = 0
    for t in doc["tests"]:
        if t["ranks"] is not None:
            continue
        entry = stored_entry(t["nodeid"])
        assert len(t["baseline_runs"]) == len(entry["runs"]) == 3
        for kept, stored in zip(t["baseline_runs"], entry["runs"]):
            assert set(kept) == {"distribution", "machine", "environment", "at_baseline_speed"}
            assert kept["environment"] == stored["environment"] and kept["machine"] == stored.get("machine")
            summaries = {**{k: v for k, v in stored["distribution"].items() if k != "kernels"},
                         **stored["distribution"]["kernels"]}
            assert {**{k: v for k, v in kept["distribution"].items() if k != "kernels"},
                    **kept["distribution"]["kernels"]} == {k: {"median": v["median"]} for k, v in summaries.items()}
            assert len(json.dumps(kept)) < len(json.dumps(stored)) / 2
            host_medians += kept["at_baseline_speed"] is not None
        rules = Rules()
        again = {}
        for form, runs in (("kept", t["baseline_runs"]), ("stored", entry["runs"])):
            again[form] = [v.to_json() for v in judge(
                t["metrics"], t["baseline_metrics"], rules, True, (t["per_step"], t["baseline_per_step"]),
                (t["distribution"], t["baseline_distribution"]), runs,
                other_card=not on_recorded_card(t["environment"], runs))]
        assert again["kept"] == again["stored"], t["nodeid"]
    assert host_medians  # some test's runs judged at the baseline host's speed


def test_every_member_of_the_document_is_documented(run):
    out, _ = run
    doc = json.loads((out / "results.json").read_text())
    text = DOCS.read_text()
    members = set(doc) | set(doc["tests"][0]) | set(doc["tests"][0]["timeline"])
    members |= {k for t in doc["tests"] for v in t["verdicts"] for k in v} | set(doc["counts"])
    missing = sorted(m for m in members if f"`{m}`" not in text)
    assert not missing, f"not in docs/results.md: {missing}"
    from pytest_gpuprof.compare.status import STATUSES as STATUS_ORDER

    assert ", ".join(f"`{s}`" for s in STATUS_ORDER) in text  # the status order, as the code has it


# --- Markdown summary ---------------------------------------------------------

def table_rows(markdown: str) -> list[list[str]]:
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


def test_summary_table_starts_with_the_failing_test(run):
    out, _ = run
    text = (out / "summary.md").read_text()
    assert text.startswith(f"## gpuprof: 1 failed, {len(OTHERS)} passed\n")
    header, first, passed_header, *passed = table_rows(text)[:len(OTHERS) + 3]
    assert header == passed_header == ["status", "test", "verdict"]
    assert first[:2] == ["❌&nbsp;**failed**", "`test_moe.py::`<wbr>`test_moe_forward`"]
    assert re.match(r"\d+ metric\(s\) broke: sync_count 8 \(threshold == 0\), ", markdown_unescaped(first[2]))
    # the passing tests folded, in the document's order
    assert f"<details><summary>✅ {len(OTHERS)} passed</summary>" in text
    assert [re.sub(r"`|<wbr>", "", r[1]) for r in passed] == [n.rpartition("/")[2] for n in OTHERS]
    assert all(r[0] == "✅&nbsp;passed" and r[2] == "within the rules" for r in passed)
    # the key metrics, folded: a row per test and rank, failing test first
    metrics = text[text.index("<details><summary>Key metrics per step</summary>"):]
    key_header, key_first, *key_rest = table_rows(metrics)
    assert key_header[:2] == ["test", "kernels/step"] and key_first[0] == f"`{MOE}`"
    assert key_first[key_header.index("syncs/step")] == "0 → 8 (+8)"
    assert [r[0] for r in key_rest] == [f"`{n}`" for n in ROWS]


def markdown_unescaped(text: str) -> str:
    """Markdown text as it renders: backslash escapes and the entities of < and & undone."""
    return html.unescape(re.sub(r"\\([\\`*_\[\]#!~|])", r"\1", text))


def test_summary_lists_the_broken_metrics_in_the_failure_message_words(run):
    out, proc = run
    text = (out / "summary.md").read_text()
    failures = text[text.index("### Failures"):]
    assert f"<details><summary>❌ <code>{MOE}</code></summary>" in failures
    header = next(line for line in proc.stdout.splitlines() if re.match(r"gpuprof: \d+ metric\(s\) broke", line))
    assert header[len("gpuprof: "):] in markdown_unescaped(failures)
    shown = failure_lines(proc.stdout)
    assert len(shown) >= 7
    items = [line for line in failures.splitlines() if line.startswith("- `")]  # not the notes after them
    assert len(items) == len(shown)
    for item, line in zip(items, shown):
        metric, words = re.fullmatch(r"- `(.*?)`: (.*)", item).groups()
        shown_metric, shown_words = line.split(": ", 1)
        # same metric (a kernel's name shortened), same words, same order
        shortened = in_metric(shown_metric, partial(short_name, width=KERNEL_WIDTH))
        assert (metric, markdown_unescaped(words)) == (shortened, shown_words)
    assert "Next step for a changed count, byte total or kernel: " in failures  # the .item() launches more work


def test_github_step_summary_is_appended_to_and_an_explicit_path_wins(tmp_path):
    replay = replay_dir(tmp_path / "replay")
    step_summary = tmp_path / "step_summary.md"
    step_summary.write_text("## an earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(step_summary)}
    proc = run_suite(tmp_path, replay, "-k", "test_moe", env=env)
    assert proc.returncode == 1
    assert f"summary report: appended to {step_summary}" in proc.stdout
    first = step_summary.read_text()
    assert first.startswith("## an earlier step\n\n## gpuprof: 1 failed\n")
    run_suite(tmp_path, replay, "-k", "test_moe", env=env)
    second = step_summary.read_text()
    assert second.startswith(first) and second.count("## gpuprof: 1 failed") == 2

    proc = run_suite(tmp_path, replay, "-k", "test_moe", "--gpuprof-summary", "own.md", env=env)
    assert step_summary.read_text() == second  # the option's file instead, not both
    assert (tmp_path / "own.md").read_text().startswith("## gpuprof: 1 failed\n")
    assert f"summary report: {tmp_path / 'own.md'}" in proc.stdout


def test_no_summary_without_the_option_or_the_variable(tmp_path):
    proc = run_suite(tmp_path, replay_dir(tmp_path / "replay"), "-k", "test_moe")
    assert proc.returncode == 1
    assert "summary report" not in proc.stdout and not list(tmp_path.glob("*.md"))


def test_summary_escapes_what_markdown_would_misread():
    doc = {
        "backend": "torch", "baseline_dir": "/b", "counts": {"error": 1, "skipped": 1},
        "skipped": [{"nodeid": "t.py::s", "reason": "gpuprof: no CUDA GPU available"}],
        "tests": [{"nodeid": "t.py::test_x[a|b]", "status": "error", "gpu": None, "metrics": None,
                   "baseline_metrics": None, "verdicts": [], "baseline_file": None,
                   "message": "cannot read trace <x> | y"}],
    }
    text = summary_markdown(doc)
    header, row = table_rows(text)[:2]
    assert len(row) == len(header)  # the pipe in the node id did not split the cell
    assert row[0] == "❌&nbsp;**error**" and row[1] == r"`t.py::`<wbr>`test_x[a\|b]`"
    assert row[-1] == r"cannot read trace &lt;x> \| y"
    assert "1 profiled test(s) skipped: gpuprof: no CUDA GPU available" in text
    assert "```text\ngpuprof: cannot read trace <x> | y\n```" in text  # verbatim in a code block


# --- benchmark file -----------------------------------------------------------

def test_benchmark_json_is_github_action_benchmark_custom_format(run, planted_metrics, planted_per_step):
    out, _ = run
    entries = json.loads((out / "bench.json").read_text())
    assert isinstance(entries, list) and entries
    for e in entries:
        assert set(e) == {"name", "unit", "value", "extra"}
        assert isinstance(e["name"], str) and isinstance(e["unit"], str) and isinstance(e["extra"], str)
        assert isinstance(e["value"], (int, float)) and not isinstance(e["value"], bool)
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names))
    by_name = {e["name"]: e for e in entries}
    steps = planted_metrics["step_count"]
    sync = by_name[f"{MOE} sync_count [NVIDIA H200]"]
    assert (sync["unit"], sync["value"]) == ("count/step", 8)
    time = by_name[f"{MOE} kernel_time_us [NVIDIA H200]"]
    assert time["unit"] == "us/step"  # the median step, as the verdict judges it, not total / steps
    assert time["value"] == pytest.approx(as_judged("kernel_time_us", planted_metrics, planted_per_step), abs=5e-4)
    assert time["value"] != pytest.approx(planted_metrics["kernel_time_us"] / steps, abs=1)
    assert by_name[f"{MOE} memcpy_dtoh_bytes [NVIDIA H200]"]["unit"] == "B/step"
    assert by_name[f"{MOE} peak_memory_allocated_bytes [NVIDIA H200]"]["value"] == \
        planted_metrics["peak_memory_allocated_bytes"]
    assert "status: failed" in sync["extra"]
    shown = re.search(r"gpu_utilization: ([0-9.]+)(;|$)", sync["extra"]).group(1)
    assert float(shown) == pytest.approx(as_judged("gpu_utilization", planted_metrics, planted_per_step), abs=5e-7)
    # smaller is better throughout: no metric where higher is better
    assert not [n for n in names if "gpu_utilization" in n or "overlap_efficiency" in n]
    per_test = {re.fullmatch(r"(.*) \S+ \[[^]]*\]", n).group(1) for n in names}  # NODEID[ [rank N]] METRIC [GPU]
    assert per_test == {MOE} | {n for n in ROWS if "distributed" not in n or "[rank" in n}
    assert len(entries) == len(per_test) * len([n for n in names if n.startswith(MOE + " ")])
    documented = DOCS.read_text()
    for metric in {re.fullmatch(r".* (\S+) \[[^]]*\]", n).group(1) for n in names}:
        kind_free = re.sub(r"memcpy_(htod|dtoh|dtod|ptop)_", "memcpy_<kind>_", metric)
        assert f"`{kind_free}`" in documented


# --- JUnit XML ----------------------------------------------------------------

RATIOS = ("gpu_utilization", "copy_utilization", "pcie_utilization", "overlap_efficiency", "sync_wait_fraction")


#: Judged on their median step: times, and the ratios with a better direction (docs/metrics.md).
MEDIAN_STEP = ("gpu_utilization", "pcie_utilization", "overlap_efficiency", "sync_wait_fraction",
               "comm_compute_overlap")


def as_judged(metric, metrics, per_step):
    """A metric as docs/metrics.md says its verdict judges it, worked out here: times, rates
    and the directed ratios the median of the steps not stalled (where the run kept their
    steps), the step count, peak memory, the host-speed reading and copy_utilization as they
    are, every count and byte total per step."""
    value = metrics[metric]
    if value is not None and metric in per_step and metric != "launch_call_us" and (
            metric.endswith(("_us", "_gbps")) or metric in MEDIAN_STEP):
        stalled = per_step["stalled"]
        return statistics.median(v for i, v in enumerate(per_step[metric]) if v is not None and not stalled[i])
    if value is None or metric in RATIOS + ("step_count", "peak_memory_allocated_bytes", "launch_call_us"):
        return value
    return value / metrics["step_count"]


def properties(junit: Path) -> dict[str, list[tuple[str, str]]]:
    tree = ET.parse(junit)
    return {tc.get("name"): [(p.get("name"), p.get("value")) for p in tc.iter("property")]
            for tc in tree.iter("testcase")}


def test_junit_xml_carries_status_metrics_and_broken_verdicts(run, planted_metrics, planted_per_step):
    out, proc = run
    props = properties(out / "junit.xml")
    moe = props["test_moe_forward"]
    named = dict(moe)
    assert all(name.startswith("gpuprof.") for name in named) and len(named) == len(moe)  # one style, none twice
    assert named["gpuprof.status"] == "failed" and named["gpuprof.gpu"] == "NVIDIA H200"
    assert named["gpuprof.baseline_file"] == str(ROOT / "baselines" / "example_suite" / "test_moe.json")
    scalars = [k for k, v in planted_metrics.items() if not isinstance(v, (dict, list))]
    assert len(scalars) == 33  # docs/metrics.md: 33 scalar metrics
    for metric in scalars:
        expected = as_judged(metric, planted_metrics, planted_per_step)
        if expected is None:
            assert f"gpuprof.{metric}" not in named
            continue
        text = named[f"gpuprof.{metric}"]
        if float(expected).is_integer():
            assert text == str(int(expected)), metric  # integers without a decimal point
        else:  # ratios to 6 decimals, the rest to 3 (1 ns)
            assert float(text) == pytest.approx(expected, abs=5e-7 if abs(expected) < 1 else 5e-4), metric
    assert named["gpuprof.sync_count"] == "8" and named["gpuprof.kernel_count"] == "95"
    broken = [f"{name.removeprefix('gpuprof.broken.')}: {value}" for name, value in moe
              if name.startswith("gpuprof.broken.")]
    assert broken == failure_lines(proc.stdout)  # each failure message line, in order, one property each

    passed = dict(props["test_cnn_train_step"])
    assert passed["gpuprof.status"] == "passed" and not any(name.startswith("gpuprof.broken.") for name in passed)
    assert float(passed["gpuprof.gpu_utilization"]) > 0.9


def test_unprofiled_tests_get_no_properties(pytester):
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--gpuprof", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1)
    assert properties(pytester.path / "junit.xml") == {"test_plain": []}
