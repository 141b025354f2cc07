"""Baseline files: layout, stable diffs, atomic writes, unreadable files left alone."""

import json
import os

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
