"""``gpuprof diff A B``: what changed from run A (the baseline) to run B (the current run).

Each side is a trace (Kineto ``.json``/``.json.gz``, nsys ``.sqlite``/``.nsys-rep``),
a results file written by ``--gpuprof-json``, a distributed run (a folder of per-rank
Kineto traces, an nsys report of several processes), or an Nsight Compute report
(``.ncu-rep``, or its raw page as CSV); two results files are compared test by test,
matched by node id, two distributed runs rank by rank, two Nsight Compute reports (or two
tests' ``counters``) counter by counter (``compare.counter_verdicts``).  The verdicts come from ``compare.judge`` with
the plugin's default rules (or the tolerances given), and are printed in the
words of the plugin's failure message, then a per-kernel table: new and vanished
kernels, changed counts and times, biggest time change first.  ``--range NAME`` cuts the
test NAME out of each side that is an nsys report of a pytest session; with neither side
one, it is refused (``inputs.check_diff_range``).

Exit status: 0 when nothing broke, 1 when a metric broke (regressed, changed,
violated a threshold, a kernel new or vanished) or a test of B has no metrics,
2 on bad input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..compare.counter_verdicts import counter_verdicts
from ..compare.evaluate import TestResult, of_measurement, status_of
from ..compare.kernels import kernel_changes
from ..compare.rules import Rules
from ..compare.verdicts import judge
from ..errors import GpuprofError
from ..metrics.counters import ncu_counters
from ..metrics.measure import Measurement
from ..metrics.specs import counter_spec
from ..numbers import format_number
from ..report.escaping import terminal_text
from ..report.names import function_name, short_name
from ..report.values import rank_sections
from ..report.words import (
    BACKEND_NAMES,
    broken_header,
    broken_lines,
    gpu_text,
    is_broken,
    let_through_header,
    verdict_line,
)
from ..trace.formats import is_ncu_input, is_nsys_input
from .inputs import check_diff_range, measure_any, measure_processes, measure_ranks, ncu_launches, read_results


@dataclass
class Side:
    """One side of the comparison: a trace (one run, node id None), a results file's tests,
    or a distributed run's ranks (``rank N``: a folder of per-rank traces, an nsys report of
    several processes)."""

    path: str
    kind: str  # "trace" | "results" | "ranks" | "counters"
    runs: dict[str | None, TestResult]


def load_side(path: str, test_range: str | None = None, nsys: str | None = None) -> Side:
    """A trace, a results file or a distributed run; every problem is a GpuprofError naming
    the file."""
    p = Path(path)
    if p.is_dir():
        return _ranks(path, measure_ranks(path), "torch")
    if not p.is_file():
        raise GpuprofError(f"{path}: no such file" if not p.exists() else f"{path}: not a file")
    if is_ncu_input(path):
        counters = ncu_counters(ncu_launches(path, None), function_name)
        return Side(path, "counters", {None: TestResult(None, counters=counters)})
    nsys_input = is_nsys_input(path)
    if not nsys_input:
        doc = read_results(p)
        if doc is not None:
            return Side(path, "results", _runs(doc))
    if nsys_input and not test_range:
        processes = measure_processes(path, nsys)
        if len(processes) > 1:
            return _ranks(path, processes, "nsys")
        m = processes[0][1]
    else:
        m = measure_any(path, test_range if nsys_input else None, nsys)
    run = of_measurement(None, m, "nsys" if nsys_input else "torch")
    run.gpu = m.gpu_name  # a trace's own GPU name, None when it names none
    return Side(path, "trace", {None: run})


def _ranks(path: str, ranks: dict[int, tuple[str, Measurement]], backend: str) -> Side:
    runs: dict[str | None, TestResult] = {}
    for rank, (_, m) in ranks.items():
        run = runs[f"rank {rank}"] = of_measurement(f"rank {rank}", m, backend)
        run.gpu = m.gpu_name
    return Side(path, "ranks", runs)


def _runs(doc: dict[str, Any]) -> dict[str | None, TestResult]:
    """Each test of a results document (checked as it was read: ``inputs.read_results``); a
    distributed test's ranks, each as a test of its own (``NODEID [rank N]``), compared rank by
    rank."""
    runs: dict[str | None, TestResult] = {}
    for t in doc["tests"]:
        if t.get("ranks") is not None:
            runs |= _runs({**doc, "tests": rank_sections(t)[1:]})  # the ranks, as the reports show them
            continue
        runs[t["nodeid"]] = TestResult.from_json(t, doc.get("backend"))
    return runs


def pairs(a: Side, b: Side, test: str | None) -> list[tuple[str | None, TestResult | None, TestResult | None]]:
    """(node id, run of A, run of B) to compare; a trace pairs with one test of a results file."""
    def pick(side: Side) -> TestResult:
        if side.kind in ("trace", "counters"):
            return side.runs[None]
        if test is not None:
            if test not in side.runs:
                raise GpuprofError(f"{side.path} has no test {test!r}")
            return side.runs[test]
        if len(side.runs) != 1:
            raise GpuprofError(f"{side.path} holds {len(side.runs)} tests; a trace compares with one: "
                               f"name it with --test NODEID")
        return next(iter(side.runs.values()))

    if (a.kind == "counters") != (b.kind == "counters"):
        raise GpuprofError(f"{a.path if a.kind == 'counters' else b.path} is an Nsight Compute report: it compares "
                           "with another one")
    if (a.kind == "ranks") != (b.kind == "ranks"):
        raise GpuprofError(f"{a.path if a.kind == 'ranks' else b.path} is a distributed run of several ranks: it "
                           "compares with another one (a folder of per-rank traces, an nsys report of several "
                           "processes), rank by rank")
    if a.kind == b.kind and a.kind in ("results", "ranks"):
        ids = [test] if test is not None else list(dict.fromkeys(list(a.runs) + list(b.runs)))
        if test is not None and test not in a.runs and test not in b.runs:
            raise GpuprofError(f"neither {a.path} nor {b.path} has a test {test!r}")
        return [(n, a.runs.get(n), b.runs.get(n)) for n in ids]
    ra, rb = pick(a), pick(b)
    return [(ra.nodeid or rb.nodeid, ra, rb)]


def diff(a_path: str, b_path: str, rules: Rules, top: int = 20, test: str | None = None,
         test_range: str | None = None, nsys: str | None = None) -> tuple[int, list[str]]:
    """(exit status, lines to print, each ``terminal_text``: they hold names from the traces)."""
    check_diff_range(a_path, b_path, test_range)
    a = load_side(a_path, test_range, nsys)
    b = load_side(b_path, test_range, nsys)
    lines = [f"A (baseline): {_describe(a)}", f"B (current):  {_describe(b)}",
             "Values are per step (ratios as they are); changes are from A to B.", ""]
    compared = []
    for nodeid, ra, rb in pairs(a, b, test):
        status, out = _compare(a.path, ra, b.path, rb, rules, top)
        if a.kind in ("results", "ranks") or b.kind in ("results", "ranks"):
            out.insert(0, f"=== {nodeid} ===")
        compared.append((status, out))
    compared.sort(key=lambda c: -c[0])  # regressions first, then in the files' order
    for _, out in compared:
        lines += out + [""]
    if not compared:
        lines.append("no tests to compare: both results files are empty")
    worst = max((status for status, _ in compared), default=0)
    lines.append("regression: a metric broke (exit 1)" if worst else "no regression (exit 0)")
    return worst, [terminal_text(line) for line in lines]


def _describe(side: Side) -> str:
    if side.kind in ("results", "ranks"):
        gpus = sorted({r.gpu for r in side.runs.values() if r.gpu})
        what = "results file" if side.kind == "results" else "distributed run"
        count = f"{len(side.runs)} {'test' if side.kind == 'results' else 'rank'}(s)"
        return f"{side.path} ({what}, {count}{', ' + ', '.join(gpus) if gpus else ''})"
    r = side.runs[None]
    if r.counters is not None:  # an Nsight Compute report
        return f"{side.path} (Nsight Compute report, {len(r.counters['kernels'])} kernel(s))"
    assert r.metrics is not None and r.backend is not None, "a trace's run is measured (load_side)"
    return (f"{side.path} ({gpu_text(r.gpu)}, {BACKEND_NAMES[r.backend]}, "
            f"{r.metrics['step_count']} step(s))")


def _compare(a_path: str, ra: TestResult | None, b_path: str, rb: TestResult | None, rules: Rules,
             top: int) -> tuple[int, list[str]]:
    if rb is None:
        return 0, [f"only in A: not in {b_path}"]
    if ra is None:
        return 0, [f"only in B: not in {a_path}"]
    if ra.metrics is None and rb.metrics is None and ra.counters and rb.counters:  # two Nsight Compute reports
        return _verdict_lines(counter_verdicts(ra.counters, rb.counters, rules), rb.gpu, a_path)
    if rb.metrics is None:
        return 1, [f"B has no metrics ({rb.status}): gpuprof: {rb.message}"]
    if ra.metrics is None:
        return 0, [f"not compared: A has no metrics ({ra.status}): {ra.message}"]
    lines = []
    if ra.gpu != rb.gpu:
        lines.append(f"note: A ran on {gpu_text(ra.gpu)}, B on {gpu_text(rb.gpu)} (the plugin compares runs of one "
                     "GPU model only)")
    backend_a, backend_b = ra.backend or "torch", rb.backend or "torch"  # a run that names none: torch's
    same_backend = backend_a == backend_b
    if not same_backend:
        lines.append(f"note: A was captured with {BACKEND_NAMES.get(backend_a, backend_a)}, B with "
                     f"{BACKEND_NAMES.get(backend_b, backend_b)}: only counts and bytes are compared "
                     f"(times and kernel names differ between profilers)")
    # as the plugin does: time metrics on their per-step samples where both runs have them
    verdicts = judge(rb.metrics, ra.metrics, rules, same_backend, (rb.per_step, ra.per_step),
                     (rb.distribution, ra.distribution))
    if rb.counters:  # profiled under Nsight Compute: its counters too
        verdicts += counter_verdicts(ra.counters, rb.counters, rules)
    else:
        lines += [f"note: {t.text}: not checked: B holds no Nsight Compute counters" for t in rules.thresholds
                  if counter_spec(t.metric)]
    status, out = _verdict_lines(verdicts, rb.gpu, a_path)
    lines += out
    if same_backend:
        lines += kernel_table(ra.metrics, rb.metrics, rules, top, (ra.distribution, rb.distribution))
    return status, lines


def _verdict_lines(verdicts: list, gpu: str | None, a_path: str) -> tuple[int, list[str]]:
    """The broken metrics in the failure message's words, one line each, then the improved
    and the others, then the changes beyond the tolerance let through; 1 when one broke."""
    lines = []
    as_json = [v.to_json() for v in verdicts]
    broken = broken_lines(as_json)
    if broken:
        lines.append(f"{broken_header(len(broken), gpu, f'baseline {a_path}')}:")
        lines += [f"  {line}" for line in broken]
    others: dict[str, list[dict[str, Any]]] = {}  # improved, and e.g. undecided: never a failure
    for v in as_json:
        if v["status"] != "ok" and not is_broken(v):
            others.setdefault(v["status"], []).append(v)
    for status, group in sorted(others.items(), key=lambda kv: kv[0] != "improved"):
        lines.append(f"{len(group)} metric(s) {status}:")
        lines += [f"  {verdict_line(v)}" for v in group]
    let_through = [v for v in as_json if v.get("let_through")]
    if let_through:
        lines.append(f"{let_through_header(len(let_through))}:")
        lines += [f"  {verdict_line(v)}" for v in let_through]
    if not broken and not others:
        compared = sum(1 for v in verdicts if v.baseline is not None or v.current is not None)
        lines.append(f"no metric broke or improved ({compared} compared)")
    return (1 if status_of(verdicts) == "failed" else 0), lines


def kernel_table(a: Mapping[str, Any], b: Mapping[str, Any], rules: Rules, top: int,
                 summaries: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] = (None, None)) -> list[str]:
    """The kernels that changed from A to B, per step; a time is the median step where both
    runs kept the kernel's steps, as its verdict judges it (``kernel_changes``)."""
    rows, same = kernel_changes(a, b, rules, summaries)
    if not rows:
        return [f"kernels: no kernel new, vanished or changed ({same} compared)"]
    shown = rows if top <= 0 else rows[:top]
    table = [["change", "count A", "count B", "us A", "us B", "Δ us", "kernel"]]
    for r in shown:
        table.append([r["change"], format_number(r["count_a"]), format_number(r["count_b"]),
                      format_number(round(r["time_us_a"], 3) if r["count_a"] is not None else None),
                      format_number(round(r["time_us_b"], 3) if r["count_b"] is not None else None),
                      format_number(round(r["delta_us"], 3), signed=True), short_name(r["kernel"])])
    widths = [max(len(row[i]) for row in table) for i in range(6)]
    lines = [f"kernels, per step (us: the median step where both runs kept the kernel's steps, else total / "
             f"steps), biggest time change first ({len(rows)} changed, {same} unchanged):"]
    for row in table:
        lines.append("  " + "  ".join([row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:6], widths[1:])]
                                      + [row[6]]))
    if len(shown) < len(rows):
        lines.append(f"  ... {len(rows) - len(shown)} more changed kernel(s) (--top 0 shows all)")
    return lines

