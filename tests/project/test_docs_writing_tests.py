"""docs/guide/writing-tests.md says what a run without ``--gpuprof`` does with a profiled test,
and shows the error of a marker with two mistakes: both as a plain run does them."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "guide" / "writing-tests.md").read_text()

SUITE = '''
import pytest

LOG = []


@pytest.mark.gpuprof(warmup=1, active=2)
def test_fixture_form(gpuprof):
    for step in gpuprof.steps():
        LOG.append("fixture")


@pytest.mark.gpuprof(warmup=1, active=2)
def test_marker_form():
    LOG.append("marker")


@pytest.mark.gpuprof(warmpu=3, thresholds=["gpu_utilization >= 85"])
def test_step():
    LOG.append("mistaken")


def test_log():
    assert LOG == ["fixture"] * 3 + ["marker"]
'''


def paragraph(start: str) -> str:
    """The page's paragraph that starts so, on one line."""
    (found,) = re.findall(rf"^{re.escape(start)}.*?(?=\n\n)", PAGE, re.M | re.S)
    return " ".join(found.split())


def test_without_gpuprof_the_marker_is_checked_and_its_steps_kept_as_the_page_says(pytester):
    said = paragraph("Without `--gpuprof`")
    for words in ("the marker's counts", "a marker-form test's body runs once",
                  "a mistake in it fails the test at set-up"):
        assert words in said, said
    shown = re.search(r"^## Marker arguments\n.*?```text\n(.*?)```", PAGE, re.M | re.S).group(1).splitlines()
    pytester.makefile(".ini", pytest="[pytest]\n")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_model.py").write_text(SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "tests/test_model.py")  # no --gpuprof
    result.assert_outcomes(passed=3, errors=1)
    assert "ERROR tests/test_model.py::test_step" in result.stdout.str()
    for line in shown:
        assert line in result.outlines, (line, result.outlines)
