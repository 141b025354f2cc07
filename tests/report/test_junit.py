"""JUnit properties as CI dashboards read them: one name style (``gpuprof.``),
the baseline beside the current value, each rank's metrics, one property per broken metric."""

from collections import Counter
from pathlib import Path

from pytest_gpuprof.compare.evaluate import TestResult
from pytest_gpuprof.compare.verdict import Verdict
from pytest_gpuprof.report.junit import junit_properties


def _rank(kernels: int, baseline_kernels: int) -> TestResult:
    """A rank of 2 steps whose kernels per step went from ``baseline_kernels`` to ``kernels``."""
    verdicts = [Verdict("kernel_count", "changed" if kernels != baseline_kernels else "ok", baseline_kernels,
                        kernels, "must match exactly per step")]
    return TestResult("t.py::t", gpu="GPU", metrics={"kernel_count": 2 * kernels, "step_count": 2},
                      baseline={"kernel_count": 2 * baseline_kernels, "step_count": 2}, verdicts=verdicts,
                      baseline_file=Path("b.json"))


def test_one_style_baseline_beside_current_and_one_property_per_broken_metric():
    broken = [Verdict("kernel_count", "changed", 10, 12, "must match exactly per step"),
              Verdict("sync_count", "regressed", 0, 8, "must match exactly per step (lower is better)")]
    result = TestResult("t.py::t", gpu="GPU", metrics={"kernel_count": 24, "sync_count": 16, "step_count": 2},
                        baseline={"kernel_count": 20, "sync_count": 0, "step_count": 2}, verdicts=broken,
                        baseline_file=Path("b.json"))
    props = junit_properties(result)
    names = [name for name, _ in props]
    assert all(name.startswith("gpuprof.") for name in names)
    assert [name for name, n in Counter(names).items() if n > 1] == []
    values = dict(props)
    assert values["gpuprof.status"] == "failed"
    assert (values["gpuprof.kernel_count"], values["gpuprof.kernel_count.baseline"]) == ("12", "10")  # 24/2, 20/2
    assert (values["gpuprof.sync_count"], values["gpuprof.sync_count.baseline"]) == ("8", "0")
    assert values["gpuprof.broken.kernel_count"].startswith("baseline 10, current 12 (+20.0%) [changed")
    assert values["gpuprof.broken.sync_count"].startswith("baseline 0, current 8 (+8) [regressed")


def test_a_distributed_tests_ranks_have_their_metrics():
    result = TestResult("t.py::t", gpu="GPU", ranks={"0": _rank(5, 5), "1": _rank(7, 5)},
                        verdicts=[Verdict("kernel_count", "changed", 5, 7, "must match exactly per step", rank=1)],
                        baseline_file=Path("b.json"))
    values = dict(junit_properties(result))
    assert (values["gpuprof.rank0.kernel_count"], values["gpuprof.rank0.kernel_count.baseline"]) == ("5", "5")
    assert (values["gpuprof.rank1.kernel_count"], values["gpuprof.rank1.kernel_count.baseline"]) == ("7", "5")
    assert "gpuprof.rank1.broken.kernel_count" not in values
    assert values["gpuprof.broken.rank1.kernel_count"].startswith("baseline 5, current 7 (+40.0%)")
