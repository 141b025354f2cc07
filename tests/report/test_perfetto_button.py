"""The report's "Open trace in Perfetto" button where CI leaves it: the GPU gate's artifact,
made here as .github/workflows/gpu-perf.yml makes it through the action (its pytest
options, its upload's paths), keeps every button's trace beside the report; opened from disk the button says at
once what to do and opens no window; served over HTTP it says how far it got."""

from __future__ import annotations

import functools
import html
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from helpers.action_runner import action_steps, upload_artifact
from helpers.browser import BROWSERS, CHROMIUM, Browser
from helpers.folds import read_page, unfold_all
from pytest_gpuprof.run.backends import TorchBackend
from pytest_gpuprof.run.kept_traces import trace_name, unique_trace_name

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / ".github" / "workflows" / "gpu-perf.yml"
TRACES = ROOT / "example_suite" / "traces"
TESTS = ("example_suite/test_moe.py::test_moe_forward", "example_suite/test_cnn.py::test_cnn_train_step")
NO_BROWSER = f"no Chromium on PATH ({', '.join(BROWSERS)}; .ci/run installs Debian's chromium)"


def _gate_steps() -> list[dict]:
    """The gate's steps on a pull request: the workflow's, the action's in place of ``uses: ./``."""
    (job,) = yaml.safe_load(GATE.read_text())["jobs"].values()
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    return [inner for step in job["steps"]
            for inner in (action_steps(action, step["with"], {"event_name": "pull_request"},
                                       lambda path: (ROOT / path).read_text())
                          if step.get("uses") == "./" else [step])]


def _option(run: str, option: str) -> str:
    """The value the gate's pytest command gives ``option``."""
    return re.search(rf"{option}[ =](\S+)", run).group(1)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> Path:
    """The gate's artifact holding the report, unzipped: the shipped traces where
    --gpuprof-keep-traces leaves them (the torch backend's folder under the gate's
    --gpuprof-output-dir), judged against the shipped baselines with the gate's report
    options, then each upload step's paths stored as upload-artifact stores them."""
    tmp = tmp_path_factory.mktemp("ci")
    checkout, steps = tmp / "checkout", _gate_steps()
    (run,) = [s["run"] for s in steps if re.search(r"-m pytest\b", s.get("run", ""))]
    out = _option(run, "--gpuprof-output-dir")
    kept = TorchBackend(checkout / out, keep_traces=True).folder
    kept.mkdir(parents=True)
    for nodeid in TESTS:
        shutil.copy(TRACES / trace_name(nodeid), kept / unique_trace_name(nodeid))
    reports = [f"{option}={_option(run, option)}" for option in ("--gpuprof-output-dir", "--gpuprof-html")]
    proc = subprocess.run([sys.executable, "-m", "pytest", *(str(ROOT / n) for n in TESTS), "--rootdir", str(ROOT),
                           "-p", "no:cacheprovider", "-q", "--gpuprof", f"--gpuprof-replay={kept}",
                           f"--gpuprof-baseline-dir={ROOT / 'baselines'}", *reports],
                          cwd=checkout, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html_name = Path(_option(run, "--gpuprof-html")).name
    for i, step in enumerate(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact")):
        upload_artifact(checkout, step["with"]["path"].split(), tmp / f"artifact-{i}")
    (report,) = tmp.glob(f"artifact-*/{html_name}")
    return report


def _hrefs(report: Path) -> list[str]:
    return [html.unescape(h) for h in re.findall(r'<p class="perfetto" data-href="([^"]*)"', read_page(report))]


def test_every_perfetto_link_of_the_artifact_resolves_inside_it(artifact):
    hrefs = _hrefs(artifact)
    assert len(hrefs) == len(TESTS)
    for href in hrefs:
        assert not href.startswith("/") and "://" not in href, href
        target = (artifact.parent / href).resolve()
        assert target.is_file() and target.is_relative_to(artifact.parent.resolve()), href


def _click(browser: Browser, selector: str) -> None:
    """A real mouse click (a user gesture, as a pop-up needs) at the middle of ``selector``."""
    browser.evaluate(f"document.querySelector({selector!r}).scrollIntoView({{block: 'center'}})")
    x, y = browser.evaluate(f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect();"
                            " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
    for kind in ("mousePressed", "mouseReleased"):
        browser.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})


#: Counts the windows the page opens and records every text the first button's state shows.
WATCH = """(() => {
    const open = window.open;
    window.opened = 0;
    window.open = function () { window.opened += 1; return open.apply(window, arguments); };
    const state = document.querySelector('p.perfetto .perfetto-state');
    window.said = [];
    new MutationObserver(() => window.said.push(state.textContent)).observe(state, {childList: true,
                                                                                   characterData: true, subtree: true});
})()"""


def _said_after_click(browser: Browser, until: str, seconds: float = 10) -> list[str]:
    unfold_all(browser)  # every test's details built in the page
    browser.evaluate(WATCH)
    _click(browser, "p.perfetto .open-perfetto")
    deadline = time.monotonic() + seconds
    while not any(until in s for s in browser.evaluate("window.said")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return browser.evaluate("window.said")


@pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)
def test_from_disk_the_button_says_what_to_do_and_opens_no_window(artifact, tmp_path):
    with Browser(tmp_path / "profile", 1200, 900) as browser:
        browser.open(artifact.as_uri())
        said = _said_after_click(browser, "http.server")
        assert said == [f"Opened from disk, this page cannot read {_hrefs(artifact)[0]}: serve its folder "
                        f"(python -m http.server in the folder of {artifact.name}, then open "
                        f"http://localhost:8000/{artifact.name}) or pick the file."]
        assert browser.evaluate("window.opened") == 0
        assert not browser.errors()


@pytest.fixture
def served(artifact):
    """The artifact's folder over HTTP on a free port: its report's address."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(artifact.parent))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/{artifact.name}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)
def test_served_the_button_says_how_far_it_got(artifact, served, tmp_path):
    """The trace fetched (its address relative to the report resolves on the server), then
    Perfetto's answer awaited (this machine may not reach ui.perfetto.dev: no further)."""
    with Browser(tmp_path / "profile", 1200, 900) as browser:
        browser.open(served)
        said = _said_after_click(browser, "waiting for Perfetto")
        assert said[:2] == [f"fetching {_hrefs(artifact)[0]}…", "waiting for Perfetto…"]
        assert browser.evaluate("window.opened") == 1
        assert not browser.errors()
