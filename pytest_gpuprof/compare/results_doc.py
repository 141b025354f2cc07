"""A results document read back (docs/results.md, "The results document"): ``gpuprof diff``
and ``gpuprof merge`` read the files ``--gpuprof-json`` wrote, and a fresh pytest process hands
its results back in one (``run.child_results``).

Each is checked once, where it is read (``checked``), with the care a baseline file is read with
(``baseline.BaselineFile``, ``entry.check_entry``): this gpuprof's ``schema_version`` (an
integer: ``true`` and ``1.0`` are not 1); no number that is not finite anywhere (Python's
``json`` reads ``NaN`` and ``Infinity``, which strict JSON has not, and ``1e400`` as infinity);
and every member ``TestResult.from_json``, ``gpuprof diff`` and the reports read of the type
``TestResult.to_json`` writes it, a run's ``metrics``, ``per_step``, ``distribution``,
``timeline`` and ``counters`` (its own and its baseline's) by the checks of a baseline entry's
parts, which ``entry`` shares.  A document that fails is one error naming the file and the member
(``results file r.json: tests[0].verdicts must be a list of verdict objects, got 5``), so that
what is read back is judged, merged and written again without a traceback.

The members every document gpuprof wrote holds are required (``REQUIRED``); the others were
added since and are checked where present: a document written before them is read as it
always was (before 2026-11-23 a run's ``per_step`` held its times and counts alone; before
2026-11-28 a test had no ``facts``, which ``evaluate.migrated_facts`` takes from its status).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import GpuprofError
from ..trace.model import INT64_MAX
from .entry import (
    BACKENDS,
    check_counters,
    check_metrics,
    check_samples,
    check_summaries,
    check_timeline,
    integer,
    need,
    number,
    shown,
)
from .host import AT_BASELINE_SPEED
from .rules import OPS
from .status import STATUSES, State

#: The ``schema_version`` of the results documents this gpuprof writes and reads.
SCHEMA_VERSION = 1

#: What ``TestResult.to_json`` writes in every test (also each rank's) since the first
#: results document: ``gpuprof merge``, ``gpuprof diff`` and the reports read them as given.
REQUIRED = ("nodeid", "status", "message", "gpu", "metrics", "baseline_metrics", "verdicts")
#: What every verdict holds (``Verdict.to_json``), since the first results document.
VERDICT_REQUIRED = ("metric", "status", "baseline", "current", "change", "rule")
#: The facts a test's status follows from (``TestResult.facts``).
FACTS = ("error", "recorded", "has_baseline", "strict")


def checked(doc: Any, name: object) -> dict[str, Any]:
    """The results document ``doc`` read from ``name`` (a file), checked (``check``): itself;
    what is wrong with it is a GpuprofError naming the file and the member."""
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if type(version) is not int or version != SCHEMA_VERSION:
        newer = type(version) is int and version > SCHEMA_VERSION
        why = ": a newer gpuprof wrote it, upgrade to read it" if newer else ""
        raise GpuprofError(f"results file {name} has schema_version {shown(version)}; this gpuprof reads "
                           f"{SCHEMA_VERSION}{why}")
    try:
        check(doc)
    except ValueError as exc:
        raise GpuprofError(f"results file {name}: {exc}") from None
    return doc


def check(doc: Mapping[str, Any]) -> None:
    """Raise ValueError saying what is wrong with a results document (``where must be ...,
    got ...``): a number that is not finite anywhere, then each member of the type it is
    written with, each test's (``_check_test``) and each rank's in it."""
    _check_finite(doc)
    need(isinstance(doc.get("tests"), list), "tests", "a list of test objects", doc.get("tests"))
    for key in ("backend", "baseline_dir", "replay_dir", "traces_dir", "gpuprof_version"):
        need(isinstance(doc.get(key, ""), str | None), key, "a string or null", doc.get(key))
    counts = doc.get("counts", {})
    need(isinstance(counts, dict) and all(integer(n) for n in counts.values()), "counts",
          "an object of counts by status", counts)
    skipped = doc.get("skipped", [])
    need(isinstance(skipped, list), "skipped", "a list of {nodeid, reason} objects", skipped)
    for i, entry in enumerate(skipped):
        need(isinstance(entry, dict) and isinstance(entry.get("nodeid"), str)
              and isinstance(entry.get("reason", ""), str), f"skipped[{i}]", "a {nodeid, reason} object", entry)
    need(isinstance(doc.get("baselines", {}), dict | None), "baselines", "an object or null", doc.get("baselines"))
    for i, test in enumerate(doc["tests"]):
        _check_test(test, f"tests[{i}]")


def _check_test(test: Any, where: str, rank: bool = False) -> None:
    """One test object (a rank's, with ``rank``: its own ranks null)."""
    need(isinstance(test, dict), where, "a test object", test)
    for key in REQUIRED:
        need(key in test, f"{where}.{key}", "", None, missing=True)
    for key, (ok, what) in _MEMBERS.items():
        if key in test:
            need(ok(test[key]), f"{where}.{key}", what, test[key])
    for i, verdict in enumerate(test["verdicts"]):
        _check_verdict(verdict, f"{where}.verdicts[{i}]")
    facts = test.get("facts")
    need(facts is None or isinstance(facts, dict) and sorted(facts) == sorted(FACTS)
          and all(isinstance(v, bool) for v in facts.values()), f"{where}.facts",
          f"an object of {', '.join(FACTS)}, each true or false", facts)
    ranks = test.get("ranks")
    need(ranks is None or not rank, f"{where}.ranks", "null in a rank's test", ranks)
    need(ranks is None or isinstance(ranks, dict) and ranks and all(r.isdigit() for r in ranks),
          f"{where}.ranks", "an object of a test per rank (keys 0, 1, ...), or null", ranks)
    try:
        _check_run(test, "", ranks is not None)
        _check_run(test, "baseline_", ranks is not None)
    except ValueError as exc:
        raise ValueError(f"{where}.{exc}") from None
    for r, own in (ranks or {}).items():
        _check_test(own, f"{where}.ranks.{r}", rank=True)
    alongside = test.get("alongside")
    if alongside is not None:
        _check_alongside(alongside, f"{where}.alongside")
    for i, run in enumerate(test.get("baseline_runs") or ()):
        _check_baseline_run(run, f"{where}.baseline_runs[{i}]")


def _check_run(test: Mapping[str, Any], prefix: str, distributed: bool) -> None:
    """A run's parts as a test keeps them, its own (``prefix`` "") or its baseline's
    ("baseline_"): ``metrics`` (a ``distributed`` test's: its ``rank_skew`` alone), ``per_step``
    with its ``distribution``, ``timeline`` and ``counters``, each null or checked as a baseline
    entry's (``entry``'s checks; its errors name the entry's member, said here with the prefix)."""
    metrics, per_step, summaries, timeline, counters = (test.get(f"{prefix}{key}") for key in
                                                         ("metrics", "per_step", "distribution", "timeline",
                                                          "counters"))
    try:
        if distributed:
            _check_skew(metrics)
        elif metrics is not None:
            check_metrics(metrics)
        if per_step is not None:
            check_samples(per_step, {} if summaries is None else summaries, "", partial=True)
        elif summaries is not None:
            check_summaries(summaries, "distribution")
        if timeline:
            check_timeline(timeline)
        if counters is not None:
            check_counters(counters)
    except ValueError as exc:
        raise ValueError(f"{prefix}{exc}") from None


def _check_skew(metrics: Any) -> None:
    skew = (metrics or {}).get("rank_skew")
    need(skew is None or number(skew), "metrics.rank_skew", "a finite number in [0, 2**63) or null", skew)


def _check_verdict(verdict: Any, where: str) -> None:
    """A verdict object (``Verdict.to_json``), as ``evaluate._verdict`` and the reports read it."""
    need(isinstance(verdict, dict), where, "a verdict object", verdict)
    for key in VERDICT_REQUIRED:
        need(key in verdict, f"{where}.{key}", "", None, missing=True)
    need(verdict["status"] in _STATES, f"{where}.status", f"one of {', '.join(map(repr, _STATES))}",
          verdict["status"])
    for key, (ok, what) in _VERDICT_MEMBERS.items():
        if key in verdict:
            need(ok(verdict[key]), f"{where}.{key}", what, verdict[key])
    threshold = verdict.get("threshold")
    if threshold is not None:
        need(isinstance(threshold, dict) and threshold.get("op") in tuple(OPS) and _finite(threshold.get("value")),
              f"{where}.threshold", f"an object of op (one of {', '.join(OPS)}) and a finite value", threshold)


def _check_alongside(alongside: Any, where: str) -> None:
    """What the base revision measured alongside showed (``run.sides``, ``pairs.judge_pairs``),
    as ``report.words.alongside_line`` reads it: its decisions with their pairs and seconds."""
    need(isinstance(alongside, dict), where, "an object or null", alongside)
    for key in ("base", "against"):
        need(_string_or_null(alongside.get(key)), f"{where}.{key}", "a string or null", alongside.get(key))
    for key in ("note", "problem"):
        need(isinstance(alongside.get(key, ""), str), f"{where}.{key}", "a string", alongside.get(key))
    decisions = alongside.get("decisions")
    if decisions is None:
        return
    need(isinstance(decisions, list), f"{where}.decisions", "a list of decision objects, or null", decisions)
    for key, ok, what in (("pairs", integer, "an integer in [0, 2**63)"), ("seconds", _finite, "a finite number")):
        need(ok(alongside.get(key)), f"{where}.{key}", what, alongside.get(key), missing=key not in alongside)
    for i, d in enumerate(decisions):
        need(isinstance(d, dict) and isinstance(d.get("metric"), str) and isinstance(d.get("outcome"), str)
              and all(_finite_or_null(d.get(k)) for k in ("base", "head", "mean", "low", "high")),
              f"{where}.decisions[{i}]", "a decision object (metric, outcome, base, head, pairs, ...)", d)


def _check_baseline_run(run: Any, where: str) -> None:
    """One of the baseline's recorded runs as a test keeps it (``TestResult.to_json``'s
    ``baseline_runs``): its summaries, probes, environment, and a few of its per-step lists."""
    need(isinstance(run, dict), where, "an object", run)
    if run.get("distribution") is not None:
        _check_run_summaries(run["distribution"], f"{where}.distribution")
    kept = run.get(AT_BASELINE_SPEED)
    need(kept is None or isinstance(kept, dict) and all(map(_finite_or_null, kept.values())),
         f"{where}.{AT_BASELINE_SPEED}", "an object of finite numbers, or null", kept)
    need(_object_or_null(run.get("environment")), f"{where}.environment", "an object or null", run.get("environment"))
    need(_probes(run.get("machine")), f"{where}.machine", "an object of numbers or nulls, or null", run.get("machine"))
    per_step = run.get("per_step")
    need(per_step is None or isinstance(per_step, dict), f"{where}.per_step", "an object of per-step lists, or null",
          per_step)
    for name, values in (per_step or {}).items():
        need(isinstance(values, list) and all(map(_finite_or_null, values)), f"{where}.per_step.{name}",
              "a list of finite numbers or nulls", values)


def _check_run_summaries(summaries: Any, where: str) -> None:
    """A recorded run's summaries as a results document keeps them: each cut to its median
    (``samples.medians``, since 2026-11-28), or whole (before)."""
    if not isinstance(summaries, dict) or all(isinstance(s, dict) and set(s) != {"median"}
                                              for name, s in summaries.items() if name != "kernels"):
        check_summaries(summaries, where)
        return
    kernels = summaries.get("kernels", {})
    need(isinstance(kernels, dict), f"{where}.kernels", "an object of kernel names", kernels)
    for name, summary in [*((n, s) for n, s in summaries.items() if n != "kernels"),
                          *((f"kernels[{k}]", s) for k, s in kernels.items())]:
        need(isinstance(summary, dict) and set(summary) == {"median"} and _finite(summary["median"])
             and summary["median"] >= 0, f"{where}.{name}", "an object of its median (a number >= 0)", summary)


def _check_finite(doc: Any) -> None:
    """No number that is not finite anywhere in the document: where one is, an error naming it
    (looked for once more, with the path, only then)."""
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack += node.values()
        elif isinstance(node, list):
            stack += node
        elif isinstance(node, float) and not math.isfinite(node):
            break
    else:
        return
    paths: list[tuple[Any, str]] = [(doc, "")]
    while paths:
        node, where = paths.pop()
        if isinstance(node, dict):
            paths += [(v, f"{where}{_member(k, where)}") for k, v in node.items()]
        elif isinstance(node, list):
            paths += [(v, f"{where}[{i}]") for i, v in enumerate(node)]
        else:
            need(not isinstance(node, float) or math.isfinite(node), where, "a finite number", node)


def _member(key: str, where: str) -> str:
    return (f".{key}" if where else key) if _NAME.fullmatch(key) else f"[{key}]"


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")


def _finite(value: Any) -> bool:
    """A finite number: a float, or an integer that is one (a 400-digit integer is none)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and -INT64_MAX <= value <= INT64_MAX


def _finite_or_null(value: Any) -> bool:
    return value is None or _finite(value)


def _string_or_null(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _object_or_null(value: Any) -> bool:
    return value is None or isinstance(value, dict)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _probes(value: Any) -> bool:
    return value is None or isinstance(value, dict) and all(_finite_or_null(v) for v in value.values())


#: The words of a verdict's ``status`` and a test's, as written.
_STATES, _STATUSES = tuple(map(str, State)), tuple(map(str, STATUSES))
#: How each member of a test object is checked where present, and the words saying so; the
#: run's parts, the verdicts, facts, ranks, ``alongside`` and ``baseline_runs`` are checked
#: apart (``_check_test``).
_MEMBERS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "nodeid": (lambda v: isinstance(v, str), "a string"),
    "status": (lambda v: v in _STATUSES, f"one of {', '.join(map(repr, _STATUSES))}"),
    "message": (lambda v: isinstance(v, str), "a string"),
    "confirmation": (lambda v: isinstance(v, str), "a string"),
    **{key: (_string_or_null, "a string or null") for key in ("gpu", "trace", "baseline_file")},
    **{key: (lambda v: v is None or v in BACKENDS, f"one of {', '.join(map(repr, BACKENDS))}, or null")
       for key in ("backend", "baseline_backend")},
    "environment": (lambda v: isinstance(v, dict), "an object"),
    **{key: (_object_or_null, "an object or null")
       for key in ("baseline_environment", "metrics", "baseline_metrics", "per_step", "distribution",
                   "baseline_per_step", "baseline_distribution", "timeline", "baseline_timeline", "counters",
                   "baseline_counters")},
    "verdicts": (lambda v: isinstance(v, list), "a list of verdict objects"),
    **{key: (_strings, "a list of strings") for key in ("unstable", "health", "slower_machine", "notes")},
    "detects": (lambda v: isinstance(v, dict) and all(_finite(x) for x in v.values()), "an object of numbers"),
    "machine": (_probes, "an object of numbers or nulls, or null"),
    "baseline_runs": (lambda v: v is None or isinstance(v, list), "a list of recorded runs, or null"),
}
#: How each member of a verdict object is checked where present (``Verdict.to_json``).
_VERDICT_MEMBERS: dict[str, tuple[Callable[[Any], bool], str]] = {
    **{key: (lambda v: isinstance(v, str), "a string")
       for key in ("metric", "change", "rule", "evidence", "let_through", "margin_source")},
    **{key: (_finite_or_null, "a finite number or null")
       for key in ("baseline", "current", "p_value", "p_level", "margin", "detectable")},
    "rank": (integer, "an integer in [0, 2**63)"),
    "provisional": (lambda v: isinstance(v, bool), "a boolean"),
}
