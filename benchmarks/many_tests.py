"""What judging costs as a module grows from one profiled test to hundreds (issue 43, "300 tests").

A project of one module of N parametrized profiled tests is replayed (no GPU): each test's
trace is one of the shipped single-process traces of ``example_suite/traces``, in turn, linked
under the name a replay finds it by (``kept_traces.trace_name``).  The baselines are recorded::

    pytest --gpuprof-update-baseline --gpuprof-replay=DIR --gpuprof-record-processes=1

then judged, writing the JSON results and the HTML report::

    pytest --gpuprof --gpuprof-replay=DIR --gpuprof-json=r.json --gpuprof-html=r.html

Usage::

    python benchmarks/many_tests.py [--sizes 1,10,100,300] [--recordings K] [--out DIR]
    python benchmarks/many_tests.py --smoke

With ``--recordings K`` the baselines are recorded K times, each adding a run to every
entry (what a baseline's history costs the results).  For each N: the recording's and the
judging's seconds (wall clock), judging's seconds per test and, past N = 1, per test beyond
N = 1's (what one more test costs, start-up left out), the peak RSS of each pytest process
(``os.wait4``'s resource usage of the child), the baseline file's size, the JSON results'
and the HTML report's; where Chromium is installed, the report opened in headless Chromium
(tests/helpers/browser.py, 1400 x 1000): the seconds from navigation to its first paint, to
its load event and to the first frame after it (the page answers: open), its DOM nodes
once loaded, and the seconds that unfolding a folded test takes (its summary link clicked, to
the first frame after its details are built: the first, middle and last test).  The pytest
processes import the gpuprof of this checkout (PYTHONPATH).
``--smoke`` runs N = 1 and 2 and checks that every test was recorded, then passed (its
reports not opened).
``--open REPORT`` measures one report already written (a report of an older checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.browser import CHROMIUM, Browser  # noqa: E402
from pytest_gpuprof.run.kept_traces import trace_name  # noqa: E402

TRACES = ROOT / "example_suite" / "traces"
SHIPPED = sorted(t for t in TRACES.glob("*.pt.trace.json.gz") if "test_distributed" not in t.name)
MODULE = "test_many.py"
TEST = "test_case"
MB = 1e6

MODULE_TEXT = '''\
import pytest


@pytest.mark.parametrize("i", range({n}))
def {test}(gpuprof, i):
    for _ in gpuprof.steps():
        pass
'''


class Run(NamedTuple):
    """One pytest process: its wall-clock seconds, peak RSS (MiB) and output."""

    seconds: float
    rss_mib: float
    out: str


class Opened(NamedTuple):
    """A report in headless Chromium: seconds from navigation to its first paint, its load
    event and the first frame after that, its DOM nodes once loaded, and the seconds each
    unfolding of a test took (``UNFOLD``; none where every test is unfolded already)."""

    paint_s: float
    load_s: float
    open_s: float
    nodes: int
    unfold_s: tuple[float, ...]


class Row(NamedTuple):
    n: int
    record: Run
    judge: Run
    baseline_mb: float
    json_mb: float
    html_mb: float
    statuses: dict[str, int]
    opened: Opened | None


def project(folder: Path, n: int) -> Path:
    """A project of one module of ``n`` parametrized profiled tests, and its replay folder."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / MODULE).write_text(MODULE_TEXT.format(n=n, test=TEST))
    replay = folder / "replay"
    replay.mkdir()
    for i in range(n):
        (replay / trace_name(f"{MODULE}::{TEST}[{i}]")).symlink_to(SHIPPED[i % len(SHIPPED)])
    return replay


def pytest_run(folder: Path, *args: str) -> Run:
    """``python -m pytest ARGS`` in ``folder``, importing this checkout's gpuprof."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    log = folder / "pytest.log"
    start = time.perf_counter()
    with log.open("w") as out:
        child = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                                 cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    text = log.read_text()
    if child.returncode != 0:
        raise SystemExit(f"pytest {' '.join(args)} in {folder} exited {child.returncode}:\n{text[-4000:]}")
    return Run(seconds, usage.ru_maxrss / 1024, text)


def measure(folder: Path, n: int, recordings: int = 1, opened: bool = True) -> Row:
    """Record the baselines of ``n`` tests (``recordings`` times: each adds a run to every
    entry, up to the 5 an entry keeps by default), then judge them; with ``opened``, open the
    report in Chromium."""
    replay = project(folder, n)
    runs = [pytest_run(folder, "--gpuprof-update-baseline", f"--gpuprof-replay={replay}",
                       "--gpuprof-record-processes=1") for _ in range(recordings)]
    record = Run(sum(r.seconds for r in runs), max(r.rss_mib for r in runs), runs[-1].out)
    results, html = folder / "results.json", folder / "report.html"
    judge = pytest_run(folder, "--gpuprof", f"--gpuprof-replay={replay}", f"--gpuprof-json={results}",
                       f"--gpuprof-html={html}")
    baseline = folder / "baselines" / MODULE.replace(".py", ".json")
    statuses: dict[str, int] = {}
    for test in json.loads(results.read_text())["tests"]:
        statuses[test["status"]] = statuses.get(test["status"], 0) + 1
    return Row(n, record, judge, baseline.stat().st_size / MB, results.stat().st_size / MB, html.stat().st_size / MB,
               statuses, open_report(html) if opened else None)


#: Resolves once the page has drawn a frame after its load event and run what was queued.
FRAME = "new Promise(done => requestAnimationFrame(() => setTimeout(done)))"
#: Resolves to the time of the page's first contentful paint (a small page may load before it).
FIRST_PAINT = """new Promise(done => new PerformanceObserver((found, observer) => {
    const paint = found.getEntriesByName("first-contentful-paint")[0];
    if (paint) { observer.disconnect(); done(paint.startTime); }
}).observe({type: "paint", buffered: true}))"""


#: Clicks the summary link of the INDEX-th test and resolves to the milliseconds until the first frame
#: after its details were built ("details-built", which the page fires once they are in it, drawn),
#: or null where the test is not folded.
UNFOLD = """new Promise(done => {
    const link = document.querySelectorAll('#summary a')[INDEX];
    const details = document.getElementById(decodeURIComponent(link.hash.slice(1))).querySelector('details');
    if (details.open || !details.querySelector(':scope > script.folded-body')) return done(null);
    const start = performance.now();
    details.addEventListener('details-built', () => requestAnimationFrame(() => setTimeout(
        () => done(performance.now() - start))), {once: true});
    link.click();
})"""


def open_report(html: Path) -> Opened | None:
    """``html`` opened in a fresh headless Chromium (None where there is none)."""
    if CHROMIUM is None:
        return None
    with tempfile.TemporaryDirectory() as profile, Browser(Path(profile), 1400, 1000, timeout=300) as browser:
        start = time.perf_counter()
        browser.open(html.as_uri())
        browser.evaluate(FRAME)
        open_s = time.perf_counter() - start
        paint = browser.evaluate(FIRST_PAINT)
        load = browser.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
        nodes = browser.call("Memory.getDOMCounters")["nodes"]
        n = browser.evaluate("document.querySelectorAll('#summary a').length")
        unfolds = [browser.evaluate(UNFOLD.replace("INDEX", str(i))) for i in sorted({0, n // 2, n - 1}) if n]
    return Opened(paint / 1e3, load / 1e3, open_s, nodes, tuple(ms / 1e3 for ms in unfolds if ms is not None))


HEADER = ("| N | record s | judge s | judge s/test | judge s per test past the first | peak RSS record / judge MiB "
          "| baseline MB | JSON MB | HTML MB | HTML first paint / load / open s | DOM nodes | unfold a test s |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def opened_cells(opened: Opened | None) -> str:
    if opened is None:
        return "not opened | | |"
    unfold = " / ".join(f"{s:.2f}" for s in opened.unfold_s) or "none folded"
    return f"{opened.paint_s:.2f} / {opened.load_s:.2f} / {opened.open_s:.2f} | {opened.nodes:,} | {unfold} |"


def line(row: Row, first: Row | None) -> str:
    """The row of ``row``; past the first: judging's seconds beyond N = 1's, per test added."""
    added = "" if first is None or row.n == first.n else \
        f"{(row.judge.seconds - first.judge.seconds) / (row.n - first.n):.3f}"
    return (f"| {row.n} | {row.record.seconds:.1f} | {row.judge.seconds:.1f} | {row.judge.seconds / row.n:.3f} | "
            f"{added} | {row.record.rss_mib:.0f} / {row.judge.rss_mib:.0f} | {row.baseline_mb:.2f} | "
            f"{row.json_mb:.2f} | {row.html_mb:.2f} | {opened_cells(row.opened)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100,300", help="the N to measure, comma-separated")
    parser.add_argument("--out", type=Path, help="keep each N's project here (default: a temporary folder)")
    parser.add_argument("--recordings", type=int, default=1,
                        help="record the baselines this many times, each adding a run to every entry (record s: "
                             "all of them)")
    parser.add_argument("--smoke", action="store_true", help="N = 1 and 2, checking every test passed")
    parser.add_argument("--open", type=Path, metavar="REPORT",
                        help="only open this HTML report in Chromium and print its size, times, DOM nodes and "
                             "unfold seconds")
    args = parser.parse_args()
    if args.open:
        print(f"{args.open}: {args.open.stat().st_size / MB:.2f} MB | {opened_cells(open_report(args.open))}")
        return 0
    sizes = [1, 2] if args.smoke else [int(s) for s in args.sizes.split(",")]
    print(f"{len(SHIPPED)} shipped traces in turn; baselines recorded {args.recordings} time(s); "
          f"python {sys.version.split()[0]}; gpuprof from {ROOT}")
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        first = None
        for n in sizes:
            row = measure(out / f"n{n}", n, args.recordings, opened=not args.smoke)
            first = first or (row if n == 1 else None)
            print(line(row, first), flush=True)
            if args.smoke and row.statuses != {"passed": n}:
                raise SystemExit(f"smoke: expected {n} passed, got {row.statuses}")
    if args.smoke:
        print("smoke passed: every test recorded, then passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
