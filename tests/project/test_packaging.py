"""What a user installs: the sdist's and the wheel's metadata and files, the version in one
place, every import declared."""

import ast
import email
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

import pytest_gpuprof

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: import name -> distribution, where they differ
DISTRIBUTION = {"pynvml": "nvidia-ml-py", "ncu_report": "ncu-report", "_pytest": "pytest"}


def requirement_name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower()


def test_every_module_the_package_imports_is_a_declared_dependency():
    imported = set()
    for path in (ROOT / "pytest_gpuprof").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.partition(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.partition(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"pytest_gpuprof"}
    declared = {requirement_name(r) for r in PROJECT["project"]["dependencies"]}
    declared |= {requirement_name(r) for r in PROJECT["project"]["optional-dependencies"]["ncu"]}  # optional
    assert "pynvml" in third_party  # the check sees imports inside functions
    assert {DISTRIBUTION.get(name, name) for name in third_party} <= declared


def test_the_version_is_written_once():
    assert "version" not in PROJECT["project"] and PROJECT["project"]["dynamic"] == ["version"]
    assert PROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "pytest_gpuprof.__version__"}
    written = [str(p.relative_to(ROOT)) for p in (ROOT / "pytest_gpuprof").rglob("*.py")
               if re.search(r"""__version__\s*=|version\s*=\s*["']\d""", p.read_text())]
    assert written == ["pytest_gpuprof/__init__.py"]


def test_gpuprof_version_prints_the_packages_version():
    out = subprocess.run([sys.executable, "-m", "pytest_gpuprof", "--version"], capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (0, f"gpuprof {pytest_gpuprof.__version__}\n")


def test_the_changelog_has_the_version_and_an_unreleased_section():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.M)
    assert headings[:2] == ["Unreleased", pytest_gpuprof.__version__]


def test_the_virtual_environments_are_ignored():
    ignored = (ROOT / ".gitignore").read_text().split()
    assert ".venv/" in ignored and ".ci-venv/" in ignored


def package_files() -> set[str]:
    """The package's files in this tree, as paths relative to it: modules and package data."""
    return {str(p.relative_to(ROOT)) for p in (ROOT / "pytest_gpuprof").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _needs_setuptools_77() -> None:
    if tuple(int(p) for p in version("setuptools").split(".")[:2]) < (77, 0):
        pytest.skip("needs setuptools >= 77 (pip install -e '.[test]')")


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    """The sdist as setuptools' build backend makes it (python -m build calls the same hook),
    from a copy of this tree's sources (the build writes beside them), with the setuptools
    >= 77 of the test extras."""
    _needs_setuptools_77()
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("sdist")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source)
    shutil.copytree(ROOT / "pytest_gpuprof", source / "pytest_gpuprof",
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta; "
                    "build_meta.build_sdist(sys.argv[1])", str(out)],
                   cwd=source, check=True, capture_output=True, text=True, timeout=300)
    (path,) = out.glob("pytest_gpuprof-*.tar.gz")
    return path


@pytest.fixture(scope="module")
def wheel(sdist, tmp_path_factory):
    """The wheel built from the unpacked sdist, as python -m build builds it: a file that
    the sdist lacks is missing from the wheel too."""
    unpacked, out = tmp_path_factory.mktemp("unpacked"), tmp_path_factory.mktemp("dist")
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    (source,) = unpacked.iterdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(source)], check=True, capture_output=True, text=True, timeout=300)
    (path,) = out.glob("pytest_gpuprof-*.whl")
    return zipfile.ZipFile(path)


def test_the_sdist_carries_the_package_its_data_the_license_and_the_readme(sdist):
    top = f"pytest_gpuprof-{pytest_gpuprof.__version__}"
    assert sdist.name == f"{top}.tar.gz"
    with tarfile.open(sdist) as tar:
        names = {m.name.removeprefix(f"{top}/") for m in tar.getmembers() if m.isfile()}
        meta = email.message_from_bytes(tar.extractfile(f"{top}/PKG-INFO").read())
        readme = tar.extractfile(f"{top}/README.md").read().decode()
    assert {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO"} <= names
    assert package_files() <= names
    assert {"pytest_gpuprof/report/html/templates/perfetto.js", "pytest_gpuprof/py.typed"} <= names
    assert readme == (ROOT / "README.md").read_text()
    # PyPI's project page is the README, as markdown; 2.4: the License-Expression of PEP 639
    assert meta["Description-Content-Type"] == "text/markdown" and meta["Metadata-Version"] == "2.4"
    assert meta["Version"] == pytest_gpuprof.__version__ and meta["License-Expression"] == "MIT"


def test_the_wheel_carries_every_file_of_the_package(wheel):
    """Every module and every data file under pytest_gpuprof/ (the HTML report's templates,
    styles and scripts, perfetto.js among them, and py.typed): a data file that
    pyproject.toml's package-data does not name fails here."""
    shipped = {n for n in wheel.namelist() if n.startswith("pytest_gpuprof/")}
    assert shipped == package_files()
    assert {f"pytest_gpuprof/report/html/templates/{name}"
            for name in ("report.html.j2", "style.css", "timeline.js", "perfetto.js")} <= shipped


def test_the_wheel_carries_its_license_its_type_marker_and_its_metadata(wheel):
    names = wheel.namelist()
    info = f"pytest_gpuprof-{pytest_gpuprof.__version__}.dist-info"
    assert f"{info}/licenses/LICENSE" in names and "pytest_gpuprof/py.typed" in names
    assert "pytest_gpuprof/report/html/templates/report.html.j2" in names
    meta = email.message_from_bytes(wheel.read(f"{info}/METADATA"))
    assert meta["Version"] == pytest_gpuprof.__version__
    assert meta["License-Expression"] == "MIT"
    assert "Copyright (c) 2026 pytest-gpuprof developers" in wheel.read(f"{info}/licenses/LICENSE").decode()
    assert "nvidia-ml-py>=12.535.77" in meta.get_all("Requires-Dist")
    assert {"Framework :: Pytest", "Environment :: GPU :: NVIDIA CUDA",
            "Programming Language :: Python :: 3.11"} <= set(meta.get_all("Classifier"))
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert set(urls) == {"Homepage", "Documentation", "Changelog", "Issues"}
    entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    assert "gpuprof = pytest_gpuprof.plugin" in entry_points
    assert "gpuprof = pytest_gpuprof.cli.main:main" in entry_points
