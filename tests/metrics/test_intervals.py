"""The interval algebra under every metric, against brute-force oracles.

Intervals have small integer end points, so an oracle can list the unit cells
``[t, t + 1)`` each interval covers and count them: a union is a set of cells, its
length the set's size.  Hypothesis draws nested, touching, repeated and empty
intervals; the explicit cases are the ones a wrong running maximum gets wrong.
"""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.naive import longest_pauses
from pytest_gpuprof.metrics.intervals import (
    clip,
    covered_length,
    merge_intervals,
    union_length,
)
from pytest_gpuprof.metrics.measure import _host_gaps, _step_busy_us, _step_slices
from pytest_gpuprof.metrics.steps import step_of
from pytest_gpuprof.trace.model import (
    COPY_COLUMNS,
    KERNEL_COLUMNS,
    RANGE_COLUMNS,
    RUNTIME_COLUMNS,
    SET_COLUMNS,
    Trace,
    make_table,
)

POINT = st.integers(min_value=0, max_value=60)


@st.composite
def intervals(draw, max_size=12):
    """[start, end) pairs with start <= end, in no particular order."""
    pairs = draw(st.lists(st.tuples(POINT, POINT), max_size=max_size))
    starts = np.array([min(p) for p in pairs], dtype=np.int64)
    ends = np.array([max(p) for p in pairs], dtype=np.int64)
    return starts, ends


def cells(starts, ends) -> set[int]:
    """The unit cells the intervals cover: the oracle of every union."""
    return {t for s, e in zip(starts.tolist(), ends.tolist()) for t in range(s, e)}


@given(intervals())
def test_union_length_counts_every_covered_cell_once(iv):
    assert union_length(*iv) == len(cells(*iv))


@given(intervals())
def test_merged_segments_are_sorted_disjoint_and_cover_the_same_cells(iv):
    seg_s, seg_e = merge_intervals(*iv)
    assert cells(seg_s, seg_e) == cells(*iv)
    assert (seg_s <= seg_e).all()
    # sorted, and a gap between consecutive segments: touching intervals were merged
    assert (seg_e[:-1] < seg_s[1:]).all()


@given(intervals(), st.lists(st.tuples(POINT, POINT), max_size=8))
def test_covered_length_of_each_query_is_its_overlap_with_the_union(iv, queries):
    a = np.array([min(q) for q in queries], dtype=np.int64)
    b = np.array([max(q) for q in queries], dtype=np.int64)
    union = cells(*iv)
    got = covered_length(merge_intervals(*iv), a, b)
    assert got.tolist() == [len(union & set(range(lo, hi))) for lo, hi in zip(a.tolist(), b.tolist())]


@given(intervals(), POINT, POINT)
def test_clipping_keeps_what_lies_inside_the_window(iv, lo, hi):
    lo, hi = min(lo, hi), max(lo, hi)
    s, e = clip(*iv, lo, hi)
    assert (e > s).all() and (s >= lo).all() and (e <= hi).all()
    assert cells(s, e) == cells(*iv) & set(range(lo, hi))
    # one clipped piece per interval that reaches into the window, none for the others
    assert len(s) == sum(1 for a, b in zip(*iv) if min(b, hi) > max(a, lo))


def test_nested_intervals_count_once():
    """Starts [0, 1, 5], ends [10, 2, 8]: [1, 2) and [5, 8) lie inside [0, 10).  Comparing
    each start with the previous interval's end instead of the running maximum would
    open a new segment at 5 (5 > 2) and count 13."""
    starts, ends = np.array([0, 1, 5]), np.array([10, 2, 8])
    assert union_length(starts, ends) == 10
    seg = merge_intervals(starts, ends)
    assert seg[0].tolist() == [0] and seg[1].tolist() == [10]
    assert covered_length(seg, np.array([3, 9, 10]), np.array([7, 12, 11])).tolist() == [4, 1, 0]


def test_touching_intervals_merge_and_a_gap_of_one_does_not():
    assert [x.tolist() for x in merge_intervals(np.array([0, 2]), np.array([2, 4]))] == [[0], [4]]
    assert [x.tolist() for x in merge_intervals(np.array([0, 3]), np.array([2, 4]))] == [[0, 3], [2, 4]]


# --- steps: attribution, per-step busy time, how far each step moves the window -----

@st.composite
def steps_and_times(draw):
    """Sorted steps [start, end] with gaps of 0 or more between them, and times to attribute."""
    lengths = draw(st.lists(st.integers(0, 6), min_size=1, max_size=6))
    gaps = draw(st.lists(st.integers(0, 3), min_size=len(lengths), max_size=len(lengths)))
    starts, ends, t = [], [], draw(st.integers(0, 3))
    for length, gap in zip(lengths, gaps):
        starts.append(t)
        ends.append(t + length)
        t += length + gap
    times = draw(st.lists(st.integers(-1, t + 2), max_size=15))
    return np.array(starts), np.array(ends), np.array(times, dtype=np.int64)


@given(steps_and_times())
def test_a_time_belongs_to_the_step_whose_closed_interval_holds_it(data):
    """Step i holds t when start_i <= t <= end_i (both ends included); where one step ends
    at the instant the next begins, the later step takes that instant; -1 (no launch
    in the trace) belongs to no step."""
    starts, ends, times = data
    got = step_of(times, starts, ends)
    for t, i in zip(times.tolist(), got.tolist()):
        holding = [k for k, (s, e) in enumerate(zip(starts, ends)) if s <= t <= e and t >= 0]
        assert i == (holding[-1] if holding else -1)


def test_the_end_of_a_step_is_inside_it():
    starts, ends = np.array([0, 10]), np.array([5, 15])
    assert step_of(np.array([0, 5, 6, 9, 10, 15, 16]), starts, ends).tolist() == [0, 0, -1, -1, 1, 1, -1]


@st.composite
def steps_with_work(draw):
    """Steps with GPU work that may run long after its step ended (into later steps)."""
    n = draw(st.integers(1, 5))
    starts = np.arange(n, dtype=np.int64) * 10
    ends = starts + draw(st.integers(1, 9))
    work = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 40), st.integers(0, 30)), max_size=12))
    step = np.array([w[0] for w in work], dtype=np.int64)
    start = np.array([starts[w[0]] + w[1] for w in work], dtype=np.int64)
    end = start + np.array([w[2] for w in work], dtype=np.int64)
    return starts, ends, pd.DataFrame({"start": start, "end": end}), step


@given(steps_with_work())
def test_each_step_moves_the_window_end_by_its_own_reach_and_the_moves_add_up(data):
    """e_i = max(step i's CPU end, its own work's last end), kept non-decreasing; step i's
    value is e_i - e_(i-1) with e_(-1) = the first step's start."""
    starts, ends, work, step = data
    got = [(hi - lo) / 1000 for lo, hi in zip(*_step_slices(starts, ends, [(work, step)]))]
    reach, previous, expected = int(starts[0]), int(starts[0]), []
    for i in range(len(starts)):
        own = [int(e) for e, s in zip(work["end"], step) if s == i]
        reach = max([reach, int(ends[i])] + own)
        expected.append((reach - previous) / 1000)
        previous = reach
    assert got == expected
    assert all(v >= 0 for v in got)


def test_a_step_whose_work_ends_before_the_previous_one_s_moves_nothing():
    """Step 0's work runs to 50, past step 1's end (25): step 1 moves the end by 0, not -25."""
    starts, ends = np.array([0, 20]), np.array([10, 25])
    work = pd.DataFrame({"start": [5, 21], "end": [50, 24]})
    lo, hi = _step_slices(starts, ends, [(work, np.array([0, 1]))])
    assert ((hi - lo) / 1000).tolist() == [0.05, 0.0]


@given(steps_with_work())
def test_a_step_s_gpu_time_is_the_union_of_its_own_work(data):
    starts, _, work, step = data
    got = _step_busy_us([(work, step)], len(starts))
    for i in range(len(starts)):
        mine = work[step == i]
        assert got[i] == len(cells(mine["start"].to_numpy(), mine["end"].to_numpy())) / 1000


def test_a_step_s_gpu_time_counts_nested_work_once():
    work = pd.DataFrame({"start": [0, 1, 5, 100], "end": [10, 2, 8, 101]})
    assert _step_busy_us([(work, np.array([0, 0, 0, 1]))], 2) == [0.01, 0.001]


# --- host gaps: the longest pause of the launching threads in each step ---------------

def host_gaps(calls, steps) -> list[int]:
    """``_host_gaps`` of steps [start, end] and calls (start, end, tid); thread 1 launches, 2 does not."""
    runtime = make_table(RUNTIME_COLUMNS, {"start": [c[0] for c in calls], "end": [c[1] for c in calls],
                                           "tid": [c[2] for c in calls], "name": ["cudaLaunchKernel"] * len(calls),
                                           "correlation": list(range(1, len(calls) + 1))})
    trace = Trace(*(make_table(c, {}) for c in (KERNEL_COLUMNS, COPY_COLUMNS, SET_COLUMNS)), runtime,
                  make_table(RANGE_COLUMNS, {}), source="kineto")
    starts, ends = (np.array([s[k] for s in steps], dtype=np.int64) for k in (0, 1))
    return _host_gaps(trace, starts, ends, np.array([1])).tolist()


@st.composite
def steps_and_calls(draw):
    """Steps sorted by start, of length 0 or more, that may overlap or nest (a step ending
    before the previous one did); calls of length 0 or more on threads 1 and 2."""
    starts = sorted(draw(st.lists(st.integers(0, 40), min_size=1, max_size=6)))
    steps = [(s, s + draw(st.integers(0, 12))) for s in starts]
    calls = draw(st.lists(st.tuples(st.integers(0, 55), st.integers(0, 6), st.sampled_from([1, 2])), max_size=14))
    return [(s, s + length, tid) for s, length, tid in calls], steps


@given(steps_and_calls())
def test_host_gaps_match_a_sweep_over_the_launching_threads_calls(data):
    calls, steps = data
    assert host_gaps(calls, steps) == longest_pauses([(s, e) for s, e, tid in calls if tid == 1], steps)


@pytest.mark.parametrize("calls, steps, expected", [
    # no launches: each step's whole window, [0, 10] then [10, 30]
    ([], [(0, 10), (20, 30)], [10, 20]),
    # only the other thread's calls: the same
    ([(2, 8, 2), (12, 28, 2)], [(0, 10), (20, 30)], [10, 20]),
    # a single launch [4, 6]: 0..4 and 6..10 in step 0, nothing in [10, 30]
    ([(4, 6, 1)], [(0, 10), (20, 30)], [4, 20]),
    # a launch exactly on the boundary 10 (step 0's end): it cuts step 1's window [10, 30] to 12..30,
    # not step 0's; one ending at 20 (step 1's start) splits [10, 30] into 10..20 and 20..30
    ([(10, 12, 1)], [(0, 10), (20, 30)], [10, 18]),
    ([(15, 20, 1)], [(0, 10), (20, 30)], [10, 10]),
    # a launch of no length at 25 still ends the pause: 10..25 and 25..30
    ([(25, 25, 1)], [(0, 10), (20, 30)], [10, 15]),
    # empty steps: one of no length (5, 5) after [0, 5] has an empty window; one ending (at 7)
    # before the previous one (at 9) too; a call covering a whole window leaves no pause
    ([(1, 2, 1)], [(0, 5), (5, 5), (6, 9), (7, 7)], [3, 0, 4, 0]),
    ([(0, 10, 1)], [(0, 10)], [0]),
])
def test_host_gaps_on_edge_cases(calls, steps, expected):
    assert host_gaps(calls, steps) == expected
    assert longest_pauses([(s, e) for s, e, tid in calls if tid == 1], steps) == expected


@settings(max_examples=50)
@given(intervals(max_size=30))
def test_union_length_does_not_depend_on_the_order_of_the_intervals(iv):
    order = np.arange(len(iv[0]))[::-1]
    assert union_length(iv[0][order], iv[1][order]) == union_length(*iv)
