"""Shared test configuration: pytester drives pytest runs of small test suites."""

import contextlib

import pytest

pytest_plugins = ["pytester"]

# torch is imported once, before any in-process pytester run snapshots sys.modules: a run
# that drops modules it imported would leave torch to be imported again later in a state
# its C extension does not survive ("SystemError: bad call flags", then a crash).
with contextlib.suppress(ImportError):
    import torch  # noqa: F401


@pytest.fixture(autouse=True)
def _no_github_step_summary(monkeypatch):
    """The suites run here must not append their summaries to the CI job's own summary
    ($GITHUB_STEP_SUMMARY is set in every GitHub Actions step); tests set it themselves."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)

