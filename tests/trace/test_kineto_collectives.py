"""The collective calls of a distributed run's Kineto trace (``record_param_comms``): their
bytes are ``In msg nelems`` times the size of ``dtype`` (docs/metrics.md, ``collectives``),
unknown (-1 in the trace's table) where the trace does not say, whatever it holds instead."""

import gzip
import json
from pathlib import Path

import pytest

from helpers.kineto import fast_only, generic

RANK0 = Path(__file__).parents[1] / "data" / "ranks" / "ddp_rank0.pt.trace.json.gz"
BFLOAT16_BYTES = 2


@pytest.mark.parametrize("load", [fast_only, generic], ids=["fast", "generic"])
def test_a_dtype_that_is_not_a_name_leaves_the_bytes_unknown(tmp_path, monkeypatch, load):
    """A dtype that is a list or an object (not hashable) was a TypeError out of the loader."""
    text = gzip.decompress(RANK0.read_bytes()).decode()
    assert text.count('"dtype": "BFloat16"') == text.count('"record_param_comms"') == 24
    text = text.replace('"dtype": "BFloat16"', '"dtype": ["BFloat16"]', 1)
    text = text.replace('"dtype": "BFloat16"', '"dtype": {"name": "BFloat16"}', 1)
    altered = tmp_path / "rank0.pt.trace.json"
    altered.write_text(text)

    calls = sorted((e for e in json.loads(text)["traceEvents"] if e.get("name") == "record_param_comms"),
                   key=lambda e: e["ts"])
    expected = [e["args"]["In msg nelems"] * BFLOAT16_BYTES if e["args"]["dtype"] == "BFloat16" else -1
                for e in calls]
    assert expected.count(-1) == 2

    assert load(altered, monkeypatch).collectives.sort_values("start")["bytes"].tolist() == expected
