"""The GitHub Actions workflows in .github/workflows.

actionlint (from the test extras: the ``actionlint`` executable next to sys.executable,
else on PATH; it runs shellcheck over the ``run:`` scripts when shellcheck is there too)
must find nothing, and the workflows must have the shape docs/guide/ci.md ("Gating merges
on a self-hosted GPU runner") describes: the GPU gate, the baseline refresh and the CPU tests;
the CPU tests (.ci/run) also build the documentation site strictly and build and check the
sdist and wheel, and release.yml publishes a tagged version to PyPI by trusted publishing.

The structural checks read the workflows with PyYAML (a test extra). Each check is also
run on a deliberately broken copy of a workflow to show that it fails.
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

from pytest_gpuprof import __version__ as VERSION

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
CONFIG = ROOT / ".github" / "actionlint.yaml"
GATE = WORKFLOWS / "gpu-perf.yml"
REFRESH = WORKFLOWS / "refresh-gpu-baselines.yml"
CPU = WORKFLOWS / "ci.yml"
RELEASE = WORKFLOWS / "release.yml"
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


def _pytest_steps(job: dict) -> list[dict]:
    return [s for s in _steps(job) if re.search(r"\bpytest\b", str(s.get("run", "")))]


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
    pytest_run = next((r for r in runs if re.search(r"\bpytest\b", r)), "")
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
    first_pytest = next((i for i, r in enumerate(runs) if re.search(r"\bpytest\b", r)), None)
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
    if wf.get("permissions") != {"contents": "read"}:
        problems.append(f"permissions {wf.get('permissions')!r}, expected contents: read")
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
    setter = NVIDIA_SMI_SETTERS.search(text)
    if setter:
        problems.append(f"changes the GPU's settings: {setter.group(0).strip()!r}")
    return problems


CHECKS = {GATE: gate_problems, REFRESH: refresh_problems, CPU: cpu_problems, RELEASE: release_problems}


def problems_of(path: Path, text: str | None = None) -> list[str]:
    text = path.read_text() if text is None else text
    wf = load(text)
    return CHECKS[path](wf) + common_problems(wf, text)


# --------------------------------------------------------------------------------------
# actionlint

def _tool(name: str) -> str | None:
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else shutil.which(name)


def actionlint(root: Path) -> subprocess.CompletedProcess:
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
    (REFRESH, 'HEAD:refs/heads/$branch"', 'HEAD:refs/heads/${{ github.head_ref }}"', "potentially untrusted"),
    (CPU, "actions/setup-python@v5", "actions/setup-python@v5\n        with: {python-version: 3.11}",
     'key "with" is duplicated'),
], ids=["unknown runner label", "untrusted input in a script", "duplicated key"])
def test_actionlint_fails_on_a_broken_copy(tmp_path, path, old, new, expected):
    shutil.copytree(ROOT / ".github", tmp_path / ".github")
    copy = tmp_path / path.relative_to(ROOT)
    text = copy.read_text()
    assert old in text
    copy.write_text(text.replace(old, new, 1))
    out = actionlint(tmp_path)
    assert out.returncode == 1
    assert expected in out.stdout and str(copy.relative_to(tmp_path)) in out.stdout


def test_actionlint_knows_the_gpu_label():
    assert load(CONFIG.read_text())["self-hosted-runner"]["labels"] == ["gpu"]


# --------------------------------------------------------------------------------------
# the workflows' shape

def test_the_four_workflows_are_there():
    assert sorted(p.name for p in WORKFLOWS.glob("*.y*ml")) == sorted(p.name for p in CHECKS)


@pytest.mark.parametrize("path", list(CHECKS), ids=lambda p: p.name)
def test_workflow_has_its_shape(path):
    assert problems_of(path) == []


def test_gate_runs_the_suite_under_gpuprof_on_pull_requests():
    wf = load(GATE.read_text())
    assert "pull_request" in _triggers(wf)
    (job,) = _gpu_jobs(wf).values()
    assert job["name"] == GATE_CHECK and job["runs-on"] == GPU_LABELS
    (step,) = _pytest_steps(job)
    assert re.search(r"--gpuprof\s", step["run"]) and "--gpuprof-keep-traces" in step["run"]
    assert [s["if"] for s in _uploads(job)] == ["always()"]


def test_the_gate_owning_one_gpu_leaves_out_the_tests_that_need_more():
    """Its --gpuprof-strict run would fail on them, skipped (seen on H100s: 5 passed, 2
    skipped, exit 1); every example file holding a distributed test is left out, by name."""
    wf = load(GATE.read_text())
    (job,) = _gpu_jobs(wf).values()
    (step,) = _pytest_steps(job)
    assert '"${extra[@]}"' in step["run"] and 'read -ra extra <<<"$GPUPROF_PYTEST_ARGS"' in step["run"]
    distributed = sorted(f"--ignore={p.relative_to(ROOT)}" for p in (ROOT / "example_suite").glob("test_*.py")
                         if "world_size=" in p.read_text())
    assert distributed and sorted(wf["env"]["GPUPROF_PYTEST_ARGS"].split()) == distributed


def test_refresh_records_baselines_on_dispatch_and_label():
    wf = load(REFRESH.read_text())
    on = _triggers(wf)
    assert "workflow_dispatch" in on and on["pull_request"]["types"] == ["labeled"]
    (job,) = _gpu_jobs(wf).values()
    assert any("--gpuprof-update-baseline" in s["run"] for s in _pytest_steps(job))
    assert job["permissions"] == {"contents": "write", "pull-requests": "write", "actions": "write"}
    # the label is only looked at on this one job; its name matches docs/guide/ci.md's
    assert f"'{REFRESH_LABEL}'" in job["if"] and wf["env"]["REFRESH_LABEL"] == REFRESH_LABEL


def test_refresh_dispatches_the_checks_it_cannot_trigger():
    """A push made with GITHUB_TOKEN starts no workflow: the job starts the gate and the
    CPU tests on the proposed commit itself, so the required checks run on it."""
    text = REFRESH.read_text()
    for workflow in (GATE, CPU):
        assert f"gh workflow run {workflow.name} --ref" in text
        assert "workflow_dispatch" in _triggers(load(workflow.read_text()))


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
    (GATE, "--gpuprof --gpuprof-strict", "--gpuprof-strict", "pytest runs without --gpuprof"),
    (GATE, "--gpuprof-keep-traces --gpuprof-output-dir", "--gpuprof-output-dir",
     "pytest runs without --gpuprof-keep-traces"),
    (GATE, "      - name: Upload the HTML report, JSON results and traces\n        if: always()\n",
     "      - name: Upload the HTML report, JSON results and traces\n", "lacks 'if: always()'"),
    (GATE, "            .gpuprof/pytest.log\n            .gpuprof/traces/\n",
     "            .gpuprof/pytest.log\n      - name: Upload the traces\n        if: always()\n"
     "        uses: actions/upload-artifact@v4\n        with:\n          name: traces\n"
     "          path: .gpuprof/traces/\n",
     "need one artifact"),
    (GATE, "            .gpuprof/traces/\n", "            .gpuprof/nsys/\n", "the artifact lacks the traces"),
    (GATE, "--gpuprof-html .gpuprof/report.html", "--gpuprof-html report.html",
     "not written in --gpuprof-output-dir"),
    (REFRESH, "            .gpuprof/report.html\n", "", "the artifact lacks the HTML report"),
    (GATE, "      - name: Job summary\n        if: always()\n", "      - name: Job summary\n",
     "$GITHUB_STEP_SUMMARY"),
    (GATE, "2>&1 | tee .gpuprof/pytest.log\n", "2>&1 | tee .gpuprof/pytest.log || true\n",
     "a failing pytest does not fail the gate"),
    (GATE, "permissions:\n  contents: read", "permissions:\n  contents: write", "expected contents: read"),
    (GATE, "uses: actions/checkout@v4", "uses: actions/checkout@main", "uses actions/checkout@main"),
    (GATE, "          nvidia-smi\n", "          sudo nvidia-smi -lgc 1980\n", "changes the GPU's settings"),
    (REFRESH, "  workflow_dispatch:\n", "  workflow_call:\n", "not triggered on workflow_dispatch"),
    (REFRESH, "types: [labeled]", "types: [opened]", "not triggered when a pull request is labeled"),
    (REFRESH, "--gpuprof-update-baseline --gpuprof-baseline-dir", "--gpuprof --gpuprof-baseline-dir",
     "without --gpuprof-update-baseline"),
    (REFRESH, "      pull-requests: write", "      pull-requests: read", "lacks pull-requests: write"),
    (REFRESH, "      actions: write", "      actions: write\n      packages: write", "permissions beyond"),
    (REFRESH, "GH_TOKEN: ${{ github.token }}\n          GH_REPO",
     "GH_TOKEN: ${{ secrets.RELEASE_PAT }}\n          GH_REPO", "secrets beyond GITHUB_TOKEN"),
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
    text = path.read_text()
    assert old in text, f"mutation no longer applies to {path.name}: {old!r}"
    problems = problems_of(path, text.replace(old, new, 1))
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


def test_a_copy_in_another_repository_installs_the_plugin_its_venvs_need():
    """Copied into a user's repository (README, "Use it in your repository"; docs/guide/ci.md),
    the GPU workflows install the checkout and GPUPROF_PLUGIN in every venv that runs pytest,
    the base revision's too; the refresh starts ci.yml only where there is one."""
    for path, venvs in ((GATE, 2), (REFRESH, 1)):
        doc = load(path.read_text())
        assert doc["env"]["GPUPROF_PLUGIN"] == ""  # this repository's checkout is the plugin
        installs = [line.strip() for job in doc["jobs"].values() for step in job["steps"]
                    for line in step.get("run", "").splitlines() if "pip install" in line]
        assert len(installs) == venvs and all(line.endswith('${GPUPROF_PLUGIN:+"$GPUPROF_PLUGIN"}')
                                              for line in installs), installs
    refresh = REFRESH.read_text()
    dispatch = refresh.index('gh workflow run ci.yml')
    assert "if [ -f .github/workflows/ci.yml ]; then" in refresh[dispatch - 80:dispatch]
    page = (ROOT / "docs" / "guide" / "ci.md").read_text()
    assert all(name in page
               for name in ("GPUPROF_PLUGIN", "GPUPROF_TESTS", "GPUPROF_PYTEST_ARGS", "GPUPROF_BASELINE_DIR"))
