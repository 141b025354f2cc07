"""What a pytest run was given for gpuprof: each option's value (command line, else ini key,
else default), the step plan they give, and the check that a value given with a space did
not move the rootdir pytest chose.  Read by ``plugin.py`` in every run, gpuprof on or off:
it loads nothing heavy."""

from __future__ import annotations

import inspect
from argparse import ArgumentTypeError
from pathlib import Path
from typing import Any

import pytest
from _pytest.config.findpaths import determine_setup  # how pytest chooses the rootdir: no public API says

from ..capture.profiler import StepPlan
from ..options import BY_NAME, OPTIONS, Option, finite_number


def option_value(config: pytest.Config, o: Option) -> Any:
    """An option's value: command line, else ini key, else default.  Paths given on the
    command line are relative to the invocation directory, others to the rootdir."""
    value = config.getoption(o.ini)
    origin, base = o.flag, config.invocation_params.dir
    if value is None:
        value = config.getini(o.ini)
        origin, base = f"ini key {o.ini}", config.rootpath
    if o.kind in ("bool", "list"):
        return value
    if value in (None, ""):
        return None
    try:
        if o.kind == "int":
            return int(value)
        if o.kind == "float":
            float(value)  # (not a number: "expected float", as for int)
            return finite_number(value)
    except ValueError:
        raise pytest.UsageError(f"{origin}: expected {o.kind}, got {value!r}") from None
    except ArgumentTypeError as exc:
        raise pytest.UsageError(f"{origin}: {exc}") from None
    return Path(base, value) if o.kind == "path" else value


def default_plan(config: pytest.Config) -> StepPlan:
    """The step plan of the options and ini keys, before any marker's overrides."""
    wait, warmup, active, least = (option_value(config, BY_NAME[n]) for n in ("wait", "warmup", "active", "min-active"))
    return StepPlan(wait, warmup, active, bool(option_value(config, BY_NAME["flush-l2"])), least)


def check_rootdir_not_moved(config: pytest.Config) -> None:
    """pytest chooses the rootdir and ini file, which decide the node ids that name traces and
    baselines, before it knows plugin options: in ``--gpuprof-base DIR`` it takes DIR for a test
    path as well.  A gpuprof option's value given so, with a space, that changed its choice is
    a usage error naming the option and its ``=`` form."""
    if hasattr(config, "workerinput"):  # an xdist worker: its controller checked the command line
        return
    args = [str(a) for a in config.invocation_params.args]
    flags = {o.flag for o in OPTIONS if o.kind != "bool"}
    values = {i + 1 for i, a in enumerate(args[:-1]) if a in flags and not args[i + 1].startswith("-")}
    if not values:
        return
    tests = set(config.option.file_or_dir or ())
    taken = rootdir_and_ini(config, [a for i, a in enumerate(args) if i in values or a in tests])
    alone = rootdir_and_ini(config, [a for i, a in enumerate(args) if i not in values and a in tests])
    if taken == alone:
        return
    moved = [(args[i - 1], args[i]) for i in sorted(values)
             if Path(config.invocation_params.dir, args[i].split("::")[0]).exists()]  # pytest takes existing paths
    raise pytest.UsageError("; ".join(
        f"{flag} {value}: given with a space, pytest also took {value} for a test path when it chose the rootdir "
        f"and ini file ({where(taken)}; without it {where(alone)}), which decide the node ids that name traces "
        f"and baselines: write {flag}={value}" for flag, value in moved))


def rootdir_and_ini(config: pytest.Config, tests: list[str]) -> tuple[Path, Path | None]:
    """The rootdir and ini file pytest chooses for these test paths, with this run's ``-c``,
    ``-o`` and ``--rootdir`` (``determine_setup``'s arguments differ between pytest 7.4 and 9)."""
    given = {"inifile": config.option.inifilename, "override_ini": config.option.override_ini, "args": tests,
             "rootdir_cmd_arg": config.option.rootdir or None, "invocation_dir": config.invocation_params.dir,
             "config": config}
    accepted = inspect.signature(determine_setup).parameters
    rootdir, inifile = determine_setup(**{k: v for k, v in given.items() if k in accepted})[:2]
    return rootdir, inifile


def where(choice: tuple[Path, Path | None]) -> str:
    rootdir, inifile = choice
    return f"rootdir {rootdir}, " + (f"ini file {inifile}" if inifile else "no ini file")
