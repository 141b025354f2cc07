"""pytest-gpuprof's GitHub Action (action.yml) run as a GitHub runner runs it
(helpers.action_runner): its steps in order, their ``if:``, inputs and outputs, the scripts
of action/ really run, on a repository made here with a base and a head commit, a profiled
test, and a trace of it replayed (``--gpuprof-replay`` in the input pytest-args) so that
no GPU is needed. First the refresh records the baselines and proposes them; then the gate
runs twice on a pull request, keeping one comment.

Substituted, for this machine has no GPU and no GitHub, and said so where each is made:
actions/checkout (the base revision: a ``git worktree`` of it), actions/upload-artifact
(the files copied below their common folder, as its zip holds them), the GPU check (step
``gpu``; its refusals are tried on their own at the end), GitHub's REST API (a local
server, ``GITHUB_API_URL``, that keeps the comments and records each call), and the GitHub
CLI ``gh`` (a script that records its arguments).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from helpers.action_runner import ActionRun, run_action, upload_artifact
from pytest_gpuprof import __version__ as VERSION
from pytest_gpuprof.run.kept_traces import trace_name

ROOT = Path(__file__).resolve().parents[2]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
MARKER = "<!-- pytest-gpuprof -->"
NODE = "tests/test_model.py::test_forward"
CLEAN = ROOT / "example_suite" / "traces" / "example_suite_test_moe.py_test_moe_forward.pt.trace.json.gz"
ITEM = ROOT / "tests" / "data" / "planted" / "item" / CLEAN.name
GPU = "NVIDIA H200"  # the GPU the replayed traces were recorded on
REPOSITORY, PR, RUN_ID = "octo/model", 7, "4242"
TOKEN = "ghs_job_token"
ARTIFACT = "gpuprof-1"
#: The artifact's files of a run that replays traces: it keeps none of its own (its report names
#: the replayed ones), where a run on a GPU adds traces/ beside the report
REPLAY_ARTIFACT = ["pytest.log", "report.html", "results.json", "summary.md"]
TEST_FILE = '''import pytest
import torch


@pytest.mark.gpuprof(thresholds=["sync_count == 0"])
def test_forward(gpuprof):
    x = torch.randn(256, 256, device="cuda")
    for _ in gpuprof.steps(warmup=3, active=10):
        x @ x
'''


class FakeGitHub(ThreadingHTTPServer):
    """The REST API's comment calls on pull request PR: comments kept in memory, each call
    recorded as (method, path). With ``refuse``, writes get 403, as a fork's read-only token does."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.comments = {1: "Looks good, but is it fast?"}  # a reviewer's, which must stay as it is
        self.authors = {1: "reviewer"}  # who wrote each comment: the job's token writes as the bot
        self.calls: list[tuple[str, str]] = []
        self.refuse = False
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeGitHub

    def log_message(self, *args):
        pass

    def _answer(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        path = urlsplit(self.path).path
        self.server.calls.append((self.command, path))
        if self.headers["Authorization"] != f"Bearer {TOKEN}":
            return self._answer(401, {"message": "Bad credentials"})
        comments = self.server.comments
        issue = f"/repos/{REPOSITORY}/issues/{PR}/comments"
        if self.command == "GET" and path == issue:
            return self._answer(200, [{"id": i, "body": b, "user": {"login": self.server.authors[i]}}
                                      for i, b in sorted(comments.items())])
        if self.command in ("POST", "PATCH") and self.server.refuse:
            return self._answer(403, {"message": "Resource not accessible by integration"})
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["body"]
        if self.command == "POST" and path == issue:
            comments[max(comments) + 1] = body
            self.server.authors[max(comments)] = "github-actions[bot]"
            return self._answer(201, {"id": max(comments), "html_url": f"https://github.com/{REPOSITORY}/pull/{PR}"})
        number = int(path.rpartition("/")[2]) if path.startswith(f"/repos/{REPOSITORY}/issues/comments/") else 0
        if self.command == "PATCH" and number in comments:
            comments[number] = body
            return self._answer(200, {"id": number, "html_url": f"https://github.com/{REPOSITORY}/pull/{PR}"})
        return self._answer(404, {"message": "Not Found"})

    do_GET = do_POST = do_PATCH = _handle


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def kept(folder: Path, trace: Path) -> Path:
    """A folder of traces as --gpuprof-keep-traces leaves it, holding the test's."""
    folder.mkdir()
    shutil.copy(trace, folder / trace_name(NODE))
    return folder


class Job:
    """A job of a self-hosted runner in a repository made under ``root``: its checkout
    (``work``, a clone of the bare ``origin.git``), its environment, and the action run in it."""

    def __init__(self, root: Path, api: FakeGitHub):
        self.root = root
        self.work = root / "work"
        bin_dir = root / "bin"
        bin_dir.mkdir()
        # the GitHub CLI: records its arguments (one JSON list a line)
        (bin_dir / "gh").write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                                    "open(os.environ['GH_CALLS'], 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
        (bin_dir / "gh").chmod(0o755)
        self.gh_calls = root / "gh-calls"
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONPATH", "GITHUB_STEP_SUMMARY", "CUDA_VISIBLE_DEVICES")
                    and not k.startswith(("PYTEST_XDIST", "GITHUB_", "RUNNER_"))}
        self.env.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", GH_CALLS=str(self.gh_calls),
                        PYTHONDONTWRITEBYTECODE="1",
                        GITHUB_REPOSITORY=REPOSITORY, GITHUB_RUN_ID=RUN_ID, GITHUB_RUN_ATTEMPT="1",
                        GITHUB_SERVER_URL="https://github.com", GITHUB_API_URL=api.url, RUNNER_NAME="gpu-box-0")
        self.runs = 0

    def gh(self) -> list[list[str]]:
        return [json.loads(line) for line in self.gh_calls.read_text().splitlines()] if self.gh_calls.exists() else []

    def next_folder(self) -> Path:
        """The next run's folder: its RUNNER_TEMP, job summary and artifacts."""
        folder = self.root / f"run{self.runs + 1}"
        folder.mkdir(exist_ok=True)
        return folder

    def run(self, inputs: dict[str, str], event_name: str, event: dict, action: dict = ACTION,
            **github: str) -> tuple[ActionRun, Path]:
        """The action with ``inputs`` on this event; returns the run and its folder."""
        folder = self.next_folder()
        self.runs += 1
        artifacts = folder / "artifacts"

        def checkout(step, env):  # actions/checkout of the base revision: a worktree of it
            assert step["with"]["path"] == ".gpuprof-base"
            git(self.work, "worktree", "add", "--detach", "--force", step["with"]["path"], step["with"]["ref"])
            return {}

        def upload(step, env):  # actions/upload-artifact: the files it would store, in artifacts/NAME
            upload_artifact(self.work, step["with"]["path"].split(), artifacts / step["with"]["name"])
            return {}

        def gpu(step, env):  # needs nvidia-smi and a CUDA torch: says the GPU of the replayed trace
            return {"name": GPU}

        context = {"action_path": str(ROOT), "token": TOKEN, "event_name": event_name, "event": event,
                   "run_attempt": "1", "repository": REPOSITORY, **github}
        env = {**self.env, "GITHUB_EVENT_NAME": event_name,
               **{f"GITHUB_{k.upper()}": v for k, v in github.items()}}
        run = run_action(action, inputs, github=context, env=env, workspace=self.work, temp=folder,
                         substitutes={"actions/checkout@v4": checkout, "actions/upload-artifact@v4": upload,
                                      "gpu": gpu})
        return run, folder


def artifact_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def artifact_line() -> str:
    """The job summary's last line, where the artifact is."""
    return (f"Report, JSON results and traces: artifact `{ARTIFACT}` of "
            f"[this run](https://github.com/{REPOSITORY}/actions/runs/{RUN_ID}). Its report's Perfetto buttons read "
            "the traces beside it: unzip it, run `python -m http.server` in its folder and open "
            "http://localhost:8000/report.html.\n")


@pytest.fixture
def api():
    server = FakeGitHub()
    yield server
    server.shutdown()


def repository(root: Path, api: FakeGitHub) -> Job:
    """A repository of one profiled test on main, pushed to its origin, checked out for a job."""
    job = Job(root, api)
    git(root, "init", "--quiet", "--bare", "--initial-branch=main", "origin.git")
    git(root, "clone", "--quiet", str(root / "origin.git"), "work")
    git(job.work, "config", "user.name", "dev")
    git(job.work, "config", "user.email", "dev@example.com")
    (job.work / "tests").mkdir()
    (job.work / "tests" / "test_model.py").write_text(TEST_FILE)
    (job.work / "pytest.ini").write_text("[pytest]\n")
    (job.work / ".gitignore").write_text(".gpuprof/\n.gpuprof-base/\n")
    (job.work / ".github" / "workflows").mkdir(parents=True)
    (job.work / ".github" / "workflows" / "gpu-perf.yml").write_text("# the gate\n")
    git(job.work, "add", ".")
    git(job.work, "commit", "--quiet", "-m", "a profiled test")
    git(job.work, "push", "--quiet", "origin", "HEAD:main")
    return job


def open_pull_request(job: Job) -> tuple[str, dict]:
    """The refresh's pull request merged into main, then a pull request of one commit more
    checked out: the base's commit and the event."""
    git(job.work, "fetch", "--quiet", "origin")
    git(job.work, "checkout", "--quiet", "-B", "main", f"origin/gpuprof/refresh-baselines-{RUN_ID}")
    git(job.work, "push", "--quiet", "origin", "main")
    base = git(job.work, "rev-parse", "HEAD")
    git(job.work, "checkout", "--quiet", "-b", "faster")
    path = job.work / "tests" / "test_model.py"
    path.write_text(path.read_text().replace("x @ x", "x @ x.T"))
    git(job.work, "commit", "--quiet", "-am", "the model reads the weights transposed")
    return base, {"pull_request": {"number": PR, "base": {"sha": base}}}


def test_the_refresh_proposes_baselines_then_the_gate_keeps_one_comment(tmp_path, api, wheel):
    """One test, so that its parts, each on the state the one before left, run in one process
    under pytest-xdist too."""
    job = repository(tmp_path, api)

    # 1. the refresh, by hand on main: records from a kept trace, commits, proposes
    clean = kept(tmp_path / "kept-clean", CLEAN)
    # the runner's Python holds the plugin's dependencies already: pip installs the wheel alone
    job.env["PIP_NO_DEPS"] = "1"
    run, folder = job.run({"mode": "refresh", "tests": "tests", "python": sys.executable, "plugin": str(wheel),
                           "pytest-args": f"--gpuprof-replay={clean} --gpuprof-record-processes=1"},
                          "workflow_dispatch", {}, ref_name="main", ref_type="branch", ref="refs/heads/main")
    assert run.succeeded, run.log
    assert [s.name for s in run.steps if s.ran] == [
        "Check the mode and the tools", "Install (keeps the runner's CUDA build of torch)",
        "Require a CUDA GPU and print its state (clocks are never changed)", "Record the baselines", "Job summary",
        "Upload the HTML report, JSON results and traces", "Propose the baselines"]
    # the plugin given (a wheel) is what the job's venv runs, not this checkout
    installed = run.step("Install (keeps the runner's CUDA build of torch)").output
    assert f"pytest-gpuprof {VERSION} from {folder}/gpuprof-venv/lib/" in installed, installed
    assert f"{NODE}  updated" in run.step("Record the baselines").output
    # one commit on a new branch, the baseline file alone, by the bot
    branch = f"gpuprof/refresh-baselines-{RUN_ID}"
    origin = job.root / "origin.git"
    assert git(origin, "log", "--format=%an|%s", f"main..{branch}").splitlines() == [
        f"github-actions[bot]|Refresh GPU baselines on {GPU}"]
    assert git(origin, "diff", "--name-only", f"main..{branch}").splitlines() == ["baselines/tests/test_model.json"]
    # a pull request into main, and the workflows the repository has started on it (it has no ci.yml)
    body = folder / "pr-body.md"
    assert job.gh() == [
        ["pr", "create", "--base", "main", "--head", branch, "--title", f"Refresh GPU baselines on {GPU}",
         "--body-file", str(body)],
        ["workflow", "run", "gpu-perf.yml", "--ref", branch]]
    summary = (job.work / ".gpuprof" / "summary.md").read_text()
    assert "updated" in summary and body.read_text().endswith(summary)
    assert (folder / "github_step_summary").read_text() == f"{summary}\n{artifact_line()}"
    assert artifact_files(folder / "artifacts" / ARTIFACT) == REPLAY_ARTIFACT

    base, event = open_pull_request(job)
    gate = {"tests": "tests", "python": sys.executable, "plugin": ""}
    # the plugin comes from this checkout (PYTHONPATH), as in the other tests' pytest runs
    job.env["PYTHONPATH"] = str(ROOT)
    item = kept(tmp_path / "kept-item", ITEM)

    # 2. the gate: the head's trace has the planted .item() sync; the gate fails, and says why
    #    in one new comment
    run, folder = job.run({**gate, "base": "false", "pytest-args": f"--gpuprof-replay={item}"},
                          "pull_request", event, head_ref="faster", ref="refs/pull/7/merge")
    assert not run.step("Check out the base revision").ran and not (job.work / ".gpuprof-base").exists()
    assert run.step("Profile and compare with the baselines").returncode == 1, run.log
    log = (job.work / ".gpuprof" / "pytest.log").read_text()
    assert "sync_count: current 8 violates threshold sync_count == 0" in log
    summary = (job.work / ".gpuprof" / "summary.md").read_text()
    assert "failed" in summary and "sync_count" in summary
    posted = f"{summary}\n{artifact_line()}"
    assert (folder / "github_step_summary").read_text() == posted
    assert api.calls == [("GET", f"/repos/{REPOSITORY}/issues/{PR}/comments"),
                         ("POST", f"/repos/{REPOSITORY}/issues/{PR}/comments")]
    assert api.comments == {1: "Looks good, but is it fast?", 2: f"{MARKER}\n\n{posted}"}
    assert "commented on pull request #7" in run.step("Comment on the pull request").output
    assert artifact_files(folder / "artifacts" / ARTIFACT) == REPLAY_ARTIFACT

    # 3. measured against the base revision alongside: its checkout and venv are made and
    #    pytest is given them (a replay cannot measure a base, so pytest stops, saying so);
    #    the comment is edited, not added to
    api.calls.clear()
    run, folder = job.run({**gate, "pytest-args": f"--gpuprof-replay={item}"}, "pull_request", event,
                          head_ref="faster", ref="refs/pull/7/merge")
    assert git(job.work / ".gpuprof-base", "rev-parse", "HEAD") == base
    assert (folder / "gpuprof-base-venv" / "bin" / "python").exists()
    gate_step = run.step("Profile and compare with the baselines")
    assert gate_step.returncode != 0 and "--gpuprof-base: the base is measured with torch.profiler only" \
        in gate_step.output, run.log
    stopped = ("gpuprof wrote no summary: the run stopped early, see the log of the step that ran pytest.\n\n"
               + artifact_line())
    assert (folder / "github_step_summary").read_text() == stopped
    assert api.calls == [("GET", f"/repos/{REPOSITORY}/issues/{PR}/comments"),
                         ("PATCH", f"/repos/{REPOSITORY}/issues/comments/2")]
    assert api.comments == {1: "Looks good, but is it fast?", 2: f"{MARKER}\n\n{stopped}"}

    # 4. a fork's pull request: its token may not write. The comment step alone, after a
    #    summary: it says why there is no comment, and the job goes on
    api.calls.clear()
    api.refuse = True
    (comment,) = [s for s in ACTION["runs"]["steps"] if s["name"] == "Comment on the pull request"]
    (job.next_folder() / "gpuprof-summary.md").write_text("## gpuprof: 1 passed\n")
    run, _ = job.run(gate, "pull_request", event, action={**ACTION, "runs": {"steps": [comment]}})
    api.refuse = False
    assert run.succeeded, run.log
    assert ("::notice title=pytest-gpuprof::the token may not comment on this pull request (HTTP 403: a pull "
            "request from a fork gets a read-only token") in run.step("Comment on the pull request").output
    assert api.calls == [("GET", f"/repos/{REPOSITORY}/issues/{PR}/comments"),
                         ("PATCH", f"/repos/{REPOSITORY}/issues/comments/2")]
    assert api.comments[2] == f"{MARKER}\n\n{stopped}"


# --------------------------------------------------------------------------------------
# the GPU check, where the end-to-end runs above substitute it: it refuses, saying why

FAKE_NVIDIA_SMI = """#!/bin/sh
case "$*" in
  *--query-gpu=index*) echo 0 ;;
  *--query-gpu=name*) echo "NVIDIA H200" ;;
  *--query-gpu=persistence_mode*) echo Enabled ;;
  *--query-gpu=uuid*) echo GPU-0 ;;
  *) echo "nvidia-smi $*" ;;
esac
"""


def gpu_check(tmp_path: Path, path: str, **env: str) -> tuple[subprocess.CompletedProcess, str]:
    """action/gpu-check run with PATH ``path``: its exit, its output, and its step outputs."""
    outputs = tmp_path / "output"
    outputs.touch()
    done = subprocess.run([shutil.which("bash"), str(ROOT / "action" / "gpu-check"), sys.executable],
                          env={"PATH": path, "GITHUB_OUTPUT": str(outputs), "GITHUB_ENV": os.devnull,
                               "HOME": str(tmp_path), **env},
                          capture_output=True, text=True, timeout=60)
    return done, outputs.read_text()


def test_without_a_driver_the_action_refuses_to_run(tmp_path):
    done, outputs = gpu_check(tmp_path, str(tmp_path))  # no folder with nvidia-smi
    assert done.returncode == 1 and outputs == ""
    assert done.stdout == ("::error::nvidia-smi not found: pytest-gpuprof's action needs a runner with an "
                           "NVIDIA driver and a CUDA GPU\n")


def with_a_driver(tmp_path: Path) -> str:
    """A PATH whose nvidia-smi is a stand-in answering for an H200."""
    (tmp_path / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (tmp_path / "nvidia-smi").chmod(0o755)
    return f"{tmp_path}:/usr/bin:/bin"


def test_with_a_torch_that_sees_no_gpu_the_action_refuses_to_run(tmp_path):
    """A driver, but a torch without CUDA or no GPU visible to it (CUDA_VISIBLE_DEVICES=-1)."""
    done, outputs = gpu_check(tmp_path, with_a_driver(tmp_path), CUDA_VISIBLE_DEVICES="-1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert outputs == "name=NVIDIA H200\n"
    assert "::error::torch sees no CUDA GPU: every profiled test would be skipped, so nothing would be measured" \
        in done.stdout
    assert "no other compute process on GPU -1" in done.stdout


def test_a_job_given_several_gpus_is_refused(tmp_path):
    done, _ = gpu_check(tmp_path, with_a_driver(tmp_path), CUDA_VISIBLE_DEVICES="0,1")
    assert done.returncode == 1
    assert "::error::CUDA_VISIBLE_DEVICES=0,1 names several GPUs; a gpuprof job measures on exactly one" in done.stdout


# --------------------------------------------------------------------------------------
# the comment poster's own logic, its HTTP layer replaced by a recorder

def _load_comment_module():
    spec = importlib.util.spec_from_file_location("gpuprof_action_comment", ROOT / "action" / "comment.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


comment = _load_comment_module()
API = "https://github.example/api/v3"
ENVIRON = {"GITHUB_API_URL": API, "GITHUB_REPOSITORY": REPOSITORY, "GITHUB_TOKEN": TOKEN, "PR_NUMBER": str(PR)}


class Recorder:
    """The HTTP layer: records each call and answers from ``answers`` ((method, URL) -> (status, body))."""

    def __init__(self, answers: dict):
        self.answers, self.calls = answers, []

    def __call__(self, method, url, payload):
        self.calls.append((method, url, payload))
        return self.answers[(method, url)]


def test_the_comment_is_found_on_a_later_page(tmp_path):
    """100 comments a page: the marked one on page 2 is edited, none is added."""
    issue = f"{API}/repos/{REPOSITORY}/issues/{PR}"
    first = [{"id": i, "body": "review"} for i in range(100)]
    recorder = Recorder({("GET", f"{issue}/comments?per_page=100&page=1"): (200, first),
                         ("GET", f"{issue}/comments?per_page=100&page=2"): (200, [{"id": 555,
                                                                                     "body": f"{MARKER}\nold",
                                                                                     "user": {"login": comment.BOT}}]),
                         ("PATCH", f"{API}/repos/{REPOSITORY}/issues/comments/555"): (200, {"html_url": "u"})})
    (tmp_path / "summary.md").write_text("new\n")
    assert comment.main([str(tmp_path / "summary.md")], ENVIRON, recorder) == 0
    assert [c[0] for c in recorder.calls] == ["GET", "GET", "PATCH"]
    assert recorder.calls[-1][2] == {"body": f"{MARKER}\n\nnew\n"}


def test_a_comment_someone_else_wrote_with_the_marker_is_left_alone(tmp_path):
    """A marker in another user's comment (a planted "all passed") is not the gate's comment:
    the gate adds its own; with COMMENT_AUTHOR, that login's marked comment is edited."""
    issue = f"{API}/repos/{REPOSITORY}/issues/{PR}"
    planted = [{"id": 7, "body": f"{MARKER}\nall passed", "user": {"login": "mallory"}}]
    recorder = Recorder({("GET", f"{issue}/comments?per_page=100&page=1"): (200, planted),
                         ("POST", f"{issue}/comments"): (201, {"html_url": "u"}),
                         ("PATCH", f"{API}/repos/{REPOSITORY}/issues/comments/7"): (200, {"html_url": "u"})})
    (tmp_path / "summary.md").write_text("1 failed\n")
    assert comment.main([str(tmp_path / "summary.md")], ENVIRON, recorder) == 0
    assert [c[0] for c in recorder.calls] == ["GET", "POST"]
    assert comment.main([str(tmp_path / "summary.md")], {**ENVIRON, "COMMENT_AUTHOR": "mallory"}, recorder) == 0
    assert [c[0] for c in recorder.calls[2:]] == ["GET", "PATCH"]


def test_gates_of_one_workflow_keep_a_comment_each(tmp_path):
    """Input name (a matrix of GPU models): each gate's comment has its own marker, and a gate
    edits its own, not the other's."""
    issue = f"{API}/repos/{REPOSITORY}/issues/{PR}"
    h100 = [{"id": 3, "body": f"{comment.marker('h100')}\n\nold", "user": {"login": comment.BOT}}]
    recorder = Recorder({("GET", f"{issue}/comments?per_page=100&page=1"): (200, h100),
                         ("POST", f"{issue}/comments"): (201, {"html_url": "u"}),
                         ("PATCH", f"{API}/repos/{REPOSITORY}/issues/comments/3"): (200, {"html_url": "u"})})
    (tmp_path / "summary.md").write_text("s\n")
    assert comment.main([str(tmp_path / "summary.md")], {**ENVIRON, "COMMENT_NAME": "h200"}, recorder) == 0
    assert [c[0] for c in recorder.calls] == ["GET", "POST"]
    assert recorder.calls[-1][2] == {"body": "<!-- pytest-gpuprof:h200 -->\n\ns\n"}
    assert comment.main([str(tmp_path / "summary.md")], {**ENVIRON, "COMMENT_NAME": "h100"}, recorder) == 0
    assert [c[0] for c in recorder.calls[2:]] == ["GET", "PATCH"]
    assert comment.marker() == MARKER


def test_a_summary_longer_than_a_comment_may_be_is_cut_saying_so():
    body = comment.comment_body("x" * 70000)
    assert len(body) == 65536 and body.startswith(f"{MARKER}\n\nxxx")
    assert body.endswith("\n\n*(cut here: the rest is in the run's job summary)*\n")
    assert comment.comment_body("short") == f"{MARKER}\n\nshort"


def test_an_api_error_other_than_403_fails_the_step_naming_it(tmp_path, capsys):
    recorder = Recorder({("GET", f"{API}/repos/{REPOSITORY}/issues/{PR}/comments?per_page=100&page=1"):
                         (401, {"message": "Bad credentials"})})
    (tmp_path / "summary.md").write_text("s")
    assert comment.main([str(tmp_path / "summary.md")], ENVIRON, recorder) == 1
    assert capsys.readouterr().out == ("::error title=pytest-gpuprof::listing the pull request's comments: "
                                       "HTTP 401 Bad credentials\n")


def test_without_its_environment_the_poster_says_what_is_missing(tmp_path, capsys):
    assert comment.main([str(tmp_path / "summary.md")], {"GITHUB_REPOSITORY": REPOSITORY}) == 2
    assert capsys.readouterr().err == "::error::comment.py: GITHUB_TOKEN, PR_NUMBER not set\n"
