"""Interval algebra on integer-nanosecond [start, end) arrays: unions, overlaps, clipping.

Every utilization and overlap metric is built from these few vectorized functions
(tests/test_intervals.py checks each against a brute-force oracle)."""

from __future__ import annotations

import numpy as np
import pandas as pd


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
