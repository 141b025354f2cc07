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

from test_plugin import (GPU, MOE, TRACE, baseline_path, fixture_test, load, marker_test, replay_dir, save,
                         section, write_module)


def number(value):
    """A value as every output prints it: integers bare, ratios to 6 decimals, the rest to 3."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.{6 if abs(value) < 1 else 3}f}".rstrip("0").rstrip(".")


def summary(values, digits):
    """A stored distribution summary, worked out apart from numpy (statistics' inclusive
    quartiles are the same linear interpolation)."""
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return {"n": len(values), "median": round(median, digits), "q1": round(q1, digits), "q3": round(q3, digits),
            "min": min(values), "max": max(values)}


def gpuprof(*args):
    return subprocess.run([sys.executable, "-m", "pytest_gpuprof", *args], capture_output=True, text=True)


def test_every_output_shows_the_verdicts_value_and_change(pytester):
    pytester.makefile(".ini", pytest="[pytest]\n")
    write_module(pytester, "test_moe", fixture_test("test_moe_forward"))
    write_module(pytester, "test_cnn", marker_test("test_cnn_train_step"))
    folder = replay_dir(pytester)
    args = ("-p", "no:cacheprovider", f"--gpuprof-replay={folder}")
    assert pytester.runpytest(*args, "--gpuprof-update-baseline").ret == 0

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
    expected = {
        "kernel_time_us": (number(time_before), number(time_now), f"{time_now / time_before - 1:+.1%}"),
        "gpu_utilization": (number(util_before), number(util_now), f"{util_now - util_before:+.6f}".rstrip("0")),
        "kernel_count": (number(kernels), number(kernels), "+0.0%"),
        f"kernels[{heaviest}].time_us": (number(kernel_before), number(kernel_now),
                                         f"{kernel_now / kernel_before - 1:+.1%}"),
    }
    # total / steps is another number on this trace: an output computing it would show it
    assert number(entry["metrics"]["kernel_time_us"] / entry["metrics"]["step_count"]) != expected["kernel_time_us"][0]
    assert number(entry["metrics"]["gpu_utilization"]) != expected["gpu_utilization"][0]

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
    for metric, (before, now, change) in expected.items():
        v = verdicts[metric]
        assert (number(v["baseline"]), number(v["current"]), v["change"]) == (before, now, change), metric

    # terminal table: "current (change)" in the metric's column
    lines = section(result)
    header = next(line for line in lines if line.startswith("test "))
    row = next(line for line in lines if line.startswith(MOE + " "))
    for metric, title in (("kernel_count", "kernels/step"), ("kernel_time_us", "kernel us (median step)"),
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
    page = (out / "r.html").read_text()
    top = re.search(r'<table class="grid summary".*?</table>', page, re.S).group(0)
    top_row = next(r for r in top.split("<tr") if html.escape(MOE) in r)
    cells = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r'<td class="num">(.*?)</td>', top_row)]
    assert cells[1:4] == [f"{expected['kernel_count'][1]} ({expected['kernel_count'][2]})",
                          f"{expected['kernel_time_us'][1]}\u00a0us ({expected['kernel_time_us'][2]})",
                          f"{expected['gpu_utilization'][1]} ({expected['gpu_utilization'][2]})"]
    section_of_moe = page[page.index(f"<code>{html.escape(MOE)}</code></h2>"):]
    for metric in ("kernel_time_us", "gpu_utilization"):
        metric_row = re.search(rf'<tr class="m-[a-z]+" data-metric="{metric}">.*?</tr>', section_of_moe, re.S).group(0)
        text = html.unescape(re.sub(r"<[^>]+>", " ", metric_row))
        before, now, change = expected[metric]
        assert re.search(rf"\b{re.escape(before)}\b", text) and re.search(rf"\b{re.escape(now)}\b", text)
        assert f" {change} " in text, (metric, text)
    kernel_row = next(r.split("</tr>")[0] for r in section_of_moe.split('<tr class="k-')[1:]
                      if f"<code>{html.escape(heaviest)}</code>" in r)  # the kernel diff's row
    before, now, _ = expected[f"kernels[{heaviest}].time_us"]
    assert f"{before} us → {now} us" in html.unescape(kernel_row), kernel_row

    # JUnit properties: the current value
    props = {p.get("name"): p.get("value") for tc in ET.parse(out / "j.xml").iter("testcase")
             if tc.get("name") == "test_moe_forward" for p in tc.iter("property")}
    for metric in ("kernel_count", "kernel_time_us", "gpu_utilization"):
        assert props[f"gpuprof.{metric}"] == expected[metric][1], metric

    # benchmark file: the current value, and gpu_utilization in each entry's extra
    entries = {e["name"]: e for e in json.loads((out / "b.json").read_text())}
    kernel_time = entries[f"{MOE} kernel_time_us [{GPU}]"]
    assert number(kernel_time["value"]) == expected["kernel_time_us"][1]
    assert f"gpu_utilization: {expected['gpu_utilization'][1]};" in kernel_time["extra"]

    # gpuprof analyze: the current value per step, beside the total
    analyzed = gpuprof("analyze", str(TRACE[MOE])).stdout.splitlines()
    per_step = next(line for line in analyzed if line.startswith("kernels ")).split("|")[0].split()
    assert per_step[1:3] == [expected["kernel_count"][1], expected["kernel_time_us"][1]]
    util = next(line for line in analyzed if line.startswith("gpu_utilization ")).split()[1]
    assert float(util) == pytest.approx(float(expected["gpu_utilization"][1]), abs=5e-5)  # printed to 4 decimals

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
    before, now, _ = expected[f"kernels[{heaviest}].time_us"]
    [row] = [line for line in diffed.stdout.splitlines() if line.startswith("  slower ") and heaviest[:50] in line]
    assert row.split()[3:6] == [before, now, "+" + number(round(kernel_now - kernel_before, 3))], row
