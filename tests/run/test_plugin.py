"""The pytest plugin end to end, without a GPU.

pytester runs small suites whose node ids match real H200 traces shipped in
``example_suite/traces``; ``--gpuprof-replay`` judges those traces through the whole
pipeline (trace -> metrics -> baseline -> verdicts -> failure message, baseline update)
without calling the test functions.  Without replay, this machine's missing GPU is the
case under test.
"""

import functools
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
from collections import Counter

import pytest

from helpers.suites import (
    CNN,
    GPU,
    MOE,
    NO_GPU,
    TRACE,
    WHY_NO_GPU,
    baseline_path,
    fixture_test,
    load,
    marker_test,
    replay_dir,
    save,
    section,
    write_module,
)
from pytest_gpuprof.compare.stats import t_quantile
from pytest_gpuprof.metrics.specs import METRICS

# Imported here, before any in-process pytester run, so pandas/numpy stay loaded across
# runs (pytester drops modules first imported inside a run).
from pytest_gpuprof.numbers import format_number
from pytest_gpuprof.options import OPTIONS as ALL_OPTIONS
from pytest_gpuprof.report.names import full_name
from pytest_gpuprof.run.kept_traces import trace_name

# These two re-run the session under nsys instead of running it: tests/run/test_nsys_backend.py
SWITCHES_BACKEND = ("gpuprof_backend", "gpuprof_nsys")
OPTIONS = tuple((o.flag, o.ini, o.kind, o.default, o.help) for o in ALL_OPTIONS if o.ini not in SWITCHES_BACKEND)
OTHER_GPU = "NVIDIA A100-SXM4-80GB"

# --- building suites -------------------------------------------------------

def calls(pytester):
    log = pytester.path / "calls.log"
    return log.read_text().split() if log.exists() else []


@pytest.fixture
def suite(pytester):
    """example_suite/test_moe.py (fixture form) and test_cnn.py (marker form), traces ready."""
    pytester.makefile(".ini", pytest="[pytest]\n")
    write_module(pytester, "test_moe", fixture_test("test_moe_forward"))
    write_module(pytester, "test_cnn", marker_test("test_cnn_train_step"))
    replay_dir(pytester)
    return pytester


def run(pytester, *args):
    return pytester.runpytest("-p", "no:cacheprovider", "-rfEs", *args)


def replay(pytester, *args):
    return run(pytester, "--gpuprof-replay", str(pytester.path / "replay"), *args)


def record(pytester, *args):
    result = replay(pytester, "--gpuprof-update-baseline", *args)
    assert result.ret == 0, result.stdout.str()
    return result


# --- reading results -------------------------------------------------------

def statuses(result):
    """node id -> status, from the summary table."""
    out = {}
    for line in section(result):
        m = re.match(r"(\S+::\S+)\s+(no baseline|\S+)(?:\s|$)", line)
        if m:
            out[m[1]] = m[2]
    return out


#: The next step a failure message ends with, by kind of failure (report.words.NEXT_STEPS).
WORK = ("Next step for a changed count, byte total or kernel: counts, bytes and kernels are exact, noise never "
        "moves them: fix the code; if the change is intended, refresh the baseline with --gpuprof-update-baseline.")
TIME = ("Next step for a time or ratio regression: fix the code; if the change is intended, refresh the baseline "
        "with --gpuprof-update-baseline (--gpuprof-confirm=N first re-measures a test failing on times or ratios "
        "alone in fresh processes).")
THRESHOLD = ("Next step for a violated threshold: fix the code, or change the threshold where it is set (the gpuprof "
             "marker's thresholds=[...], --gpuprof-threshold or the ini key gpuprof_thresholds); a threshold is "
             "absolute, refreshing the baseline does not move it.")


def message(result, first_line_start="gpuprof: "):
    """The lines of a gpuprof failure message, from its first line to its last next step."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if line.startswith(first_line_start))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("Next step for "))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("Next step for ")), len(lines))
    return lines[start:end]


def quartiles(values):
    """q1, median, q3 worked out apart from numpy: statistics' inclusive method is the same
    linear interpolation between the closest ranks."""
    return statistics.quantiles(values, n=4, method="inclusive")


def time_text(us):
    """A time as the reports show it (docs/metrics.md), worked out apart from ``numbers``: 4
    significant digits, in µs, or in ms from 1000 µs (no time here reaches a second)."""
    return f"{us / 1000:.4g} ms" if us >= 999.95 else f"{us:.4g} µs"


def time_range(low, high):
    """``14.8–14.85 ms``: two times, their unit said once where both share it."""
    (a, unit_a), (b, unit_b) = (time_text(v).split() for v in (low, high))
    return f"{a}–{b} {unit_b}" if unit_a == unit_b else f"{a} {unit_a}–{b} {unit_b}"


def spread(label, values):
    """How a time verdict's evidence shows one run's per-step values."""
    q1, median, q3 = (round(v, 3) for v in quartiles(values))
    return f"{label} {time_text(median)} (IQR {time_range(q1, q3)}, n={len(values)})"


@functools.cache
def analyze(trace):
    """What ``gpuprof analyze --json`` says about a trace."""
    out = subprocess.run([sys.executable, "-m", "pytest_gpuprof", "analyze", "--json", str(trace)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def judged(trace, metric):
    """The value a ratio is judged by: the median of its per-step values (none stalled in the
    shipped traces), worked out with statistics, rounded like every ratio."""
    steps = analyze(trace)["per_step"]
    assert not any(steps["stalled"])
    return round(statistics.median(steps[metric]), 6)


def test_trace_names_match_the_shipped_traces():
    for nodeid, path in TRACE.items():
        assert trace_name(nodeid) == path.name
        assert path.is_file()


# --- 1. options and ini keys -----------------------------------------------

SETTINGS_MODULE = '''
import json
from pytest_gpuprof.options import BY_NAME
from pytest_gpuprof.plugin import SESSION
from pytest_gpuprof.run.given import option_value


def test_settings(pytestconfig):
    state = pytestconfig.stash.get(SESSION, None)
    out = {"gpuprof": state is not None}
    if state is not None:
        s = state.settings
        out.update({
            "gpuprof_update_baseline": s.update_baseline,
            "gpuprof_strict": s.strict,
            "gpuprof_baseline_dir": str(s.baseline_dir),
            "gpuprof_output_dir": str(s.output_dir),
            "gpuprof_keep_traces": s.keep_traces,
            "gpuprof_replay": None if s.replay_dir is None else str(s.replay_dir),
            "gpuprof_kernel_time_tolerance": s.rules.kernel_time_tolerance,
            "gpuprof_time_tolerance": s.rules.time_tolerance,
            "gpuprof_time_floor_us": s.rules.time_floor_us,
            "gpuprof_ratio_tolerance": s.rules.ratio_tolerance,
            "gpuprof_thresholds": [t.text for t in s.rules.thresholds],
            "gpuprof_wait": s.plan.wait,
            "gpuprof_warmup": s.plan.warmup,
            "gpuprof_active": s.plan.active,
            "gpuprof_min_active": s.plan.min_active,
            "gpuprof_flush_l2": s.plan.flush_l2,
            "gpuprof_nsys_path": s.nsys_path,
            "gpuprof_ncu": s.ncu,
            "gpuprof_ncu_path": s.ncu_path,
            # report files: --gpuprof-KIND is ini key gpuprof_KIND (dashes as underscores)
            **{"gpuprof_" + kind.replace("-", "_"): None if path is None else str(path)
               for kind, path in s.reports.items()},
            "gpuprof_timeline_events": s.timeline_events,
            "gpuprof_baseline_runs": s.baseline_runs,
            "gpuprof_confirm": s.confirm,
            "gpuprof_record_processes": s.record_processes,
            "gpuprof_confirm_timeout": s.confirm_timeout,
            "gpuprof_base": None if s.base is None else str(s.base),
            "gpuprof_base_python": s.base_python,
            "gpuprof_base_only": s.base_only,
            "gpuprof_base_pairs": s.base_pairs,
            # read where a distributed test spawns its ranks, with or without --gpuprof
            "gpuprof_rank_timeout": option_value(pytestconfig, BY_NAME["rank-timeout"]),
        })
    with open(str(pytestconfig.rootpath / "settings.json"), "w") as fh:
        json.dump(out, fh)
'''

NUMBERS = {  # ini key -> (a value, another value); none is the default
    "gpuprof_kernel_time_tolerance": (0.03, 0.2), "gpuprof_time_tolerance": (0.25, 0.5),
    "gpuprof_time_floor_us": (7.5, 12.0), "gpuprof_ratio_tolerance": (0.125, 0.0), "gpuprof_wait": (2, 1),
    "gpuprof_warmup": (4, 0),
    "gpuprof_active": (6, 1), "gpuprof_min_active": (5, 2),  # under the default active: it stays 10
    "gpuprof_timeline_events": (50, 0), "gpuprof_baseline_runs": (3, 1),
    "gpuprof_confirm": (2, 1), "gpuprof_record_processes": (2, 1), "gpuprof_confirm_timeout": (60.0, 1.5),
    "gpuprof_base_pairs": (3, 8), "gpuprof_rank_timeout": (30.0, 7.5),
}
THRESHOLDS = (["sync_count == 0", "gpu_utilization >= 85%"], ["memset_count <= 3"])


def spellings(pytester, opt, key, kind, variant=0):
    """(command-line words, ini line, pyproject line, resolved value) for a non-default value."""
    if kind == "bool":
        return [opt], f"{key} = true", f"{key} = true", True
    if kind == "path":
        name = f"dir{variant}_{key}"
        if key in ("gpuprof_replay", "gpuprof_base"):
            (pytester.path / name).mkdir(exist_ok=True)  # --gpuprof-replay and --gpuprof-base need an existing one
        return [opt, name], f"{key} = {name}", f'{key} = "{name}"', str(pytester.path / name)
    if kind == "list":
        exprs = THRESHOLDS[variant]
        parsed = [e.replace("85%", "0.85") for e in exprs]
        cli = [w for e in exprs for w in (opt, e)]
        ini = f"{key} =\n" + "".join(f"    {e}\n" for e in exprs)
        return cli, ini, f"{key} = {json.dumps(exprs)}", parsed
    if key in ("gpuprof_nsys_path", "gpuprof_ncu_path", "gpuprof_base_python"):
        value = f"/opt/tool{variant}/bin/{key}"
        return [f"{opt}={value}"], f"{key} = {value}", f'{key} = "{value}"', value
    value = NUMBERS[key][variant]
    return [f"{opt}={value}"], f"{key} = {value}", f"{key} = {value}", value


def defaults(pytester):
    out = {}
    for _, key, kind, default, _ in OPTIONS:
        if kind == "path" and default is not None:
            default = str(pytester.path / default)
        out[key] = default
    out["gpuprof"] = True
    return out


def settings_after(pytester, *args):
    target = pytester.path / "settings.json"
    target.unlink(missing_ok=True)
    result = run(pytester, *args)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    return load(target)


@pytest.mark.parametrize("where", ["command line", "pytest.ini", "pyproject.toml"])
@pytest.mark.parametrize("option", OPTIONS, ids=[o[0] for o in OPTIONS])
def test_every_option_is_accepted_on_the_command_line_and_as_an_ini_key(pytester, option, where):
    opt, key, kind, _, _ = option
    pytester.makepyfile(test_settings=SETTINGS_MODULE)
    cli, ini, toml, expected = spellings(pytester, opt, key, kind)
    on = [] if key == "gpuprof" else ["--gpuprof"]
    if where == "command line":
        pytester.makefile(".ini", pytest="[pytest]\n")
        assert settings_after(pytester) == {"gpuprof": False}  # off unless asked for
        args = on + cli
    elif where == "pytest.ini":
        pytester.makefile(".ini", pytest=f"[pytest]\n{ini}\n")
        args = on
    else:
        pytester.makefile(".toml", pyproject=f"[tool.pytest.ini_options]\n{toml}\n")
        args = on
    got = settings_after(pytester, *args)
    want = defaults(pytester)
    want[key] = expected
    assert set(got) == {o[1] for o in OPTIONS}
    assert got == want  # this option took effect, and nothing else changed


@pytest.mark.parametrize("option", [o for o in OPTIONS if o[2] != "bool"],
                         ids=[o[0] for o in OPTIONS if o[2] != "bool"])
def test_command_line_wins_over_ini(pytester, option):
    opt, key, kind, _, _ = option
    pytester.makepyfile(test_settings=SETTINGS_MODULE)
    _, ini, _, from_ini = spellings(pytester, opt, key, kind, variant=0)
    cli, _, _, from_cli = spellings(pytester, opt, key, kind, variant=1)
    assert from_ini != from_cli
    pytester.makefile(".ini", pytest=f"[pytest]\n{ini}\n")
    assert settings_after(pytester, "--gpuprof")[key] == from_ini
    assert settings_after(pytester, "--gpuprof", *cli)[key] == from_cli  # a list is replaced, not extended


def test_ini_baseline_dir_decides_where_baselines_go_and_the_command_line_overrides_it(suite):
    (suite.path / "pytest.ini").unlink()
    suite.makefile(".toml", pyproject='[tool.pytest.ini_options]\ngpuprof_baseline_dir = "perf/baselines"\n')
    record(suite)
    from_ini = baseline_path(suite, "test_moe", "perf/baselines")
    assert load(from_ini)["tests"][MOE][GPU]["metrics"] == analyze(TRACE[MOE])["metrics"]
    assert not (suite.path / "baselines").exists()
    before = from_ini.read_bytes()

    result = replay(suite, "--gpuprof")  # judged against the ini directory
    assert statuses(result) == {MOE: "passed", CNN: "passed"}
    assert f"baselines: {suite.path / 'perf' / 'baselines'}" in section(result)[0]

    record(suite, "--gpuprof-baseline-dir", "from_cli")
    assert load(baseline_path(suite, "test_moe", "from_cli"))["tests"][MOE][GPU]
    assert from_ini.read_bytes() == before
    result = replay(suite, "--gpuprof", "--gpuprof-baseline-dir", "empty_cli_dir")
    assert statuses(result) == {MOE: "no baseline", CNN: "no baseline"}


def test_command_line_paths_are_relative_to_the_invocation_dir_ini_paths_to_the_rootdir(suite, monkeypatch):
    """README: baseline dir, ini and default relative to the rootdir; command line to the current dir."""
    suite.makefile(".ini", pytest="[pytest]\ngpuprof_baseline_dir = perf\n")
    sub = suite.path / "example_suite"
    shutil.move(str(suite.path / "replay"), str(sub / "kept"))
    monkeypatch.chdir(sub)
    result = run(suite, "--gpuprof-update-baseline", "--gpuprof-replay", "kept")
    assert statuses(result) == {MOE: "updated", CNN: "updated"}
    assert baseline_path(suite, "test_moe", "perf").is_file()  # ini: under the rootdir
    result = run(suite, "--gpuprof-update-baseline", "--gpuprof-replay", "kept", "--gpuprof-baseline-dir", "bl")
    assert statuses(result) == {MOE: "updated", CNN: "updated"}
    assert (sub / "bl" / "example_suite" / "test_moe.json").is_file()  # command line: under the cwd
    assert not (suite.path / "bl").exists()


@pytest.mark.parametrize("args, ini, error", [
    (["--gpuprof-time-tolerance=abc"], "", "--gpuprof-time-tolerance: expected float, got 'abc'"),
    (["--gpuprof"], "gpuprof_time_floor_us = 5us", "ini key gpuprof_time_floor_us: expected float, got '5us'"),
    (["--gpuprof", "--gpuprof-ratio-tolerance", "0,05"], "", "--gpuprof-ratio-tolerance: expected float, got '0,05'"),
    (["--gpuprof-active=ten"], "", "--gpuprof-active: expected int, got 'ten'"),
    (["--gpuprof", "--gpuprof-ratio-tolerance=-0.1"], "",
     "--gpuprof-ratio-tolerance / ini key gpuprof_ratio_tolerance: must not be negative, got -0.1"),
    (["--gpuprof", "--gpuprof-threshold", "gpu_utilization >> 0.9"], "",
     "--gpuprof-threshold / ini gpuprof_thresholds: cannot parse threshold 'gpu_utilization >> 0.9'"),
    (["--gpuprof"], "gpuprof_thresholds =\n    sync_count == 0\n    gpu_utilisation >= 0.9",
     "--gpuprof-threshold / ini gpuprof_thresholds: unknown metric 'gpu_utilisation' in threshold "
     "'gpu_utilisation >= 0.9'"),
    (["--gpuprof", "--gpuprof-replay", "no_such_dir"], "", "--gpuprof-replay: {path}/no_such_dir is not a directory"),
    # a baseline directory that is a file: refused here, where no GPU means nothing would read it
    (["--gpuprof", "--gpuprof-baseline-dir=pytest.ini"], "",
     "--gpuprof-baseline-dir / ini key gpuprof_baseline_dir: {path}/pytest.ini is a file, not a directory"),
    (["--gpuprof"], "gpuprof_baseline_dir = pytest.ini/baselines",
     "--gpuprof-baseline-dir / ini key gpuprof_baseline_dir: {path}/pytest.ini is a file, not a directory, so the "
     "baseline directory {path}/pytest.ini/baselines cannot be made"),
], ids=["cli-float", "ini-float", "cli-float-comma", "cli-int", "negative", "cli-threshold", "ini-threshold",
        "replay-dir", "baseline-dir-file", "baseline-dir-in-a-file"])
def test_bad_value_is_a_usage_error_naming_the_option(suite, args, ini, error):
    suite.makefile(".ini", pytest=f"[pytest]\n{ini}\n")
    result = run(suite, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    expected = f"ERROR: {error.format(path=suite.path)}"
    assert [line for line in result.errlines if line.startswith(expected)], result.errlines
    assert "passed" not in result.stdout.str() and calls(suite) == []


# --- 2. write, read, compare -----------------------------------------------

def test_update_writes_readable_baselines_then_a_judging_run_passes(suite):
    result = record(suite)  # --gpuprof-update-baseline implies --gpuprof
    result.assert_outcomes(passed=2)
    assert calls(suite) == []  # replay never calls the test functions
    assert statuses(result) == {MOE: "updated", CNN: "updated"}
    files = {MOE: baseline_path(suite, "test_moe"), CNN: baseline_path(suite, "test_cnn")}
    lines = section(result)
    for nodeid, path in files.items():
        assert f"updated 1 test(s) in {path} (first run recorded)" in lines
        text = path.read_text()
        doc = json.loads(text)
        # sorted keys, two-space indentation, a final newline: stable pull-request diffs
        assert text == json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        assert text.startswith('{\n  "schema_version": 1,\n  "tests": {\n    "' + nodeid + '": {\n'
                               '      "' + GPU + '": {\n')
        assert doc["schema_version"] == 1
        assert list(doc["tests"]) == [nodeid] and list(doc["tests"][nodeid]) == [GPU]
        entry = doc["tests"][nodeid][GPU]
        expected = analyze(TRACE[nodeid])
        assert expected["gpu"] == GPU
        assert entry["metrics"]["kernel_count"] == expected["metrics"]["kernel_count"] > 0
        assert entry["metrics"] == expected["metrics"]
        assert entry["per_step"] == expected["per_step"]  # 10 steps: under the cap, all kept
        # the judged series: times, and the ratios with a direction that have a value in some step
        ratios = {m for m in ("gpu_utilization", "overlap_efficiency", "sync_wait_fraction")
                  if any(v is not None for v in expected["per_step"][m])}
        rates = {m for m in expected["per_step"]
                 if m.endswith("_gbps") and any(v is not None for v in expected["per_step"][m])}
        assert set(entry["distribution"]) == {m for m in expected["per_step"] if m.endswith("_time_us")} | {
            "window_us", "kernels"} | ratios | rates
        assert [run["per_step"] for run in entry["runs"]] == [expected["per_step"]]  # one run recorded
        assert set(entry["distribution"]["kernels"]) == set(expected["per_step"]["kernels"])
        steps = expected["per_step"]["kernel_time_us"]
        q1, median, q3 = quartiles(steps)
        assert entry["distribution"]["kernel_time_us"] == pytest.approx(  # to 1 ns
            {"n": len(steps), "median": median, "q1": q1, "q3": q3, "min": min(steps), "max": max(steps)}, abs=1e-3)
        assert entry["step_source"] == expected["steps"]["source"]
        assert entry["backend"] == "torch" and entry["environment"]["gpu"] == GPU
    written = {path: path.read_bytes() for path in files.values()}

    result = replay(suite, "--gpuprof")
    result.assert_outcomes(passed=2)
    assert statuses(result) == {MOE: "passed", CNN: "passed"}
    lines = section(result)
    assert "GPU: NVIDIA H200" in lines
    kernels = analyze(TRACE[MOE])["metrics"]["kernel_count"] // analyze(TRACE[MOE])["metrics"]["step_count"]
    row = next(line for line in lines if line.startswith(MOE))
    assert f"  {kernels} (+0.0%)  " in row
    assert not any(line.startswith("updated") for line in lines)
    assert {path: path.read_bytes() for path in files.values()} == written  # judging never writes
    assert calls(suite) == []


# --- 3. the failure message ------------------------------------------------

def test_failure_names_every_broken_metric_with_baseline_current_change_and_rule(suite):
    record(suite)
    path = baseline_path(suite, "test_moe")
    doc = load(path)
    entry = doc["tests"][MOE][GPU]
    metrics = entry["metrics"]
    steps = metrics["step_count"]
    kernels, util = metrics["kernel_count"] / steps, judged(TRACE[MOE], "gpu_utilization")
    assert kernels.is_integer() and util < 0.99
    metrics["kernel_count"] -= steps  # one kernel fewer per step in the baseline
    # a baseline whose GPU was busy in every step: utilization is judged per step
    entry["per_step"]["gpu_utilization"] = [1.0] * steps
    entry["distribution"]["gpu_utilization"] = {"n": steps, "median": 1.0, "q1": 1.0, "q3": 1.0, "min": 1.0, "max": 1.0}
    save(path, doc)
    edited = path.read_bytes()

    result = replay(suite, "--gpuprof", "--gpuprof-ratio-tolerance", "0.01")
    result.assert_outcomes(failed=1, passed=1)
    assert statuses(result) == {MOE: "failed", CNN: "passed"}
    shown = message(result)
    # a ratio as a percentage, its change in percentage points
    util_change = f"{util:.1%} ({(util - 1) * 100:+.1f} pp)"
    assert shown[:2] == [
        f"gpuprof: 2 metric(s) broke on {GPU}: kernel_count {int(kernels) - 1} → {int(kernels)} "
        f"({1 / (kernels - 1):+.1%}), gpu_utilization 100.0% → {util_change} (baseline file {path}):",
        f"  kernel_count: baseline {int(kernels) - 1}, current {int(kernels)} ({1 / (kernels - 1):+.1%}) "
        f"[changed; rule: must match exactly per step]",
    ]
    assert shown[2].startswith(
        f"  gpu_utilization: baseline 100.0%, current {util_change} "
        f"[regressed; rule: median per step must not drop by more than 0.01 unless the steps differ")
    assert "vs baseline 100.0% (IQR 100.0%–100.0%, n=10); Mann-Whitney U p=" in shown[2]
    assert shown[3:] == [WORK, TIME]
    assert any(line.startswith(f"FAILED {MOE} - Failed: gpuprof: ") for line in result.outlines)
    assert path.read_bytes() == edited  # a failing run does not touch the baseline

    # within the default ratio tolerance (0.05) the same utilization drop is fine
    result = replay(suite, "--gpuprof")
    assert [line.split(":")[0].strip() for line in message(result)[1:-1]] == ["kernel_count"]


@pytest.mark.parametrize("stored", ["distribution", "samples only"])
@pytest.mark.parametrize("factor, status", [(2.0, "improved"), (1.05, "passed"), (0.5, "failed")])
def test_time_change_beyond_tolerance_is_improved_or_regressed(suite, factor, status, stored):
    """Times are judged on their per-step samples: medians of all steps, and a rank test on
    the steps; a baseline written before distributions were stored is summarized from its samples."""
    record(suite)
    path = baseline_path(suite, "test_moe")
    doc = load(path)
    entry = doc["tests"][MOE][GPU]
    samples = entry["per_step"]["kernel_time_us"]
    scaled = [round(v * factor, 3) for v in samples]
    entry["per_step"]["kernel_time_us"] = scaled
    (run,) = entry["runs"]  # one process recorded it (replayed): the run is the entry's samples
    run["per_step"]["kernel_time_us"] = scaled
    q1, median, q3 = quartiles(scaled)
    run["distribution"]["kernel_time_us"] = {"n": len(scaled), "median": round(median, 3), "q1": round(q1, 3),
                                             "q3": round(q3, 3), "min": min(scaled), "max": max(scaled)}
    if stored == "distribution":
        entry["distribution"]["kernel_time_us"] = run["distribution"]["kernel_time_us"]
    else:
        del entry["distribution"]
    save(path, doc)
    result = replay(suite, "--gpuprof")
    assert statuses(result) == {MOE: status, CNN: "passed"}
    if status == "failed":
        result.assert_outcomes(failed=1, passed=1)
        now, before = statistics.median(samples), statistics.median(scaled)
        # the Bonferroni family: every time series both runs kept, the ratios with a direction that
        # have a value in some step, the 20 heaviest kernels
        series = sum(METRICS[k].kind == "time" or METRICS[k].kind == "ratio" and METRICS[k].better is not None
                     and any(v is not None for v in entry["per_step"][k])
                     for k in entry["per_step"] if k in METRICS) + len(entry["per_step"]["kernels"])
        change = f"{now / before - 1:+.1%}"
        # one recorded run: bounded by the spread assumed for kernel times (2.5%, time_rules.ONE_RUN_SPREAD)
        # and, the replayed traces naming no card, the spread between cards (1.1%, BETWEEN_CARDS) beside it
        half = t_quantile(0.995, 20) * math.hypot(0.025, 0.011) * math.sqrt(2)
        rule = " and the median lies outside the 99% prediction interval of the baseline's runs"
        bound = (f"; outside what the baseline's runs show (1 recorded run(s)' medians {time_range(before, before)}, "
                 f"99% prediction interval {time_range(before * math.exp(-half), before * math.exp(half))})")
        assert message(result)[1:] == [
            f"  kernel_time_us: baseline {time_text(before)}, current {time_text(now)} ({change}) "
            f"[regressed; rule: median per step within ±5% (changes under 5 µs ignored) unless the steps differ "
            f"(Mann-Whitney p < 0.01 / {series} series = {0.01 / series:.2g}){rule}; "
            f"{spread('median', samples)} vs {spread('baseline', scaled)}; "
            f"Mann-Whitney U p=1.1e-05 (n=10/10){bound}]",
            TIME,
        ]
    else:
        result.assert_outcomes(passed=2)
        assert "metric(s) broke" not in result.stdout.str()


@pytest.mark.parametrize("how", ["marker", "command line", "pytest.ini"])
def test_threshold_violation_fails_naming_the_threshold(pytester, how):
    marker = '@pytest.mark.gpuprof(thresholds=["sync_count == 0", "gpu_utilization >= 0.99"])'
    write_module(pytester, "test_moe", fixture_test("test_moe_forward", marker if how == "marker" else ""))
    write_module(pytester, "test_cnn", marker_test("test_cnn_train_step"))
    replay_dir(pytester)
    ini = "[pytest]\n"
    args = ["--gpuprof", "-k", "test_moe"]
    if how == "command line":
        args += ["--gpuprof-threshold", "sync_count == 0", "--gpuprof-threshold", "gpu_utilization >= 99%"]
    elif how == "pytest.ini":
        ini += "gpuprof_thresholds =\n    sync_count == 0\n    gpu_utilization >= 0.99\n"
    pytester.makefile(".ini", pytest=ini)
    util = judged(TRACE[MOE], "gpu_utilization")  # thresholds hold the median per step
    assert util < 0.99 and analyze(TRACE[MOE])["metrics"]["sync_count"] == 0

    result = replay(pytester, *args)  # no baseline at all: thresholds still apply
    result.assert_outcomes(failed=1, deselected=1)
    assert statuses(result) == {MOE: "failed"}
    assert message(result) == [  # a ratio as a percentage: 0.99 is 99.0%
        f"gpuprof: 1 metric(s) broke on {GPU}: gpu_utilization {util:.1%} (threshold >= 99.0%) "
        f"(baseline file {baseline_path(pytester, 'test_moe')}):",
        f"  gpu_utilization: current {util:.1%} violates threshold gpu_utilization >= 0.99",
        THRESHOLD,
    ]


def test_marker_threshold_replaces_the_global_one_on_the_same_metric(pytester):
    marker = '@pytest.mark.gpuprof(thresholds=["gpu_utilization >= 0.5"])'
    write_module(pytester, "test_moe", fixture_test("test_moe_forward", marker))
    write_module(pytester, "test_cnn", marker_test("test_cnn_train_step"))
    replay_dir(pytester)
    pytester.makefile(".ini", pytest="[pytest]\n")
    assert analyze(TRACE[CNN])["metrics"]["gpu_utilization"] < 0.999
    result = replay(pytester, "--gpuprof", "--gpuprof-threshold", "gpu_utilization >= 0.999")
    result.assert_outcomes(passed=1, failed=1)
    assert statuses(result) == {MOE: "no baseline", CNN: "failed"}
    assert any("violates threshold gpu_utilization >= 0.999" in line for line in message(result))


# --- 4. a -k update touches only the selected test --------------------------

def test_k_update_refreshes_only_the_selected_test(pytester):
    backward = "example_suite/test_moe.py::test_moe_backward"
    pytester.makefile(".ini", pytest="[pytest]\n")
    write_module(pytester, "test_moe", fixture_test("test_moe_forward"), fixture_test("test_moe_backward"))
    write_module(pytester, "test_cnn", marker_test("test_cnn_train_step"))
    replay_dir(pytester, {**TRACE, backward: TRACE[CNN]})
    record(pytester).assert_outcomes(passed=3)
    moe_file, cnn_file = baseline_path(pytester, "test_moe"), baseline_path(pytester, "test_cnn")

    # make every stored entry differ from what a fresh recording would write
    for path in (moe_file, cnn_file):
        doc = load(path)
        for nodeid, by_gpu in doc["tests"].items():
            by_gpu[GPU]["metrics"]["kernel_count"] += 1
            by_gpu[OTHER_GPU] = {"recorded on": "another machine", "test": nodeid}
        save(path, doc, indent=4)
    cnn_before = cnn_file.read_bytes()
    moe_before = load(moe_file)

    result = replay(pytester, "--gpuprof-update-baseline", "-k", "test_moe_forward")
    result.assert_outcomes(passed=1, deselected=2)
    assert statuses(result) == {MOE: "updated"}
    assert [line for line in section(result) if line.startswith("updated")] == [
        f"updated 1 test(s) in {moe_file} (replaced: the GPU work per step changed)"]
    assert cnn_file.read_bytes() == cnn_before  # another module: byte-identical
    after = load(moe_file)
    assert after["tests"][backward] == moe_before["tests"][backward]  # same file, other test: untouched
    assert after["tests"][MOE][OTHER_GPU] == moe_before["tests"][MOE][OTHER_GPU]  # other GPU model kept
    assert after["tests"][MOE][GPU]["metrics"] == analyze(TRACE[MOE])["metrics"]  # refreshed
    assert moe_file.read_text() == json.dumps(after, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --- 5. missing baseline -----------------------------------------------------

def test_missing_baseline_passes_as_no_baseline_and_fails_under_strict(suite):
    result = replay(suite, "--gpuprof")
    result.assert_outcomes(passed=2)
    assert statuses(result) == {MOE: "no baseline", CNN: "no baseline"}
    assert not (suite.path / "baselines").exists()  # judging never records

    # a baseline recorded on another GPU model is no baseline for this one
    moe_file = baseline_path(suite, "test_moe")
    moe_file.parent.mkdir(parents=True)
    entry = {"backend": "torch", "metrics": analyze(TRACE[MOE])["metrics"]}
    save(moe_file, {"schema_version": 1, "tests": {MOE: {OTHER_GPU: entry}}})
    result = replay(suite, "--gpuprof")
    assert statuses(result) == {MOE: "no baseline", CNN: "no baseline"}

    result = replay(suite, "--gpuprof", "--gpuprof-strict")
    result.assert_outcomes(failed=2)
    assert statuses(result) == {MOE: "failed", CNN: "failed"}
    for module in ("test_moe", "test_cnn"):
        line = f"gpuprof: no baseline for {GPU} in {baseline_path(suite, module)} (--gpuprof-strict)"
        assert line in result.outlines


# --- 6. corrupt baseline ----------------------------------------------------

@pytest.mark.parametrize("content, words", [
    ('{"schema_version": 1, "tests": {\n', "is not valid JSON"),
    ('{"schema_version": 2, "tests": {}}\n', "has schema_version 2; this gpuprof reads 1"),
    ("[]\n", "has no 'tests' object; fix or delete it"),
], ids=["invalid-json", "schema-version", "no-tests"])
@pytest.mark.parametrize("mode", ["--gpuprof", "--gpuprof-update-baseline"])
def test_corrupt_baseline_is_an_error_naming_the_file_and_is_never_overwritten(suite, mode, content, words):
    path = baseline_path(suite, "test_moe")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    result = replay(suite, mode)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1, passed=1)
    assert statuses(result)[MOE] == "error"
    assert any(line.startswith(f"gpuprof: baseline file {path} {words}") for line in result.outlines)
    assert path.read_text() == content
    if mode == "--gpuprof-update-baseline":  # the healthy module is still recorded
        assert statuses(result)[CNN] == "updated"
        assert [line for line in section(result) if "test(s) in" in line] == [
            f"updated 1 test(s) in {baseline_path(suite, 'test_cnn')} (first run recorded)"]


SPOIL_MODULE = '''
from pathlib import Path


def test_spoil_the_moe_baseline(pytestconfig):
    path = Path(str(pytestconfig.rootpath), "baselines", "example_suite", "test_moe.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{ spoiled")
'''


def test_baseline_spoiled_during_an_update_run_is_not_written_and_fails_the_run(suite):
    """The files are re-read just before writing; one unreadable then, none is written
    (an update is all or nothing: tests/run/test_session_robustness.py)."""
    (suite.path / "example_suite" / "test_zz_spoil.py").write_text(SPOIL_MODULE)
    result = replay(suite, "--gpuprof-update-baseline")
    result.assert_outcomes(passed=3)  # every test passed ...
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # ... but the run fails
    moe_file = baseline_path(suite, "test_moe")
    assert moe_file.read_text() == "{ spoiled"
    assert not baseline_path(suite, "test_cnn").exists()
    lines = [line for line in section(result) if "test(s) in" in line or line.startswith("no baseline written")]
    assert len(lines) == 1
    assert lines[0].startswith(f"no baseline written, every file left as it was: baseline file {moe_file} "
                               "is not valid JSON")


# --- 7. no GPU, and no --gpuprof ---------------------------------------------

@pytest.fixture(scope="session")
def torch():
    """torch (tests/conftest.py has imported it already, before any pytester run)."""
    return pytest.importorskip("torch")


def test_without_a_gpu_profiled_tests_are_skipped_saying_why(torch, suite):
    if torch.cuda.is_available():
        pytest.skip("checks the no-GPU path")
    result = run(suite, "--gpuprof")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines([f"SKIPPED [[]2[]] *: gpuprof: {NO_GPU}"])
    assert f"2 profiled test(s) skipped: {NO_GPU}" in section(result)
    assert "\n".join(section(result)).count("no CUDA GPU") == 1 and "skipped" not in NO_GPU  # said once
    assert statuses(result) == {}
    assert calls(suite) == []
    assert not (suite.path / "baselines").exists()


PLAIN_MODULE = '''

@pytest.mark.gpuprof(wait=1, warmup=0, active=3)
def test_marker_plan_without_gpuprof(gpuprof):
    for _ in gpuprof.steps():
        log("plan:step")
'''

RECORD_IMPORTS = '''
import json
import os
import sys

HEAVY = ("torch", "pandas", "numpy")


def pytest_collection_finish(session):
    with open(os.path.join(str(session.config.rootpath), "modules.json"), "w") as fh:
        json.dump({name: name in sys.modules for name in HEAVY}, fh)
'''


def test_header_line_says_version_capture_baselines_and_gpu(torch, suite):
    """One gpuprof line in pytest's header under gpuprof; none without it."""
    from pytest_gpuprof import __version__

    def header(result):
        return [line for line in result.outlines[:result.outlines.index(next(
            line for line in result.outlines if line.startswith("collected")))] if line.startswith("gpuprof")]

    assert header(replay(suite, "--gpuprof")) == [
        f"gpuprof {__version__}: capture replaying traces from {suite.path / 'replay'}, "
        f"baselines {suite.path / 'baselines'}"]
    assert header(run(suite)) == []
    if not torch.cuda.is_available():
        assert header(run(suite, "--gpuprof")) == [
            f"gpuprof {__version__}: capture torch.profiler, baselines {suite.path / 'baselines'}, "
            f"GPU none visible ({WHY_NO_GPU})"]


def test_without_gpuprof_profiled_tests_run_as_plain_tests_and_torch_is_not_imported(suite):
    write_module(suite, "test_plain", PLAIN_MODULE)
    suite.makeconftest(RECORD_IMPORTS)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")  # a fresh interpreter
    result.assert_outcomes(passed=3)
    assert load(suite.path / "modules.json") == {"torch": False, "pandas": False, "numpy": False}
    assert Counter(calls(suite)) == {
        "test_moe_forward:body": 1, "test_moe_forward:step": 3,  # steps(warmup=1, active=2): 3 plain iterations
        "test_cnn_train_step:body": 1,  # marker ignored: called once
        "plan:step": 4,  # the marker's plan: wait 1 + warmup 0 + active 3
    }
    assert not any(re.fullmatch(r"=+ gpuprof =+", line) for line in result.outlines)


def test_min_active_raises_every_tests_measured_steps_to_its_floor(suite):
    """--gpuprof-min-active: a test asking fewer measured steps (the fixture's steps(active=2),
    the marker's active=3) gets the floor; its warm-up and wait steps stay its own."""
    write_module(suite, "test_plain", PLAIN_MODULE)
    suite.runpytest("-p", "no:cacheprovider", "--gpuprof-min-active=6", "-k", "moe or plan").assert_outcomes(passed=2)
    assert Counter(calls(suite)) == {
        "test_moe_forward:body": 1, "test_moe_forward:step": 1 + 6,  # warmup 1, active 2 raised to 6
        "plan:step": 1 + 0 + 6,  # wait 1, warmup 0, active 3 raised to 6
    }


def test_m_gpuprof_selects_the_fixture_form_and_the_marker_form(suite):
    """A test that only asks for the fixture carries the marker too (``-m gpuprof``)."""
    write_module(suite, "test_plain", "\n\ndef test_plain():\n    pass\n")
    selected = run(suite, "-m", "gpuprof", "--collect-only", "-q").outlines
    assert sorted(line for line in selected if "::" in line) == [CNN, MOE]
    rest = run(suite, "-m", "not gpuprof", "--collect-only", "-q").outlines
    assert [line for line in rest if "::" in line] == ["example_suite/test_plain.py::test_plain"]


# --- 8. the marker form -------------------------------------------------------

def test_marker_form_without_fixture_is_judged_under_replay(suite):
    record(suite)
    path = baseline_path(suite, "test_cnn")
    doc = load(path)
    metrics = doc["tests"][CNN][GPU]["metrics"]
    steps = metrics["step_count"]
    kernel, row = next(iter(metrics["kernels"].items()))
    metrics["kernels"]["renamed_kernel"] = metrics["kernels"].pop(kernel)
    save(path, doc)

    result = replay(suite, "--gpuprof")
    result.assert_outcomes(failed=1, passed=1)
    assert statuses(result) == {MOE: "passed", CNN: "failed"}
    assert calls(suite) == []
    per_step = format_number(row["count"] / steps)
    # the heaviest kernel is a CUTLASS one, recorded mangled: the message names it demangled
    assert kernel.startswith("_ZN17cutlass") and full_name(kernel).startswith("void cutlass__5x_cudnn::Kernel<")
    shown = message(result)
    assert shown[0].startswith(f"gpuprof: 2 metric(s) broke on {GPU}: kernels[")  # the kernel by its short name
    assert shown[0].endswith(f"].count new, kernels[renamed_kernel].count vanished (baseline file {path}):")
    assert shown[1:] == [
        f"  kernels[{full_name(kernel)}].count: new kernel, {per_step} per step (not in the baseline)",
        f"  kernels[renamed_kernel].count: vanished, baseline {per_step} per step, now none",
        WORK,
    ]


@pytest.mark.parametrize("marker, error", [
    ("@pytest.mark.gpuprof(warmup=1, warmpu=2)",
     "unknown argument(s) warmpu; known: active, flush_l2, ncu, thresholds, tolerances, wait, warmup"),
    ("@pytest.mark.gpuprof(2)", "takes keyword arguments only"),
    ('@pytest.mark.gpuprof(tolerances={"kernel_tim_us": 0.5})', "tolerances names unknown metric 'kernel_tim_us'"),
    ('@pytest.mark.gpuprof(thresholds=["gpu_utilization => 0.9"])', "cannot parse threshold 'gpu_utilization => 0.9'"),
], ids=["unknown-kwarg", "positional", "tolerance-metric", "threshold"])
@pytest.mark.parametrize("form", ["marker", "fixture"])
def test_bad_marker_fails_the_test_with_a_clear_error(pytester, form, marker, error):
    pytester.makefile(".ini", pytest="[pytest]\n")
    if form == "marker":
        write_module(pytester, "test_moe", marker_test("test_moe_forward", marker))
    else:
        write_module(pytester, "test_moe", fixture_test("test_moe_forward", marker))
    write_module(pytester, "test_cnn", marker_test("test_cnn_train_step"))
    replay_dir(pytester)
    result = replay(pytester, "--gpuprof-update-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 1 and outcomes.get("failed", 0) + outcomes.get("errors", 0) == 1
    assert f"@pytest.mark.gpuprof on {MOE}: {error}" in "\n".join(result.outlines)
    assert calls(pytester) == []
    assert not baseline_path(pytester, "test_moe").exists()  # nothing recorded for it
    assert baseline_path(pytester, "test_cnn").exists()


def test_help_says_where_a_relative_path_is_taken_from(pytester):
    """What the test above shows, --help says for every path option (it once said 'under the
    rootdir' where the command line's path was taken from the current directory)."""
    from pytest_gpuprof.options import OPTIONS

    text = " ".join(pytester.runpytest_subprocess("--help").stdout.str().split())
    for option in (o for o in OPTIONS if o.kind == "path"):
        described = text.partition(f"{option.flag}=PATH ")[2]
        assert described.startswith(option.help.split(";")[0][:30]), option.flag
        assert "from the current directory on the command line, from the rootdir in an ini file" in \
            described[:len(option.help) + 200], option.flag
