"""``gpuprof diff`` between runs of two backends names both profilers; a run that names no
backend (a results file written without one) was captured with torch.profiler."""

import gzip
import json
from pathlib import Path

from pytest_gpuprof.cli.main import main
from pytest_gpuprof.compare.evaluate import of_measurement
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.report.document import SCHEMA_VERSION
from pytest_gpuprof.trace.kineto import load_kineto

DATA = Path(__file__).parents[1] / "data"
NODEID = "test_sync.py::test_sync"


def test_a_results_file_without_a_backend_is_named_torch_profiler_against_nsys(tmp_path, capsys):
    """The note said 'A was captured with None'."""
    test = of_measurement(NODEID, measure(load_kineto(DATA / "sync.pt.trace.json.gz")), None).to_json()
    test.pop("backend", None)
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "tests": [test]}))
    report = tmp_path / "sync.sqlite"
    report.write_bytes(gzip.decompress((DATA / "nsys" / "sync.sqlite.gz").read_bytes()))

    assert main(["diff", str(results), str(report), "--test", NODEID]) == 0
    out = capsys.readouterr().out
    assert "note: A was captured with torch.profiler, B with Nsight Systems: only counts and bytes are compared" in out
