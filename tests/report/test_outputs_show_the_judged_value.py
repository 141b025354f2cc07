"""Every output shows one value per metric: the value its verdict judged, with the same change.

A real trace (the MoE test of the example suite) is judged against its own baseline,
changed in the test by a known amount: kernel time per step halved in every step (the
run regresses by about +100%), and so the heaviest kernel's time, gpu_utilization lowered
by 0.1 in every step (the run improves by about +0.1).  The baseline's totals are left as they are, so total / steps
and the median step differ there: an output computing its numbers apart from the
verdict shows other ones.  The values are worked out here from the per-step samples;
then the terminal table, the Markdown summary, the HTML report, the JUnit properties,
the benchmark file, ``gpuprof analyze`` and ``gpuprof diff`` must each show them.
"""

import html
import json
import re
import statistics
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from helpers.folds import read_page
from helpers.suites import (
    CNN,
    GPU,
    MOE,
    TRACE,
    baseline_path,
    fixture_test,
    load,
    marker_test,
    replay_dir,
    save,
    section,
    write_module,
)


def number(value):
    """A raw value as the JUnit properties and the benchmark file hold it: integers bare,
    ratios to 6 decimals, the rest to 3."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.{6 if abs(value) < 1 else 3}f}".rstrip("0").rstrip(".")


def shown(metric, value):
    """A value as the reports show it (docs/metrics.md), worked out apart from ``numbers``: a
    time to 4 significant digits in µs, or in ms from 1000 µs (none here reaches a second), a
    ratio as a percentage to one decimal, a count bare."""
    if metric.endswith("_us"):
        return f"{value / 1000:.4g} ms" if value >= 999.95 else f"{value:.4g} µs"
    return f"{value:.1%}" if metric == "gpu_utilization" else number(value)


def summary(values, digits):
    """A stored distribution summary, worked out apart from numpy (statistics' inclusive
    quartiles are the same linear interpolation)."""
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return {"n": len(values), "median": round(median, digits), "q1": round(q1, digits), "q3": round(q3, digits),
            "min": min(values), "max": max(values)}


def gpuprof(*args):
    return subprocess.run([sys.executable, "-m", "pytest_gpuprof", *args], capture_output=True, text=True)


def recorded_suite(pytester) -> tuple[str, ...]:
    """The MoE (fixture form) and CNN (marker form) tests with baselines recorded from their
    shipped traces; the arguments that replay them."""
    pytester.makefile(".ini", pytest="[pytest]\n")
    write_module(pytester, "test_moe", fixture_test("test_moe_forward"))
    write_module(pytester, "test_cnn", marker_test("test_cnn_train_step"))
    args = ("-p", "no:cacheprovider", f"--gpuprof-replay={replay_dir(pytester)}")
    assert pytester.runpytest(*args, "--gpuprof-update-baseline").ret == 0
    return args


def test_every_output_shows_the_verdicts_value_and_change(pytester):
    args = recorded_suite(pytester)

    path = baseline_path(pytester, "test_moe")
    doc = load(path)
    entry = doc["tests"][MOE][GPU]
    samples = json.loads(gpuprof("analyze", "--json", str(TRACE[MOE])).stdout)["per_step"]
    assert not any(samples["stalled"])
    entry["per_step"]["kernel_time_us"] = [round(v / 2, 3) for v in samples["kernel_time_us"]]
    entry["per_step"]["gpu_utilization"] = [round(v - 0.1, 6) for v in samples["gpu_utilization"]]
    [run] = entry["runs"]  # the one recorded run is the changed one
    run["per_step"] = entry["per_step"]
    for metric, digits in (("kernel_time_us", 3), ("gpu_utilization", 6)):
        entry["distribution"][metric] = run["distribution"][metric] = summary(entry["per_step"][metric], digits)
    heaviest = next(iter(entry["metrics"]["kernels"]))
    entry["per_step"]["kernels"][heaviest] = [round(v / 2, 3) for v in samples["kernels"][heaviest]]
    entry["distribution"]["kernels"][heaviest] = run["distribution"]["kernels"][heaviest] = \
        summary(entry["per_step"]["kernels"][heaviest], 3)
    save(path, doc)

    # worked out here: the medians of both runs' steps and their change
    time_now = statistics.median(samples["kernel_time_us"])
    time_before = statistics.median(entry["per_step"]["kernel_time_us"])
    util_now = round(statistics.median(samples["gpu_utilization"]), 6)
    util_before = round(statistics.median(entry["per_step"]["gpu_utilization"]), 6)
    kernels = entry["metrics"]["kernel_count"] / entry["metrics"]["step_count"]
    kernel_now = statistics.median(samples["kernels"][heaviest])
    kernel_before = statistics.median(entry["per_step"]["kernels"][heaviest])
    raw = {"kernel_time_us": (time_before, time_now), "gpu_utilization": (util_before, util_now),
           "kernel_count": (kernels, kernels), f"kernels[{heaviest}].time_us": (kernel_before, kernel_now)}
    changes = {"kernel_time_us": f"{time_now / time_before - 1:+.1%}",
               "gpu_utilization": f"{(util_now - util_before) * 100:+.1f} pp",  # a ratio's change in points
               "kernel_count": "+0.0%", f"kernels[{heaviest}].time_us": f"{kernel_now / kernel_before - 1:+.1%}"}
    # as the reports show them (units by magnitude), and as JUnit and the benchmark file hold them (raw)
    expected = {metric: (shown(metric, b), shown(metric, c), changes[metric]) for metric, (b, c) in raw.items()}
    numbers = {metric: (number(b), number(c)) for metric, (b, c) in raw.items()}
    # total / steps is another number on this trace: an output computing it would show it
    assert shown("kernel_time_us", entry["metrics"]["kernel_time_us"] / entry["metrics"]["step_count"]) \
        != expected["kernel_time_us"][0]
    assert shown("gpu_utilization", entry["metrics"]["gpu_utilization"]) != expected["gpu_utilization"][0]

    out = pytester.path / "out"
    result = pytester.runpytest(*args, f"--gpuprof-json={out / 'r.json'}", f"--gpuprof-summary={out / 's.md'}",
                                f"--gpuprof-html={out / 'r.html'}", f"--gpuprof-benchmark-json={out / 'b.json'}",
                                f"--junitxml={out / 'j.xml'}")
    result.assert_outcomes(failed=1, passed=1)

    # the verdicts judged those values (results document)
    results = json.loads((out / "r.json").read_text())
    moe = next(t for t in results["tests"] if t["nodeid"] == MOE)
    verdicts = {v["metric"]: v for v in moe["verdicts"] if "threshold" not in v}
    assert verdicts["kernel_time_us"]["status"] == "regressed" and verdicts["gpu_utilization"]["status"] == "improved"
    for metric, (before, now) in numbers.items():  # the document keeps the raw numbers
        v = verdicts[metric]
        assert (number(v["baseline"]), number(v["current"]), v["change"]) == (before, now, changes[metric]), metric

    # terminal table: "current (change)" in the metric's column
    lines = section(result)
    header = next(line for line in lines if line.startswith("test "))
    row = next(line for line in lines if line.startswith(MOE + " "))
    for metric, title in (("kernel_count", "kernels/step"), ("kernel_time_us", "kernel time (median step)"),
                          ("gpu_utilization", "gpu util (median step)")):
        start = header.index(title)
        _, now, change = expected[metric]
        assert row[start:].startswith(f"{now} ({change})"), (metric, row)
    assert any("as the verdicts judge it: times and ratios the median step" in line for line in lines)

    # Markdown summary: "baseline → current (change)"
    markdown = (out / "s.md").read_text()
    md_row = next(line for line in markdown.splitlines() if MOE in line and line.startswith("|"))
    for metric in ("kernel_count", "kernel_time_us", "gpu_utilization"):
        before, now, change = expected[metric]
        assert f"| {before} → {now} ({change}) |" in md_row

    # HTML report: the top table's row, then each metric's row below
    page = read_page(out / "r.html")
    top = re.search(r'<table class="grid summary".*?</table>', page, re.S).group(0)
    top_row = next(r for r in top.split("<tr") if MOE in html.unescape(re.sub(r"<[^>]+>", "", r)))
    cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).replace("\u00a0", " ")
             for c in re.findall(r'<td class="num">(.*?)</td>', top_row)]
    for metric in ("kernel_count", "kernel_time_us", "gpu_utilization"):
        _, now, change = expected[metric]
        assert f"{now} ({change})" in cells, (metric, cells)
    heading = next(m for m in re.finditer(r"<h2.*?</h2>", page, re.S)
                   if MOE in html.unescape(re.sub(r"<[^>]+>", "", m[0])))
    section_of_moe = page[heading.start():]
    for metric in ("kernel_time_us", "gpu_utilization"):
        metric_row = re.search(rf'<tr class="m-[a-z]+" data-metric="{metric}">.*?</tr>', section_of_moe, re.S).group(0)
        text = html.unescape(re.sub(r"<[^>]+>", " ", metric_row))
        before, now, change = expected[metric]
        assert re.search(rf"(?<![\d.]){re.escape(before)}(?![\d.])", text), (before, text)
        assert re.search(rf"(?<![\d.]){re.escape(now)}(?![\d.])", text), (now, text)
        assert f" {change} " in text, (metric, text)
    kernel_row = next(r.split("</tr>")[0] for r in section_of_moe.split('<tr class="k-')[1:]
                      if f"<code>{html.escape(heaviest)}</code>" in r)  # the kernel diff's row
    before, now, _ = expected[f"kernels[{heaviest}].time_us"]
    assert f"{before} → {now}" in html.unescape(kernel_row), kernel_row

    # JUnit properties: the raw current value, the baseline's beside it
    props = {p.get("name"): p.get("value") for tc in ET.parse(out / "j.xml").iter("testcase")
             if tc.get("name") == "test_moe_forward" for p in tc.iter("property")}
    for metric in ("kernel_count", "kernel_time_us", "gpu_utilization"):
        assert (props[f"gpuprof.{metric}.baseline"], props[f"gpuprof.{metric}"]) == numbers[metric], metric

    # benchmark file: the current value, and gpu_utilization in each entry's extra
    entries = {e["name"]: e for e in json.loads((out / "b.json").read_text())}
    kernel_time = entries[f"{MOE} kernel_time_us [{GPU}]"]
    assert number(kernel_time["value"]) == numbers["kernel_time_us"][1]
    assert f"gpu_utilization: {numbers['gpu_utilization'][1]};" in kernel_time["extra"]

    # gpuprof analyze: the current value per step, beside the total
    analyzed = gpuprof("analyze", str(TRACE[MOE])).stdout.splitlines()
    per_step = next(line for line in analyzed if line.startswith("kernels ")).split("|")[0].split()
    assert per_step[1:4] == [expected["kernel_count"][1], *expected["kernel_time_us"][1].split()]
    util = next(line for line in analyzed if line.startswith("gpu_utilization ")).split()[1]
    assert util == expected["gpu_utilization"][1]

    # gpuprof diff: the baseline as run A (its samples and totals), this run as B
    run_a = {**moe, "metrics": moe["baseline_metrics"], "per_step": moe["baseline_per_step"],
             "distribution": moe["baseline_distribution"]}
    (out / "diff_a.json").write_text(json.dumps({**results, "tests": [run_a]}))
    (out / "diff_b.json").write_text(json.dumps({**results, "tests": [moe]}))
    diffed = gpuprof("diff", str(out / "diff_a.json"), str(out / "diff_b.json"))
    assert diffed.returncode == 1, diffed.stdout + diffed.stderr
    for metric in ("kernel_time_us", "gpu_utilization", f"kernels[{heaviest}].time_us"):
        before, now, change = expected[metric]
        assert f"  {metric}: baseline {before}, current {now} ({change}) [" in diffed.stdout, diffed.stdout
    # and its kernel table: the heaviest kernel's median step in A and in B
    before, now = numbers[f"kernels[{heaviest}].time_us"]
    [row] = [line for line in diffed.stdout.splitlines() if line.startswith("  slower ") and heaviest[:50] in line]
    assert row.split()[3:6] == [before, now, "+" + number(round(kernel_now - kernel_before, 3))], row


def metric_row(page, nodeid, metric):
    """The text of a metric's row in a test's section of the HTML report."""
    heading = next(m for m in re.finditer(r"<h2.*?</h2>", page, re.S)
                   if nodeid in html.unescape(re.sub(r"<[^>]+>", "", m[0])))
    row = re.search(rf'<tr class="m-[a-z-]+" data-metric="{re.escape(metric)}">.*?</tr>', page[heading.start():], re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row.group(0))))


def test_a_metric_without_a_comparison_shows_its_median_step_too(pytester):
    """No baseline (MoE), and a metric the baseline's runs do not hold ("not compared": the CNN's
    memcpy_dtod_gbps, stripped from its baseline as an older one lacks it): the HTML report
    shows the median step that the thresholds judged and every other output shows, not
    total / steps or the whole window's ratio or rate."""
    args = recorded_suite(pytester)
    baseline_path(pytester, "test_moe").unlink()
    unkept = ("memcpy_dtod_gbps",)
    path = baseline_path(pytester, "test_cnn")
    doc = load(path)
    entry = doc["tests"][CNN][GPU]
    for stored in (entry, *entry["runs"]):
        for key in ("per_step", "distribution", "metrics"):
            for metric in unkept:
                stored.get(key, {}).pop(metric, None)
    save(path, doc)

    out = pytester.path / "out"
    result = pytester.runpytest(*args, f"--gpuprof-json={out / 'r.json'}", f"--gpuprof-summary={out / 's.md'}",
                                f"--gpuprof-html={out / 'r.html'}", f"--junitxml={out / 'j.xml'}")
    result.assert_outcomes(passed=2)
    results = {t["nodeid"]: t for t in json.loads((out / "r.json").read_text())["tests"]}
    assert results[MOE]["status"] == "no baseline"
    cnn = {v["metric"]: v for v in results[CNN]["verdicts"] if "threshold" not in v}
    for metric in unkept:
        assert cnn[metric]["rule"].startswith("not compared") and cnn[metric]["baseline"] is None, cnn[metric]

    page = read_page(out / "r.html")
    props = {(tc.get("name"), p.get("name")): p.get("value") for tc in ET.parse(out / "j.xml").iter("testcase")
             for p in tc.iter("property")}
    checked = 0
    for nodeid, metrics in ((MOE, ("kernel_time_us", "window_us", "gpu_utilization")), (CNN, unkept)):
        samples = json.loads(gpuprof("analyze", "--json", str(TRACE[nodeid])).stdout)
        steps = samples["metrics"]["step_count"]
        for metric in metrics:
            median = statistics.median(samples["per_step"][metric])
            whole = samples["metrics"][metric] / (steps if metric.endswith("_us") else 1)  # a time: total / steps
            judged, other = (f"{v:.4g} GB/s" if metric.endswith("_gbps") else shown(metric, v) for v in (median, whole))
            assert judged != other, metric  # the two differ in these traces
            text = metric_row(page, nodeid, metric)
            assert re.search(rf"current: {re.escape(judged)}(/step)? ", text), (nodeid, metric, judged, text)
            assert other not in text, (nodeid, metric, other, text)
            assert float(props[nodeid.rpartition("::")[2], f"gpuprof.{metric}"]) == \
                pytest.approx(median, abs=1e-3), (nodeid, metric)  # JUnit holds the same value
            checked += 1
    assert checked == 4
