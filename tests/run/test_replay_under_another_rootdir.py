"""A folder of traces kept on a GPU machine replays wherever pytest's rootdir is: a node id
that gained or lost leading directories finds its trace, checked by the digest in the name,
never another test's; two files that could be one test's trace, or one file two tests could
have, fail the test naming them; no trace skips it, naming the folder and the names looked for."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from helpers.suites import CNN, MOE, TRACE, fixture_test, write_module
from pytest_gpuprof.errors import GpuprofError
from pytest_gpuprof.run.backends import ReplayBackend

TEST = "tests/test_model.py::test_forward"


def kept_name(nodeid: str, digest_of: str | None = None) -> str:
    """The name gpuprof keeps a trace of ``nodeid`` under, worked out here: the node id with
    every run of other characters than letters, digits, ``.``, ``_`` and ``-`` made ``_``, cut
    to 160 characters, then the first 10 hex digits of the SHA-256 of ``digest_of`` (the node
    id itself unless said)."""
    readable = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else " " for c in nodeid)
    readable = "_".join(readable.split())[:160]
    digest = hashlib.sha256((digest_of or nodeid).encode()).hexdigest()[:10]
    return f"{readable}.{digest}.pt.trace.json.gz"


def folder_of(tmp_path: Path, *kept: str) -> Path:
    """A replay folder holding an (empty) kept trace of each node id."""
    folder = tmp_path / "kept"
    folder.mkdir()
    for nodeid in kept:
        (folder / kept_name(nodeid)).touch()
    return folder


def backend(folder: Path, *tests: str) -> ReplayBackend:
    replay = ReplayBackend(folder)
    replay.expect(list(tests or (TEST,)))
    return replay


@pytest.mark.parametrize("kept", [
    "test_model.py::test_forward",  # kept from tests/ as the rootdir: the node id had fewer directories
    "repo/tests/test_model.py::test_forward",  # the rootdir above the project
    "ci_work/my_repo/tests/test_model.py::test_forward",  # names with "_" in them
    "tests/test_model.py::test_forward",  # the same rootdir
])
def test_a_trace_kept_under_another_rootdir_is_found(tmp_path, kept):
    folder = folder_of(tmp_path, kept)
    replay = backend(folder)
    assert replay.unmeasurable(TEST) is None
    assert replay.path(TEST) == folder / kept_name(kept)


def test_a_long_node_id_and_a_rank_are_found_under_another_rootdir(tmp_path):
    long = f"tests/test_model.py::test_forward[{'x' * 200}]"
    rank = "tests/test_dist.py::test_all_reduce [rank 1]"
    folder = folder_of(tmp_path, f"repo/{long}", f"repo/{rank}")
    replay = backend(folder, long, "tests/test_dist.py::test_all_reduce")
    assert len(kept_name(f"repo/{long}")) > 160 and kept_name(f"repo/{long}").startswith("repo_tests_")
    assert replay.path(long) == folder / kept_name(f"repo/{long}")
    assert replay.path(rank) == folder / kept_name(f"repo/{rank}")


def test_a_name_whose_digest_is_another_node_ids_is_not_taken(tmp_path):
    folder = tmp_path / "kept"
    folder.mkdir()
    (folder / kept_name("repo/tests/test_model.py::test_forward", digest_of="repo/tests/test_model.py::test_other")) \
        .touch()
    replay = backend(folder)
    assert replay.unmeasurable(TEST) == (
        f"no trace to replay in {folder}: looked for {kept_name(TEST)}, tests_test_model.py_test_forward.pt.trace."
        "json.gz, and the names its node id has under another rootdir (directories before it, or fewer)")


def test_another_tests_own_trace_is_not_taken(tmp_path):
    """``test_model.py::test_forward`` is a test of this run too: its trace is its own."""
    folder = folder_of(tmp_path, "test_model.py::test_forward")
    replay = backend(folder, TEST, "test_model.py::test_forward")
    assert replay.unmeasurable(TEST).startswith(f"no trace to replay in {folder}: looked for {kept_name(TEST)}")
    assert replay.path("test_model.py::test_forward") == folder / kept_name("test_model.py::test_forward")


def test_two_files_that_could_be_a_tests_trace_fail_it_naming_both(tmp_path):
    below, above = "test_model.py::test_forward", "repo/tests/test_model.py::test_forward"
    folder = folder_of(tmp_path, below, above)
    replay = backend(folder)
    assert replay.unmeasurable(TEST) is None  # not skipped: it fails when its trace is read
    with pytest.raises(GpuprofError) as error:
        replay.path(TEST)
    assert str(error.value) == (
        f"2 traces in {folder} could be the trace of {TEST}, kept under other rootdirs: {kept_name(above)} (kept as "
        f"{above}); {kept_name(below)} (kept as {below}); keep one, or rename it {kept_name(TEST)}")


def test_one_file_two_tests_could_have_is_replayed_for_neither(tmp_path):
    kept, first, second = "test_x.py::test_y", "a/test_x.py::test_y", "b/test_x.py::test_y"
    folder = folder_of(tmp_path, kept)
    replay = backend(folder, first, second)
    for test, other in ((first, second), (second, first)):
        with pytest.raises(GpuprofError) as error:
            replay.path(test)
        assert str(error.value) == (
            f"trace {folder / kept_name(kept)}, kept as {kept} under another rootdir, could be the trace of {test} "
            f"or of {other}: rename it as its test's own (for {test}: {kept_name(test)})")
    (folder / kept_name(kept)).rename(folder / kept_name(first))  # renamed: each test has its own, or none
    assert replay.path(first) == folder / kept_name(first)
    assert replay.unmeasurable(second) is not None


def test_a_suite_replays_traces_kept_under_other_rootdirs(pytester):
    """The MoE trace kept where example_suite/ was the rootdir, the CNN trace where a folder
    two levels above the project was: both replayed from the project's rootdir."""
    pytester.makefile(".ini", pytest="[pytest]\n")
    write_module(pytester, "test_moe", fixture_test("test_moe_forward"))
    write_module(pytester, "test_cnn", fixture_test("test_cnn_train_step"))
    folder = pytester.path / "kept"
    folder.mkdir()
    moe_kept, cnn_kept = MOE.removeprefix("example_suite/"), f"ci_work/project/{CNN}"
    shutil.copyfile(TRACE[MOE], folder / kept_name(moe_kept))
    shutil.copyfile(TRACE[CNN], folder / kept_name(cnn_kept))
    result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={folder}", "--gpuprof-json=r.json")
    result.assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "r.json").read_text())
    assert {t["nodeid"]: Path(t["trace"]).name for t in doc["tests"]} == {
        MOE: kept_name(moe_kept), CNN: kept_name(cnn_kept)}
