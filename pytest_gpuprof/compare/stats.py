"""Small statistics for noise-aware time comparison (no SciPy dependency).

``summarize`` keeps the shape of a run's per-step values in a few numbers, so a
baseline keeps the distribution and not one mean; ``evenly_spaced`` bounds how
many of the values themselves are stored.

The Mann-Whitney U test asks whether one sample's values tend to be larger
than the other's without assuming a distribution: right for per-step GPU times,
which are skewed (clock dips, L2 warmth) and few.  The p-value is exact (the
distribution of U counted over all orderings) when there are no ties and both
samples are small; otherwise it is the normal approximation with tie and
continuity corrections.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

EXACT_UP_TO = 30  # each sample size up to which the exact distribution is used
MAX_STORED_SAMPLES = 200  # per-step values kept of each series in baselines and results


class Prior(NamedTuple):
    """A log spread learnt from other processes, with its degrees of freedom: pooled with a
    series' own spread (``time_rules.run_spread``), not a floor under it, since three runs'
    own spread (2 degrees of freedom) is known far less well than the prior."""

    spread: float
    freedom: int


def summarize(samples: list[float], decimals: int = 3) -> dict[str, float | int]:
    """``n``, ``median``, quartiles ``q1`` and ``q3``, ``min`` and ``max`` of a non-empty
    list of per-step values, rounded to ``decimals`` (3 for microseconds: 1 ns; ratios
    keep their 6).  Quartiles are numpy's default percentiles: linear interpolation
    between the two closest ranks (the value at position p * (n - 1) of the sorted values)."""
    x = np.asarray(samples, dtype=float)
    low, q1, median, q3, high = (round(float(v), decimals) for v in np.percentile(x, [0, 25, 50, 75, 100]))
    return {"n": len(x), "median": median, "q1": q1, "q3": q3, "min": low, "max": high}


def pooled_squares(series) -> tuple[float, int]:
    """Several series' spread pooled: the sum of each series' squared deviations from its own
    mean, and the degrees of freedom, the sum of n - 1 over the series of two or more values.
    A test's kernel series share one spread (between processes, between pairs): pooled,
    10 to 25 short series give ten times one series' degrees of freedom."""
    squares, freedom = 0.0, 0
    for values in series:
        if len(values) < 2:
            continue
        mean = sum(values) / len(values)
        squares += sum((x - mean) ** 2 for x in values)
        freedom += len(values) - 1
    return squares, freedom


def evenly_spaced(samples: list, cap: int = MAX_STORED_SAMPLES) -> list:
    """At most ``cap`` of the values, in their order, spread over the whole run (indices
    ``round(linspace(0, n - 1, cap))``: first and last kept) so that a long run is
    stored in bounded space and a drift over the run still shows."""
    if len(samples) <= cap:
        return list(samples)
    return [samples[i] for i in np.round(np.linspace(0, len(samples) - 1, cap)).astype(int).tolist()]


def mann_whitney_u(a: list[float], b: list[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test: (U of ``a``, p-value)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("both samples need at least one value")
    both = np.concatenate([x, y])
    ranks = _ranks(both)
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    _, tie_counts = np.unique(both, return_counts=True)
    ties = bool((tie_counts > 1).any())
    if not ties and n1 <= EXACT_UP_TO and n2 <= EXACT_UP_TO:
        counts = _u_distribution(n1, n2)
        total = counts.sum()
        low = min(u1, n1 * n2 - u1)
        p = 2 * counts[: int(low) + 1].sum() / total
        return u1, min(1.0, float(p))
    mean = n1 * n2 / 2
    n = n1 + n2
    tie_term = float(((tie_counts ** 3) - tie_counts).sum()) / (n * (n - 1))
    sd = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term))
    if sd == 0:
        return u1, 1.0
    z = (abs(u1 - mean) - 0.5) / sd
    return u1, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def smallest_p(n1: int, n2: int) -> float:
    """The smallest two-sided p-value the Mann-Whitney U test can give for samples of
    these sizes: every value of one sample below every value of the other, no ties
    (2 orderings out of C(n1 + n2, n1))."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))


def steps_for(level: float) -> int:
    """The fewest steps per run (both runs alike) at which the test can reach p < level."""
    n = 1
    while smallest_p(n, n) >= level:
        n += 1
    return n


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties sharing their average rank."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=float)
    ranks[order] = np.arange(1, len(values) + 1)
    sorted_vals = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        if j > i:
            ranks[order[i:j + 1]] = (i + j + 2) / 2
        i = j + 1
    return ranks


@lru_cache(maxsize=256)
def _u_distribution(n1: int, n2: int) -> np.ndarray:
    """Number of orderings of n1 + n2 distinct values giving each U = 0 .. n1*n2."""
    # f[i][j] is the distribution for sizes (i, j): f(i, j) = f(i-1, j) shifted by j + f(i, j-1)
    f: list[list[np.ndarray]] = []
    for i in range(n1 + 1):
        f.append([])
        for j in range(n2 + 1):
            if i == 0 or j == 0:
                f[i].append(np.ones(1, dtype=float))
                continue
            dist = np.zeros(i * j + 1, dtype=float)
            prev = f[i - 1][j]
            dist[j:j + len(prev)] += prev
            other = f[i][j - 1]
            dist[: len(other)] += other
            f[i].append(dist)
    return f[n1][n2]


@lru_cache(maxsize=1024)
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t distribution with ``df`` degrees of freedom (p > 0.5),
    by bisection on its distribution function."""
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom: 1 - I_x(df/2, 1/2) / 2 with
    x = df / (df + t^2), for t >= 0 (the regularized incomplete beta function I)."""
    tail = _incomplete_beta(df / (df + t * t), df / 2, 0.5) / 2
    return 1 - tail if t >= 0 else tail


def _incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction
    (Lentz's method), evaluated on the side where it converges fast."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1 - _incomplete_beta(1 - x, b, a)
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return front * f / a
