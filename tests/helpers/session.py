"""A gpuprof session's settings, made in a test rather than read from pytest's options."""

from pathlib import Path

from pytest_gpuprof.capture.profiler import StepPlan
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.run.settings import Settings


def session_settings(folder: Path, **more) -> Settings:
    """A session's settings that judge against the baselines in FOLDER and write there, keeping no traces."""
    return Settings(update_baseline=False, strict=False, baseline_dir=folder, output_dir=folder, keep_traces=False,
                    replay_dir=None, plan=StepPlan(), rules=Rules(), **more)
