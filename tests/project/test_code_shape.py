"""The code's shape, as its linter and type checker see it: with the settings of
pyproject.toml, ``ruff check`` (``[tool.ruff]``) finds nothing in pytest_gpuprof, tests,
benchmarks and the GitHub Action's Python (action/), and ``mypy`` (``[tool.mypy]``)
nothing in pytest_gpuprof.  Both come with the test extras; CI runs them through this file.
And its size: no module of the package over ``MODULE_LINES`` lines, no function over
``FUNCTION_LINES`` (issue 41), so that each reads as one thing.

mypy checks the package against the types of torch, numpy and pytest as installed; from
cold it takes about 40 s on two CPUs, then a few seconds from its cache (.mypy_cache)."""

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "pytest_gpuprof"
#: The most lines a module of the package has (its file's lines).
MODULE_LINES = 450
#: The most lines a function or method has, from its ``def`` to its last line (decorators not counted).
FUNCTION_LINES = 60


def assert_finds_nothing(tool: str, *args: str) -> None:
    """``python -m TOOL ARGS``, run in the repository, exits 0; else the test fails with what
    it found.  Skipped, saying so, where the tool is not installed."""
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed (pip install -e '.[test]')")
    run = subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True)
    if run.returncode != 0:
        pytest.fail(f"{tool} {' '.join(args)} (exit {run.returncode}):\n{run.stdout}{run.stderr}", pytrace=False)


def test_ruff_finds_nothing_in_the_package_tests_benchmarks_and_the_action():
    assert_finds_nothing("ruff", "check", "--no-fix", PACKAGE, "tests", "benchmarks", "action")


def test_mypy_finds_nothing_in_the_package():
    assert_finds_nothing("mypy", "--config-file", "pyproject.toml")


def test_the_judge_and_the_stages_before_it_import_no_pytest():
    """One judge with no pytest (``compare.judge``): the in-process path, the ranks, the nsys
    backend's outer session and replays call it alike; nor do the trace, metrics and report
    stages know pytest."""
    importers = sorted(str(path.relative_to(ROOT)) for stage in ("trace", "metrics", "compare", "report")
                       for path in (ROOT / PACKAGE / stage).rglob("*.py")
                       if any(line.split()[1].split(".")[0] in ("pytest", "_pytest")
                              for line in path.read_text().splitlines()
                              if line.startswith(("import ", "from ")) and len(line.split()) > 1))
    assert importers == []


def modules() -> list[Path]:
    return sorted((ROOT / PACKAGE).rglob("*.py"))


def test_no_module_of_the_package_is_over_450_lines():
    long = [f"{path.relative_to(ROOT)}: {lines} lines" for path in modules()
            if (lines := len(path.read_text().splitlines())) > MODULE_LINES]
    assert not long, f"modules over {MODULE_LINES} lines:\n" + "\n".join(long)


def test_no_function_of_the_package_is_over_60_lines():
    """Every function and method, nested ones too."""
    long = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines" for path in modules()
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (lines := node.end_lineno - node.lineno + 1) > FUNCTION_LINES]
    assert not long, f"functions over {FUNCTION_LINES} lines:\n" + "\n".join(long)
