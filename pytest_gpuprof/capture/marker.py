"""A test's ``@pytest.mark.gpuprof``, read and checked once, when the test is collected.

Every part of gpuprof that needs a test's marker (its steps, its rules, its ranks, its
Nsight Compute plan) asks ``marker_of``: the spec is read the first time and kept in the
item's stash, and a mistake found then is kept too (the test fails its set-up with it,
``plugin.py``), so that no later reader meets it again or words it otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..errors import ConfigError
from .profiler import PLAN_KEYS, StepPlan

#: Every argument of ``@pytest.mark.gpuprof``.
MARKER_KEYS = {*PLAN_KEYS, "thresholds", "tolerances", "world_size", "ncu"}
#: What ``ncu=`` may hold besides True or False: how many of the heaviest kernels' functions,
#: a regular expression of function names instead, which measured step, at most how many
#: launches (``run.kernel_profiling.NcuPlan``).
NCU_KEYS: dict[str, type[Any]] = {"top": int, "kernels": str, "step": int, "launches": int}


@dataclass(frozen=True)
class MarkerSpec:
    """A test's marker as checked: its arguments as written (``compare.rules.Rules.with_marker``
    reads the thresholds and tolerances from them), and the parts the run stage acts on."""

    arguments: Mapping[str, Any] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        """The ranks the test runs on: 1 unless it is a distributed test."""
        return self.arguments.get("world_size", 1)

    @property
    def ncu(self) -> bool | dict[str, Any] | None:
        """Its Nsight Compute plan as written (None: not said, the run's option decides)."""
        return self.arguments.get("ncu")

    def plan(self, run_plan: StepPlan) -> StepPlan:
        """The run's step plan with the marker's steps on top."""
        return run_plan.with_overrides(**{k: self.arguments.get(k) for k in PLAN_KEYS})


def is_profiled(item: Any) -> bool:
    """A test gpuprof profiles: it has the marker or uses the ``gpuprof`` fixture."""
    return item.get_closest_marker("gpuprof") is not None or "gpuprof" in getattr(item, "fixturenames", ())


def marker_origin(nodeid: str) -> str:
    """How a mistake in a test's marker names it."""
    return f"@pytest.mark.gpuprof on {nodeid}"


def read_marker(item: Any) -> MarkerSpec:
    """The test's ``@pytest.mark.gpuprof`` (none: an empty spec), each argument the run stage
    acts on checked of its type: the steps as ``StepPlan`` takes them, ``ncu`` a bool or a dict
    of ``NCU_KEYS``, ``world_size`` a whole number >= 1 (``compare.rules.Rules.with_marker``
    checks ``thresholds`` and ``tolerances``).  Its mistakes are one ``ConfigError``, a line
    for each, naming the test."""
    marker = item.get_closest_marker("gpuprof")
    if marker is None:
        return MarkerSpec()
    problems = marker_problems(marker.args, dict(marker.kwargs))
    if problems:
        origin = marker_origin(item.nodeid)
        raise ConfigError("\n".join(f"{origin}: {problem}" for problem in problems))
    return MarkerSpec(dict(marker.kwargs))


def marker_problems(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """Every mistake ``read_marker`` finds in a marker's arguments, in words."""
    problems = ["takes keyword arguments only"] if args else []
    unknown = set(kwargs) - MARKER_KEYS
    if unknown:
        problems.append(f"unknown argument(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(MARKER_KEYS))}")
    for key in PLAN_KEYS:  # each on its own: every wrong one is named
        try:
            StepPlan().with_overrides(**{key: kwargs.get(key)})
        except ConfigError as exc:
            problems.append(str(exc))
    size = kwargs.get("world_size", 1)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        problems.append(f"world_size must be a whole number of ranks, 1 or more, got {size!r}")
    ncu = kwargs.get("ncu", False)
    if not isinstance(ncu, (bool, dict)) or isinstance(ncu, dict) and any(
            key not in NCU_KEYS or isinstance(value, bool) or not isinstance(value, NCU_KEYS[key])
            or NCU_KEYS[key] is int and value < (0 if key == "step" else 1)
            or key == "kernels" and not value.strip() for key, value in ncu.items()):
        problems.append("ncu must be True, False or a dict of top (kernels' functions, 1 or more), kernels (a "
                        "regular expression of function names), step (0 or more) and launches (1 or more), "
                        f"got {ncu!r}")
    return problems


SPEC = pytest.StashKey[MarkerSpec]()
#: What is wrong with the test's marker, found when it was first read.
MISTAKE = pytest.StashKey[str]()


def marker_of(item: pytest.Item) -> MarkerSpec:
    """The test's spec, read on first use (at collection: ``plugin.py``) and kept; a marker
    found wrong then raises its ``ConfigError`` again."""
    spec = item.stash.get(SPEC, None)
    if spec is not None:
        return spec
    if MISTAKE in item.stash:
        raise ConfigError(item.stash[MISTAKE])
    try:
        spec = item.stash[SPEC] = read_marker(item)
    except ConfigError as exc:
        item.stash[MISTAKE] = str(exc)
        raise
    return spec


def marker_mistake(item: pytest.Item, problem: str) -> None:
    """Keep a mistake found in the marker by a later check (its rules' metric names)."""
    item.stash[MISTAKE] = problem
    if SPEC in item.stash:
        del item.stash[SPEC]
