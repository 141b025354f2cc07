"""The HTML report's timeline on the planted bugs' replay (docs/html.md), in headless
Chromium: every kernel whose own verdict broke is marked at the default zoom, boxes are
labelled with the function's own name, each host thread's CUDA API calls are drawn with
the synchronizations marked, no merged bar holds one activity, the legend holds only what
the step holds."""

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from helpers.browser import BROWSERS, CHROMIUM, Browser
from helpers.folds import read_page, unfold_all
from pytest_gpuprof.metrics import timeline
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.options import default
from pytest_gpuprof.report.html.gpu_timeline import KIND_COLORS
from pytest_gpuprof.trace.kineto import load_kineto

ROOT = Path(__file__).parents[2]
TRACES = ROOT / "example_suite" / "traces"
MOE = "example_suite/test_moe.py::test_moe_forward"
TRANSFORMER = "example_suite/test_transformer.py::test_transformer_train_step"
NO_BROWSER = f"no Chromium on PATH ({', '.join(BROWSERS)}; .ci/run installs Debian's chromium)"
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize")


def thread_names(trace: Path) -> dict[int, str]:
    """A Kineto trace's thread names (its ``thread_name`` metadata), read here from the file."""
    with gzip.open(trace, "rt") as fh:
        return {e["tid"]: e["args"]["name"] for e in json.load(fh)["traceEvents"]
                if e.get("ph") == "M" and e.get("name") == "thread_name"}


def with_calls(trace: Path) -> dict:
    """The timeline sample of a trace with its host threads' runtime calls, the threads named
    as the trace's metadata events name them (read here with ``json``)."""
    loaded = load_kineto(trace)
    return timeline.sample(measure(loaded), default("timeline-events"), loaded.runtime, thread_names(trace))


@pytest.fixture(scope="module")
def replay(planted_replay):
    """The results document and HTML report of the planted bugs replayed against baselines
    recorded from the shipped traces (the run's one such replay, tests/conftest.py), each
    timeline sample holding its runtime calls."""
    out, _ = planted_replay
    doc = json.loads((out / "results.json").read_text())
    for t in doc["tests"]:  # the run kept each step's runtime calls and named threads itself
        name = t["nodeid"].replace("/", "_").replace("::", "_") + ".pt.trace.json.gz"
        assert t["timeline"] == with_calls(out / "replay" / name)
        assert t["baseline_timeline"] == with_calls(TRACES / name)
    return out / "report.html", doc


def broken_kernels(t: dict) -> dict[str, set[str]]:
    """Per run, the kernels a test's own count or time verdicts (or new, vanished) broke."""
    out: dict[str, set[str]] = {"baseline": set(), "current": set()}
    for v in t["verdicts"]:
        m = re.fullmatch(r"kernels\[(.*)\]\.(count|time_us)", v["metric"], re.S)
        if m is None or v["status"] in ("ok", "improved", "reported"):
            continue
        runs = {"new": ["current"], "vanished": ["baseline"]}.get(v["status"], ["baseline", "current"])
        for run in runs:
            out[run].add(m.group(1))
    return out


def section(i: int) -> str:
    return f"document.querySelectorAll('section.test')[{i}]"


def test_the_legend_holds_only_what_the_step_holds(replay):
    html, doc = replay
    text = read_page(html)  # the folded tests' details unpacked
    for t, part in zip(doc["tests"], text.split('<section class="test')[1:]):
        keys = set(re.findall(r'<span class="key" data-key="([^"]+)">', part))
        kinds = set()
        for sample in (t["timeline"], t["baseline_timeline"]):
            for e in timeline.events(sample):
                kinds.add("comm" if e["kind"] == "kernel" and "nccl" in e["name"] else e["kind"])
        calls = {"call-sync" if c["name"].startswith(SYNC_CALLS) else None
                 for s in (t["timeline"], t["baseline_timeline"]) for c in timeline.calls(s)}
        assert keys & set(KIND_COLORS) == kinds, t["nodeid"]
        assert ("call-sync" in keys) == ("call-sync" in calls), t["nodeid"]
        assert ("marked" in keys) == any(broken_kernels(t).values()), t["nodeid"]
        assert "merged" in keys and "range" in keys and "call-launch" in keys
    moe = text.split('<section class="test')[1 + [t["nodeid"] for t in doc["tests"]].index(MOE)]
    assert 'data-key="htoh"' not in moe and 'data-key="dtoh"' in moe  # the .item() copies


def test_the_merged_colour_is_unlike_every_kind_s():
    css = (ROOT / "pytest_gpuprof" / "report" / "html" / "templates" / "style.css").read_text()
    merged = re.search(r"\.k-mixed\{fill:#([0-9a-f]{6})\}", css).group(1)
    rgb = [int(merged[i:i + 2], 16) for i in (0, 2, 4)]
    for kind, color in KIND_COLORS.items():
        other = [int(color[1 + i:3 + i], 16) for i in (0, 2, 4)]
        assert sum(abs(a - b) for a, b in zip(rgb, other)) > 120, kind


def open_unfolded(browser, html):
    """The report in the browser, every test's section unfolded (and the folds it holds)."""
    browser.open(html.as_uri())
    unfold_all(browser)


MARKS = """[...SECTION.querySelectorAll('.mark')].map(m => [m.dataset.run, +m.dataset.stream, +m.dataset.name])"""
DATA = "JSON.parse(SECTION.querySelector('.tl-data').textContent)"


@pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)
def test_every_kernel_that_broke_is_marked_on_its_lane_at_the_default_zoom(replay, tmp_path):
    html, doc = replay
    with Browser(tmp_path / "profile", 1400, 1000) as browser:
        open_unfolded(browser, html)
        for i, t in enumerate(doc["tests"]):
            broke = broken_kernels(t)
            expected = set()
            for run, sample in (("baseline", t["baseline_timeline"]), ("current", t["timeline"])):
                expected |= {(run, e["stream"], e["name"]) for e in timeline.events(sample) if e["name"] in broke[run]}
            names = {r["label"]: sample["names"] for r, sample in zip(
                browser.evaluate(DATA.replace("SECTION", section(i)))["runs"],
                (t["baseline_timeline"], t["timeline"]))}
            marks = {(run, stream, names[run][name]) for run, stream, name in
                     browser.evaluate(MARKS.replace("SECTION", section(i)))}
            assert marks == expected, t["nodeid"]
            if t["nodeid"] == TRANSFORMER:  # one kernel 9 times a step instead of once: a count change
                (name,) = broke["current"]
                assert len([e for e in timeline.events(t["timeline"]) if e["name"] == name]) == 9
                assert len(browser.evaluate(MARKS.replace("SECTION", section(i)))) == 9 + 1
            if t["nodeid"] == MOE:
                assert len(marks) >= 2 and {run for run, _, _ in marks} == {"current", "baseline"}
        assert not browser.errors()


def own_name(full: str) -> str:
    """A kernel's function without return type, scopes, template arguments and parameters,
    read here with a pattern that fits the example suite's names."""
    return re.match(r"(?:void )?(?:(?:\w+|\(anonymous namespace\))::)*(\w+)", full).group(1)


@pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)
def test_labels_are_function_names_and_whole(replay, tmp_path):
    html, doc = replay
    with Browser(tmp_path / "profile", 1400, 1000) as browser:
        open_unfolded(browser, html)
        boxes = browser.evaluate("[...document.querySelectorAll('g.ev')].filter(g => g.querySelector('text')).map("
                                 "g => [g.querySelector('text').textContent, g.querySelector('title').textContent])")
        assert len(boxes) > 20
        for label, title in boxes:
            assert own_name(title.split("\n")[0]).startswith(label.removesuffix("…")), (label, title)
        # a namespaced kernel reads as Nsight Systems shows it
        assert ["tensor_kernel_scan_outer_dim", "at::native::tensor_kernel_scan_outer_dim"] in [
            [label, title.split("<")[0].removeprefix("void ")] for label, title in boxes]
        i = [t["nodeid"] for t in doc["tests"]].index(MOE)
        lanes = browser.evaluate(f"[...{section(i)}.querySelectorAll('g.lane')].map(g => "
                                 "[...g.querySelectorAll('.lanelabel tspan')].map(t => t.textContent).join(' '))")
        assert "stream 7 · compute + DtoH/Memset" in lanes and not [lane for lane in lanes if "…" in lane]
        assert "CUDA API · thread 1933 (python3)" in lanes and "ranges · thread 1933 (python3)" in lanes


@pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)
def test_the_item_bug_shows_as_eight_marked_synchronizations_on_the_cpu_row(replay, tmp_path):
    html, doc = replay
    i = [t["nodeid"] for t in doc["tests"]].index(MOE)
    moe = doc["tests"][i]
    assert moe["baseline_metrics"]["sync_count"] == 0
    assert moe["metrics"]["sync_count"] == 8 * moe["metrics"]["step_count"]
    with Browser(tmp_path / "profile", 1400, 1000) as browser:
        browser.open(html.as_uri())
        syncs = browser.evaluate(f"[...{section(i)}.querySelectorAll('.syncmark')].map(m => m.dataset.run)")
        assert syncs.count("current") == 8 and syncs.count("baseline") == 0
        drawn = browser.evaluate(f"[...{section(i)}.querySelectorAll('g.call.c-sync title')]"
                                 ".map(t => t.textContent.split(' ')[0])")
        assert drawn == ["cudaStreamSynchronize"] * 8
        assert not browser.errors()
        if os.environ.get("GPUPROF_TIMELINE_SCREENSHOT"):  # docs/html-timeline.png: docs/html.md says how
            shot = Path(os.environ["GPUPROF_TIMELINE_SCREENSHOT"])
            screenshot(browser, f"{section(i)}.querySelector('.timeline')", shot)


def screenshot(browser: Browser, element: str, path: Path) -> None:
    """The element alone, the window as tall as it is."""
    top, height = browser.evaluate(f"(() => {{ const r = {element}.getBoundingClientRect();"
                                   " return [r.y + window.scrollY, r.height]; })()")
    width = browser.evaluate("window.innerWidth")
    browser.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": int(height) + 16,
                                                        "deviceScaleFactor": 1, "mobile": False})
    browser.evaluate(f"window.scrollTo(0, {top} - 8)")
    browser.screenshot(path)


@pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)
def test_no_merged_bar_holds_one_activity(replay, tmp_path):
    """At the default zoom and zoomed in: each merged bar holds two or more, and the boxes and
    merged bars of a run hold each of its activities once."""
    html, doc = replay
    count = ("(() => { const out = {}; for (const e of SECTION.querySelectorAll('.ev, .call')) {"
             " const run = e.dataset.run || e.parentNode.dataset.run;"
             " if (e.tagName === 'g' || e.classList.contains('merged')) out[run] = (out[run] || 0) +"
             " (e.classList.contains('merged') ? +e.dataset.count : 1); } return out; })()")
    with Browser(tmp_path / "profile", 1400, 1000) as browser:
        open_unfolded(browser, html)
        for i, t in enumerate(doc["tests"]):
            for _ in range(2):
                merged = browser.evaluate(f"[...{section(i)}.querySelectorAll('.merged')].map(m => +m.dataset.count)")
                assert all(n >= 2 for n in merged), t["nodeid"]
                browser.evaluate(f"{section(i)}.querySelector('.tl-bar [data-act=in]').click()")
            browser.evaluate(f"{section(i)}.querySelector('.tl-bar [data-act=reset]').click()")
            held = browser.evaluate(count.replace("SECTION", section(i)))
            full = max(t["timeline"]["span_ns"], t["baseline_timeline"]["span_ns"])  # the whole step's view
            for run, sample in (("baseline", t["baseline_timeline"]), ("current", t["timeline"])):
                calls = [c for c in timeline.calls(sample)
                         if c["start_ns"] + c["dur_ns"] >= 0 and c["start_ns"] <= full]
                assert held.get(run, 0) == len(timeline.events(sample)) + len(calls), (t["nodeid"], run)
