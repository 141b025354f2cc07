"""The pull-request summary (``--gpuprof-summary``) as GitHub shows it: rendered at GitHub's
content width (1012 px) with its font and table styling in headless Chromium, the planted
bugs' summary (benchmarks/report_size.py) shows each test's status and verdict without
scrolling sideways, folds the details, and prints no name longer than ~100 characters.

No Markdown renderer is installed: ``gfm_html`` renders the subset of GitHub Flavored
Markdown the summary writes (headings, paragraphs, tables, lists, code spans and blocks,
backslash escapes, and the raw HTML GitHub allows: ``<details>``, ``<summary>``, ``<code>``,
``<sub>``, ``<wbr>``).  Run as a script it makes docs/pr-summary.png::

    python tests/report/test_pr_summary.py SUMMARY.md docs/pr-summary.png
"""

from __future__ import annotations

import html
import re
import sys
import tempfile
from pathlib import Path

import pytest

# run as a script too: tests/ for its helpers (pytest puts it on sys.path)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers.browser import BROWSERS, CHROMIUM, Browser
from pytest_gpuprof.report.markdown import KERNEL_WIDTH, summary_markdown

NO_BROWSER = f"no Chromium on PATH ({', '.join(BROWSERS)}; .ci/run installs Debian's chromium)"
#: The width of a GitHub job summary's or pull request comment's content.
GITHUB_WIDTH = 1012
#: GitHub's styles of rendered Markdown (github-markdown-css) that decide a table's width.
GITHUB_CSS = f"""
body {{ margin: 0; padding: 16px; }}
.markdown-body {{ width: {GITHUB_WIDTH}px; font-family: -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial,
  sans-serif; font-size: 14px; line-height: 1.5; word-wrap: break-word; }}
.markdown-body table {{ display: block; width: max-content; max-width: 100%; overflow: auto;
  border-spacing: 0; border-collapse: collapse; }}
.markdown-body td, .markdown-body th {{ padding: 6px 13px; border: 1px solid #d0d7de; }}
.markdown-body code {{ font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 85%;
  padding: .2em .4em; white-space: break-spaces; background: #eff1f3; border-radius: 6px; }}
.markdown-body pre {{ overflow: auto; padding: 16px; background: #f6f8fa; }}
.markdown-body pre code {{ white-space: pre; padding: 0; }}
"""
_RAW_HTML = re.compile(r"</?(details|summary|code|sub|wbr)\b[^>]*>")
_ENTITY = re.compile(r"&(#\d+|[a-z]+);")


def _inline(text: str) -> str:
    """A line's inline Markdown: code spans, backslash escapes, ``**strong**``, the raw tags
    and entities GitHub keeps; any other ``<`` or ``&`` as text."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "`":
            fence = re.match(r"`+", text[i:]).group(0)
            end = text.find(fence, i + len(fence))
            while end != -1 and text[end + len(fence):end + len(fence) + 1] == "`":
                end = text.find(fence, end + len(fence) + 1)
            if end != -1:
                code = text[i + len(fence):end]
                code = code[1:-1] if code.startswith(" ") and code.endswith(" ") and code.strip() else code
                out.append(f"<code>{html.escape(code, quote=False)}</code>")
                i = end + len(fence)
                continue
        if text[i] == "\\" and i + 1 < len(text) and not text[i + 1].isalnum():
            out.append(html.escape(text[i + 1], quote=False))
            i += 2
            continue
        raw = _RAW_HTML.match(text, i) or _ENTITY.match(text, i)
        if raw:
            out.append(raw.group(0))
            i = raw.end()
            continue
        out.append(html.escape(text[i], quote=False))
        i += 1
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", "".join(out))


def _cells(row: str) -> list[str]:
    """A table row's cells: split on pipes not escaped; ``\\|`` is a pipe, in code spans too."""
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def unescaped(markdown: str) -> str:
    """Markdown text as it reads: backslash escapes and entities undone."""
    return html.unescape(re.sub(r"\\([^A-Za-z0-9\s])", r"\1", markdown))


def gfm_html(markdown: str) -> str:
    """The summary's Markdown as GitHub renders it (the subset the summary writes)."""
    lines, out, i = markdown.splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("```"):
            end = lines.index(re.match(r"`+", line).group(0), i + 1)
            out.append(f"<pre><code>{html.escape(chr(10).join(lines[i + 1:end]))}</code></pre>")
            i = end + 1
        elif _RAW_HTML.match(line):  # an HTML block runs to the next blank line
            end = next((j for j in range(i, len(lines)) if not lines[j].strip()), len(lines))
            out.append("\n".join(lines[i:end]))
            i = end
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
            i += 1
        elif line.startswith("|"):
            end = next((j for j in range(i, len(lines)) if not lines[j].startswith("|")), len(lines))
            head, _, *rows = lines[i:end]
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in _cells(head)) + "</tr></thead>"
                       "<tbody>" + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in _cells(r)) + "</tr>"
                                           for r in rows) + "</tbody></table>")
            i = end
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith(("- ", "  - ")):
                nested = lines[i].startswith("  - ")
                item = _inline(lines[i].strip()[2:])
                if nested and items:
                    items[-1] += f"<ul><li>{item}</li></ul>"
                else:
                    items.append(item)
                i += 1
            out.append("<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>")
        else:
            end = next((j for j in range(i, len(lines)) if not lines[j].strip()), len(lines))
            out.append(f"<p>{_inline(' '.join(lines[i:end]))}</p>")
            i = end
    return (f"<!doctype html><html><head><meta charset='utf-8'><style>{GITHUB_CSS}</style></head>"
            f"<body><div class='markdown-body'>{chr(10).join(out)}</div></body></html>")


def test_the_renderer_reads_what_the_summary_writes():
    page = gfm_html("## a `b|c` \\*x\\*\n\n| s | t |\n|---|---|\n| ❌&nbsp;**failed** | `a::`<wbr>`b` \\| `c\\|d` |\n\n"
                    "<details><summary>✅ <code>x</code></summary>\n\n- `k`: 1 &lt; 2\n  - inner\n\n</details>\n")
    assert "<h2>a <code>b|c</code> *x*</h2>" in page
    assert ("<td>❌&nbsp;<strong>failed</strong></td>"
            "<td><code>a::</code><wbr><code>b</code> | <code>c|d</code></td>") in page
    assert "<details><summary>✅ <code>x</code></summary>" in page
    assert "<ul><li><code>k</code>: 1 &lt; 2<ul><li>inner</li></ul></li></ul>" in page


@pytest.fixture(scope="module")
def planted_summary(planted_replay) -> Path:
    """The planted bugs' summary: four tests failing, two passing (benchmarks/report_size.py's
    replay, made once for the run: tests/conftest.py)."""
    out, _ = planted_replay
    return out / "summary.md"


def test_no_name_runs_past_a_hundred_characters(planted_summary):
    """The CNN's kernel names run to ~700 characters; every code span holds at most a
    shortened one inside ``kernels[...].count``."""
    text = planted_summary.read_text()
    spans = re.findall(r"`([^`]+)`", text)
    kernels = [s for s in spans if s.startswith("kernels[")]
    assert len(kernels) > 80
    assert max(len(s) - len("kernels[].count") for s in kernels) <= KERNEL_WIDTH
    assert max(map(len, spans)) <= KERNEL_WIDTH + len("kernels[].time_us")


def test_the_table_holds_status_test_and_what_broke(planted_summary):
    text = planted_summary.read_text()
    table = text[:text.index("<details>")]
    rows = [_cells(line) for line in table.splitlines() if line.startswith("| ")]
    assert rows[0] == ["status", "test", "verdict"]
    by_test = {re.sub(r"`|<wbr>", "", row[1]): row for row in rows[1:]}
    assert sorted(by_test) == sorted(f"{name}.py::{test}" for name, test in [
        ("test_cnn", "test_cnn_train_step"), ("test_moe", "test_moe_forward"),
        ("test_transformer", "test_transformer_train_step"), ("test_weight_streaming", "test_weight_streaming")])
    assert all(row[0] == "❌&nbsp;**failed**" for row in rows[1:])
    verdicts = {test: unescaped(row[2]) for test, row in by_test.items()}
    # the .item() bug: 8 syncs a step where the gpuprof marker allows none
    assert verdicts["test_moe.py::test_moe_forward"].startswith("10 metric(s) broke: sync_count 8 (threshold == 0), ")
    # one kernel ran 9 times a step instead of once: 8 more kernels
    before, after = re.fullmatch(r"2 metric\(s\) broke: kernel_count (\d+) → (\d+) \(\+[\d.]+%\), "
                                 r"kernels\[.+\]\.count 1 → 9 \(\+800(\.0)?%\)",
                                 verdicts["test_transformer.py::test_transformer_train_step"]).group(1, 2)
    assert int(after) - int(before) == 8
    # copies on the compute stream: no overlap left, below the marker's thresholds (0.6 and 0.85)
    assert re.fullmatch(r"2 metric\(s\) broke: overlap_efficiency 0(\.0+)?% \(threshold >= 60(\.0+)?%\), "
                        r"gpu_utilization \S+ \(threshold >= 85(\.0+)?%\)",
                        verdicts["test_weight_streaming.py::test_weight_streaming"])
    passed = text[text.index("<details><summary>✅ 2 passed</summary>"):]
    assert [r[0] for r in (_cells(line) for line in passed.split("</details>")[0].splitlines()
                           if line.startswith("| "))] == ["status", "✅&nbsp;passed", "✅&nbsp;passed"]


def test_each_failing_test_folds_its_broken_metrics_one_per_line(planted_summary):
    text = planted_summary.read_text()
    folds = re.findall(r"<details><summary>❌ <code>(.*?)</code></summary>\n\n(.*?)\n</details>", text, re.S)
    assert [nodeid for nodeid, _ in folds] == ["example_suite/test_cnn.py::test_cnn_train_step",
                                              "example_suite/test_moe.py::test_moe_forward",
                                              "example_suite/test_transformer.py::test_transformer_train_step",
                                              "example_suite/test_weight_streaming.py::test_weight_streaming"]
    moe = dict(folds)["example_suite/test_moe.py::test_moe_forward"]
    assert unescaped(moe).startswith("10 metric(s) broke on NVIDIA H200: sync_count 8 (threshold == 0), ")
    assert len([line for line in moe.splitlines() if line.startswith("- `")]) == 10


def test_a_test_to_look_at_keeps_its_notes_below_the_table():
    """The verdict cell says a few words; how an unstable test was measured follows the table."""
    test = {"nodeid": "t.py::test_a", "status": "unstable", "gpu": "G", "message": "", "verdicts": [],
            "metrics": None, "baseline_metrics": None, "unstable": ["the host stalled"], "notes": ["a note"]}
    text = summary_markdown({"backend": "torch", "baseline_dir": "b", "counts": {"unstable": 1}, "skipped": [],
                             "tests": [test]})
    table = text[:text.index("<details>")]
    assert "| ⚠️&nbsp;unstable | `t.py::`<wbr>`test_a` | within the rules |" in table
    assert table.count("- `t.py::`<wbr>`test_a`: unstable: the host stalled\n") == 1
    assert table.count("- `t.py::`<wbr>`test_a`: a note\n") == 1


def _layout(browser: Browser) -> dict:
    return browser.evaluate("""(() => {
        const table = document.querySelector('table'), verdict = table.querySelector('th:last-child');
        const rights = [...table.querySelectorAll('th, td')].map(c => c.getBoundingClientRect().right);
        const left = document.querySelector('.markdown-body').getBoundingClientRect().left;
        return {right: Math.max(...rights) - left, verdict: verdict.getBoundingClientRect().right - left,
                scrolls: table.scrollWidth > table.clientWidth, height: table.getBoundingClientRect().height,
                rows: table.querySelectorAll('tbody tr').length};
    })()""")


@pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)
def test_the_summary_fits_githubs_width_with_the_verdict_visible(planted_summary, tmp_path):
    page = tmp_path / "summary.html"
    page.write_text(gfm_html(planted_summary.read_text()))
    with Browser(tmp_path / "profile", width=GITHUB_WIDTH + 100, height=900) as browser:
        browser.open(page.as_uri())
        layout = _layout(browser)
        assert layout["rows"] == 4
        assert not layout["scrolls"] and layout["right"] <= GITHUB_WIDTH and layout["verdict"] <= GITHUB_WIDTH
        assert layout["height"] < 600  # a few lines a row, not every note
        # what is folded: the passing tests, each failing test's details, the key metrics
        assert browser.evaluate("[...document.querySelectorAll('details')].filter(d => !d.open).length") == 6
        assert not browser.errors()


def screenshot(summary: Path, png: Path) -> None:
    """docs/pr-summary.png: the summary at GitHub's width, the first failing test unfolded."""
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "summary.html"
        page.write_text(gfm_html(summary.read_text()))
        with Browser(Path(tmp) / "profile", width=GITHUB_WIDTH + 48, height=1000) as browser:
            browser.open(page.as_uri())
            browser.evaluate("document.querySelectorAll('details')[1].open = true")
            browser.screenshot(png)


if __name__ == "__main__":
    screenshot(Path(sys.argv[1]), Path(sys.argv[2]))
