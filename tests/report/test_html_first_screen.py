"""The failing report read in its first screen: the planted bugs' replay against
baselines recorded from the shipped traces (benchmarks/report_size.py's recipe), opened in
headless Chromium (tests/helpers/browser.py): every failing test's cause in the first 1000 px, the
page at most half its former height, each full kernel name once, a summary link unfolding
its folded test, test ids wrapping only between their parts."""

import html as html_text
import json
import re
from pathlib import Path

import pytest

from helpers.browser import BROWSERS, CHROMIUM, Browser
from helpers.folds import read_page, wait_built
from pytest_gpuprof.compare.status import BROKEN
from pytest_gpuprof.report.names import full_name

ROOT = Path(__file__).parents[2]
#: The failing report's height before its redesign, at 1400 and 1024 px wide (docs/benchmarks.md).
HEIGHT_BEFORE = {1400: 13_452, 1024: 20_424}
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=f"no Chromium on PATH ({', '.join(BROWSERS)})")


@pytest.fixture(scope="module")
def report(planted_replay):
    """The planted bugs replayed against baselines recorded from the good traces (the run's
    one such replay, tests/conftest.py): the page and its results document."""
    out, _ = planted_replay
    return out / "report.html", json.loads((out / "results.json").read_text())


def failing(doc):
    return [t for t in doc["tests"] if t["status"] == "failed"]


def test_every_failing_tests_cause_is_in_the_first_screen(report, tmp_path):
    page, doc = report
    assert len(failing(doc)) == 4
    with Browser(tmp_path / "profile", 1400, 1000) as browser:
        browser.open(page.as_uri())
        for t in failing(doc):
            broken = {v["metric"] for v in t["verdicts"] if v["status"] in BROKEN}
            scalar = sorted(m for m in broken if not m.startswith("kernels["))
            # the failure message's first line (the terminal's), without its "gpuprof: " and ":"
            first = t["message"].splitlines()[0].removeprefix("gpuprof: ").rstrip(":") if t["message"] else None
            seen = browser.evaluate(f"""(() => {{
                const link = [...document.querySelectorAll('#summary a')]
                    .find(a => a.textContent === {json.dumps(t['nodeid'])});
                const cause = link.closest('tr').nextElementSibling;
                return {{bottom: cause.getBoundingClientRect().bottom, first: cause.querySelector('.first').textContent,
                         metrics: [...cause.querySelectorAll('.what code')].map(c => c.textContent)}};
            }})()""")
            assert seen["bottom"] <= 1000, t["nodeid"]
            assert sorted(seen["metrics"]) == scalar, t["nodeid"]
            if first:
                assert seen["first"] == first


@pytest.mark.parametrize("width", sorted(HEIGHT_BEFORE))
def test_the_page_is_at_most_half_as_tall(report, tmp_path, width):
    with Browser(tmp_path / "profile", width, 1000) as browser:
        browser.open(report[0].as_uri())
        assert browser.evaluate("document.documentElement.scrollHeight") <= HEIGHT_BEFORE[width] / 2


def test_each_full_kernel_name_appears_once(report):
    """Outside the timelines' own data, each full name is written once: in the page's lookup
    (a name its short form shows whole is only shown), the folded tests' details read unpacked."""
    page, doc = report
    text = re.sub(r'<script type="application/json" (class="tl-data"|id="timeline-samples")>.*?</script>', "",
                  read_page(page), flags=re.S)
    names = {full_name(k) for t in doc["tests"] for m in (t["metrics"], t["baseline_metrics"])
             for k in (m or {}).get("kernels", {})}
    before, rest = text.split('<script type="application/json" id="kernel-names">')
    listed, after = rest.split("</script>", 1)
    lookup = json.loads(listed)
    assert sorted(lookup) == sorted(set(lookup)) and set(lookup) <= names
    long = [n for n in names if len(n) > 60 and n in lookup]  # a long name cannot hide in another
    assert long
    for name in long:
        assert (before + after).count(html_text.escape(name, quote=True)) == 0  # nowhere as page text or a title
        assert listed.count(json.dumps(name)[1:-1].replace("<", "\\u003c").replace(">", "\\u003e")
                            .replace("&", "\\u0026").replace("'", "\\u0027")) == 1


def test_a_summary_link_unfolds_its_folded_test(report, tmp_path):
    page, doc = report
    passed = next(t for t in doc["tests"] if t["status"] == "passed")["nodeid"]
    with Browser(tmp_path / "profile", 1400, 1000) as browser:
        browser.open(page.as_uri())
        link = f"[...document.querySelectorAll('#summary a')].find(a => a.textContent === {json.dumps(passed)})"
        section = f"document.getElementById({link}.hash.slice(1))"
        assert browser.evaluate(f"{section}.querySelector('details').open") is False
        browser.evaluate(f"{link}.click()")
        assert browser.evaluate(f"{section}.querySelector('details').open") is True
        wait_built(browser, section)  # unpacked asynchronously, then scrolled to
        assert browser.evaluate(f"{section}.querySelector('table.kernels')") is not None
        top = browser.evaluate(f"{section}.getBoundingClientRect().top")
        assert -1 < top < 50  # scrolled to the top, give or take a subpixel
        anchor = browser.evaluate(f"{section}.id")
    # a #test-id address unfolds it too, on load (a fresh page: going to a fragment of the page
    # already open is no load, and fires no load event)
    with Browser(tmp_path / "fresh", 1400, 1000) as browser:
        browser.open(page.as_uri() + "#" + anchor)
        opened = f"document.getElementById({json.dumps(anchor)})"
        assert browser.evaluate(f"{opened}.querySelector('details').open") is True
        wait_built(browser, opened)
        assert -1 < browser.evaluate(f"{opened}.getBoundingClientRect().top") < 50


def test_no_test_id_breaks_mid_word_at_1024_px(report, tmp_path):
    """Where a test id wraps, the line ends after ``/`` or ``::`` or before ``[``."""
    with Browser(tmp_path / "profile", 1024, 1000) as browser:
        browser.open(report[0].as_uri())
        breaks = browser.evaluate("""(() => {
            const out = [];
            for (const code of document.querySelectorAll('#summary a code, section.test h2 code')) {
                const text = code.textContent, range = document.createRange(), tops = [];
                const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
                const chars = [];
                for (let n = walker.nextNode(); n; n = walker.nextNode())
                    for (let i = 0; i < n.length; i++) chars.push([n, i]);
                for (const [n, i] of chars) {
                    range.setStart(n, i); range.setEnd(n, i + 1); tops.push(range.getClientRects()[0].top);
                }
                for (let i = 1; i < tops.length; i++)
                    if (tops[i] > tops[i - 1] + 2) out.push(text.slice(0, i) + '|' + text.slice(i));
            }
            return out;
        })()""")
    assert breaks, "no test id wraps at 1024 px: the check checks nothing"
    for wrapped in breaks:
        before, after = wrapped.split("|")
        assert before.endswith(("/", "::")) or after.startswith("["), wrapped
