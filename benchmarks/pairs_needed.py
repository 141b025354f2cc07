"""How many base/head pairs ``compare.pairs.decide`` needs, by simulation: each process's
value is the true value times exp(N(0, sigma)), pairs added until the metric is decided or
the cap is reached, as ``run.sides.judge_pairs`` does.  Prints, per case, how often each
outcome ends the sequence and the mean pairs it took (docs/metrics.md, "Against the base
revision measured alongside").

    python benchmarks/pairs_needed.py [--runs 20000] [--cap 5]
"""

from __future__ import annotations

import argparse
import math
import random
from collections import Counter

from pytest_gpuprof.compare.pairs import decide
from pytest_gpuprof.compare.rules import Rules

CASES = (  # metric, its value at base, the change at head, the process spread (log sd), metrics judged
    ("kernels[gelu].time_us", 400.0, 0.00, 0.005, 2),
    ("kernels[gelu].time_us", 400.0, 0.00, 0.025, 2),
    ("kernels[gelu].time_us", 400.0, 0.10, 0.005, 2),
    ("kernels[gelu].time_us", 400.0, 0.10, 0.025, 2),
    ("kernels[gelu].time_us", 400.0, 0.05, 0.005, 2),
    ("window_us", 18000.0, 0.00, 0.04, 1),
    ("window_us", 18000.0, 0.10, 0.04, 1),
    ("window_us", 18000.0, 0.20, 0.04, 1),
    ("memcpy_htod_time_us", 7300.0, 0.00, 0.05, 1),
    ("memcpy_htod_time_us", 7300.0, 0.65, 0.05, 1),
)


def simulate(metric: str, value: float, change: float, sigma: float, judged: int, cap: int, rng: random.Random):
    bases, heads = [], []
    for _ in range(cap):
        bases.append(value * math.exp(rng.gauss(0, sigma)))
        heads.append(value * (1 + change) * math.exp(rng.gauss(0, sigma)))
        d = decide(metric, bases, heads, Rules(), looks=cap, judged=judged)
        if d.outcome != "not sure":
            break
    return d.outcome, len(bases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--cap", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(1)
    print("| metric | change | process spread | judged | worse | same | not sure | mean pairs |")
    print("|---|---|---|---|---|---|---|---|")
    for metric, value, change, sigma, judged in CASES:
        outcomes, pairs = Counter(), 0
        for _ in range(args.runs):
            outcome, n = simulate(metric, value, change, sigma, judged, args.cap, rng)
            outcomes[outcome] += 1
            pairs += n
        share = {k: f"{outcomes[k] / args.runs:.2%}" for k in ("worse", "same", "not sure")}
        print(f"| {metric} | {change:+.0%} | {sigma} | {judged} | {share['worse']} | {share['same']} | "
              f"{share['not sure']} | {pairs / args.runs:.2f} |")


if __name__ == "__main__":
    main()
