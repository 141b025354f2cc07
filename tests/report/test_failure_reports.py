"""What a failure says, the same in every report (docs/results.md: "One count of what broke",
"A change let through", "The next step"): the planted bugs replayed against baselines
recorded from the shipped traces (docs/html.md's recipe), read back from the terminal, the
Markdown summary, the HTML report and the JUnit file; the counts and numbers worked out here
from the results document's verdicts and samples."""

import html
import json
import math
import re
import statistics
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from helpers.folds import read_page
from pytest_gpuprof.compare.evaluate import TestResult
from pytest_gpuprof.compare.rules import parse_threshold
from pytest_gpuprof.compare.verdict import Verdict
from pytest_gpuprof.report.words import failure_message

ROOT = Path(__file__).parents[2]
TRACES = ROOT / "example_suite" / "traces"
MOE = "example_suite/test_moe.py::test_moe_forward"
STREAMING = "example_suite/test_weight_streaming.py::test_weight_streaming"
#: docs/results.md: the verdict statuses that fail a test.
FAILING = ("regressed", "changed", "threshold", "new", "vanished")


@pytest.fixture(scope="module")
def replayed(planted_replay):
    """The planted bugs (the MoE's ``.item()``, weight streaming's copies moved onto the
    compute stream, among them) replayed against baselines recorded from the shipped traces,
    every report written (benchmarks/report_size.py's replay, made once for the run:
    tests/conftest.py): (folder, results document, terminal output)."""
    out, proc = planted_replay
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return out, json.loads((out / "results.json").read_text()), proc.stdout


def result_of(doc, nodeid):
    return next(t for t in doc["tests"] if t["nodeid"] == nodeid)


def broken_metrics(test) -> set:
    """The metrics that broke, as docs/results.md counts them: each (rank, metric) with a failing verdict."""
    return {(v.get("rank"), v["metric"]) for v in test["verdicts"] if v["status"] in FAILING}


def terminal_failure(stdout: str, nodeid: str) -> list[str]:
    """The lines of one test's failure message in pytest's FAILURES section."""
    lines = stdout.splitlines()
    name = nodeid.split("::")[-1]
    start = next(i for i, line in enumerate(lines) if re.fullmatch(rf"_+ {name} _+", line))
    end = next(i for i in range(start + 1, len(lines)) if re.match(r"^(_{3,}|={3,}) ", lines[i]))
    return lines[start + 1:end]


def markdown_unescaped(text: str) -> str:
    return html.unescape(re.sub(r"\\([\\`*_\[\]#!~|])", r"\1", text))


def markdown_row(markdown: str, nodeid: str) -> list[str]:
    """The cells of a test's row in the summary's table (status, test, verdict): the test is
    its node id less its folders, code spans joined by ``<wbr>``."""
    rows = ([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in markdown.splitlines()
            if line.startswith("| "))
    return next(row for row in rows if len(row) == 3 and re.sub(r"`|<wbr>", "", row[1]) == nodeid.rpartition("/")[2])


def markdown_failure(markdown: str, nodeid: str) -> list[str]:
    """The lines of one test's fold under ``### Failures``."""
    text = markdown[markdown.index("### Failures"):]
    fold = text.split(f"<summary>❌ <code>{html.escape(nodeid)}</code></summary>")[1]
    return fold.split("</details>")[0].splitlines()


def html_text(markup: str) -> str:
    """What a reader sees of some HTML: its text, tags (``<wbr>`` too) dropped."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def html_section(page: str, nodeid: str) -> str:
    return next(s for s in page.split('<section class="test')[1:]
                if html_text(s.split("</h2>")[0]).strip().endswith(nodeid))


def html_lists(section: str) -> list[tuple[str, str, list[str]]]:
    """(class, heading, items' text) of each list of verdicts of a test's section: what broke
    (``broke``), then the others (``noted``)."""
    return [(css, html.unescape(heading), [html.unescape(re.sub("<[^>]+>", "", li))
                                           for li in re.findall(r"<li[^>]*>(.*?)</li>", items, re.S)])
            for css, heading, items in re.findall(r'<div class="(broke|noted)"><h3>(.*?)</h3><ul>(.*?)</ul></div>',
                                                  section, re.S)]


def junit_broken(junit: Path, nodeid: str) -> list[str]:
    """Each broken metric's property (``gpuprof.broken.METRIC``) as the failure message's line for it."""
    name = nodeid.split("::")[-1]
    case = next(tc for tc in ElementTree.parse(junit).iter("testcase") if tc.get("name") == name)
    return [f"{p.get('name').removeprefix('gpuprof.broken.')}: {p.get('value')}" for p in case.iter("property")
            if p.get("name").startswith("gpuprof.broken.")]


@pytest.mark.parametrize("nodeid", [MOE, STREAMING])
def test_every_report_gives_one_count_of_what_broke(replayed, nodeid):
    out, doc, stdout = replayed
    test = result_of(doc, nodeid)
    count = len(broken_metrics(test))
    assert count and test["status"] == "failed"
    # a metric broken by its threshold and against its baseline: more broken verdicts than metrics
    assert sum(v["status"] in FAILING for v in test["verdicts"]) > count

    terminal = terminal_failure(stdout, nodeid)
    assert terminal[0].startswith(f"gpuprof: {count} metric(s) broke on NVIDIA H200: ")
    # the first three named in brief, then how many more
    assert (f" and {count - 3} more (baseline file " in terminal[0]) == (count > 3)
    listed = [line for line in terminal[1:] if line.startswith("  ") and not line.startswith("  (")]
    assert len(listed) == count

    markdown = (out / "summary.md").read_text()
    assert markdown_row(markdown, nodeid)[-1].startswith(f"{count} metric(s) broke: ")
    entry = markdown_failure(markdown, nodeid)
    assert markdown_unescaped(entry[2]) == terminal[0].removeprefix("gpuprof: ")
    assert len([line for line in entry if line.startswith("- `")]) == count

    page = read_page(out / "report.html")
    row = next(r for r in page.split('<table class="grid summary"')[1].split("</table>")[0].split("<tr")
               if nodeid in html_text(r))
    assert re.findall(r'<td class="num">(.*?)</td>', row)[0] == str(count)
    [(css, heading, items)] = [found for found in html_lists(html_section(page, nodeid)) if found[0] == "broke"]
    assert heading == terminal[0].removeprefix("gpuprof: ").removesuffix(":")
    more = re.fullmatch(r"… and (\d+) more per-kernel metric\(s\): see the kernel diff below", items[-1])
    assert (len(items) - 1 + int(more.group(1)) if more else len(items)) == count

    assert len(junit_broken(out / "junit.xml", nodeid)) == count


def test_no_improvement_is_counted_or_listed_as_broken(replayed):
    """Weight streaming with its copies on the compute stream: its kernels got faster
    (improved) while its overlap broke; the improvements are listed apart."""
    out, doc, stdout = replayed
    test = result_of(doc, STREAMING)
    improved = [v["metric"] for v in test["verdicts"] if v["status"] == "improved"]
    assert "kernel_time_us" in improved and not set(improved) & {m for _, m in broken_metrics(test)}

    def names_improved(line: str) -> bool:
        return any(line.lstrip().startswith(f"{m}:") for m in improved) or "[improved" in line

    terminal = terminal_failure(stdout, STREAMING)
    assert not any(names_improved(line) for line in terminal)
    markdown = (out / "summary.md").read_text()
    assert not any(names_improved(markdown_unescaped(line)) for line in markdown_failure(markdown, STREAMING))
    assert "improved" not in markdown_row(markdown, STREAMING)[-1]
    assert not any(names_improved(line) for line in junit_broken(out / "junit.xml", STREAMING))
    lists = html_lists(html_section(read_page(out / "report.html"), STREAMING))
    [broke] = [items for css, _, items in lists if css == "broke"]
    assert not any(names_improved(line) for line in broke)
    [listed] = [items for _, heading, items in lists if heading.startswith(f"{len(improved)} metric(s) improved (")]
    assert len(listed) == len(improved)


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """The exact two-sided Mann-Whitney U p-value of two samples without ties: twice the
    share of the C(n, len(a)) rank sets whose sum lies as far out as ``a``'s, or farther."""
    ranks = {v: r for r, v in enumerate(sorted(a + b), 1)}
    assert len(ranks) == len(a) + len(b)  # no ties
    n, k = len(a) + len(b), len(a)
    u = sum(ranks[v] for v in a) - k * (k + 1) // 2
    ways = [[0] * (k * n + 1) for _ in range(k + 1)]  # ways[j][s]: j ranks of 1..i summing to s
    ways[0][0] = 1
    for i in range(1, n + 1):
        for j in range(min(i, k), 0, -1):
            for s in range(k * n, i - 1, -1):
                ways[j][s] += ways[j - 1][s - i]
    low = min(u, k * (n - k) - u) + k * (k + 1) // 2
    return min(1.0, 2 * sum(ways[k][:low + 1]) / math.comb(n, k))


@pytest.mark.parametrize("nodeid", [MOE, STREAMING])
def test_a_change_let_through_is_said_with_its_p_value_and_level(replayed, nodeid):
    """The window of both planted bugs moved beyond its 10% tolerance (docs/metrics.md), and
    the steps' rank test did not get under the corrected level: every report says so."""
    out, doc, stdout = replayed
    test = result_of(doc, nodeid)
    now, before = test["per_step"], test["baseline_per_step"]
    steps = [[v for v, stalled in zip(run["window_us"], run["stalled"]) if not stalled] for run in (now, before)]
    median, baseline = (statistics.median(s) for s in steps)
    assert abs(median / baseline - 1) > 0.10
    series = len((set(test["distribution"]) & set(test["baseline_distribution"])) - {"kernels"}) + len(
        set(test["distribution"]["kernels"]) & set(test["baseline_distribution"]["kernels"]))
    p, level = mann_whitney_p(*steps), 0.01 / series
    assert p >= level
    said = f"not significant (p={p:.2g} ≥ {level:.2g})"
    line = f"window_us {median / baseline - 1:+.1%} beyond its tolerance, let through: {said}"

    assert f"  ({line})" in terminal_failure(stdout, nodeid)
    assert f"  {nodeid}: {line}" in stdout.splitlines()  # the gpuprof section
    markdown = (out / "summary.md").read_text()
    assert f"- {line}" in [markdown_unescaped(item) for item in markdown_failure(markdown, nodeid)]
    section = html_section(read_page(out / "report.html"), nodeid)
    window = section.split('data-metric="window_us"')[1].split("</tr>")[0]
    assert re.findall(r'<span class="vd (v-[a-z-]+)">(.*?)</span>', window) == [("v-let-through", html.escape(said))]
    (let_through,) = [items for kind, head, items in html_lists(section)
                      if kind == "noted" and head == f"{len(items)} change(s) beyond the tolerance let through"]
    assert line in let_through  # beside it, in the weight-streaming replay, a GEMM 9.9% faster within the
    # prediction interval of one recorded run on a card it cannot name (±10.4%: 2.5% and 1.1% between cards)


def threshold_verdict(text: str, current: float) -> Verdict:
    t = parse_threshold(text, "marker")
    return Verdict(t.metric, "threshold", None, current, t.text, relative=False, threshold=t)


def test_a_broken_threshold_suggests_the_step_that_fixes_it():
    """Refreshing the baseline cannot fix a threshold: its message does not suggest it."""
    result = TestResult("t.py::test_x", gpu="NVIDIA H200", metrics={"step_count": 10}, baseline_file=Path("b.json"),
                        verdicts=[threshold_verdict("gpu_utilization >= 0.85", 0.6)])
    lines = failure_message(result).splitlines()
    assert lines[:2] == ["gpuprof: 1 metric(s) broke on NVIDIA H200: gpu_utilization 60.0% (threshold >= 85.0%) "
                         "(baseline file b.json):",
                         "  gpu_utilization: current 60.0% violates threshold gpu_utilization >= 0.85"]
    assert len(lines) == 3 and lines[2].startswith("Next step for a violated threshold: fix the code, or change the "
                                                   "threshold where it is set")
    for where in ("thresholds=", "--gpuprof-threshold", "gpuprof_thresholds"):
        assert where in lines[2]
    assert "--gpuprof-update-baseline" not in "\n".join(lines)


def test_each_kind_of_failure_gets_its_own_step():
    regressed = Verdict("kernel_time_us", "regressed", 100.0, 130.0, "within ±5%")
    changed = Verdict("kernel_count", "changed", 10.0, 11.0, "must match exactly per step")
    result = TestResult("t.py::test_x", gpu="NVIDIA H200", metrics={"step_count": 10}, baseline_file=Path("b.json"),
                        verdicts=[threshold_verdict("sync_count == 0", 8.0), changed, regressed])
    steps = [line for line in failure_message(result).splitlines() if line.startswith("Next step")]
    assert [s.split(":")[0] for s in steps] == ["Next step for a violated threshold",
                                                "Next step for a changed count, byte total or kernel",
                                                "Next step for a time or ratio regression"]
    assert all("refresh the baseline with --gpuprof-update-baseline" in s for s in steps[1:])
    error = TestResult.of_error("t.py::test_x", "b.json: not a baseline file")
    assert failure_message(error).splitlines()[1].startswith("Next step for an error: ")
    strict = TestResult("t.py::test_x", gpu="NVIDIA H200", message="no baseline for NVIDIA H200 in b.json",
                        has_baseline=False, strict=True)
    assert failure_message(strict).splitlines()[1] == ("Next step for no baseline: record one for this GPU model "
                                                       "with --gpuprof-update-baseline.")


def test_a_replay_is_named_with_its_folder(replayed):
    out, doc, stdout = replayed
    replay = out / "replay"
    assert doc["replay_dir"] == str(replay)
    assert f"capture: replaying traces from {replay}" in stdout
    markdown = (out / "summary.md").read_text()
    assert f"capture: replaying traces from `{replay}`" in markdown.splitlines()[2]
    meta = re.search(r'<p class="meta">(.*?)</p>', (out / "report.html").read_text()).group(1)
    assert f"capture <b>replaying traces from {html.escape(str(replay))}</b>" in meta and "backend" not in meta


def test_a_new_kernels_baseline_count_is_0(replayed):
    """A kernel the baseline did not run ran 0 times there, not ``n/a`` times."""
    out, doc, _ = replayed
    new = [v for v in result_of(doc, MOE)["verdicts"] if v["status"] == "new"]
    assert new  # the planted .item() adds kernels
    rows = re.findall(r'<tr class="k-[a-z-]+" data-kernel-status="new">.*?</tr>', read_page(out / "report.html"),
                      re.S)
    counts = [re.findall(r'<td class="num">(.*?)</td>', row)[0] for row in rows]
    assert len(counts) >= len(new) and all(re.fullmatch(r"0 → \d+(\.\d+)?", c) for c in counts), counts
