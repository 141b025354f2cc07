"""A baseline entry: what a test is judged against on one GPU model (docs/results.md,
"Baseline files").  Its typed shapes (``Entry``, a distributed test's ``DistributedEntry``, the
``RecordedRun`` each keeps), how an entry of an older form is read in today's (``migrated``),
and what an entry must hold to be trusted (``check_entry``; its checks of a run's parts also
check a results document's, ``results_doc``).  ``baseline.BaselineFile`` reads them from their
file; ``recording.new_baseline_entry`` makes the one a recording stores.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Required, TypedDict, final

from ..metrics.specs import COPY_KINDS, COUNTER_SPECS, METRICS, RECORDED_SINCE
from ..metrics.timeline import KINDS, calls, events, ranges
from ..trace.model import INT64_MAX
from .samples import distribution, judged_series


@final
class RecordedRun(TypedDict, total=False):
    """One run an entry was recorded from (``Entry.runs``): its per-step samples, their
    summaries, its environment and the machine probes of its session.  A run of an entry
    written before per-step samples were kept holds its summaries and environment at most."""

    per_step: dict[str, Any]
    distribution: dict[str, Any]
    environment: dict[str, Any]
    machine: dict[str, Any]


@final
class Entry(TypedDict, total=False):
    """What a test of one process is judged against on one GPU model (docs/results.md,
    "Baseline files"): its metrics, the per-step samples and summaries of its recorded runs
    pooled, and the runs themselves, oldest first.  An entry ``BaselineFile.entry`` gives
    holds ``metrics`` and ``runs`` (checked, migrated)."""

    backend: str | None  # one of BACKENDS, torch's where absent (None: a result that names none)
    environment: dict[str, Any]
    metrics: dict[str, Any]
    per_step: dict[str, Any]
    distribution: dict[str, Any]
    runs: list[RecordedRun]
    step_source: str | None  # where its steps came from (None: a results document's test, pairs.base_entry)
    timeline: dict[str, Any]
    counters: dict[str, Any]  # Nsight Compute's (metrics.counters)


@final
class DistributedEntry(TypedDict, total=False):
    """A distributed test's entry (``compare.distributed``): an ``Entry`` per rank (keys "0",
    "1", ...) and each recorded run's ``rank_skew``, the last of them also its ``metrics``."""

    backend: str | None
    environment: dict[str, Any]
    metrics: Required[dict[str, Any]]
    rank_skew: Required[list[float | None]]
    ranks: Required[dict[str, Entry]]
    world_size: int


#: A stored entry of either shape (a distributed test's holds ``ranks``).
StoredEntry = Entry | DistributedEntry


def migrated(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry of an older form in today's: one written before runs were kept (neither
    ``runs`` nor ``per_step``: its totals in ``metrics``, perhaps their ``distribution``)
    gets its one run, of its ``distribution`` and ``environment``; a distributed test's
    ranks alike.  Any other entry as it is (what is wrong with it, ``check_entry`` says)."""
    if "ranks" in entry:
        ranks = entry["ranks"]
        if not isinstance(ranks, dict):
            return entry
        return entry | {"ranks": {rank: migrated(own) if isinstance(own, dict) else own
                                  for rank, own in ranks.items()}}
    if "runs" in entry or "per_step" in entry:
        return entry
    return entry | {"runs": [{key: entry[key] for key in ("distribution", "environment") if entry.get(key)}]}


# --- what an entry must hold (recording.new_baseline_entry writes it) ------------------
BACKENDS = ("torch", "nsys")
_COPY_TIMES = [f"memcpy_{kind}_time_us" for kind in COPY_KINDS]


def _no_copy(kind: str, steps: Mapping[str, Any], i: int) -> bool:
    return steps[f"memcpy_{kind}_bytes"][i] == 0 or steps[f"memcpy_{kind}_time_us"][i] == 0


#: Judged per-step ratios and when a step may have no value (nothing to divide): the words, the
#: per-step lists that tell such a step, the test on them.
_NULL_WHEN: dict[str, tuple[str, tuple[str, ...], Callable[[Mapping[str, Any], int], bool]]] = {
    **{name: ("a step with no window", ("window_us",), lambda steps, i: steps["window_us"][i] == 0)
       for name, spec in METRICS.items() if spec.kind == "ratio" and judged_series(spec)},
    "overlap_efficiency": ("a step with no copy time", tuple(_COPY_TIMES),
                           lambda steps, i: all(steps[c][i] == 0 for c in _COPY_TIMES)),
    **{f"memcpy_{kind}_gbps": (f"a step with no {kind} copy", (f"memcpy_{kind}_bytes", f"memcpy_{kind}_time_us"),
                               functools.partial(_no_copy, kind))
       for kind in COPY_KINDS},
    "pcie_utilization": ("a trace without its PCIe link", (), lambda steps, i: True),
    "comm_compute_overlap": ("a step with no communication kernel", ("comm_time_us",),
                             lambda steps, i: not steps["comm_time_us"][i]),
}


def check_entry(entry: Mapping[str, Any]) -> None:
    """Raise ValueError saying what is wrong with an entry as ``BaselineFile.load`` gives it
    (``where: problem``): each part the verdicts read is of its type, finite, not negative
    and under 2**63 (a ratio at most 1), so that no part is silently skipped (a missing value
    is "not compared", a weaker gate).  Samples come with their runs: an entry holds
    ``per_step`` and each of its runs its own, or (written before per-step samples were
    kept: ``metrics``, and perhaps their summaries in ``distribution``) none of them.  A
    distributed test's entry holds one such entry per rank (``compare.distributed``)."""
    if "ranks" in entry:
        _check_distributed(entry)
        return
    need("metrics" in entry, "metrics", "", None, missing=True)
    backend = entry.get("backend", BACKENDS[0])
    need(backend in BACKENDS, "backend", f"one of {', '.join(map(repr, BACKENDS))}", backend)
    check_metrics(entry["metrics"])
    runs: Any = entry.get("runs")
    sampled = "per_step" in entry or isinstance(runs, list) and any(isinstance(r, dict) and "per_step" in r
                                                                     for r in runs)
    if sampled:
        for key in ("per_step", "runs"):
            need(key in entry, key, "", None, missing=True)
        check_samples(entry["per_step"], entry.get("distribution", {}), "")
        need(entry["per_step"]["kernels"] or not entry["metrics"]["kernels"], "per_step.kernels",
              "the per-step times of the heaviest kernels", {})
    elif "distribution" in entry:
        check_summaries(entry["distribution"], "distribution")
    for key in ("environment", "timeline"):
        need(isinstance(entry.get(key, {}), dict), key, "an object", entry.get(key))
    need(isinstance(entry.get("step_source", ""), str), "step_source", "a string", entry.get("step_source"))
    need("runs" in entry, "runs", "", None, missing=True)
    need(isinstance(runs, list) and runs, "runs", "a non-empty list", runs)
    for i, run in enumerate(runs):
        where = f"runs[{i}]"
        need(isinstance(run, dict), where, "an object", run)
        if sampled:
            for key in ("per_step", "distribution"):
                need(key in run, f"{where}.{key}", "", None, missing=True)
            check_samples(run["per_step"], run["distribution"], f"{where}.", complete=True)
        elif "distribution" in run:
            check_summaries(run["distribution"], f"{where}.distribution")
        for key in ("environment", "machine"):
            need(isinstance(run.get(key, {}), dict), f"{where}.{key}", "an object", run.get(key))
        for probe, value in (run.get("machine") or {}).items():
            need(value is None or number(value), f"{where}.machine.{probe}", f"{_NUMBER} or null", value)
    if entry.get("timeline"):
        check_timeline(entry["timeline"])
    if "counters" in entry:
        check_counters(entry["counters"])


def check_counters(counters: Any) -> None:
    """Nsight Compute's counters (``metrics.counters``): per kernel every counter of
    ``COUNTER_SPECS`` as its launches' median, min and max (all three null where a launch could
    not give it), the test's ``memory_bandwidth_utilization`` (a number, or null), and why each
    null figure is null (``no_value``, absent from counters stored before it was kept)."""
    need(isinstance(counters, dict), "counters", "an object", counters)
    bandwidth = counters.get("memory_bandwidth_utilization")
    need(bandwidth is None or number(bandwidth), "counters.memory_bandwidth_utilization", f"{_NUMBER} or null",
          bandwidth)
    no_value = counters.get("no_value", {})
    need(isinstance(no_value, dict) and all(isinstance(why, str) for why in no_value.values()), "counters.no_value",
          "an object of why each null figure is null", no_value)
    kernels = counters.get("kernels")
    need(isinstance(kernels, dict), "counters.kernels", "an object of kernel name to counters", kernels)
    for name, row in kernels.items():
        where = f"counters.kernels[{name}]"
        need(isinstance(row, dict), where, "an object", row)
        need(integer(row.get("launches")) and row["launches"] > 0, f"{where}.launches", "a positive integer",
              row.get("launches"))
        need(isinstance(row.get("function", ""), str), f"{where}.function", "a string", row.get("function"))
        for counter in COUNTER_SPECS:
            stats = row.get(counter)
            need(isinstance(stats, dict), f"{where}.{counter}", "an object (median, min, max)", stats)
            if [stats.get(key, 0) for key in ("min", "median", "max")] == [None] * 3:
                continue  # no launch could give it (``no_value`` says why)
            for key in ("min", "median", "max"):
                need(number(stats.get(key)), f"{where}.{counter}.{key}", _NUMBER, stats.get(key))
            ordered = [stats[k] for k in ("min", "median", "max")]
            need(ordered == sorted(ordered), f"{where}.{counter}", "ordered min <= median <= max", ordered)


def _check_distributed(entry: Mapping[str, Any]) -> None:
    """A distributed test's entry: an entry per rank (keys 0, 1, ...), of two ranks or more (a
    test of one process has an entry of its own), and the recorded runs' ``rank_skew``, each a
    ratio or null."""
    ranks = entry["ranks"]
    need(isinstance(ranks, dict) and ranks and all(isinstance(r, str) and r.isdigit() for r in ranks), "ranks",
          "an object of an entry per rank (keys 0, 1, ...)", ranks)
    need(len(ranks) > 1, "ranks", "the entries of two ranks or more (one process is judged against an entry "
          "of its own)", ranks)
    for rank, own in ranks.items():
        need(isinstance(own, dict) and "ranks" not in own, f"ranks.{rank}", "an entry", own)
        try:
            check_entry(own)
        except ValueError as exc:
            raise ValueError(f"ranks.{rank}.{exc}") from None
    size = entry.get("world_size", len(ranks))
    need(integer(size) and size == len(ranks), "world_size", f"the number of ranks ({len(ranks)})", size)
    skews = entry.get("rank_skew")
    need(isinstance(skews, list) and skews and all(v is None or (number(v) and v >= 0) for v in skews),
          "rank_skew", f"a non-empty list of {_NUMBER}s or nulls", skews)


def check_metrics(metrics: Any) -> None:
    need(isinstance(metrics, dict), "metrics", "an object", metrics)
    no_copies = all(metrics.get(name) == 0 for name in _COPY_TIMES)
    for name, spec in METRICS.items():
        where = f"metrics.{name}"
        if name in RECORDED_SINCE:  # older entries lack it; null where nothing was measured
            value = metrics.get(name)
            check, words = (integer, _INTEGER) if spec.kind in ("count", "bytes") else _bound(name)
            need(value is None or check(value), where, f"{words} or null", value)
            continue
        need(name in metrics, where, "present", None, missing=True)
        value = metrics[name]
        check, words = _bound(name)
        if name == "step_count":
            need(integer(value) and value > 0, where, "a positive integer", value)
        elif name == "peak_memory_allocated_bytes":
            need(value is None or integer(value), where, f"{_INTEGER} or null", value)
        elif spec.kind in ("count", "bytes"):
            need(integer(value), where, _INTEGER, value)
        elif name == "overlap_efficiency" and no_copies:
            need(value is None or check(value), where, f"{words} or null", value)
        else:
            need(check(value), where, words, value)
    kernels = metrics.get("kernels")
    need(isinstance(kernels, dict), "metrics.kernels", "an object of kernel names", kernels)
    for kernel, row in kernels.items():
        where = f"metrics.kernels[{kernel}]"
        need(isinstance(row, dict), where, "an object", row)
        need(integer(row.get("count")), f"{where}.count", _INTEGER, row.get("count"))
        need(number(row.get("time_us")), f"{where}.time_us", _NUMBER, row.get("time_us"))
    need(kernels or not metrics["kernel_count"], "metrics.kernels", "the counts of the kernels that ran", kernels)
    collectives = metrics.get("collectives", {})  # absent from entries recorded before it
    need(isinstance(collectives, dict), "metrics.collectives", "an object of collective names", collectives)
    for name, row in collectives.items():
        where = f"metrics.collectives[{name}]"
        need(isinstance(row, dict), where, "an object", row)
        need(integer(row.get("count")), f"{where}.count", _INTEGER, row.get("count"))
        need("bytes" in row and (row["bytes"] is None or integer(row["bytes"])), f"{where}.bytes",
              f"{_INTEGER} or null", row.get("bytes"), missing="bytes" not in row)


def check_samples(per_step: Any, summaries: Any, prefix: str, complete: bool = False,
                   partial: bool = False) -> None:
    """A run's ``per_step``: a list per judged series, ``stalled`` and each kernel name, all
    of one length with the other lists (which an update pools: ``sm_clock_mhz`` and
    ``clock_events``, kept since 2026-11-28, above 0 and NVML's bit masks, or null), values
    >= 0 (ratios at most 1, nulls only in ratios); and its ``distribution``, with a summary of every series that
    has usable steps when ``complete`` (a recorded run's: its medians bound the next run's,
    and one left out would widen that bound).  ``partial``: a results document's, which may
    lack the series kept since it was written (before 2026-11-23: the times and counts alone)."""
    need(isinstance(per_step, dict), f"{prefix}per_step", "an object", per_step)
    kernels = per_step.get("kernels")
    need(isinstance(kernels, dict), f"{prefix}per_step.kernels", "an object of kernel names", kernels,
          missing=kernels is None)
    series = [name for name, spec in METRICS.items() if judged_series(spec)]
    lengths = set()
    # a series absent (not null) was kept before it existed
    kept = [n for n in [*series, "stalled"] if n in per_step or not (partial or n in RECORDED_SINCE)]
    for name, values in [*((n, per_step.get(n)) for n in kept), *((f"kernels[{k}]", v) for k, v in kernels.items())]:
        where = f"{prefix}per_step.{name}"
        need(isinstance(values, list), where, "a list of per-step values", values, missing=values is None)
        check, words = _bound(name)
        for i, value in enumerate(values):
            need(check(value) or value is None and name in _NULL_WHEN, f"{where}[{i}]", words, value)
        lengths.add(len(values))
    for name, values in per_step.items():
        if name not in (*series, "stalled", "kernels"):
            need(isinstance(values, list), f"{prefix}per_step.{name}", "a list of per-step values", values)
            lengths.add(len(values))
    # not judged series: read to put the host series at one speed, and the kernels' at one SM clock
    for name, (check, words) in (("launch_call_us", (_positive, _POSITIVE)), ("sm_clock_mhz", (_positive, _POSITIVE)),
                                 ("clock_events", (integer, _INTEGER))):
        for i, value in enumerate(per_step.get(name) or ()):
            need(value is None or check(value), f"{prefix}per_step.{name}[{i}]", f"{words} or null", value)
    need(len(lengths) == 1, f"{prefix}per_step", "lists of one length (one value per step)", sorted(lengths))
    for i, value in enumerate(per_step.get("stalled") or ()):
        need(value in (0, 1) and not isinstance(value, float), f"{prefix}per_step.stalled[{i}]", "0 or 1", value)
    for name, (words, told_by, empty) in _NULL_WHEN.items():
        values = per_step.get(name) or () if name in series else ()
        for told in told_by if None in values else ():  # (a list a null's step is told by: other lists may be absent)
            need(told in per_step, f"{prefix}per_step.{told}", "", None, missing=True)
        for i, value in enumerate(values):
            need(value is not None or empty(per_step, i), f"{prefix}per_step.{name}[{i}]",
                  f"{_bound(name)[1]} (null only in {words})", value)
    check_summaries(summaries, f"{prefix}distribution")
    if complete:
        expected = distribution(per_step)
        for name in expected:
            if name != "kernels":
                need(name in summaries, f"{prefix}distribution.{name}", "", None, missing=True)
        for kernel in expected["kernels"]:
            need(kernel in summaries.get("kernels", {}), f"{prefix}distribution.kernels[{kernel}]", "", None,
                  missing=True)


def check_summaries(summaries: Any, where: str) -> None:
    """A ``distribution``: the summaries it holds (a series without one is summarized
    from its samples, ``samples.distribution``)."""
    need(isinstance(summaries, dict), where, "an object", summaries)
    kernels = summaries.get("kernels", {})
    need(isinstance(kernels, dict), f"{where}.kernels", "an object of kernel names", kernels)
    for name, summary in summaries.items():
        if name in METRICS:
            _check_summary(summary, f"{where}.{name}", name)
    for kernel, summary in kernels.items():
        _check_summary(summary, f"{where}.kernels[{kernel}]", "kernel")


def _check_summary(summary: Any, where: str, name: str) -> None:
    need(isinstance(summary, dict), where, "a summary object (n, min, q1, median, q3, max)", summary)
    need(integer(summary.get("n")) and summary["n"] > 0, f"{where}.n", "a positive integer", summary.get("n"))
    check, words = _bound(name)
    for key in ("min", "q1", "median", "q3", "max"):
        need(check(summary.get(key)), f"{where}.{key}", words, summary.get(key))
    ordered = [summary[k] for k in ("min", "q1", "median", "q3", "max")]
    need(ordered == sorted(ordered), where, "ordered min <= q1 <= median <= q3 <= max", ordered)


def check_timeline(timeline: Mapping[str, Any]) -> None:
    """The timeline sample the HTML report draws: every event's and range's indices in range
    (a sample stored before ranges or runtime calls were kept has none)."""
    try:
        events(timeline)
        ranges(timeline)
        calls(timeline)
        ok = (integer(timeline["span_ns"]) and integer(timeline["step"]) and set(timeline["kinds"]) <= set(KINDS)
              and all(integer(s) for s in timeline["streams"]) and all(isinstance(n, str) for n in timeline["names"])
              and all(integer(t) for t in timeline.get("threads", []))
              and all(isinstance(n, str) for n in timeline.get("range_names", []))
              and all(isinstance(n, str) for n in timeline.get("call_names", []) + timeline.get("thread_names", [])))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        ok = False
    need(ok, "timeline", "a timeline sample (step, span_ns, streams, names, kinds, events)", timeline)


#: What ``integer``, ``number`` and ``_ratio`` accept, in the errors' words: no value past
#: what the trace tables hold (``INT64_MAX``).
_INTEGER, _NUMBER, _RATIO = "an integer in [0, 2**63)", "a finite number in [0, 2**63)", "a finite number in [0, 1]"
_POSITIVE = "a finite number in (0, 2**63)"


def integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT64_MAX


def number(value: Any) -> bool:
    """In [0, 2**63), also as the float that summaries and verdicts compute with (2**63 - 1
    is 2.0**63 there); NaN and the infinities fail the comparisons, a 400-digit integer
    fails before it is converted."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= INT64_MAX
            and float(value) <= INT64_MAX)


def _ratio(value: Any) -> bool:
    return number(value) and value <= 1


def _positive(value: Any) -> bool:
    return number(value) and value > 0


def _bound(name: str) -> tuple[Callable[[Any], bool], str]:
    """How a value of the metric or series NAME is checked, and the words saying so: a
    ratio at most 1 (``pcie_utilization`` may pass 1 where the link is faster than NVML
    said), a host-speed reading or a bandwidth above 0, any other number at least 0."""
    spec = METRICS.get(name)
    if spec is not None and spec.kind == "ratio" and name != "pcie_utilization":
        return _ratio, _RATIO
    if name == "launch_call_us" or spec is not None and spec.kind == "rate":
        return _positive, _POSITIVE
    return number, _NUMBER


def need(ok: Any, where: str, what: str, got: Any, missing: bool = False) -> None:
    if not ok:
        raise ValueError(f"{where} is missing" if missing else f"{where} must be {what}, got {shown(got)}")


def shown(value: Any, width: int = 60) -> str:
    """A value as an error quotes it: its ``repr``, cut short at ``width`` characters."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
