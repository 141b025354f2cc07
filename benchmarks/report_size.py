"""How long the failing HTML report is, and how heavy: issue 35's figures, before and after.

The report of a replay of the planted bugs (tests/data/planted: the MoE's ``.item()``, the
transformer's extra kernel, weight streaming's copies on the compute stream, the CNN in fp32)
against baselines recorded by replaying the shipped traces (docs/html.md), measured in
headless Chromium (tests/helpers/browser.py) at the default state::

    python benchmarks/report_size.py [--out DIR]

prints the file's bytes, the kernel-diff tables' share of them, the page's height at 1400 and
1024 px wide, and the Markdown summary's bytes and longest line.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
PLANTED = ("item", "extra_kernel", "compute_stream", "fp32")


def failing_report(out: Path, *options: str) -> subprocess.CompletedProcess:
    """The planted bugs' replay, its HTML report (report.html) and Markdown summary (summary.md)
    written in ``out``, OPTIONS given to it besides (other reports: tests/conftest.py); its process."""
    baselines, replay = out / "baselines", out / "replay"
    for folder in (baselines, replay):  # a folder used before starts afresh
        shutil.rmtree(folder, ignore_errors=True)
    pytest = [sys.executable, "-m", "pytest", "example_suite", "-q", "-p", "no:cacheprovider",
              "--ignore=example_suite/test_distributed.py", f"--gpuprof-baseline-dir={baselines}"]
    subprocess.run([*pytest, "--gpuprof-update-baseline", f"--gpuprof-replay={ROOT / 'example_suite' / 'traces'}"],
                   cwd=ROOT, check=True, capture_output=True)
    replay.mkdir()
    for trace in (ROOT / "example_suite" / "traces").glob("*.gz"):
        shutil.copy(trace, replay)
    for bug in PLANTED:
        for trace in (ROOT / "tests" / "data" / "planted" / bug).glob("*.gz"):
            shutil.copy(trace, replay)
    done = subprocess.run([*pytest, "--gpuprof", f"--gpuprof-replay={replay}", f"--gpuprof-html={out / 'report.html'}",
                           f"--gpuprof-summary={out / 'summary.md'}", *options], cwd=ROOT, capture_output=True,
                          text=True)
    if done.returncode != 1:
        raise SystemExit(f"the planted bugs' replay should fail (exit 1), got {done.returncode}:\n{done.stdout}")
    return done


def page_height(html: Path, width: int) -> int:
    from helpers.browser import Browser

    with tempfile.TemporaryDirectory() as profile, Browser(Path(profile), width=width) as browser:
        browser.open(html.as_uri())
        return int(browser.evaluate("document.documentElement.scrollHeight"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep the report here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        failing_report(out)
        html, summary = out / "report.html", out / "summary.md"
        text = html.read_text()
        kernels = sum(len(t) for t in re.findall(r'<table class="grid kernels".*?</table>', text, re.S))
        lines = summary.read_text().splitlines()
        print(f"html: {len(text.encode()):,} bytes; kernel-diff tables {kernels:,} bytes "
              f"({kernels / len(text):.0%})")
        for width in (1400, 1024):
            print(f"html: {page_height(html, width):,} px tall at {width} px wide")
        print(f"summary: {len(summary.read_bytes()):,} bytes, {len(lines)} lines, longest {max(map(len, lines))} "
              "characters")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
