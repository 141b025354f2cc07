"""Shared test configuration: pytester drives pytest runs of small test suites."""

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _no_github_step_summary(monkeypatch):
    """The suites run here must not append their summaries to the CI job's own summary
    ($GITHUB_STEP_SUMMARY is set in every GitHub Actions step); tests set it themselves."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
