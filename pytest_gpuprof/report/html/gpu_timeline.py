"""The GPU timeline of a test as ``timeline.js`` draws it: both runs' sampled step, one lane
per stream, each kernel whose own verdict broke marked, each host thread's runtime calls by
what they do, and the legend of what the runs hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...compare.status import BROKEN
from ...metrics import timeline
from ...metrics.measure import is_comm_kernel, is_launch_call, is_sync_call
from ...metrics.specs import kernel_counter
from ..names import function_name, kernel_metric, short_name
from ..words import kernel_verdict_words

#: Timeline colours by activity kind, close to Nsight Systems' (kernels blue, HtoD green, DtoH pink).
KIND_COLORS = {
    "kernel": "#3b73b9", "comm": "#9467bd", "htod": "#2ca02c", "dtoh": "#d6409f", "dtod": "#ff8c1a",
    "ptop": "#8c564b", "htoh": "#7f7f7f", "other": "#bcbd22", "memset": "#17becf",
}
KIND_LABELS = {
    "kernel": "kernel", "comm": "NCCL kernel", "htod": "Memcpy HtoD", "dtoh": "Memcpy DtoH", "dtod": "Memcpy DtoD",
    "ptop": "Memcpy PtoP", "htoh": "Memcpy HtoH", "other": "Memcpy (other)", "memset": "Memset",
}
#: What a merged timeline bar is, in the legend.
MERGED_WORDS = "merged: activities closer than 1 px at this zoom (their kind's colour; this one when kinds mix)"
#: The CPU rows' runtime calls by what they do (``_call_kind``), as their legend names them.
CALL_LABELS = {
    "sync": "synchronization (▼: the CPU waits for the GPU)", "launch": "kernel launch",
    "memcpy": "memcpy call (asynchronous)", "other": "other CUDA API call",
}


def timeline_view(t: Mapping[str, Any]) -> dict[str, Any]:
    """What ``timeline.js`` draws: both runs' samples with names shortened (the full ones
    for hover) and box labels the function's own name (as Nsight Systems shows it), each
    stream's role, each kernel whose own verdict broke marked with why, each host thread's
    runtime calls by what they do (a sample stored before calls were kept has none)."""
    marks = _kernel_marks(t.get("verdicts") or [])
    runs: list[dict[str, Any]] = []
    for label, sample in (("baseline", t.get("baseline_timeline")), ("current", t.get("timeline"))):
        if sample is None:
            why = ("the baseline was recorded without a timeline sample (refresh it with --gpuprof-update-baseline)"
                   if label == "baseline" else "no timeline sample for this run")
            runs.append({"label": label, "missing": why})
            continue
        events = [{**e, "kind": "comm"} if e["kind"] == "kernel" and is_comm_kernel(e["name"]) else e
                  for e in timeline.events(sample)]
        kinds: list[set[str]] = [set() for _ in sample["streams"]]
        for e in events:
            kinds[e["lane"]].add(e["kind"])
        names = sample["names"]
        range_names = sample.get("range_names", [])
        call_names = sample.get("call_names", [])
        runs.append({
            "label": label, "step": sample["step"], "span": sample["span_ns"], "truncated": sample["truncated"],
            "streams": [{"id": s, "role": _role(k)} for s, k in zip(sample["streams"], kinds)],
            # "full": as recorded, _shared_samples points them at the page's list
            "names": [short_name(n) for n in names], "full": names,
            "labels": [function_name(n) for n in names],
            "marked": {i: "; ".join(marks[label][n]) for i, n in enumerate(names) if n in marks[label]},
            # lane, kind, start, duration, name index, sorted by start within each lane
            "events": [[e["lane"], e["kind"], e["start_ns"], e["dur_ns"], names.index(e["name"])] for e in events],
            "threads": sample.get("threads", []),
            "thread_names": sample.get("thread_names", [""] * len(sample.get("threads", []))),
            "range_names": range_names,
            # thread, depth, GPU start, GPU end, CPU start, CPU end, name index
            "ranges": [[sample["threads"].index(r["thread"]), r["depth"], r["gpu_start_ns"], r["gpu_end_ns"],
                        r["start_ns"], r["end_ns"], range_names.index(r["name"])] for r in timeline.ranges(sample)],
            "call_names": call_names,
            # thread, what the call does, CPU start, duration, name index
            "calls": [[sample["threads"].index(c["thread"]), _call_kind(c["name"]), c["start_ns"], c["dur_ns"],
                       call_names.index(c["name"])] for c in timeline.calls(sample)],
        })
    return {"runs": runs, "legend": _legend(runs)}


def _legend(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The legend's keys (``key-`` class, words): only what the runs hold."""
    drawn = [r for r in runs if not r.get("missing")]
    kinds = {e[1] for r in drawn for e in r["events"]}
    calls = {c[1] for r in drawn for c in r["calls"]}
    keys = [(kind, label) for kind, label in KIND_LABELS.items() if kind in kinds]
    if any(len(r["events"]) > 1 for r in drawn):
        keys.append(("merged", MERGED_WORDS))
    if any(r["ranges"] for r in drawn):
        keys.append(("range", "annotation range (on the GPU: the span of the work launched in it)"))
    keys += [(f"call-{kind}", label) for kind, label in CALL_LABELS.items() if kind in calls]
    if any(r["marked"] for r in drawn):
        keys.append(("marked", "red tick above: kernel whose own verdict broke (new, vanished, count or time)"))
    return keys


def _kernel_marks(verdicts: list[Mapping[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """Per run, the kernels whose own verdict broke (count or time, new or vanished), each with
    its verdicts in words: a new kernel is marked in the current run, a vanished one in the
    baseline run, a changed one in both."""
    out: dict[str, dict[str, list[str]]] = {"baseline": {}, "current": {}}
    for v in verdicts:
        found = kernel_metric(v["metric"])
        if found is None or v["status"] not in BROKEN or kernel_counter(v["metric"]) is not None:
            continue
        runs = {"new": ("current",), "vanished": ("baseline",)}.get(v["status"], ("baseline", "current"))
        for run in runs:
            out[run].setdefault(found[0], []).append(kernel_verdict_words(v))
    return out


def _call_kind(name: str) -> str:
    """What a runtime call does, as the CPU row colours it (``CALL_LABELS``)."""
    if is_sync_call(name):
        return "sync"
    if is_launch_call(name):
        return "launch"
    return "memcpy" if name.startswith(("cudaMemcpy", "cuMemcpy")) else "other"


def _role(kinds: set[str]) -> str:
    """What runs on a stream, in Nsight's words: compute, copy (with directions) or both."""
    copies = sorted(KIND_LABELS[k].replace("Memcpy ", "") for k in kinds if k not in ("kernel", "comm"))
    if kinds == {"comm"}:
        return "communication"
    if not kinds & {"kernel", "comm"}:
        return "copy " + "/".join(copies)
    return "compute" + (" + " + "/".join(copies) if copies else "")
