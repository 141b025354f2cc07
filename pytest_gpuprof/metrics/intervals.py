"""Interval algebra on integer-nanosecond [start, end) arrays: unions, overlaps, gaps, clipping.

Every utilization, overlap and host-gap metric is built from these few vectorized functions
(tests/test_intervals.py checks each against a brute-force oracle)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.model import INT64_MAX, INT64_MIN


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted segments covering the same points as the intervals (touching ones merge)."""
    if len(starts) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    covered_to = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > covered_to[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of the intervals, in their unit."""
    s, e = merge_intervals(starts, ends)
    return int((e - s).sum())


def covered_length(segments: tuple[np.ndarray, np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each query interval [a, b), the length covered by the merged segments."""
    seg_s, seg_e = segments
    if len(seg_s) == 0:
        return np.zeros(len(a), np.int64)
    before = np.concatenate(([0], np.cumsum(seg_e - seg_s)))

    def covered_up_to(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(seg_s, t, side="right") - 1
        j = np.maximum(i, 0)
        inside = before[j] + np.minimum(t, seg_e[j]) - seg_s[j]
        return np.where(i >= 0, inside, 0)

    return covered_up_to(b) - covered_up_to(a)


def longest_gap(segments: tuple[np.ndarray, np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each query interval [a, b], the longest stretch of it that the merged segments
    leave uncovered (0 for an empty query).  The gaps between the segments are sorted: a
    query meets a run of them, of which only the first and the last can be cut short."""
    seg_s, seg_e = segments
    gap_s = np.concatenate(([INT64_MIN], seg_e))  # gap k is [seg_e[k-1], seg_s[k]), unbounded at both ends
    gap_e = np.concatenate((seg_s, [INT64_MAX]))
    first = np.searchsorted(seg_s, a, side="right")  # the gaps that meet [a, b]: first .. last
    last = np.searchsorted(seg_e, b, side="left")
    whole = np.zeros(len(gap_s) + 1, dtype=np.int64)  # each bounded gap's length; 0 for the others, and a pad
    whole[1:-2] = seg_s[1:] - seg_e[:-1]
    # reduceat over the pairs (first + 1, last): every other result is the longest gap between them
    between = np.maximum.reduceat(whole, np.stack((first + 1, last), axis=1).ravel())[::2]
    ends = np.maximum(np.minimum(gap_e[first], b) - np.maximum(gap_s[first], a),
                      np.minimum(gap_e[last], b) - np.maximum(gap_s[last], a))
    return np.maximum(ends, np.where(first + 1 < last, between, 0))


def clip(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The parts of the intervals inside [lo, hi); intervals wholly outside are dropped."""
    s, e = np.maximum(starts, lo), np.minimum(ends, hi)
    keep = e > s
    return s[keep], e[keep]


def union_length_per_group(starts: np.ndarray, ends: np.ndarray, groups: np.ndarray, n: int) -> np.ndarray:
    """For each group 0 .. n-1, the length of the union of its own intervals."""
    out = np.zeros(n, dtype=np.int64)
    if len(starts):
        order = np.lexsort((starts, groups))
        s, e, g = starts[order], ends[order], groups[order]
        covered_to = pd.Series(e).groupby(g).cummax().to_numpy()
        prev = np.concatenate(([0], covered_to[:-1]))
        first = np.ones(len(g), dtype=bool)
        first[1:] = g[1:] != g[:-1]
        prev = np.where(first, s, prev)
        np.add.at(out, g, np.maximum(0, e - np.maximum(s, prev)))
    return out
