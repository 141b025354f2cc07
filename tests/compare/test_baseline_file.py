"""One baseline file owned by ``BaselineFile``: an entry of an older form migrated where it is
read (and written back so only by an update), a file of a newer schema refused, and what is
loaded saved and loaded again unchanged."""

import copy
import json
from pathlib import Path

import pytest

from pytest_gpuprof.compare.baseline import BaselineFile, baseline_file, update_all
from pytest_gpuprof.compare.judge import Judge
from pytest_gpuprof.compare.recording import recorded_over
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.errors import BaselineError
from pytest_gpuprof.trace.kineto import load_kineto

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "baselines" / "example_suite" / "test_moe.json"
NODEID, GPU = "example_suite/test_moe.py::test_moe_forward", "NVIDIA H200"
TRACE = ROOT / "example_suite" / "traces" / "example_suite_test_moe.py_test_moe_forward.pt.trace.json.gz"


def shipped():
    """The MoE test's real entry, as the repository ships it."""
    return json.loads(SHIPPED.read_text())["tests"][NODEID][GPU]


def old_entry():
    """The MoE entry as a gpuprof of before recorded runs wrote it: its totals and their
    summaries, no samples, no runs."""
    entry = shipped()
    return {key: entry[key] for key in ("backend", "environment", "metrics", "distribution")}


def write(path, tests):
    path.write_text(json.dumps({"schema_version": 1, "tests": tests}))


def test_an_entry_of_before_runs_were_kept_is_read_as_its_one_run(tmp_path):
    old = old_entry()
    file = BaselineFile(tmp_path / "m.json")
    write(file.path, {NODEID: {GPU: old}})
    # by hand: one run holding what the entry kept of it, its summaries and its environment
    one_run = [{"distribution": old["distribution"], "environment": old["environment"]}]
    assert file.entry(NODEID, GPU) == {**old, "runs": one_run}
    # an entry of only its totals: one run that kept nothing
    write(file.path, {NODEID: {GPU: {"metrics": old["metrics"]}}})
    assert file.entry(NODEID, GPU) == {"metrics": old["metrics"], "runs": [{}]}


def test_a_distributed_entry_s_ranks_are_migrated_each(tmp_path):
    old = old_entry()
    file = BaselineFile(tmp_path / "m.json")
    write(file.path, {NODEID: {GPU: {"ranks": {"0": old, "1": {"metrics": old["metrics"]}}, "rank_skew": [0.02],
                                     "world_size": 2, "metrics": {"rank_skew": 0.02}}}})
    ranks = file.entry(NODEID, GPU)["ranks"]
    assert ranks["0"]["runs"] == [{"distribution": old["distribution"], "environment": old["environment"]}]
    assert ranks["1"]["runs"] == [{}]


def test_reading_never_writes_and_an_update_keeps_the_other_entries_as_stored(tmp_path):
    old = old_entry()
    file = BaselineFile(tmp_path / "m.json")
    write(file.path, {NODEID: {GPU: old}})
    before = file.path.read_bytes()
    file.entry(NODEID, GPU)
    file.load()
    assert file.path.read_bytes() == before  # reading leaves the file as it was
    file.update({"m.py::other": {GPU: shipped()}})
    written = json.loads(file.path.read_text())["tests"][NODEID][GPU]
    assert written == old  # as stored: the diff shows the recorded test alone
    assert file.entry(NODEID, GPU) == {**old, "runs": [{"distribution": old["distribution"],
                                                        "environment": old["environment"]}]}  # read migrated


def test_an_entry_of_samples_without_runs_is_damaged_not_migrated(tmp_path):
    """Samples come with their runs: an entry with ``per_step`` and no ``runs`` was not written
    before runs were kept; it stays refused, also once an update wrote its file again."""
    damaged = shipped()
    del damaged["runs"]
    file = BaselineFile(tmp_path / "m.json")
    write(file.path, {NODEID: {GPU: damaged}})
    file.update({"m.py::other": {GPU: shipped()}})
    assert json.loads(file.path.read_text())["tests"][NODEID][GPU] == damaged
    with pytest.raises(BaselineError, match=f"entry of {NODEID} on {GPU}: runs is missing"):
        file.entry(NODEID, GPU)


def test_recording_over_an_entry_of_before_runs_were_kept_replaces_its_run(tmp_path):
    """With the default 5 runs kept, the update over such an entry crashed (KeyError
    'per_step': its run had no samples to pool with this one's)."""
    path = baseline_file(tmp_path, NODEID)
    path.parent.mkdir(parents=True)
    write(path, {NODEID: {GPU: {"backend": "torch", "metrics": shipped()["metrics"]}}})
    trace = load_kineto(TRACE)
    judge = Judge(tmp_path, "torch", Rules(), update=True, baseline_runs=5)
    judged = judge.judge(NODEID, {}, lambda: {0: (trace, None)})
    assert len(judged.entry["runs"]) == 1 and judged.entry["runs"][0]["per_step"] == judged.result.per_step
    hows = update_all(tmp_path, {path: {NODEID: {GPU: judged.entry}}}, lambda e, now: recorded_over(e, now, 5))
    assert hows == {path: ["replaced: the recorded runs kept no per-step samples"]}
    assert BaselineFile(path).entry(NODEID, GPU) == judged.entry


def test_a_file_of_a_newer_schema_is_refused_saying_so_and_never_written(tmp_path):
    file = BaselineFile(tmp_path / "m.json")
    file.path.write_text('{"schema_version": 2, "tests": {}}')
    said = f"baseline file {file.path} has schema_version 2; this gpuprof reads 1: a newer gpuprof wrote it, " \
           "upgrade to read it"
    with pytest.raises(BaselineError) as err:
        file.entry(NODEID, GPU)
    assert str(err.value) == said
    with pytest.raises(BaselineError):
        file.update({NODEID: {GPU: shipped()}})
    assert file.path.read_text() == '{"schema_version": 2, "tests": {}}'


def test_load_save_load_is_the_same_file(tmp_path):
    loaded = BaselineFile(SHIPPED).load()
    file = BaselineFile(tmp_path / "m.json")
    file.update(copy.deepcopy(loaded["tests"]))
    assert file.load() == loaded
    assert file.path.read_bytes() == SHIPPED.read_bytes()  # sorted and indented as the repository keeps it


def test_two_recordings_made_against_one_entry_both_keep_their_run(tmp_path):
    """Two recordings judged against the entry of one run (two updaters at once): each made an
    entry of two runs; written one after the other, the file keeps all three, and the one
    written first is stored exactly as it was made."""
    path = baseline_file(tmp_path, NODEID)
    trace = load_kineto(TRACE)

    def recorded():  # by a process of its own: its judge reads the file as it is now
        return Judge(tmp_path, "torch", Rules(), update=True, baseline_runs=5).judge(
            NODEID, {}, lambda: {0: (trace, None)}).entry

    def stored_over(entry):
        return update_all(tmp_path, {path: {NODEID: {GPU: entry}}}, lambda e, now: recorded_over(e, now, 5))[path]

    assert stored_over(recorded()) == ["first run recorded"]
    first, second = recorded(), recorded()
    assert len(first["runs"]) == len(second["runs"]) == 2
    assert stored_over(first) == ["run 2 of at most 5 recorded"]
    assert BaselineFile(path).entry(NODEID, GPU) == first
    assert stored_over(second) == ["run 3 of at most 5 recorded"]
    stored = BaselineFile(path).entry(NODEID, GPU)
    assert stored["runs"] == [first["runs"][0], first["runs"][1], second["runs"][1]]
