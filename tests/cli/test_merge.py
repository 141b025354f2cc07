"""``gpuprof merge`` (cli/merge.py): a suite run in two shards, merged, is the suite run once."""

import json
import subprocess
import sys

import pytest

from helpers.example_suite import run_suite

SHARDS = {"a": "moe or cnn", "b": "not moe and not cnn"}


def merge(*args):
    return subprocess.run([sys.executable, "-m", "pytest_gpuprof", "merge", *map(str, args)],
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, item_replay):
    """The example suite replayed (the MoE test's planted-bug trace in place: it fails) once
    whole (the run's one such replay, tests/conftest.py) and once in two shards; the folder of
    the shards' results files, and each results file."""
    out = tmp_path_factory.mktemp("merge")
    whole, _ = item_replay
    replay = whole / "replay"
    files = {"whole": whole / "results.json"}
    for name, select in SHARDS.items():
        files[name] = out / f"{name}.json"
        run_suite(out, replay, "--gpuprof-json", str(files[name]), "-k", select)
    return out, files


def test_two_shards_merged_are_the_whole_run(runs):
    out, files = runs
    done = merge(files["a"], files["b"], "--json", out / "merged.json", "--summary", out / "merged.md")
    assert done.returncode == 1, done.stdout + done.stderr  # the planted MoE bug fails, as in the whole run
    whole, merged = (json.loads(p.read_text()) for p in (files["whole"], out / "merged.json"))
    shards = [json.loads(files[k].read_text()) for k in SHARDS]
    assert all(len(s["tests"]) for s in shards) and sum(len(s["tests"]) for s in shards) == len(whole["tests"]) == 8
    assert [(t["nodeid"], t["status"]) for t in merged["tests"]] == [(t["nodeid"], t["status"]) for t in whole["tests"]]
    assert merged["counts"] == whole["counts"] == {"failed": 1, "passed": 7, "skipped": 0}
    assert [t["verdicts"] for t in merged["tests"]] == [t["verdicts"] for t in whole["tests"]]
    assert done.stdout.startswith("gpuprof: merged 2 results file(s): 1 failed, 7 passed")
    assert (out / "merged.md").read_text().startswith("## gpuprof: 1 failed, 7 passed")


def test_overlapping_shards_or_a_trace_are_refused_by_name(runs, tmp_path):
    out, files = runs
    done = merge(files["a"], files["whole"])
    assert done.returncode == 2 and f"is in both {files['a']} and {files['whole']}: the shards overlap" in done.stderr
    trace = next((files["whole"].parent / "replay").glob("*.json.gz"))
    done = merge(files["a"], trace)
    assert done.returncode == 2 and f"{trace}: not a results file (--gpuprof-json)" in done.stderr
    assert merge(files["b"]).returncode == 0  # the shard without the failing test passes
