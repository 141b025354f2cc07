"""Baseline files: layout, stable diffs, atomic writes, unreadable files left alone."""

import json
import os
from pathlib import Path

import pytest

from pytest_gpuprof.compare import baseline
from pytest_gpuprof.compare.baseline import BaselineFile
from pytest_gpuprof.errors import BaselineError


def test_one_file_per_module(tmp_path):
    path = baseline.baseline_file(tmp_path, "tests/gpu/test_moe.py::test_fwd[bf16]")
    assert path == tmp_path / "tests/gpu/test_moe.json"


def entry(**metrics):
    """An entry in today's form (its ``runs`` kept), which an update writes back as it is."""
    return {"metrics": metrics, "runs": [{}]}


def test_update_keeps_other_entries_and_writes_sorted_indented_json(tmp_path):
    file = BaselineFile(tmp_path / "m.json")
    file.update({"m.py::b": {"H100": entry(z=1, a=2)}})
    file.update({"m.py::a": {"H200": entry(k=3)}})
    file.update({"m.py::b": {"H200": entry(k=4)}})
    text = file.path.read_text()
    doc = json.loads(text)
    assert doc["schema_version"] == baseline.SCHEMA_VERSION
    assert doc["tests"]["m.py::b"] == {"H100": entry(z=1, a=2), "H200": entry(k=4)}
    assert text == json.dumps(doc, indent=2, sort_keys=True) + "\n"
    assert file.load()["tests"]["m.py::a"] == {"H200": entry(k=3)}


@pytest.mark.parametrize("content, words", [
    ("{ not json", "not valid JSON"),
    ('{"schema_version": 1}', "no 'tests' object"),
    ('{"schema_version": 99, "tests": {}}', "schema_version 99"),
])
def test_unreadable_file_is_an_error_naming_it_and_is_never_overwritten(tmp_path, content, words):
    file = BaselineFile(tmp_path / "m.json")
    file.path.write_text(content)
    with pytest.raises(BaselineError, match=words) as err:
        file.load()
    assert str(file.path) in str(err.value)
    with pytest.raises(BaselineError):
        file.update({"m.py::a": {"H200": {}}})
    assert file.path.read_text() == content


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    file = BaselineFile(tmp_path / "m.json")
    file.update({"m.py::a": {"H200": entry(k=1)}})
    before = file.path.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        file.update({"m.py::a": {"H200": entry(k=2)}})
    assert file.path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


# --- one session's files: Baselines ------------------------------------------------

SHIPPED = Path(__file__).resolve().parents[2] / "baselines" / "example_suite" / "test_moe.json"


def real_entry(kernel_time_us):
    """The MoE test's entry as the repository ships it, its kernel time set."""
    found = json.loads(SHIPPED.read_text())["tests"]["example_suite/test_moe.py::test_moe_forward"]["NVIDIA H200"]
    return found | {"metrics": found["metrics"] | {"kernel_time_us": kernel_time_us}}


def module_file(tmp_path, tests=100):
    """A module's baseline file of ``tests`` entries, the last of them damaged (a negative kernel time)."""
    path = tmp_path / "m.json"
    BaselineFile(path).update({f"m.py::t[{i}]": {"H200": real_entry(-1.0 if i == tests - 1 else 5.0)}
                               for i in range(tests)})
    return path


def counting_reads(monkeypatch):
    """How many times a baseline file was read (``BaselineFile.load``), by path."""
    reads = {}
    load = BaselineFile.load

    def counted(self, migrate=True):
        reads[self.path] = reads.get(self.path, 0) + 1
        return load(self, migrate)
    monkeypatch.setattr(BaselineFile, "load", counted)
    return reads


def test_a_session_reads_a_module_file_once_and_checks_each_entry_it_judges(tmp_path, monkeypatch):
    path = module_file(tmp_path)
    reads = counting_reads(monkeypatch)
    files = baseline.Baselines()
    assert [files.entry(path, f"m.py::t[{i}]", "H200") for i in range(99)] == [real_entry(5.0)] * 99
    assert files.entry(path, "m.py::t[0]", "H100") is None and files.entry(path, "m.py::absent", "H200") is None
    for _ in range(2):  # the damaged entry: checked each time it is asked for, an error naming the file and the test
        with pytest.raises(BaselineError, match=rf"baseline file {path}: entry of m\.py::t\[99\] on H200: "
                                                r"metrics\.kernel_time_us must be a finite number"):
            files.entry(path, "m.py::t[99]", "H200")
    assert reads == {path: 1}


def test_a_file_that_cannot_be_read_is_the_same_error_for_each_of_its_tests_read_once(tmp_path, monkeypatch):
    path = tmp_path / "m.json"
    path.write_text("{ not json")
    reads = counting_reads(monkeypatch)
    files = baseline.Baselines()
    said = set()
    for i in range(3):
        with pytest.raises(BaselineError, match="not valid JSON") as err:
            files.entry(path, f"m.py::t[{i}]", "H200")
        said.add(str(err.value))
    assert len(said) == 1 and str(path) in said.pop()
    assert files.entry(tmp_path / "absent.json", "absent.py::t", "H200") is None
    assert files.entry(tmp_path / "absent.json", "absent.py::u", "H200") is None
    assert reads == {path: 1, tmp_path / "absent.json": 1}


def test_each_caller_gets_its_own_copy_of_an_entry(tmp_path):
    path = module_file(tmp_path, tests=2)
    files = baseline.Baselines()
    files.entry(path, "m.py::t[0]", "H200")["metrics"]["kernel_time_us"] = 1e9
    assert files.entry(path, "m.py::t[0]", "H200") == real_entry(5.0)


def test_what_this_session_writes_is_read_again_what_another_process_writes_is_not(tmp_path, monkeypatch):
    """Judging uses the file as it was read; an update of this process (``Baselines.update_all``)
    has the files it was given read again; another process's write (here ``update`` behind its
    back) is seen by the next session, and by this one's updates, which read every file under
    the lock."""
    path = module_file(tmp_path, tests=2)
    files = baseline.Baselines()
    assert files.entry(path, "m.py::t[0]", "H200") == real_entry(5.0)
    BaselineFile(path).update({"m.py::t[0]": {"H200": real_entry(6.0)}})  # another process
    assert files.entry(path, "m.py::t[0]", "H200") == real_entry(5.0)
    assert baseline.Baselines().entry(path, "m.py::t[0]", "H200") == real_entry(6.0)
    files.update_all(tmp_path, {path: {"m.py::t[1]": {"H200": real_entry(7.0)}}})
    assert [files.entry(path, f"m.py::t[{i}]", "H200") for i in range(2)] == [real_entry(6.0), real_entry(7.0)]
    reads = counting_reads(monkeypatch)
    path.write_text("{ not json")
    with pytest.raises(BaselineError):  # refused, nothing written: read again all the same
        files.update_all(tmp_path, {path: {"m.py::t[1]": {"H200": real_entry(8.0)}}})
    with pytest.raises(BaselineError, match="not valid JSON"):
        files.entry(path, "m.py::t[0]", "H200")
    assert reads == {path: 2}  # the update's, under the lock, and the next judgment's
