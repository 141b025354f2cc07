"""What the repository-level tests share: the wheel of this checkout, built once a session
for the tests that install it in a fresh venv (the README's steps, the GitHub Action's)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, as the README's step 1 builds it (``pip wheel --no-deps .``),
    from a copy of the files the build reads: built in the checkout, it would leave its
    pytest_gpuprof.egg-info there, and a pytest started later with the checkout on sys.path
    (PYTHONPATH) would find the plugin's entry point there first, loading the plugins in
    another order (``-n auto`` then no longer starts a worker per GPU)."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source)
    shutil.copytree(ROOT / "pytest_gpuprof", source / "pytest_gpuprof", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = out.glob("pytest_gpuprof-*.whl")
    return found
