"""A Kineto trace read through one of the loader's two paths alone (trace/kineto.py: the
fast path, which gives up on what it cannot read, and the generic JSON parser), and two
traces' tables compared."""

import pandas as pd

from pytest_gpuprof.trace import kineto
from pytest_gpuprof.trace.kineto import load_kineto


def tables(trace):
    return {n: getattr(trace, n) for n in ("kernels", "copies", "sets", "runtime", "ranges")}


def generic(path, monkeypatch):
    """Load through the generic JSON path by making the fast path give up."""
    def give_up(*_):
        raise kineto._Fallback
    with monkeypatch.context() as m:
        m.setattr(kineto, "_read_fast", give_up)
        return load_kineto(path)


def fast_only(path, monkeypatch, chunk=None):
    """Load through the fast path alone: the test fails if it gives up on the file."""
    def refuse(*_):
        raise AssertionError(f"the fast path gave up on {path}")
    with monkeypatch.context() as m:
        m.setattr(kineto, "read_generic", refuse)
        if chunk is not None:
            m.setattr(kineto, "CHUNK", chunk)
        return load_kineto(path)


def assert_same(a, b):
    for name, table in tables(a).items():
        other = tables(b)[name]
        pd.testing.assert_frame_equal(
            table.assign(name=table["name"].astype(str)) if "name" in table else table,
            other.assign(name=other["name"].astype(str)) if "name" in other else other,
            check_categorical=False, obj=name,
        )
    assert a.gpu_name == b.gpu_name and a.metadata == b.metadata and a.threads == b.threads
