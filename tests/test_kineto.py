"""The Kineto loader: exact nanoseconds, both parsing paths identical, clear errors."""

import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from pytest_gpuprof import kineto
from pytest_gpuprof.errors import TraceError
from pytest_gpuprof.kineto import load_kineto

DATA = Path(__file__).parent / "data"
TRACES = sorted(DATA.glob("*.json.gz")) + sorted((DATA.parent.parent / "example_suite" / "traces").glob("*.json.gz"))


def tables(trace):
    return {n: getattr(trace, n) for n in ("kernels", "copies", "sets", "runtime", "ranges")}


def generic(path, monkeypatch):
    """Load through the generic JSON path by making the fast path give up."""
    def give_up(*_):
        raise kineto._Fallback
    with monkeypatch.context() as m:
        m.setattr(kineto, "_read_fast", give_up)
        return load_kineto(path)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name[:40])
def test_fast_and_generic_paths_agree(path, monkeypatch):
    fast, slow = load_kineto(path), generic(path, monkeypatch)
    for name, table in tables(fast).items():
        other = tables(slow)[name]
        pd.testing.assert_frame_equal(
            table.assign(name=table["name"].astype(str)) if "name" in table else table,
            other.assign(name=other["name"].astype(str)) if "name" in other else other,
            check_categorical=False, obj=name,
        )
    assert fast.gpu_name == slow.gpu_name and fast.metadata == slow.metadata


def test_a_reordered_file_falls_back_and_reads_the_same(tmp_path):
    """Keys in another order (as a tool that re-saves the JSON might write): same tables."""
    src = DATA / "overlap.pt.trace.json.gz"
    with gzip.open(src, "rt") as fh:
        doc = json.load(fh)
    doc["traceEvents"] = [dict(sorted(e.items())) for e in doc["traceEvents"]]
    out = tmp_path / "resaved.json"
    out.write_text(json.dumps(doc, separators=(",", ":")))
    a, b = load_kineto(src), load_kineto(out)
    assert len(b.kernels) == len(a.kernels) > 0
    assert (b.kernels["start"].to_numpy() == a.kernels["start"].to_numpy()).all()
    assert list(b.copies["bytes"]) == list(a.copies["bytes"])


def test_timestamps_are_exact_integer_nanoseconds(tmp_path):
    # 4379007041391.974 us cannot be held exactly by a float64 in ns; the text can.
    event = {"ph": "X", "cat": "user_annotation", "name": "step_0", "pid": 1, "tid": 1,
             "ts": "TS", "dur": "DUR", "args": {"External id": 1}}
    text = json.dumps({"traceEvents": [event]}, indent=2).replace('"TS"', "4379007041391.974").replace('"DUR"', "0.5")
    path = tmp_path / "t.json"
    path.write_text(text)
    ranges = load_kineto(path).ranges
    assert ranges["start"].tolist() == [4379007041391974]
    assert ranges["end"].tolist() == [4379007041392474]


def test_plain_and_gzipped_files_read_the_same(tmp_path):
    src = DATA / "sync.pt.trace.json.gz"
    plain = tmp_path / "sync.json"
    with gzip.open(src, "rb") as fh, open(plain, "wb") as out:
        shutil.copyfileobj(fh, out)
    a, b = load_kineto(src), load_kineto(plain)
    assert a.runtime.equals(b.runtime) and a.copies.equals(b.copies)


def test_json_escapes_in_names_are_decoded(tmp_path):
    event = {"ph": "X", "cat": "user_annotation", "name": 'say "hi" \\ \u00e9', "pid": 1, "tid": 1,
             "ts": 1.0, "dur": 2.0, "args": {}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [event]}, indent=2))
    assert load_kineto(path).ranges["name"].astype(str).tolist() == ['say "hi" \\ \u00e9']


@pytest.mark.parametrize("content, words", [
    ("not json at all", "not a Chrome-trace JSON"),
    ('{"traceEvents": {}}', "holds no kernel"),
    ('{"traceEvents": []}', "holds no kernel"),
    ("", "not a Chrome-trace JSON"),
])
def test_bad_files_name_the_file(tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TraceError, match=words) as err:
        load_kineto(path)
    assert str(path) in str(err.value)


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(TraceError, match="cannot read trace .*nope.json"):
        load_kineto(tmp_path / "nope.json")
