"""Every output tells one story: baselines recorded from a replay of the shipped traces, then
the same traces replayed against them, show no change anywhere (JSON, terminal, Markdown,
HTML, JUnit), each output holds the number the verdict judged, and no note is said twice."""

import html
import json
import re
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
TRACES = ROOT / "example_suite" / "traces"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """(outputs folder, terminal text) of the shipped traces replayed against baselines
    recorded from the same traces."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("agree")
    common = [sys.executable, "-m", "pytest", str(ROOT / "example_suite"), "--rootdir", str(ROOT), "-p",
              "no:cacheprovider", f"--gpuprof-replay={TRACES}", f"--gpuprof-baseline-dir={out / 'B'}"]
    env = {k: v for k, v in __import__("os").environ.items() if k != "GITHUB_STEP_SUMMARY"}
    record = subprocess.run([*common, "--gpuprof-update-baseline"], cwd=out, capture_output=True, text=True, env=env)
    assert record.returncode == 0, record.stdout + record.stderr
    judged = subprocess.run([*common, "--gpuprof", f"--gpuprof-json={out / 'r.json'}",
                             f"--gpuprof-html={out / 'r.html'}", f"--gpuprof-summary={out / 's.md'}",
                             f"--junitxml={out / 'j.xml'}"], cwd=out, capture_output=True, text=True, env=env)
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
    assert all(re.fullmatch(r"[+-]?0(\.0+)?%?", c) for c in changes), changes


def test_markdown_shows_no_change(replayed):
    out, _ = replayed
    pairs = re.findall(r"(\S+) → (\S+)", (out / "s.md").read_text())
    assert len(pairs) > 40
    assert all(before == after for before, after in pairs), [p for p in pairs if p[0] != p[1]]


def test_html_shows_the_judged_value_on_both_sides(replayed):
    out, _ = replayed
    text = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", (out / "r.html").read_text())))
    pairs = re.findall(r"current: (\S+(?: (?:[a-zA-Z]*/step|GB/s|us|B|%))?) baseline: (\S+(?: (?:[a-zA-Z]*/step|GB/s|us|B|%))?)", text)
    assert len(pairs) > 100
    assert all(a == b for a, b in pairs), [p for p in pairs if p[0] != p[1]]
    # the bandwidth the verdict judged (the median step's), not the whole window's
    cnn = next(t for t in _tests(out) if t["nodeid"].endswith("test_cnn_train_step"))
    dtod = next(v for v in cnn["verdicts"] if v["metric"] == "memcpy_dtod_gbps")
    assert dtod["current"] != cnn["metrics"]["memcpy_dtod_gbps"]  # the two differ in this trace
    assert f"current: {dtod['current']:g} GB/s baseline: {dtod['current']:g} GB/s" in text


def test_junit_holds_the_judged_values(replayed):
    out, _ = replayed
    judged = {t["nodeid"].rpartition("::")[2]: {v["metric"]: v["current"] for v in t["verdicts"]}
              for t in _tests(out) if "[rank" not in t["nodeid"]}
    checked = 0
    for case in ElementTree.parse(out / "j.xml").getroot().iter("testcase"):
        for prop in case.iter("property"):
            metric = prop.get("name").removeprefix("gpuprof.")
            value = judged.get(case.get("name"), {}).get(metric)
            if prop.get("name").startswith("gpuprof.") and isinstance(value, (int, float)):
                checked += 1
                assert float(prop.get("value")) == pytest.approx(value, rel=1e-6), (case.get("name"), metric)
    assert checked > 50


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
