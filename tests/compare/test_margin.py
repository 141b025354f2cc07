"""The margin from the noise measured: a kernel made a few percent slower in a real trace
fails where the baseline's recorded runs agree with each other, and passes, the margin named,
where they do not; each verdict says its margin and where it came from, and the test what
it could detect.  Driven through the judge with the CNN's recorded trace, one kernel's
launches made longer (everything else as measured)."""

import math

import pytest

from helpers.cnn_judged import CARD, NODE, RULES, TRACE, heaviest, kernel_verdict, on_card, record, slowed
from pytest_gpuprof.compare.judge import Judge
from pytest_gpuprof.compare.status import State, Status
from pytest_gpuprof.trace.kineto import load_kineto


@pytest.fixture(scope="module")
def trace():
    return on_card(load_kineto(TRACE), CARD)


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
