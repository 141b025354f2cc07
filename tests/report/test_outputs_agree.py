"""Every output tells one story: baselines recorded from a replay of the shipped traces, then
the same traces replayed against them, show no change anywhere (JSON, terminal, Markdown,
HTML, JUnit), each output holds the number the verdict judged, and no note is said twice."""

import html
import json
import re
import shutil
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

import pytest

from helpers.folds import read_page

ROOT = Path(__file__).parents[2]
TRACES = ROOT / "example_suite" / "traces"
#: The unit after a value as the reports show it (docs/metrics.md), ``/step`` after a total per step.
UNIT = r"(?: (?:GB/s|[µm]?s|[KMGT]?i?B)(?:/step)?)?"


def example_suite(out: Path, *args: str):
    """The example suite, its shipped traces replayed, judged against (or recorded into) OUT/B."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    return subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "example_suite"), "--rootdir", str(ROOT), "-p",
                           "no:cacheprovider", f"--gpuprof-replay={TRACES}", f"--gpuprof-baseline-dir={out / 'B'}",
                           *args], cwd=out, capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """Baselines recorded once from a replay of the shipped traces; each replay below judges
    against a copy of its own."""
    out = tmp_path_factory.mktemp("recorded")
    record = example_suite(out, "--gpuprof-update-baseline")
    assert record.returncode == 0, record.stdout + record.stderr
    return out / "B"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory, recorded):
    """(outputs folder, terminal text) of the shipped traces replayed against baselines
    recorded from the same traces."""
    out = tmp_path_factory.mktemp("agree")
    shutil.copytree(recorded, out / "B")
    judged = example_suite(out, "--gpuprof", f"--gpuprof-json={out / 'r.json'}", f"--gpuprof-html={out / 'r.html'}",
                           f"--gpuprof-summary={out / 's.md'}", f"--junitxml={out / 'j.xml'}")
    assert judged.returncode == 0, judged.stdout + judged.stderr
    return out, judged.stdout


def _tests(out: Path) -> list[dict]:
    return json.loads((out / "r.json").read_text())["tests"]


def test_json_every_verdict_baseline_equals_current(replayed):
    out, _ = replayed
    compared = 0
    for t in _tests(out):
        for v in t["verdicts"]:
            if v["baseline"] is None:  # a threshold: nothing to compare with
                continue
            compared += 1
            assert v["current"] == v["baseline"], (t["nodeid"], v)
    assert compared > 300  # every test's metrics, rank by rank


def test_terminal_shows_no_change(replayed):
    _, terminal = replayed
    rows = [line for line in terminal.splitlines() if line.startswith("example_suite/")]
    changes = [c for row in rows for c in re.findall(r"\(([^)]*)\)", row)]
    assert len(rows) == 12 and len(changes) > 40
    assert all(re.fullmatch(r"[+-]?0(\.0+)?(%| pp)?", c) for c in changes), changes


def test_markdown_shows_no_change(replayed):
    out, _ = replayed
    pairs = re.findall(rf"(\S+{UNIT}) → (\S+{UNIT})", (out / "s.md").read_text())
    assert len(pairs) > 40
    assert all(before == after for before, after in pairs), [p for p in pairs if p[0] != p[1]]


def test_html_shows_the_judged_value_on_both_sides(replayed):
    out, _ = replayed
    text = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", read_page(out / "r.html"))))
    pairs = re.findall(rf"current: (\S+{UNIT}) baseline: (\S+{UNIT})", text)
    assert len(pairs) > 100
    assert all(a == b for a, b in pairs), [p for p in pairs if p[0] != p[1]]
    # the bandwidth the verdict judged (the median step's), not the whole window's
    cnn = next(t for t in _tests(out) if t["nodeid"].endswith("test_cnn_train_step"))
    dtod = next(v for v in cnn["verdicts"] if v["metric"] == "memcpy_dtod_gbps")
    assert dtod["current"] != cnn["metrics"]["memcpy_dtod_gbps"]  # the two differ in this trace
    assert f"current: {dtod['current']:.4g} GB/s baseline: {dtod['current']:.4g} GB/s" in text
    assert "; ;" not in text and "1.00x" not in text  # no empty clause, no "1.00x slower" (the launch-bound test)


def _time(us: float) -> str:
    """A time as the reports should show it, worked out apart from ``numbers``: 4 significant
    digits in ms from 1000 us up (no judged kernel time here reaches a second)."""
    return f"{us / 1000:.4g} ms" if us >= 999.95 else f"{us:.4g} µs"


def test_every_output_shows_the_same_text_for_the_judged_time(replayed):
    out, terminal = replayed
    page = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", read_page(out / "r.html"))))
    rows = {line.split()[0]: line for line in terminal.splitlines() if line.startswith("example_suite/")}
    checked = 0
    for t in _tests(out):
        v = next((v for v in t["verdicts"] if v["metric"] == "kernel_time_us" and v.get("rank") is None), None)
        if v is None or "[rank" in t["nodeid"]:
            continue
        shown = _time(v["current"])
        assert f"{shown} (+0.0%)" in rows[t["nodeid"]], (shown, rows[t["nodeid"]])
        assert f"current: {shown}/step baseline: {shown}/step" in page, shown
        checked += 1
    assert checked >= 6


def test_junit_holds_the_judged_values(replayed):
    out, _ = replayed
    judged = {t["nodeid"].rpartition("::")[2]: {v["metric"]: (v["current"], v["baseline"]) for v in t["verdicts"]
                                                if v.get("rank") is None}
              for t in _tests(out) if "[rank" not in t["nodeid"]}
    checked = 0
    for case in ElementTree.parse(out / "j.xml").getroot().iter("testcase"):
        names = [prop.get("name") for prop in case.iter("property")]
        assert len(names) == len(set(names)), case.get("name")  # no property repeated
        for prop in case.iter("property"):
            metric, _, side = prop.get("name").removeprefix("gpuprof.").partition(".baseline")
            values = judged.get(case.get("name"), {}).get(metric)
            value = None if values is None else values[1 if prop.get("name").endswith(".baseline") else 0]
            if isinstance(value, (int, float)) and not side:
                checked += 1
                assert float(prop.get("value")) == pytest.approx(value, rel=1e-6), (case.get("name"), metric)
    assert checked > 100  # current and baseline


@pytest.fixture(scope="module")
def unjudged(tmp_path_factory, recorded):
    """(outputs folder, terminal text) of the shipped traces replayed where nothing compares some
    metrics: the MoE and CNN tests have no baseline, and weight streaming's baseline lacks the
    copy bandwidths in its recorded runs (as one recorded before them does: "not compared")."""
    out = tmp_path_factory.mktemp("unjudged")
    shutil.copytree(recorded, out / "B")
    for module in ("test_moe", "test_cnn"):
        (out / "B" / "example_suite" / f"{module}.json").unlink()
    path = out / "B" / "example_suite" / "test_weight_streaming.json"
    doc = json.loads(path.read_text())
    for entry in (e for by_gpu in doc["tests"].values() for e in by_gpu.values()):
        for stored in (entry, *entry["runs"]):
            for key in ("per_step", "distribution", "metrics"):
                for name in [n for n in stored.get(key, {}) if n.startswith("memcpy_") and n.endswith("_gbps")]:
                    del stored[key][name]
    path.write_text(json.dumps(doc))
    judged = example_suite(out, "--gpuprof", f"--gpuprof-json={out / 'r.json'}", f"--gpuprof-html={out / 'r.html'}")
    assert judged.returncode == 0, judged.stdout + judged.stderr
    return out, judged.stdout


def _shown(metric: str, value: float) -> str:
    """A judged series' value as the reports show it, worked out apart from ``numbers``."""
    if metric.endswith("_us"):
        return _time(value)
    return f"{value:.4g} GB/s" if metric.endswith("_gbps") else f"{value:.1%}"


def _sections(page: str) -> dict[str, str]:
    """Each test's section of the HTML report (its text from its heading to the next), by node id."""
    headings = list(re.finditer(r"<h2.*?</h2>", page, re.S))
    ends = [m.start() for m in headings[1:]] + [len(page)]
    return {html.unescape(re.sub(r"<[^>]+>", "", re.search(r"<code>.*?</code>", m[0])[0])): page[m.start():end]
            for m, end in zip(headings, ends)}


def test_html_shows_the_median_step_where_no_verdict_compared_it(unjudged):
    """A metric with no baseline, or "not compared", shows in the HTML report the value its
    thresholds judged and every other output shows (the median step), not total / steps or
    the whole window's ratio or rate."""
    out, terminal = unjudged
    tests = {t["nodeid"]: t for t in _tests(out)}
    moe, cnn = (f"example_suite/{m}" for m in ("test_moe.py::test_moe_forward", "test_cnn.py::test_cnn_train_step"))
    streaming = "example_suite/test_weight_streaming.py::test_weight_streaming"
    assert tests[moe]["status"] == tests[cnn]["status"] == "no baseline"
    htod = next(v for v in tests[streaming]["verdicts"] if v["metric"] == "memcpy_htod_gbps")
    assert htod["rule"].startswith("not compared") and htod["baseline"] is None
    assert _shown("memcpy_htod_gbps", htod["current"]) != _shown("memcpy_htod_gbps",
                                                                 tests[streaming]["metrics"]["memcpy_htod_gbps"])
    assert _shown("gpu_utilization", tests[moe]["distribution"]["gpu_utilization"]["median"]) \
        != _shown("gpu_utilization", tests[moe]["metrics"]["gpu_utilization"])  # they differ in these traces
    sections = _sections(read_page(out / "r.html"))
    checked = 0
    for nodeid in (moe, cnn, streaming):
        t = tests[nodeid]
        for metric, summary in t["distribution"].items():
            row = re.search(rf'<tr class="m-[a-z-]+" data-metric="{metric}">.*?</tr>', sections[nodeid], re.S)
            if row is None:  # not a scalar metric, or 0 in the run: named only
                continue
            text = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row[0])))
            assert re.search(rf"current: {re.escape(_shown(metric, summary['median']))}(/step)? ", text), \
                (nodeid, metric, _shown(metric, summary["median"]), text)
            checked += 1
    assert checked >= 12, checked
    rows = {line.split()[0]: line for line in terminal.splitlines() if line.startswith("example_suite/")}
    for nodeid in (moe, cnn):  # the terminal shows the same
        assert _shown("gpu_utilization", tests[nodeid]["distribution"]["gpu_utilization"]["median"]) in rows[nodeid]


def test_no_note_is_said_twice(replayed):
    out, terminal = replayed
    tests = _tests(out)
    for t in tests:
        assert len(t["notes"]) == len(set(t["notes"])), t["notes"]
    noted = [line for line in terminal.splitlines() if line.startswith("  example_suite/")]
    assert any("not checked" in line for line in noted)
    assert [line for line, n in Counter(noted).items() if n > 1] == []
    summary = (out / "s.md").read_text()
    for note in {n for t in tests for n in t["notes"]}:
        said = summary.count(_markdown(note))
        assert said <= 1, (note, said)


def _markdown(text: str) -> str:
    """A note as the Markdown summary escapes it."""
    return re.sub(r"([\\`*_\[\]<>|])", r"\\\1", text)
