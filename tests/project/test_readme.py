"""The README as a newcomer follows it: "Use it in your repository" run step by step in a
fresh folder and a new venv with the built wheel, "Reading a failure" against the message
gpuprof really prints, and its table of statuses against the statuses there are.

Without a GPU the steps that need one (record, gate) replay a trace of the example suite
under the test's name, the README's own way of judging without a GPU
(``--gpuprof-replay``); the MoE layer's trace plays the test, its planted ``.item()``
bug the regression."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
import yaml

from helpers.once import once_per_run
from pytest_gpuprof import __version__ as VERSION
from pytest_gpuprof.compare.status import FAILED_STATUSES, STATUSES

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CLEAN = ROOT / "example_suite" / "traces" / "example_suite_test_moe.py_test_moe_forward.pt.trace.json.gz"
ITEM = ROOT / "tests" / "data" / "planted" / "item" / CLEAN.name
REPLAY = "--gpuprof-replay=.gpuprof/traces"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # torch's CPU build
CI_PAGE = (ROOT / "docs" / "guide" / "ci.md").read_text()


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a text: (language, body)."""
    return re.findall(r"^```(\w+)\n(.*?)^```$", text, re.M | re.S)


def test_the_readme_is_read_in_five_minutes():
    assert len(README.split()) <= 1500
    for heading in ("Quick start", "Use it in your repository", "Reading a failure", "Documentation"):
        assert f"\n## {heading}\n" in README


def make_venv(venv: Path) -> None:
    """A new venv that sees this environment's packages behind its own (a .pth file: torch,
    pandas and pytest are not downloaded again) but not its pytest-gpuprof."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    own = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    Path(own, "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")


class Repository:
    """A fresh folder with its own git repository, whose commands run in ``venv`` (``make_venv``)."""

    def __init__(self, path: Path, venv: Path):
        self.path = path
        path.mkdir()
        self.venv = venv
        self.env = {**os.environ, "PATH": f"{self.venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
                    "VIRTUAL_ENV": str(self.venv), "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.com",
                    "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.com", "PYTHONDONTWRITEBYTECODE": "1"}
        for name in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
            self.env.pop(name, None)
        self.sh("git init --quiet .")

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def sh(self, command: str) -> subprocess.CompletedProcess:
        """A README command in this folder's venv; ``pytest`` is the venv's ``python -m pytest``
        (pytest itself is this environment's, so the venv has no ``pytest`` script)."""
        command = re.sub(r"^pytest\b", "python -m pytest -p no:cacheprovider", command)
        return subprocess.run(["bash", "-c", command], cwd=self.path, env=self.env, capture_output=True, text=True,
                              timeout=300)

    def keep_trace(self, trace: Path) -> None:
        """The trace ``--gpuprof-keep-traces`` would have kept of tests/test_model.py::test_forward."""
        folder = self.path / ".gpuprof" / "traces"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(trace, folder / "tests_test_model.py_test_forward.pt.trace.json.gz")


def run_ok(result: subprocess.CompletedProcess, code: int = 0) -> str:
    out = result.stdout + result.stderr
    assert result.returncode == code, out
    return out


def install_from_wheel() -> str:
    """Step 1's command that installs the wheel (the other installs from the repository's URL)."""
    install = blocks(section("Use it in your repository"))[0][1].strip()
    return install.splitlines()[-1]


@pytest.fixture(scope="session")
def venv(tmp_path_factory, wheel) -> tuple[Path, subprocess.CompletedProcess]:
    """A new venv (``make_venv``) and step 1's install of the wheel into it, as run in a
    repository holding the wheel: made once for the run, for both tests that follow the README
    in a repository of their own (the later steps install nothing new: step 6 finds the plugin
    installed)."""
    def make(folder: Path) -> subprocess.CompletedProcess:
        make_venv(folder / "venv")
        repo = Repository(folder / "install", folder / "venv")
        shutil.copy(wheel, repo.path)
        return repo.sh(install_from_wheel())

    folder, installed = once_per_run(tmp_path_factory, "readme-venv", make)
    return folder / "venv", installed


def test_use_it_in_your_repository_step_by_step(tmp_path, wheel, venv):
    steps = blocks(section("Use it in your repository"))
    languages = [language for language, _ in steps]
    assert languages == ["bash", "python", "bash", "bash", "bash", "yaml", "bash", "bash"], languages
    install, test_file, record, commit, gate, _, cpu_ci, replay = (body.strip() for _, body in steps)

    # 1. install: from the repository's URL, or the wheel, which is what is tried here
    from_git, from_wheel = [line for line in install.splitlines() if not line.startswith("#")]
    homepage = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Homepage"]
    assert from_git == f'pip install "pytest-gpuprof @ git+{homepage}"'
    assert from_wheel == install_from_wheel()
    repo = Repository(tmp_path / "repo", venv[0])
    shutil.copy(wheel, repo.path)
    run_ok(venv[1])  # in a repository of its own, as here, holding the wheel
    where = run_ok(repo.sh("python -c 'import pytest_gpuprof; print(pytest_gpuprof.__file__)'"))
    assert where.startswith(str(repo.venv)), where

    # 2. the marked test, in the file its first line names
    name = re.match(r"# (\S+)\n", test_file).group(1)
    (repo.path / name).parent.mkdir(parents=True)
    (repo.path / name).write_text(test_file + "\n")

    # 3. record (a GPU's run replayed); the file the README names
    repo.keep_trace(CLEAN)
    assert record == "pytest --gpuprof-update-baseline"
    out = run_ok(repo.sh(f"{record} {REPLAY}"))
    assert "tests/test_model.py::test_forward  updated" in out, out
    written = re.search(r"This writes `(\S+)`", section("Use it in your repository")).group(1)
    assert (repo.path / written).is_file()

    # 4. committed as shown
    run_ok(repo.sh(commit))
    assert run_ok(repo.sh("git ls-files baselines")).split() == [written]

    # 5. the gate passes while nothing changed ...
    assert gate == "pytest --gpuprof"
    out = run_ok(repo.sh(f"{gate} {REPLAY}"))
    assert "tests/test_model.py::test_forward  passed" in out and "1 passed" in out, out

    # ... and, judging kept traces as the last part shows, fails on the .item() bug, naming it
    assert replay == f"pytest --gpuprof {REPLAY}"
    repo.keep_trace(ITEM)
    out = run_ok(repo.sh(replay), code=1)
    assert "sync_count: current 8 violates threshold sync_count == 0" in out, out
    assert "gpu_utilization: current 75.6% violates threshold gpu_utilization >= 0.85" in out, out
    assert "1 failed" in out

    # 6. CPU-only CI: torch's CPU build first (here the CPU build this environment has), the
    # plugin, then every test but the profiled ones; the same lines in docs/guide/ci.md
    cpu_torch, plugin, not_profiled = cpu_ci.splitlines()
    assert cpu_torch == f"pip install torch --index-url {CPU_INDEX}" and plugin == from_wheel
    assert all(line in CI_PAGE.splitlines() for line in (cpu_torch, not_profiled))
    assert "Requirement already satisfied: torch" in run_ok(repo.sh(cpu_torch))
    run_ok(repo.sh(plugin))
    (repo.path / "tests" / "test_plain.py").write_text("def test_plain():\n    pass\n")
    out = run_ok(repo.sh(not_profiled))
    assert "1 passed, 1 deselected" in out, out
    # ... and where every test is profiled, exit status 5, unless let pass as it says
    only_profiled = f"{not_profiled} tests/test_model.py"
    assert "1 deselected" in run_ok(repo.sh(only_profiled), code=pytest.ExitCode.NO_TESTS_COLLECTED)
    (let_pass,) = re.findall(r"`(pytest -m \"not gpuprof\" \|\| [^`]+)`", README)
    assert let_pass in CI_PAGE
    run_ok(repo.sh(let_pass.replace(not_profiled, only_profiled)))


def test_the_gate_workflow_is_a_dozen_lines_that_use_the_released_action():
    """Step 5's workflow: the action at the tag release.yml moves to each release of this major
    version, given inputs action.yml declares, its required ones among them, on the GPU runner,
    with the permission its comment needs."""
    (workflow,) = [body for language, body in blocks(section("Use it in your repository")) if language == "yaml"]
    assert len(workflow.splitlines()) <= 16
    doc = yaml.safe_load(workflow)
    (job,) = doc["jobs"].values()
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert doc["permissions"] == {"contents": "read", "pull-requests": "write"}
    checkout, action = job["steps"]
    assert checkout == {"uses": "actions/checkout@v4", "with": {"persist-credentials": False}}
    assert action["uses"] == f"pytest-gpuprof/pytest-gpuprof@v{VERSION.split('.')[0]}"
    assert 'major="${GITHUB_REF_NAME%%.*}"' in (ROOT / ".github" / "workflows" / "release.yml").read_text()
    declared = yaml.safe_load((ROOT / "action.yml").read_text())["inputs"]
    required = {name for name, spec in declared.items() if spec.get("required")}
    assert required <= set(action["with"]) <= set(declared)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="says what a machine without a GPU does")
def test_a_machine_without_a_gpu_records_nothing(tmp_path, venv):
    """Step 3's warning: no GPU, no baseline; the test is skipped saying why."""
    repo = Repository(tmp_path / "repo", venv[0])
    run_ok(venv[1])  # step 1's install
    test_file = blocks(section("Use it in your repository"))[1][1].strip()
    (repo.path / "tests").mkdir()
    (repo.path / "tests" / "test_model.py").write_text(test_file + "\n")
    out = run_ok(repo.sh("pytest --gpuprof-update-baseline -rs"))
    assert "1 skipped" in out and "no CUDA GPU available" in out, out
    assert not (repo.path / "baselines").exists()
    # it says so, and the other way the README gives (kept traces) records there
    assert ("no baseline recorded for the 1 profiled test(s) not measured: record on a machine with a CUDA GPU, "
            "or from traces kept there (--gpuprof-keep-traces) without one: --gpuprof-update-baseline "
            "--gpuprof-replay=DIR") in out, out
    (command,) = re.findall(r"`(pytest --gpuprof-update-baseline --gpuprof-replay=\S+)`", README)
    repo.keep_trace(CLEAN)
    out = run_ok(repo.sh(command))
    assert "tests/test_model.py::test_forward  updated" in out, out


def test_reading_a_failure_shows_the_message_gpuprof_prints():
    text = section("Reading a failure")
    command = re.search(r"\(`(pytest example_suite [^`]+)`\)", text).group(1)
    (shown,) = [body for language, body in blocks(text) if language == "text"]
    result = subprocess.run([sys.executable, "-m", *command.split(), "-p", "no:cacheprovider"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    message = result.stdout[result.stdout.index("gpuprof: "):]
    message = message[:message.index("\n====")].replace(f"baseline file {ROOT}/", "baseline file ")
    lines = message.splitlines()
    for line in shown.splitlines():
        assert line in lines, line
    indented = [line for line in lines if line.startswith("  ")]
    steps = [line for line in lines if line.startswith("Next step")]
    assert "the second of its two\n`Next step` lines" in text and len(steps) == 2 and steps[1] in shown
    numbers = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    said = re.search(r"(\w+) of its (\w+) indented lines are shown", text)
    assert said.groups() == (numbers[len([s for s in shown.splitlines() if s.startswith("  ")])].capitalize(),
                             numbers[len(indented)])


def test_the_status_table_has_every_status_and_its_outcome():
    rows = re.findall(r"^\| `([^`]+)` \| .+ \| (.+) \|$", section("Reading a failure"), re.M)
    assert sorted(status for status, _ in rows) == sorted(STATUSES)
    for status, outcome in rows:
        assert outcome.startswith("fails") == (status in FAILED_STATUSES), (status, outcome)


def test_every_link_works_on_pypi_and_names_a_file_of_the_repository():
    """The README is the package's description on PyPI too, where a relative link breaks:
    each link is absolute, into this repository's main branch, at a file that exists."""
    homepage = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Homepage"]
    owner_name = homepage.removeprefix("https://github.com/")
    prefixes = (f"{homepage}/blob/main/", f"https://raw.githubusercontent.com/{owner_name}/main/")
    links = re.findall(r"\]\(([^)]+)\)", README)
    assert links
    for link in links:
        prefix = next((p for p in prefixes if link.startswith(p)), None)
        assert prefix, link
        assert (ROOT / link.removeprefix(prefix)).is_file(), link
