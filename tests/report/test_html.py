"""The HTML report, from a run that replays a planted bug recorded on a GPU; and the page
in a real headless Chromium (driven over the DevTools protocol, tests/helpers/browser.py): it
loads without errors, the regression renders on top, its timeline zooms and shows the
trace's annotation ranges, and no kernel name is shown mangled."""

import gzip
import html as html_text
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from helpers.browser import BROWSERS, CHROMIUM, Browser
from helpers.folds import FOLDED, stored, unfold_all, unfolded, wait_built
from pytest_gpuprof.report.html import page as html_page
from pytest_gpuprof.report.html import render_html
from pytest_gpuprof.report.html.classes import FAIL_COLOR
from pytest_gpuprof.report.html.page import OPEN_STATUSES

ROOT = Path(__file__).parents[2]
TRACES = ROOT / "example_suite" / "traces"
PLANTED = ROOT / "tests" / "data" / "planted" / "item"
MOE = "example_suite/test_moe.py::test_moe_forward"
CNN = "example_suite/test_cnn.py::test_cnn_train_step"
NO_BROWSER = f"no Chromium on PATH ({', '.join(BROWSERS)}; .ci/run installs Debian's chromium)"


def pytest_run(tmp, *args):
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "example_suite"), "--rootdir", str(ROOT), "-p", "no:cacheprovider",
         "-q", f"--gpuprof-baseline-dir={tmp / 'baselines'}", *args],
        cwd=tmp, capture_output=True, text=True, env={**os.environ, "GPUPROF_EXAMPLE_BUG": ""})


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Baselines recorded from the good traces (with their timelines), then the MoE's
    planted `.item()` trace judged against them, with the CNN's good trace beside it."""
    tmp = tmp_path_factory.mktemp("html")
    pytest_run(tmp, "--gpuprof-update-baseline", f"--gpuprof-replay={TRACES}", "-k", "moe or cnn")
    replay = tmp / "replay"
    replay.mkdir()
    shutil.copy(next(PLANTED.glob("*.json.gz")), replay)
    shutil.copy(next(TRACES.glob("*test_cnn*.json.gz")), replay)
    html, results = tmp / "report.html", tmp / "results.json"
    proc = pytest_run(tmp, "--gpuprof", f"--gpuprof-replay={replay}", "-k", "moe or cnn",
                      f"--gpuprof-html={html}", f"--gpuprof-json={results}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return html, json.loads(results.read_text())


def test_the_file_is_the_rendering_of_the_results_document(report):
    html, doc = report
    assert html.read_text() == render_html(doc, html.parent)


def test_time_metrics_show_the_interquartile_range_of_both_runs(report):
    html, doc = report
    moe = next(t for t in doc["tests"] if t["nodeid"] == MOE)
    row = html.read_text().split('data-metric="window_us"')[1].split("</tr>")[0]
    cells = row.split('<td class="num">')[1:3]  # baseline, current
    for cell, d in zip(cells, (moe["baseline_distribution"], moe["distribution"])):
        q1, q3 = d["window_us"]["q1"], d["window_us"]["q3"]
        assert 1e3 <= q1 <= q3 < 1e4  # a few ms: 4 significant digits in ms (docs/metrics.md)
        assert f'<div class="iqr">IQR {q1 / 1e3:.3f} ms–{q3 / 1e3:.3f} ms</div>' in cell


def plain(page: str) -> str:
    """The page without the ``<wbr>`` that let a test id wrap between its parts."""
    return page.replace("<wbr>", "")


def kernel_names(page: str) -> list[str]:
    """The page's one list of full kernel names (``#kernel-names``) that shown names point into."""
    return json.loads(page.split('<script type="application/json" id="kernel-names">')[1].split("</script>")[0])


def test_regressions_come_first_with_what_broke(report):
    sections = plain(report[0].read_text()).split('<section class="test')[1:]
    assert [MOE in s for s in sections] == [True, False]  # the failing test's section first
    moe_section = sections[0]
    for words in ("sync_count: current 8 violates threshold sync_count == 0",
                  "memcpy_dtoh_count: baseline 0, current 8 (+8) [changed"):
        assert words in moe_section
    runs = timeline_runs(report[0].read_text(), moe_section)
    assert [r["label"] for r in runs] == ["baseline", "current"] and all(r["events"] for r in runs)


def timeline_runs(page: str, section: str) -> list[dict]:
    """The runs a section's timeline draws: its own JSON, each drawn run's sample taken from
    the page's one list of them (``#timeline-samples``); a folded test's section holds it
    compressed (``page.packed``)."""
    section = unfolded(section)
    runs = json.loads(section.split('<script type="application/json" class="tl-data">')[1].split("</script>")[0])
    samples = timeline_samples(page)["samples"]
    return [r if "missing" in r else {**samples[r["sample"]], **r} for r in runs["runs"]]


def timeline_samples(page: str) -> dict:
    return json.loads(page.split('<script type="application/json" id="timeline-samples">')[1].split("</script>")[0])


def test_kernel_diff_lists_the_new_kernels(report):
    html, doc = report
    moe = next(t for t in doc["tests"] if t["nodeid"] == MOE)
    new = [k for k in moe["metrics"]["kernels"] if k not in moe["baseline_metrics"]["kernels"]]
    assert new
    text = html.read_text()
    names = kernel_names(text)
    rows = text.split('<table class="grid kernels">')[1].split("</table>")[0].split("<tr")[2:]
    new_rows = [row for row in rows if 'data-kernel-status="new"' in row]
    assert len(new_rows) == len(new)
    # each new kernel's row points into the names list at its (Kineto-demangled) name, or shows it whole

    def named(row):
        if "data-k" in row:
            return names[int(row.split('data-k="')[1].split('"')[0])]
        return html_text.unescape(row.split('<td class="kname"><code>')[1].split("</code>")[0])

    assert {named(row) for row in new_rows} == set(new)


class Elements(HTMLParser):
    """A page's elements as a browser's parser reads them: tag names, text and each script's content."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []
        self.scripts: list[tuple[dict, str]] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "script":
            self.scripts.append((dict(attrs), ""))

    def handle_data(self, data):
        if self.lasttag == "script" and self.scripts and not self.scripts[-1][1]:
            self.scripts[-1] = (self.scripts[-1][0], data)
        else:
            self.text.append(data)


def test_everything_from_the_document_is_escaped():
    """Hostile text in a test id, its message, a kernel name (what broke, the cause, the
    kernel diff, the names list, the timeline) and the baseline folder stays text: the page
    holds no element but its own, and each script is the page's or JSON holding the text."""
    evil = "<script>alert(1)</script>"
    kernel = f"void k<{evil}>(a&b)"
    failed = _synthetic_test(f"t.py::test[{evil}]", "failed", {kernel: 3.0}, {}, [
        {"metric": f"kernels[{kernel}].count", "status": "new", "baseline": None, "current": 2.0, "change": "",
         "rule": "kernel absent from the baseline", "evidence": ""}])
    failed["message"] = f"gpuprof: bad <file> & {evil}"
    error = {"nodeid": "t.py::test_error", "status": "error", "message": f"bad <file> & more {evil}",
             "metrics": None, "verdicts": []}
    doc = {**_doc(failed, error), "baseline_dir": f"<b>{evil}"}
    page = Elements(render_html(doc))
    assert "img" not in page.tags
    assert page.tags.count("script") == len(page.scripts) == 6  # a timeline, the names, the samples, 3 of its own
    own = [s for a, s in page.scripts if a.get("type") != "application/json"]
    assert all("alert" not in s for s in own)
    timeline, names, samples = [json.loads(s) for a, s in page.scripts if a.get("type") == "application/json"]
    assert kernel in names  # the names list
    current = samples["samples"][timeline["runs"][1]["sample"]]
    assert [names[k] for k in current["k"] if k is not None] == [kernel]  # the box's name: the list's
    text = "".join(page.text)
    assert f"t.py::test[{evil}]" in text and f"bad <file> & more {evil}" in text and f"<b>{evil}" in text
    assert "k<<script>alert(1)</script>>" in text  # the kernel's shown (short) name


def user_ranges(trace: Path) -> set[str]:
    """The names of a Kineto trace's user annotations, read here from the file."""
    with gzip.open(trace, "rt") as fh:
        return {e["name"] for e in json.load(fh)["traceEvents"] if e.get("cat") == "user_annotation"}


@pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)
def test_report_in_headless_chromium(report, tmp_path):
    html, doc = report
    with Browser(tmp_path / "profile", 1400, 1800) as browser:
        browser.open(html.as_uri())
        assert not browser.errors()
        sections = browser.evaluate("[...document.querySelectorAll('section.test')].map(s => s.dataset.status)")
        assert sections == ["failed", "passed"]
        # the failing test unfolded and drawn on top, the passing one folded
        first = browser.evaluate("(() => { const r = document.querySelector('section.test').getBoundingClientRect();"
                                 " return [r.x, r.y, r.width, r.height]; })()")
        assert first[3] > 300 and first[2] > 300
        folds = browser.evaluate("[...document.querySelectorAll('section.test > details')].map(d => d.open)")
        assert folds == [True, False]
        text = browser.evaluate("document.querySelector('section.test').innerText")
        assert MOE in text and "sync_count" in text
        shot = tmp_path / "report.png"
        browser.screenshot(shot)
        badge = browser.evaluate("(() => { const r = document.querySelector('section.test .badge')"
                                 ".getBoundingClientRect();"
                                 " return {x: r.x, y: r.y, width: r.width, height: r.height}; })()")
        assert _has_color(shot, FAIL_COLOR, badge, badge)

        # annotation ranges: rows for them, holding the trace's own range names
        ranges = browser.evaluate("[...document.querySelector('section.test .timeline')"
                                  ".querySelectorAll('g.range title')].map(t => t.textContent.split('\\n')[0])")
        assert browser.evaluate("document.querySelector('section.test').querySelectorAll('g.lane.ranges').length") >= 4
        planted = next(PLANTED.glob("*.json.gz"))
        assert {"Expert_Forward", "Linear1_Computation"} <= set(ranges) <= user_ranges(planted) | user_ranges(
            next(TRACES.glob("*test_moe*.json.gz")))

        # zoom: Ctrl + wheel over the plot keeps the time under the pointer and narrows the range
        def visible():
            return browser.evaluate("(() => { const o = document.querySelector('section.test .tl-range');"
                                    " return [+o.dataset.startNs, +o.dataset.endNs]; })()")

        moe = next(t for t in doc["tests"] if t["nodeid"] == MOE)
        span = max(moe["timeline"]["span_ns"], moe["baseline_timeline"]["span_ns"])
        assert visible() == [0, span]
        plot = browser.evaluate("(() => { const r = document.querySelector('section.test .tl-plot')"
                                ".getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
        browser.evaluate(f"window.scrollTo(0, {plot[1]} - 100)")
        plot_y = browser.evaluate("document.querySelector('section.test .tl-plot').getBoundingClientRect().y")
        label, right = 200, 12  # timeline.js: LABEL, RIGHT
        px = plot[0] + label + 0.75 * (plot[2] - label - right)
        before = visible()
        at = before[0] + 0.75 * (before[1] - before[0])
        browser.wheel(px, plot_y + 60, -400, ctrl=True)
        after = visible()
        assert after[1] - after[0] < 0.7 * (before[1] - before[0])
        assert after[0] < at < after[1] and abs((at - after[0]) / (after[1] - after[0]) - 0.75) < 0.01
        browser.wheel(px, plot_y + 60, -400)  # without Ctrl the page scrolls, the range stays
        assert visible() == after
        browser.evaluate("document.querySelector('section.test .tl-bar [data-act=in]').click()")
        halved = visible()
        assert abs((halved[1] - halved[0]) - (after[1] - after[0]) / 2) <= 1

        # every folded part opened (the tests', then the folds their details hold): no kernel
        # name anywhere on the page is mangled, and the CNN's CUTLASS kernel (mangled in its
        # trace) reads demangled and shortened
        unfold_all(browser)
        shown = browser.evaluate("document.body.innerText + [...document.querySelectorAll('[title]')]"
                                 ".map(e => e.title).join(' ') + [...document.querySelectorAll('svg title')]"
                                 ".map(e => e.textContent).join(' ')")
        assert not re.search(r"(^|[^A-Za-z0-9])_Z[A-Za-z0-9_]", shown)
        assert "cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::conv::kernel::ImplicitGemmConvolution<…>>" in shown
        # the CNN's dense step (191 activities in 13 ms) drawn as fewer, merged bars at full view
        cnn = "document.querySelectorAll('section.test')[1]"
        drawn = browser.evaluate(f"{cnn}.querySelectorAll('.ev').length")  # activities and merged bars
        merged = browser.evaluate(f"{cnn}.querySelectorAll('.merged').length")
        assert merged > 0 and drawn < 2 * 191
        assert not browser.errors()


def _has_color(png: Path, hex_color: str, at: dict, size: dict) -> bool:
    """The screenshot shows the color inside the element's box (decoded with zlib: no imaging library)."""
    import struct
    import zlib

    data = png.read_bytes()
    pos, chunks = 8, []
    width = height = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color_type = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color_type in (2, 6)
            channels = 3 if color_type == 2 else 4
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b, c = prev[x], prev[x - channels] if x >= channels else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    want = tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    for y in range(int(at["y"]), min(height, int(at["y"] + size["height"]))):
        for x in range(int(at["x"]), min(width, int(at["x"] + size["width"]))):
            if tuple(rows[y][x * channels:x * channels + 3]) == want:
                return True
    return False


def _synthetic_test(nodeid, status, kernels_now, kernels_before, verdicts, timeline=True, baseline_timeline=True):
    """A results-document test entry by hand: two steps, kernel names that need escaping."""
    def sample(names):
        names = sorted(names)
        events = ";".join(f"0 0 {i * 2000} 1500 {i}" for i in range(len(names))) + f";1 1 500 700 {len(names)}"
        return {"step": 1, "span_ns": 2000 * len(names), "streams": [7, 13], "names": names + ["memcpy htod"],
                "kinds": ["kernel", "htod", "dtoh", "dtod", "ptop", "htoh", "other", "memset"],
                "events": events, "truncated": False}

    def metrics(kernels):
        return {"step_count": 2, "kernel_count": 2 * len(kernels), "kernel_time_us": 10.0,
                "gpu_utilization": 0.5, "kernels": {k: {"count": 2, "time_us": t} for k, t in kernels.items()}}

    return {"nodeid": nodeid, "status": status, "message": "", "gpu": "NVIDIA H200", "backend": "torch",
            "environment": {"gpu": "NVIDIA H200"}, "baseline_environment": {"gpu": "NVIDIA H200"},
            "baseline_backend": "torch", "trace": None, "baseline_file": "b.json",
            "metrics": metrics(kernels_now), "baseline_metrics": metrics(kernels_before), "verdicts": verdicts,
            "timeline": sample(kernels_now) if timeline else None,
            "baseline_timeline": sample(kernels_before) if baseline_timeline else None}


def _doc(*tests):
    counts = {}
    for t in tests:
        counts[t["status"]] = counts.get(t["status"], 0) + 1
    return {"schema_version": 1, "gpuprof_version": "x", "backend": "torch", "baseline_dir": "baselines",
            "counts": counts, "skipped": [{"nodeid": "t.py::skip<me>", "reason": "no <GPU>"}], "tests": list(tests)}


def test_kernel_names_are_escaped_in_the_timeline_titles_and_the_kernel_diff():
    new, old = "void k<float, 4>(a&b)", "void gone<int>()"
    verdicts = [{"metric": f"kernels[{new}].count", "status": "new", "baseline": None, "current": 1.0,
                 "change": "", "rule": "kernel absent from the baseline", "evidence": ""},
                {"metric": f"kernels[{old}].count", "status": "vanished", "baseline": 1.0, "current": None,
                 "change": "", "rule": "kernel in the baseline, absent now", "evidence": ""}]
    text = render_html(_doc(_synthetic_test("t.py::test_a", "failed", {new: 3.0, "same": 1.0},
                                            {old: 2.0, "same": 1.0}, verdicts)))
    for raw in (new, old, "skip<me>", "no <GPU>"):
        assert raw not in text
    # the full name once, in the names list (as JSON that cannot close its script element);
    # shown shortened and escaped where the kernel diff and what broke point into the list
    names = kernel_names(text)
    assert new in names and old in names and "<" not in text.split('id="kernel-names">')[1].split("</script>")[0]
    assert text.count(html_text.escape(new)) == 0
    diff = text.split('<table class="grid kernels">')[1].split("</table>")[0]
    for name, short, status in ((new, "k&lt;float, 4&gt;", "new"), (old, "gone&lt;int&gt;", "vanished")):
        row = diff.split(f'data-kernel-status="{status}"')[1].split("</tr>")[0]
        assert f'<code data-k="{names.index(name)}">{short}</code>' in row
    # both runs drawn from JSON that cannot close its script element, the copy on its own stream
    current = timeline_runs(text, text)[1]
    for data in ('class="tl-data">', 'id="timeline-samples">'):
        assert "</" not in text.split(data)[1].split("</script>")[0]
    assert [s["id"] for s in current["streams"]] == [7, 13] and current["streams"][1]["role"] == "copy HtoD"
    assert names[current["k"][current["names"].index("k<float, 4>")]] == new


def test_the_document_order_is_kept_and_missing_timelines_are_said():
    passed = _synthetic_test("t.py::test_ok", "passed", {"k": 1.0}, {"k": 1.0}, [], baseline_timeline=False)
    failed = _synthetic_test("t.py::test_bad", "failed", {"k": 1.0}, {"k": 1.0}, [
        {"metric": "gpu_utilization", "status": "threshold", "baseline": None, "current": 0.5, "change": "",
         "rule": "gpu_utilization >= 0.85", "evidence": "",
         "threshold": {"op": ">=", "value": 0.85}}])
    text = plain(unfolded(render_html(_doc(passed, failed))))  # as given: results_document does the ordering
    assert text.index("t.py::test_ok") < text.index("t.py::test_bad")
    assert "the baseline was recorded without a timeline sample" in text
    bad = text.split('<section class="test')[2]
    assert "gpu_utilization: current 50.0% violates threshold gpu_utilization &gt;= 0.85" in bad  # a ratio in %
    assert 'class="thr"' in bad  # the threshold line on the metric's bar


def test_many_kernel_verdicts_are_left_to_the_kernel_diff():
    names = {f"k{i}": float(i + 1) for i in range(20)}
    verdicts = [{"metric": f"kernels[{n}].count", "status": "new", "baseline": None, "current": 1.0, "change": "",
                 "rule": "kernel absent from the baseline", "evidence": ""} for n in names]
    text = render_html(_doc(_synthetic_test("t.py::test_a", "failed", names, {}, verdicts)))
    assert "… and 14 more per-kernel metric(s): see the kernel diff below" in text
    # the biggest time change first: k19 (20 us) leads the list of what broke
    broke = text.split('<div class="broke">')[1].split("</div>")[0]
    assert broke.index(">k19</code>") < broke.index(">k18</code>")
    assert text.count('data-kernel-status="new"') == 20


def test_summary_colours_a_change_by_its_direction_and_verdict():
    """Red only for a metric a rule broke; a faster kernel time green; a count change that
    broke nothing (its rule allows it) grey."""
    ok = _synthetic_test("t.py::test_ok", "passed", {"k": 1.0}, {"k": 1.0}, [])
    ok["metrics"]["kernel_time_us"] = 8.0  # faster than the baseline's 10
    ok["metrics"]["kernel_count"] = 3  # baseline 2, within a loosened count rule
    bad = _synthetic_test("t.py::test_bad", "failed", {"k": 1.0}, {"k": 1.0}, [
        {"metric": "kernel_time_us", "status": "regressed", "baseline": 5.0, "current": 6.0, "change": "+20.0%",
         "rule": "median per step within ±10%", "evidence": ""}])
    bad["metrics"]["kernel_time_us"] = 12.0
    rows = render_html(_doc(ok, bad)).split('<table class="grid summary"')[1].split("</table>")[0].split("<tr")[2:]
    assert 'class="delta better">(-20.0%)' in rows[0] and 'class="delta changed">(+50.0%)' in rows[0]
    assert "worse" not in rows[0]
    assert 'class="delta worse">(+20.0%)' in rows[1]


def test_a_kept_trace_is_linked_relative_to_the_report_for_perfetto(report):
    html, doc = report
    moe = next(t for t in doc["tests"] if t["nodeid"] == MOE)
    href = html.read_text().split('<p class="perfetto" data-href="')[1].split('"')[0]
    assert not href.startswith("/") and (html.parent / href).resolve() == Path(moe["trace"]).resolve()


def test_a_distributed_tests_own_summary_row_shows_its_skew_and_ranks():
    """Its own row has no per-step metrics of its own: it shows ``rank_skew`` as judged (a
    ratio, in %), how many ranks ended in each status and the worst rank."""
    ranks = {n: _synthetic_test(f"t.py::test_dist_{n}", status, {"k": 1.0}, {"k": 1.0}, [])
             for n, status in (("0", "passed"), ("1", "failed"), ("2", "passed"))}
    dist = {"nodeid": "t.py::test_dist", "status": "failed", "message": "", "gpu": "NVIDIA H200",
            "baseline_file": "b.json", "metrics": {"rank_skew": 0.25}, "ranks": ranks,
            "verdicts": [{"metric": "rank_skew", "status": "regressed", "baseline": 0.05, "current": 0.25,
                          "change": "+20.0 pp", "rule": "rank_skew within the recorded runs'", "evidence": ""}]}
    summary = plain(render_html(_doc(dist))).split('<table class="grid summary"')[1].split("</table>")[0]
    rows = [row for row in summary.split("<tr")[2:] if 'class="cause' not in row]
    assert [row.split("<code>")[1].split("</code>")[0] for row in rows] == [
        "t.py::test_dist", "t.py::test_dist [rank 0]", "t.py::test_dist [rank 1]", "t.py::test_dist [rank 2]"]
    assert ('<td class="ranks" colspan="5"><code>rank_skew</code> 25.0% (+20.0 pp) · 3 ranks: 2 passed, 1 failed'
            " · worst: rank 1 failed</td>") in rows[0]
    assert all('class="ranks"' not in row for row in rows[1:])  # each rank's row: its own metrics


def test_past_twenty_changed_kernels_the_smallest_changes_fold():
    """A changed precision swaps every kernel: the kernel diff shows the 20 biggest changes and
    folds the rest under one count, so that the next test stays near."""
    names = {f"k{i}": float(i + 1) for i in range(25)}  # k24 changed most (25 us a step), k0 least
    verdicts = [{"metric": f"kernels[{n}].count", "status": "new", "baseline": None, "current": 1.0, "change": "",
                 "rule": "kernel absent from the baseline", "evidence": ""} for n in names]
    diff = render_html(_doc(_synthetic_test("t.py::test_a", "failed", names, {}, verdicts))).split("<h3>Kernel diff")[1]
    shown, more = diff.split('<details class="folded"><summary>5 more changed kernel(s), smaller changes</summary>')
    assert {f"k{i}" for i in range(5, 25)} == set(re.findall(r"<code>(k\d+)</code>", shown))
    assert {f"k{i}" for i in range(5)} == set(re.findall(r"<code>(k\d+)</code>", more.split("</details>")[0]))


class Placed(HTMLParser):
    """Each element of a page as (the index of the test section it lies in, else None; tag;
    class), and the text of each script element that stores a folded test's details."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.sections, self.section, self.elements, self.stored, self.storing = 0, None, [], [], False
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section" and "test" in (attrs.get("class") or "").split():
            self.section, self.sections = self.sections, self.sections + 1
        self.elements.append((self.section, tag, attrs.get("class") or ""))
        if tag == "script" and attrs.get("type") == "application/zlib":
            self.stored.append("")
            self.storing = True

    def handle_data(self, data):
        if self.storing:
            self.stored[-1] += data

    def handle_endtag(self, tag):
        self.storing = False
        if tag == "section":
            self.section = None


def _threshold_broken():
    return _synthetic_test("t.py::test_bad", "failed", {"k": 1.0, "new": 2.0}, {"k": 1.0}, [
        {"metric": "gpu_utilization", "status": "threshold", "baseline": None, "current": 0.5, "change": "",
         "rule": "gpu_utilization >= 0.85", "evidence": "", "threshold": {"op": ">=", "value": 0.85}}])


def test_a_passing_tests_details_wait_outside_the_page_and_each_sample_is_written_once():
    """A failing test's details are in the page; a passing test's are the text of a script
    element in its section (its markup compressed, in base64: nothing the browser parses until
    the test is unfolded), only its heading in the page; a timeline sample drawn by several
    runs (both runs of a test replayed against the baseline recorded from its trace, tests that
    replay one trace) is written once, each run pointing at it."""
    doc = _doc(_threshold_broken(), *(_synthetic_test(f"t.py::test_ok[{i}]", "passed", {"k": 1.0}, {"k": 1.0}, [])
                                      for i in range(2)))
    page = render_html(doc)
    placed = Placed(page)
    details = {"timeline", "grid metrics", "grid kernels"}
    assert placed.sections == 3 and len(placed.stored) == 2
    for section, test in enumerate(doc["tests"]):
        mine = [(tag, css) for s, tag, css in placed.elements if s == section]
        if test["status"] == "failed":
            assert details <= {css for _, css in mine}
        else:
            assert [tag for tag, _ in mine if tag != "wbr"] == [  # its heading, its details as text
                "section", "details", "summary", "h2", "span", "code", "script"]
            assert re.fullmatch(r"[A-Za-z0-9+/]+=*", placed.stored[section - 1])  # base64, which nothing ends
            assert details <= {css for _, _, css in Placed(stored(page)[section - 1]).elements}
    samples = timeline_samples(page)["samples"]
    drawn = [s for t in doc["tests"] for s in (t["baseline_timeline"], t["timeline"])]
    assert len(samples) == len({json.dumps(s, sort_keys=True) for s in drawn}) == 2
    sections = page.split('<section class="test')[1:]
    refs = [[r["sample"] for r in timeline_runs(page, section)] for section in sections]
    (same,) = {*refs[1], *refs[2]}  # the passing tests' four runs: one sample
    assert refs[0][0] == same != refs[0][1]  # the failing test's baseline run is that one too
    for (baseline, current), test in zip(refs, doc["tests"]):  # names that need no shortening
        assert samples[baseline]["names"] == test["baseline_timeline"]["names"]
        assert samples[current]["names"] == test["timeline"]["names"]


@pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)
def test_a_passing_tests_details_are_built_when_it_is_unfolded(tmp_path):
    """Unfolded, a passing test's details are in the page: its timeline drawn, its kernel's full
    name one hover away; a hostile name in them stays text."""
    evil = '<img src=x onerror="window.injected=1"><script>window.injected=2</script>\u2028'
    kernel = f"void k<{evil}>(a&b)"
    page = tmp_path / "report.html"
    page.write_text(render_html(_doc(_threshold_broken(), _synthetic_test(f"t.py::test_ok[{evil}]", "passed",
                                                                         {kernel: 3.0}, {kernel: 3.0}, []))))
    assert "\u2028" not in page.read_text()  # as \\u2028 in its JSON, shown as such in its text
    passed = "document.querySelectorAll('section.test')[1]"
    parts = ("[...document.querySelectorAll('section.test')].map(s =>"
             " ['svg.tl', 'table.metrics', 'table.kernels'].map(part => s.querySelector(part) !== null))")
    with Browser(tmp_path / "profile", 1400, 1000) as browser:
        browser.open(page.as_uri())
        assert browser.evaluate(parts) == [[True] * 3, [False] * 3]
        browser.evaluate(f"{passed}.querySelector('summary').click()")
        wait_built(browser, passed)  # unpacked asynchronously (DecompressionStream)
        assert browser.evaluate(parts) == [[True] * 3, [True] * 3]
        assert browser.evaluate(f"{passed}.querySelector('details').open") is True
        named = browser.evaluate(f"[...{passed}.querySelectorAll('[data-k]')].map(e => e.title || e.textContent)")
        assert len(named) == 2 and set(named) == {kernel}  # the kernel diff's name: hover, and unfolded
        boxes = browser.evaluate(f"[...{passed}.querySelectorAll('g.ev title')]"
                                 ".map(t => t.textContent.split('\\n')[0])")
        assert boxes.count(kernel) == 2  # in each run
        assert browser.evaluate("[window.injected, document.querySelectorAll('img').length]") == [None, 0]
        assert not browser.errors()



#: Text that must stay text wherever a page shows it: markup, what would end a script element or
#: open a comment in it, an entity, a line separator, characters past ASCII and past the BMP
#: (the page's script reads the stored details as UTF-8).
HOSTILE = '<img src=x onerror="window.injected=1"></script><!--<script>window.injected=2</script> &amp; \u2028é🚀'
#: ``HOSTILE`` as a page shows it: its line separator written visibly (``escaping.shown_lines``).
HOSTILE_SHOWN = HOSTILE.replace("\u2028", "\\u2028")


def _passing_hostile_tests() -> dict:
    """A failing test and two passing ones, a kernel named with ``HOSTILE``, times in µs and ms."""
    kernel = f"void k<{HOSTILE}>(a&b)"
    passing = [_synthetic_test(f"t.py::test_ok[{i}{HOSTILE}]", "passed", {kernel: 3.14159 * (i + 1), "gemm": 2718.28},
                               {kernel: 3.0, "gemm": 2718.28, "gone": 1.5}, []) for i in range(2)]
    for t in passing:
        t["message"] = f"note {HOSTILE}"
    return _doc(_threshold_broken(), *passing)


def _folded_and_unfolded(monkeypatch, doc: dict) -> tuple[str, str]:
    """The page as written (passing tests folded), and as it would be with every test unfolded."""
    folded = render_html(doc)
    monkeypatch.setattr(html_page, "OPEN_STATUSES", (*OPEN_STATUSES, "passed"))
    return folded, render_html(doc)


def test_a_folded_tests_details_are_the_markup_of_the_test_unfolded(monkeypatch):
    """What a folded test stores unpacks (here with zlib and base64) to the very markup the page
    writes for the test unfolded: every number, unit and word of it, each name escaped as there;
    the stored text is base64 alone, which holds nothing of the document's as it was."""
    doc = _passing_hostile_tests()
    folded, opened = _folded_and_unfolded(monkeypatch, doc)
    assert len(FOLDED.findall(folded)) == 2 and not FOLDED.findall(opened)
    inline = [section.split("</summary>\n", 1)[1].rsplit("</details>", 1)[0]
              for section in opened.split('<section class="test')[2:]]
    assert [markup.strip() for markup in stored(folded)] == [markup.strip() for markup in inline]
    assert not any("injected" in text for text in FOLDED.findall(folded))  # base64 alone
    for i, markup in enumerate(stored(folded)):
        parsed = Elements(markup)
        assert "img" not in parsed.tags  # the timeline's JSON its only script
        assert [a for a, _ in parsed.scripts] == [{"type": "application/json", "class": "tl-data"}]
        text = "".join(parsed.text)
        assert f"note {HOSTILE_SHOWN}" in text and f"void k<{HOSTILE_SHOWN}>(a&b)" in text  # as text
        # the kernel diff's counts and times per step, each kernel's
        for row in (f"1 → 11.5 µs → {('1.571', '3.142')[i]} µs", "1 → 11.359 ms → 1.359 ms+0 µs (+0.0%)",
                    "1 → 00.75 µs → n/a-0.75 µs"):
            assert row in text, row


@pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)
def test_unfolded_in_the_browser_a_folded_test_shows_what_an_unfolded_one_does(monkeypatch, tmp_path):
    """In headless Chromium, a folded test once unfolded (its details unpacked by the page's
    script) shows the same text, hover texts and elements as the same test written unfolded:
    no number, unit or name lost, no hostile name turned into markup."""
    folded, opened = _folded_and_unfolded(monkeypatch, _passing_hostile_tests())
    shown = """[...document.querySelectorAll('section.test')].slice(1).map(s => ({
        text: s.querySelector(':scope > details').innerText,
        titles: [...s.querySelectorAll('[title]')].map(e => e.title),
        hover: [...s.querySelectorAll('svg title')].map(e => e.textContent),
        tags: [...s.querySelectorAll('*')].map(e => e.tagName)}))"""
    seen = []
    for name, markup in (("folded", folded), ("opened", opened)):
        page = tmp_path / f"{name}.html"
        page.write_text(markup)
        with Browser(tmp_path / f"profile-{name}", 1400, 1000) as browser:
            browser.open(page.as_uri())
            unfold_all(browser)
            seen.append(browser.evaluate(shown))
            assert browser.evaluate("[window.injected, document.querySelectorAll('img').length]") == [None, 0]
            assert not browser.errors()
    assert seen[0] == seen[1]
    for i, section in enumerate(seen[0]):
        assert f"note {HOSTILE_SHOWN}" in section["text"] and "1.359 ms → 1.359 ms" in section["text"]
        assert f"1.5 µs → {('1.571', '3.142')[i]} µs" in section["text"]
        assert sum(h.startswith(f"void k<{HOSTILE}>(a&b)\n") for h in section["hover"]) == 2  # a box in each run
        assert section["tags"].count("SCRIPT") == 1 and "IMG" not in section["tags"]  # the timeline's JSON


@pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)
def test_a_browser_that_cannot_unpack_a_folded_test_says_so_in_its_place(tmp_path):
    """Without ``DecompressionStream`` (an older browser), unfolding a folded test shows why its
    details are not there, and the console says what failed."""
    page = tmp_path / "report.html"
    page.write_text(render_html(_doc(_threshold_broken(),
                                     _synthetic_test("t.py::test_ok", "passed", {"k": 1.0}, {"k": 1.0}, []))))
    passed = "document.querySelectorAll('section.test')[1]"
    with Browser(tmp_path / "profile", 1400, 1000) as browser:
        browser.open(page.as_uri())
        browser.evaluate("delete window.DecompressionStream")
        browser.evaluate(f"{passed}.querySelector('summary').click()")
        wait_built(browser, passed)
        note = browser.evaluate(f"{passed}.querySelector('details > p.note').textContent")
        assert note.startswith("this browser could not unpack the test's details (ReferenceError") and \
            note.endswith("open the report in a recent Chrome, Firefox or Safari, or read the JSON results")
        assert browser.evaluate(f"{passed}.querySelector('table.kernels')") is None
        assert any("DecompressionStream" in error for error in browser.errors())
