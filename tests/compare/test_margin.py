"""The margin from the noise measured: a kernel made a few percent slower in a real trace
fails where the baseline's recorded runs agree with each other, and passes, the margin named,
where they do not; each verdict says its margin and where it came from, and the test what
it could detect.  Driven through the judge with the CNN's recorded trace, one kernel's
launches made longer (everything else as measured)."""

import copy
import math
from pathlib import Path

import pytest

from pytest_gpuprof.compare.judge import Judge
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.compare.status import State, Status
from pytest_gpuprof.trace.kineto import load_kineto

ROOT = Path(__file__).resolve().parents[1]
while not (ROOT / "example_suite").is_dir():  # (wherever this file lies under tests/)
    ROOT = ROOT.parent
NODE = "example_suite/test_cnn.py::test_cnn_train_step"
TRACE = ROOT / "example_suite" / "traces" / "example_suite_test_cnn.py_test_cnn_train_step.pt.trace.json.gz"


#: A 2% minimum effect on kernel times (``--gpuprof-kernel-time-tolerance=0.02``; the default is 5%).
RULES = Rules(kernel_time_tolerance=0.02)
#: The card the traces are said to run on (``environment.gpu_id``): the recorded runs' and the
#: judged run's alike, unless a test says otherwise.
CARD = "0123456789ab"


@pytest.fixture(scope="module")
def trace():
    return on_card(load_kineto(TRACE), CARD)


def on_card(trace, card: str):
    """The trace as measured on the card ``card``."""
    out = copy.copy(trace)
    out.metadata = {**trace.metadata, "environment": {**trace.metadata["environment"], "gpu_id": card}}
    return out


def heaviest(trace) -> str:
    """The kernel name with the most time in the trace, from its table."""
    k = trace.kernels
    return str((k.end - k.start).groupby(k.name).sum().idxmax())


def slowed(trace, factor: float, name: str | None = None):
    """The trace with every launch of kernel ``name`` (the heaviest) ``factor`` times as long."""
    out = copy.copy(trace)
    k = trace.kernels.copy()
    hit = k.name == (name or heaviest(trace))
    k.loc[hit, "end"] = k.start[hit] + ((k.end[hit] - k.start[hit]) * factor).round().astype("int64")
    out.kernels = k
    return out


def record(tmp_path: Path, traces) -> Path:
    """A baseline of these traces, one recorded run each, as --gpuprof-update-baseline keeps them."""
    from pytest_gpuprof.compare.baseline import BaselineFile, baseline_file

    for t in traces:  # each in a process of its own, whose judge reads the file as the last one left it
        judge = Judge(tmp_path, "torch", RULES, update=True, baseline_runs=len(traces))
        judged = judge.judge(NODE, {}, lambda t=t: {0: (t, TRACE)})
        BaselineFile(baseline_file(tmp_path, NODE)).update({NODE: {judged.result.gpu: judged.entry}})
    return tmp_path


def kernel_verdict(result, name: str):
    return next(v for v in result.verdicts if v.metric == f"kernels[{name}].time_us")


def test_a_kernel_3pct_slower_fails_where_the_recorded_runs_agree(trace, tmp_path):
    name = heaviest(trace)
    baselines = record(tmp_path, [trace, trace, trace])
    result = Judge(baselines, "torch", RULES).judge(NODE, {}, lambda: {0: (slowed(trace, 1.03), TRACE)}).result
    v = kernel_verdict(result, name)
    assert v.status == State.REGRESSED and result.status == Status.FAILED
    assert v.margin == pytest.approx(0.02) and v.margin_source == "the minimum effect (its tolerance)"
    assert v.change() == "+3.0%"


def test_a_change_under_the_minimum_effect_never_fails(trace, tmp_path):
    baselines = record(tmp_path, [trace, trace, trace])
    result = Judge(baselines, "torch", RULES).judge(NODE, {}, lambda: {0: (slowed(trace, 1.015), TRACE)}).result
    assert kernel_verdict(result, heaviest(trace)).status == State.OK and result.status == Status.PASSED


def test_the_same_change_passes_where_the_recorded_runs_move_more_and_says_the_margin(trace, tmp_path):
    """Recorded runs 4% apart: one more run's median may move that much, and 3% is within."""
    name = heaviest(trace)
    baselines = record(tmp_path, [slowed(trace, 0.98), trace, slowed(trace, 1.02)])
    result = Judge(baselines, "torch", RULES).judge(NODE, {}, lambda: {0: (slowed(trace, 1.03), TRACE)}).result
    v = kernel_verdict(result, name)
    assert v.status == State.OK and v.let_through == "within the baseline's runs"
    assert v.margin > 0.03 and v.margin_source.startswith("the baseline's 3 recorded run(s): 99% prediction interval")
    # the margin is the interval's upper bound over the baseline's median: worked out from the runs' medians
    assert "prediction interval" in v.evidence and result.status == Status.PASSED


def test_every_verdict_on_samples_and_the_test_say_what_could_be_detected(trace, tmp_path):
    baselines = record(tmp_path, [trace, trace, trace])
    result = Judge(baselines, "torch", RULES).judge(NODE, {}, lambda: {0: (trace, TRACE)}).result
    timed = [v for v in result.verdicts if v.margin is not None]
    assert timed and all(v.detectable is None or v.detectable >= v.margin for v in timed)
    total = next(v for v in result.verdicts if v.metric == "kernel_time_us")
    assert result.detects == {"kernel_time_us": total.detectable}
    assert result.to_json()["detects"] == result.detects and total.to_json()["margin"] == total.margin


def test_kernels_that_all_moved_alike_are_the_card_not_the_code(trace, tmp_path):
    """Every kernel 4% slower (a slower card): unstable, said; one kernel 10% slower on top of
    that stays a regression."""
    baselines = record(tmp_path, [trace, trace, trace])
    card = trace
    for name in set(trace.kernels.name):
        card = slowed(card, 1.04, name)
    result = Judge(baselines, "torch", RULES).judge(NODE, {}, lambda: {0: (card, TRACE)}).result
    assert result.status == Status.UNSTABLE
    assert any("kernel series moved alike, +4.0% at the median" in why for why in result.slower_machine)
    worse = slowed(card, 1.10)
    result = Judge(baselines, "torch", RULES).judge(NODE, {}, lambda: {0: (worse, TRACE)}).result
    assert kernel_verdict(result, heaviest(trace)).status == State.REGRESSED and result.status == Status.FAILED


@pytest.mark.parametrize("card", ["fedcba987654", None])
def test_another_card_adds_the_spread_between_cards(trace, tmp_path, card):
    """A run on a card none of the recorded runs measured (or one that does not say which) is
    judged with the spread between cards: a 3% slower kernel is within it, the source says so."""
    name = heaviest(trace)
    baselines = record(tmp_path, [trace, trace, trace])
    run = slowed(trace, 1.03)
    run.metadata = {**run.metadata, "environment": {k: v for k, v in run.metadata["environment"].items()
                                                    if k != "gpu_id"} | ({"gpu_id": card} if card else {})}
    result = Judge(baselines, "torch", RULES).judge(NODE, {}, lambda: {0: (run, TRACE)}).result
    v = kernel_verdict(result, name)
    assert v.status == State.OK and v.let_through == "within the baseline's runs"
    assert v.margin_source.endswith("and 1.1% between cards: another card than the recorded runs'")
    assert v.margin > math.expm1(0.011 * 2.5)  # at least t x the between-card spread
