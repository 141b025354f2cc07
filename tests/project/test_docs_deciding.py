"""docs/deciding.md's worked example, recomputed.

The page walks one real time verdict through the gate: the MoE test's GeLU kernel, slowed by
10% on an H200 (``GPUPROF_EXAMPLE_SLOWDOWN=0.10``), against its baseline of three recorded
runs.  Its data is one results file of ``benchmarks/results/gate_h200_2026-11-23.tar.xz``.
This test recomputes every number the example's table states from that file with plain
Python (medians, the Mann-Whitney U test, Student's t quantile, the prediction interval:
none of the package's statistics), reads the table and the prose from the page, and fails
where a number differs.  It then judges the same data with the package's judge and checks
that it gives the same verdict, p-value, level and interval, and the rule and evidence the
page quotes.  The status table is checked against the code's set of statuses.

``python tests/project/test_docs_deciding.py`` prints the table the page should hold.
"""

from __future__ import annotations

import json
import math
import re
import tarfile
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "deciding.md"
ARCHIVE = ROOT / "benchmarks" / "results" / "gate_h200_2026-11-23.tar.xz"
MEMBER = "./machine_a/sweep/slowdown0.10-0.json"
NODEID = "example_suite/test_moe.py::test_moe_forward"
KERNEL = "GeluCUDAKernelImpl"  # the slowed kernel's name holds this

# the rules the example is judged by: the defaults (pytest_gpuprof/options.py), said in the page
ALPHA = 0.01  # chance of a false time alarm per test
KERNEL_TOLERANCE = 0.05  # --gpuprof-kernel-time-tolerance
FLOOR_US = 5.0  # --gpuprof-time-floor-us
RUNS_LEVEL = 0.01  # the prediction interval is 99%
SHORT_LAUNCH_US = 10.0  # a kernel of shorter launches gets a wider spread (not this one)
# GPUPROF_EXAMPLE_SLOWDOWN of the run, as its file is named: the GeLU kernel runs over 10% more elements
SLOWDOWN_PCT = f"{float(re.search(r'slowdown([0-9.]+)-', MEMBER)[1]) * 100:g}"
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])")


# --------------------------------------------------------------------------------------
# the data

@lru_cache(maxsize=1)
def document() -> dict:
    with tarfile.open(ARCHIVE) as tar:
        member = tar.extractfile(MEMBER)
        assert member is not None
        return json.load(member)


def moe_result() -> dict:
    return next(t for t in document()["tests"] if t["nodeid"] == NODEID)




def kernel_name(test: dict) -> str:
    return next(k for k in test["per_step"]["kernels"] if KERNEL in k)


# --------------------------------------------------------------------------------------
# statistics in plain Python, written from the textbook definitions

def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between the closest ranks: the value at position p (n - 1)."""
    s = sorted(values)
    pos = p * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def u_statistic(a: list[float], b: list[float]) -> float:
    """Pairs (x from a, y from b) with x > y, a tie counting one half."""
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)


def tie_sizes(values: list[float]) -> list[int]:
    counts: dict[float, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return [c for c in counts.values() if c > 1]


def u_null(n1: int, n2: int, ties: list[int]) -> tuple[float, float]:
    """U's mean and standard deviation when both samples come from one distribution, the
    variance corrected for ties: n1 n2 / 12 ((n + 1) - sum(t^3 - t) / (n (n - 1)))."""
    n = n1 + n2
    correction = sum(t ** 3 - t for t in ties) / (n * (n - 1))
    return n1 * n2 / 2, math.sqrt(n1 * n2 / 12 * ((n + 1) - correction))


def normal_tail(z: float) -> float:
    """P(Z > z) for a standard normal Z, by Simpson's rule on its density from 0 to z."""
    steps = 20000
    h = z / steps
    density = [math.exp(-(i * h) ** 2 / 2) / math.sqrt(2 * math.pi) for i in range(steps + 1)]
    area = h / 3 * (density[0] + density[-1] + 4 * sum(density[1:-1:2]) + 2 * sum(density[2:-1:2]))
    return 0.5 - area


def t_cdf(x: float, df: int) -> float:
    """P(T <= x), x >= 0, for Student's t: 1/2 plus its density integrated by Simpson's rule."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    steps = 4000
    h = x / steps
    f = [c * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(steps + 1)]
    return 0.5 + h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))


def t_quantile(p: float, df: int) -> float:
    lo, hi = 0.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def log_spread(series: list[list[float]]) -> tuple[float, int]:
    """The pooled standard deviation of the logs (sum of squared deviations from each
    series' own mean over the sum of n - 1), and its degrees of freedom."""
    squares, df = 0.0, 0
    for values in series:
        logs = [math.log(v) for v in values]
        mean = sum(logs) / len(logs)
        squares += sum((x - mean) ** 2 for x in logs)
        df += len(logs) - 1
    return math.sqrt(squares / df), df


# --------------------------------------------------------------------------------------
# the example's numbers

def sci(x: float, digits: int = 1) -> str:
    """``3.0e-6``: one digit before the point, ``digits`` after, a plain exponent."""
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def example() -> dict:
    """Every number of the worked example, recomputed from the results file: the table's
    rows (label -> the numbers of its value) and the prose's numbers, in the order it states
    them."""
    t = moe_result()
    name = kernel_name(t)
    now, base = t["per_step"]["kernels"][name], t["baseline_per_step"]["kernels"][name]
    assert not any(t["per_step"]["stalled"]) and not any(t["baseline_per_step"]["stalled"])  # every step usable
    runs = t["baseline_runs"]
    # the medians as a distribution summary keeps them: in microseconds, to 1 ns
    now_median, base_median = round(percentile(now, 0.5), 3), round(percentile(base, 0.5), 3)
    # the series the test judges on samples: those both runs summarized, kernels by name
    metrics = [k for k in t["distribution"] if k != "kernels" and k in t["baseline_distribution"]]
    kernels = [k for k in t["distribution"]["kernels"] if k in t["baseline_distribution"]["kernels"]]
    m = len(metrics) + len(kernels)
    level = ALPHA / m
    u = u_statistic(base, now)  # the baseline's steps against this run's
    ties = tie_sizes(base + now)
    mean_u, sd_u = u_null(len(base), len(now), ties)
    z = (abs(u - mean_u) - 0.5) / sd_u
    p = 2 * normal_tail(z)
    # the prediction interval: the kernel series' run medians, their logs' pooled spread
    medians = [r["distribution"]["kernels"][name]["median"] for r in runs]
    series = [[r["distribution"]["kernel_time_us"]["median"] for r in runs]]
    series += [[r["distribution"]["kernels"][k]["median"] for r in runs] for k in kernels]
    pooled, df = log_spread(series)
    own, own_df = log_spread([medians])
    launches = t["baseline_metrics"]["kernels"][name]["count"] / t["baseline_metrics"]["step_count"]
    per_launch = base_median / launches
    assert per_launch >= SHORT_LAUNCH_US  # no short-kernel spread
    q = t_quantile(1 - RUNS_LEVEL / 2, df)
    assert pooled > own
    half = q * pooled * math.sqrt(1 + 1 / len(runs))
    centre = math.exp(sum(math.log(x) for x in medians) / len(medians))
    interval = (centre * math.exp(-half), centre * math.exp(half))
    assert not interval[0] <= now_median <= interval[1]
    total_now = percentile(t["per_step"]["kernel_time_us"], 0.5)
    total_base = percentile(t["baseline_per_step"]["kernel_time_us"], 0.5)
    tied = [v for v in base if base.count(v) > 1]
    assert len(set(tied)) == 1 and not any(v in now for v in base)  # one tie, within the baseline
    n1, n2, r = len(now), len(base), len(runs)
    v = {  # each number as the page writes it
        "n1": str(n1), "n2": str(n2), "runs": str(r),
        "now": f"{now_median:.3f}", "now_q1": f"{percentile(now, 0.25):.3f}", "now_q3": f"{percentile(now, 0.75):.3f}",
        "base": f"{base_median:.3f}", "base_q1": f"{percentile(base, 0.25):.3f}",
        "base_q3": f"{percentile(base, 0.75):.3f}",
        "change_us": f"{now_median - base_median:.3f}", "change_pct": f"{(now_median / base_median - 1) * 100:.1f}",
        "tolerance_pct": f"{KERNEL_TOLERANCE * 100:g}", "tolerance_us": f"{KERNEL_TOLERANCE * base_median:.3f}",
        "floor": f"{FLOOR_US:g}", "m": str(m), "metrics": str(len(metrics)), "kernels": str(len(kernels)),
        "alpha": f"{ALPHA:g}", "level": f"{level:.3g}", "all": str(n1 + n2),
        "smallest": sci(2 / math.comb(n1 + n2, n1)), "pairs": str(n1 * n2), "u": f"{u:g}",
        "tie": f"{tied[0]:.3f}", "tied": str(len(tied)), "mean_u": f"{mean_u:g}", "sd_u": f"{sd_u:.2f}",
        "z": f"{z:.3f}", "p": sci(p), "medians": [f"{x:.3f}" for x in medians], "own": f"{own:.4f}",
        "own_df": str(own_df), "series": str(len(series)), "pooled": f"{pooled:.5f}", "df": str(df),
        "per_launch": f"{per_launch:.2f}", "launches": f"{launches:g}", "short": f"{SHORT_LAUNCH_US:g}",
        "quantile": f"{1 - RUNS_LEVEL / 2:g}", "t": f"{q:.3f}", "half": f"{half:.4f}", "centre": f"{centre:.3f}",
        "percent": f"{(1 - RUNS_LEVEL) * 100:g}", "low": f"{interval[0]:.3f}", "high": f"{interval[1]:.3f}",
        "total_base": f"{total_base:.3f}", "total_now": f"{total_now:.3f}",
        "total_pct": f"{(total_now / total_base - 1) * 100:.2f}",
    }
    rows = {
        "steps: this run, the baseline": [v["n1"], v["n2"]],
        "recorded runs in the baseline": [v["runs"]],
        "median (IQR), this run": [v["now"], v["now_q1"], v["now_q3"]],
        "median (IQR), the baseline": [v["base"], v["base_q1"], v["base_q3"]],
        "change of the median": [v["change_us"], v["change_pct"]],
        f"tolerance ({v['tolerance_pct']}% of the baseline's median), floor": [v["tolerance_us"], v["floor"]],
        "series the test judges on samples, m": [v["m"], v["metrics"], v["kernels"]],
        f"level, {v['alpha']} / m": [v["level"]],
        f"smallest p for {n1} and {n2} steps, 2 / C({n1 + n2}, {n1})": [v["smallest"]],
        "U: pairs whose baseline step is the slower": [v["u"], v["pairs"]],
        "a tie in the baseline's steps": [v["tie"], v["tied"]],
        "U if nothing changed: mean, standard deviation": [v["mean_u"], v["sd_u"]],
        "z, with the continuity correction": [v["z"]],
        "p, two-sided": [v["p"]],
        "the recorded runs' medians": v["medians"],
        f"their own log spread ({own_df} degrees of freedom)": [v["own"]],
        "the pooled log spread of the test's kernel series": [v["pooled"], v["series"], v["df"]],
        "time per launch": [v["per_launch"], v["launches"]],
        f"t({v['quantile']}, {df})": [v["t"]],
        f"half-width on the log scale, t · s · √(1 + 1/{r})": [v["half"]],
        "centre: the runs' geometric mean": [v["centre"]],
        f"{v['percent']}% prediction interval": [v["low"], v["high"]],
        "`kernel_time_us` median, the baseline → this run": [v["total_base"], v["total_now"], v["total_pct"]],
    }
    # the prose, in order: the slowdown, then steps 1 to 4, then the total
    prose = [SLOWDOWN_PCT,
             v["now"], v["base"], v["change_us"], v["change_pct"], v["tolerance_pct"], v["tolerance_us"], v["floor"],
             v["m"], v["metrics"], v["kernels"], v["alpha"], v["m"], v["level"], v["n1"], v["n2"], "2", v["all"],
             v["n1"], v["smallest"],
             v["n1"], v["n2"], v["pairs"], v["u"], v["mean_u"], v["sd_u"], v["tie"], v["tied"], v["mean_u"], v["u"],
             "0.5", v["sd_u"], v["z"], v["p"], v["level"], v["smallest"],
             *v["medians"], v["own"], v["own_df"], v["series"], v["kernels"], v["pooled"], v["df"], v["pooled"],
             v["per_launch"], v["launches"], v["short"], v["quantile"], v["df"], v["t"], v["t"], v["pooled"], "1", "1",
             v["runs"], v["half"], v["centre"], v["percent"], v["low"], v["high"], v["now"],
             v["total_base"], v["total_now"], v["total_pct"]]
    return {
        "name": name, "now": now, "base": base, "m": m, "level": level, "p": p, "u": u,
        "interval": interval, "now_median": now_median, "base_median": base_median,
        "series": len(series), "df": df, "rows": rows, "prose": prose,
    }


# --------------------------------------------------------------------------------------
# the page

def section(title: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def fenced(text: str) -> list[str]:
    return re.findall(r"```text\n(.*?)```", text, flags=re.S)


def table_rows(text: str, header: str) -> dict[str, str]:
    """The rows of the table whose header line starts ``header``: first cell -> second cell."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells[1]
    return rows


def numbers(text: str) -> list[str]:
    return NUMBER.findall(text)


def prose(text: str) -> str:
    """The section less its fenced blocks, its tables, its code spans and its list numbers."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = "\n".join(re.sub(r"^\d+\. ", "", line) for line in text.splitlines() if not line.startswith("|"))
    return re.sub(r"`[^`]*`", "", text)


# --------------------------------------------------------------------------------------
# the tests

WORKED = "A worked example"


def test_the_table_states_the_recomputed_numbers():
    expected = example()["rows"]
    rows = table_rows(section(WORKED), "| quantity | value |")
    assert list(rows) == list(expected), "the table's quantities are not the ones this test recomputes"
    for label, value in rows.items():
        assert numbers(value) == expected[label], f"{label}: the page says {value!r}, recomputed {expected[label]}"


def test_the_prose_states_the_recomputed_numbers():
    said = numbers(prose(section(WORKED)))
    assert said == example()["prose"], "the worked example's prose states other numbers, or in another order"


def test_the_samples_shown_are_the_data():
    ex = example()
    blocks = fenced(section(WORKED))
    shown = blocks[0].split("\n\n")
    assert numbers(shown[0].split(":", 1)[1]) == [f"{v:.3f}" for v in sorted(ex["now"])]
    assert numbers(shown[1].split(":", 1)[1]) == [f"{v:.3f}" for v in sorted(ex["base"])]


def test_the_package_judges_the_same():
    from pytest_gpuprof.compare import time_rules as package
    from pytest_gpuprof.compare.evaluate import TestResult, status_of
    from pytest_gpuprof.compare.rules import Rules
    from pytest_gpuprof.compare.stats import mann_whitney_u
    from pytest_gpuprof.compare.time_rules import pooled_log_spread, run_spread
    from pytest_gpuprof.compare.verdicts import judge

    ex = example()
    doc = document()
    result = TestResult.from_json(moe_result(), doc.get("backend"))
    entry = result.baseline_entry
    assert entry is not None
    rules = Rules()
    assert (rules.alpha, rules.kernel_time_tolerance, rules.time_floor_us) == (ALPHA, KERNEL_TOLERANCE, FLOOR_US)
    assert (package.RUNS_LEVEL, package.SHORT_KERNEL[0]) == (RUNS_LEVEL, SHORT_LAUNCH_US)
    verdicts = judge(result.metrics, result.baseline, rules, entry.get("backend", "torch") == result.backend,
                     (result.per_step, entry.get("per_step")), (result.distribution, entry.get("distribution")),
                     entry.get("runs"))
    metric = f"kernels[{ex['name']}].time_us"
    v = next(v for v in verdicts if v.metric == metric)
    assert v.status == "regressed"
    assert v.p_value == pytest.approx(ex["p"], rel=1e-6)
    assert v.p_level == pytest.approx(ex["level"], rel=1e-12)
    assert (v.baseline, v.current) == (pytest.approx(ex["base_median"]), pytest.approx(ex["now_median"]))
    judged_on_samples = [x for x in verdicts if x.p_level is not None]
    assert len(judged_on_samples) == ex["m"]
    # the interval: the package's from the same runs
    medians = tuple(r["distribution"]["kernels"][ex["name"]]["median"] for r in entry["runs"])
    series = [tuple(r["distribution"]["kernel_time_us"]["median"] for r in entry["runs"])]
    series += [tuple(r["distribution"]["kernels"][k]["median"] for r in entry["runs"])
               for k in result.distribution["kernels"] if k in entry["distribution"]["kernels"]]
    assert len(series) == ex["series"]
    pooled = pooled_log_spread(series)
    assert pooled is not None and pooled[1] == ex["df"]
    interval = run_spread(medians, pooled)
    assert interval == pytest.approx(ex["interval"], rel=1e-9)
    # without the tie the package's p is the exact one, the smallest possible (the page says so)
    untied = [b + 1e-6 * k for k, b in enumerate(sorted(ex["base"]))]  # the tie split, the order kept
    assert len(set(untied)) == len(untied) and max(untied) < min(ex["now"])
    exact = 2 / math.comb(len(untied) + len(ex["now"]), len(ex["now"]))
    assert mann_whitney_u(untied, ex["now"])[1] == pytest.approx(exact)
    # the only broken verdict, and so the test's status
    assert [x.metric for x in verdicts if x.failed] == [metric]
    assert next(x for x in verdicts if x.metric == "kernel_time_us").status == "ok"
    assert status_of(verdicts) == "failed" == moe_result()["status"]
    assert moe_result()["unstable"] == []  # that run's health and probes explained nothing (the page says so)
    # the rule and the evidence as the page quotes them
    quoted = fenced(section(WORKED))[1]
    assert f"rule:     {v.rule}\nevidence: {v.evidence}\n" == quoted


def test_the_status_table_lists_every_status_of_the_code():
    from pytest_gpuprof.compare.status import STATUSES

    rows = table_rows(section("Every status a test can get"), "| status |")
    assert [s.strip("`") for s in rows] == list(STATUSES)


if __name__ == "__main__":
    for label, values in example()["rows"].items():
        print(f"| {label} | {', '.join(values)} |")
