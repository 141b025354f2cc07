"""Hostile baseline files: the real baselines of baselines/ altered, each judged.

Every altered file is judged the way a pytest run judges a test (``compare.judge.Judge``:
the trace measured, the test's entry read from the file and checked, then evaluated),
against the test's shipped trace or a trace of it with a planted bug (tests/data/planted),
in a comparing run or, one input in four, a run that updates the baseline; then the
session ends as a run does (``finish``: baselines and every report written, the terminal
section made).  Each outcome is one of

* clean error: an ``error`` result whose message names the file;
* accepted: judged as the checks below say;
* traceback: any exception;
* silently wrong: a file accepted that must be refused, judged otherwise than the checks
  below, an update that wrote a file that must be refused or changed another entry (an
  update keeps every other entry as stored, an old form too: docs/results.md, "Baseline
  files"), or an error that does not name the file.

What must be refused is worked out here from the baseline format (docs/guide/running.md, docs/metrics.md,
docs/results.md), not by the reader: ``refusal`` reads the bytes with the standard json
module and says what the file may not hold (bytes that are not UTF-8 or not JSON, a name
twice in one object, a test or GPU model that is not an object, and in the entry judged a
value of the wrong type, NaN, infinite, negative or over 2**63, a ratio over 1, a missing
part, an unknown backend).  An accepted file must be judged as the unaltered file where the
alteration changed nothing the verdicts read (``judged_part``: not the environment, the
step source, the timeline sample, the runs' machine probes, which a replay has none to
compare with, or another test's entry), and otherwise as the altered entry judged directly
(``evaluate``): the file is judged as written, with no part of it skipped or taken from
elsewhere.

    python benchmarks/fuzz_baselines.py [--per-class 300] [--seed 1]
    python benchmarks/fuzz_baselines.py --smoke
        3 inputs per probe, in seconds (CI runs it).
    python benchmarks/fuzz_baselines.py --per-class 300 --seed 1 --input N [--folder DIR]
        input N alone (each input past "accepted" is told with its number), its file left
        under DIR/baselines.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import random
import re
import shutil
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzz_loaders import OUTCOMES, main
from pytest_gpuprof.capture.profiler import StepPlan
from pytest_gpuprof.compare.evaluate import Measured, TestResult, evaluate
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.compare.samples import judged_series
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.metrics.specs import COPY_KINDS, METRICS
from pytest_gpuprof.report.words import failure_message
from pytest_gpuprof.run.backends import ReplayBackend
from pytest_gpuprof.run.kept_traces import trace_name
from pytest_gpuprof.run.outcomes import Outcomes
from pytest_gpuprof.run.settings import Settings
from pytest_gpuprof.trace.kineto import load_kineto

ROOT = Path(__file__).resolve().parent.parent
BASELINES = ROOT / "baselines"
JUDGED = [name for name, spec in METRICS.items() if judged_series(spec)]
COPY_TIMES = [f"memcpy_{kind}_time_us" for kind in COPY_KINDS]
LIMIT = 2**63  # what the trace tables hold (int64 nanoseconds)
#: Values an alteration writes.
VALUES = [None, math.nan, math.inf, -math.inf, -1, -0.5, -0.0, 0, 1, 7, 0.5, 1.5, 1e300, LIMIT - 1, LIMIT,
          10**30, "abc", "", "12", [], {}, True, False, [1, "x"], {"a": 1}]
NUMBERS = [math.nan, math.inf, -math.inf, -1, -1e-9, -0.0, 0, 1, 0.999, 1.0, 1.5, 7, 1e-320, 1e308, 2**53 + 1,
           LIMIT - 1, LIMIT, 2**64, 10**400, -10**400, True]
#: Names an alteration gives a key: terminal escapes, a lone surrogate, markup, NUL, 5,000 characters.
NAMES = ["", "x", "\x1b[31mred\x1b[0m", "\ud800", "<b>k</b>", "a" * 5000, "kernel\x00name", "\u202eevil", "ΔΣ"]
DROP = "(left out)"  # a value that leaves the member out
STRUCTURE_PROBES = ("set value", "set number", "drop key", "rename key", "extra key", "wrap value", "runs",
                    "backend", "top level", "test and GPU level")
#: A line of a baseline file that holds a number: (indent and name, the number, comma).
NUMBER_LINE = re.compile(rb'(\s*(?:"[^"]*": )?)(-?\d[\d.eE+-]*)(,?)')
BYTE_PROBES = ("truncate", "flip byte", "insert bytes", "not UTF-8", "duplicate key", "deep nesting", "encoding")


@dataclass(frozen=True)
class Source:
    """A shipped baseline file, the one test it holds and the traces that test is judged on."""

    path: Path
    nodeid: str
    gpu: str
    traces: tuple[Path, ...]

    @property
    def name(self) -> str:
        return self.path.name


@functools.cache
def sources() -> tuple[Source, ...]:
    out = []
    for path in sorted(BASELINES.rglob("*.json")):
        tests = json.loads(path.read_text())["tests"]
        if any("ranks" in e for by_gpu in tests.values() for e in by_gpu.values()):
            continue  # a distributed test's entries, one per rank: tests/compare/test_ranks_judge.py
        (nodeid, by_gpu), = tests.items()
        name = trace_name(nodeid)
        planted = sorted((ROOT / "tests" / "data" / "planted").glob(f"*/{name}"))
        traces = (ROOT / "example_suite" / "traces" / name, *planted)
        out.append(Source(path, nodeid, next(iter(by_gpu)), traces))
    return tuple(out)


@dataclass
class Altered:
    """One hostile file and how it is judged."""

    probe: str
    source: Source
    describe: str
    data: bytes
    trace: Path
    update: bool  # judged by a run that updates the baseline


# ---- the alterations ------------------------------------------------------------------

def written(doc: Any) -> bytes:
    """DOC as an update writes a baseline file (``baseline.update_all``, ``files.write_atomic``)."""
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")


def places(node: Any, prefix: tuple = ()) -> list[tuple[tuple, bool]]:
    """Every place under NODE: (path, True for an object's member, False for a list's item)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    out = []
    for key, value in items:
        out.append((prefix + (key,), isinstance(node, dict)))
        out += places(value, prefix + (key,))
    return out


def pick(rng: random.Random, entry: dict, members: bool | None = None) -> tuple:
    """A place of the entry; members as often as list items (the thousands of per-step values
    would otherwise be nearly every pick)."""
    found = places(entry)
    if members is None:
        members = rng.random() < 0.5
    return rng.choice([p for p, member in found if member == members])


def parent(doc: Any, path: tuple) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


def structure_input(rng: random.Random, probe: str, src: Source) -> tuple[str, Any]:
    """(what was done, the altered document)."""
    doc = json.loads(src.path.read_text())
    entry = doc["tests"][src.nodeid][src.gpu]
    if probe in ("set value", "set number", "wrap value"):
        if probe == "set number":
            path = rng.choice([p for p, _ in places(entry) if type(parent(entry, p)[p[-1]]) in (int, float)])
            value = rng.choice(NUMBERS)
        else:
            path = pick(rng, entry)
            old = parent(entry, path)[path[-1]]
            value = rng.choice(VALUES) if probe == "set value" else rng.choice([[old], {"value": old}, [[old]]])
        parent(entry, path)[path[-1]] = value
        return f"{_shown(path)} = {_shown(value)}", doc
    if probe in ("drop key", "rename key"):
        path = pick(rng, entry, members=True)
        value = parent(entry, path).pop(path[-1])
        if probe == "drop key":
            return f"{_shown(path)} left out", doc
        name = rng.choice([*NAMES, path[-1] + "_x", path[-1].upper()])
        parent(entry, path)[name] = value
        return f"{_shown(path)} renamed {name!r}", doc
    if probe == "extra key":
        path = rng.choice([(), *(p for p, _ in places(entry) if isinstance(parent(entry, p)[p[-1]], dict))])
        target = parent(entry, path + (None,))
        name = rng.choice(["zz_extra", rng.choice(list(METRICS)), "kernels", "median", "runs", *NAMES])
        value = rng.choice([*VALUES, copy.deepcopy(rng.choice(list(target.values()) or [0]))])
        target[name] = value
        return f"{_shown(path)} gains {name!r}: {_shown(value)}", doc
    if probe == "runs":
        return _runs(rng, entry), doc
    if probe == "backend":
        value = rng.choice(["torch", "nsys", "Torch", "", None, 5, ["torch"], "nsys ", "perf", DROP])
        _set(entry, "backend", value)
        return f"backend = {_shown(value)}", doc
    if probe == "top level":
        return _top_level(rng, doc)
    return _test_and_gpu(rng, doc, src)


def _set(node: dict, key: str, value: Any) -> None:
    if value is DROP:
        del node[key]
    else:
        node[key] = value


def _runs(rng: random.Random, entry: dict) -> str:
    """The runs list made of the wrong shape, or of another length."""
    runs = entry["runs"]
    run = rng.randrange(len(runs))
    kind = rng.choice(["empty", "object", "null", "one", "twice", "200 copies", "null run", "nested", "short list",
                       "no distribution", "series summary left out", "distribution empty", "machine list",
                       "bad probe", "run of another test"])
    if kind in ("empty", "object", "null", "nested", "one", "twice", "200 copies"):
        entry["runs"] = {"empty": [], "object": {"0": runs[0]}, "null": None, "nested": [runs], "one": runs[:1],
                         "twice": runs + runs, "200 copies": runs[:1] * 200}[kind]
    elif kind == "null run":
        runs[run] = None
    elif kind == "short list":
        per_step = runs[run]["per_step"]
        series = rng.choice([*(s for s in (*JUDGED, "stalled") if s in per_step), *per_step["kernels"]])
        values = per_step[series] if series in per_step else per_step["kernels"][series]
        values.pop()
    elif kind == "no distribution":
        del runs[run]["distribution"]
    elif kind == "series summary left out":
        del runs[run]["distribution"][rng.choice([k for k in runs[run]["distribution"]])]
    elif kind == "distribution empty":
        runs[run]["distribution"] = {}
    elif kind == "machine list":
        runs[run]["machine"] = list(runs[run].get("machine", {}).values())
    elif kind == "bad probe":
        runs[run].setdefault("machine", {})[rng.choice(["gemm_us", "launch_us", "new_probe"])] = rng.choice(VALUES)
    else:
        other = rng.choice(sources())
        (_, by_gpu), = json.loads(other.path.read_text())["tests"].items()
        runs[run] = next(iter(by_gpu.values()))["runs"][0]
    return f"runs: {kind} (run {run})"


def _top_level(rng: random.Random, doc: dict) -> tuple[str, Any]:
    kind = rng.choice(["document", "schema_version", "tests", "extra member", "another test"])
    if kind == "document":
        value = rng.choice([[], None, "x", 1, {}, [doc]])
        return f"document = {_shown(value)}", value
    if kind == "schema_version":
        value = rng.choice([0, 2, "1", 1.0, True, None, -1, DROP])
        _set(doc, "schema_version", value)
        return f"schema_version = {_shown(value)}", doc
    if kind == "tests":
        value = rng.choice([[], None, "x", {}, [doc["tests"]], DROP])
        _set(doc, "tests", value)
        return f"tests = {_shown(value)}", doc
    if kind == "extra member":
        doc[rng.choice(["zz", "comment", "schema"])] = rng.choice(VALUES)
        return "an extra top-level member", doc
    value = rng.choice([*VALUES, {"NVIDIA H200": rng.choice(VALUES)}])
    doc["tests"]["other/test_x.py::test_y"] = value
    return f"another test = {_shown(value)}", doc


def _test_and_gpu(rng: random.Random, doc: dict, src: Source) -> tuple[str, Any]:
    """The test's entry moved, replaced or renamed between the test and GPU levels."""
    by_gpu = doc["tests"][src.nodeid]
    entry = by_gpu[src.gpu]
    kind = rng.choice(["entry", "GPU level skipped", "GPU level doubled", "GPU renamed", "test renamed",
                       "another GPU", "entry of another test"])
    if kind == "entry":
        value = rng.choice([None, [], "x", 5, [entry], True])
        by_gpu[src.gpu] = value
        return f"entry = {_shown(value)}", doc
    if kind == "GPU level skipped":
        doc["tests"][src.nodeid] = entry
    elif kind == "GPU level doubled":
        by_gpu[src.gpu] = {src.gpu: entry}
    elif kind == "GPU renamed":
        by_gpu[rng.choice(["NVIDIA H100", src.gpu.lower(), src.gpu + " ", ""])] = by_gpu.pop(src.gpu)
    elif kind == "test renamed":
        doc["tests"][src.nodeid.upper()] = doc["tests"].pop(src.nodeid)
    elif kind == "another GPU":
        by_gpu["NVIDIA A100"] = rng.choice([*VALUES, {"metrics": None}, copy.deepcopy(entry)])
    else:
        (_, other), = json.loads(rng.choice(sources()).path.read_text())["tests"].items()
        by_gpu[src.gpu] = next(iter(other.values()))
    return kind, doc


def byte_input(rng: random.Random, probe: str, src: Source) -> tuple[str, bytes]:
    raw = src.path.read_bytes()
    at = rng.randrange(len(raw))
    if probe == "truncate":
        at = rng.choice([0, at])
        return f"cut at {at}", raw[:at]
    if probe == "flip byte":
        bit = 1 << rng.randrange(8)
        return f"bit {bit} of byte {at}", raw[:at] + bytes([raw[at] ^ bit]) + raw[at + 1:]
    if probe == "insert bytes":
        junk = bytes(rng.choice(b'{}[]",:\\-0123456789 eE.\x00\x1b\xff\xfe\xc3') for _ in range(rng.randint(1, 4)))
        return f"{junk!r} at {at}", raw[:at] + junk + raw[at:]
    lines = raw.split(b"\n")
    if probe == "not UTF-8":  # inside a string, so that only the encoding is wrong
        i = rng.choice([i for i, line in enumerate(lines) if b'": "' in line])
        bad = rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80", b"\xe2\x82"])
        cut = lines[i].rindex(b'"')
        lines[i] = lines[i][:cut] + bad + lines[i][cut:]
        return f"{bad!r} in line {i + 1}", b"\n".join(lines)
    if probe == "duplicate key":  # the member written again just before itself, with its value or another
        i = rng.choice([i for i, line in enumerate(lines) if line.lstrip().startswith(b'"') and b'": ' in line])
        key = lines[i][:lines[i].index(b'": ') + 3]
        value = rng.choice([lines[i][len(key):].rstrip(b","), json.dumps(rng.choice(VALUES)).encode()])
        lines.insert(i, key + value + b",")
        return f"{key.strip()!r} twice (line {i + 1})", b"\n".join(lines)
    if probe == "deep nesting":  # a number replaced
        found = [(i, m) for i, line in enumerate(lines) if (m := NUMBER_LINE.fullmatch(line))]
        i, m = rng.choice(found)
        depth = rng.choice([50, 1000, 100_000])
        lines[i] = m[1] + b"[" * depth + b"]" * depth + m[3]
        return f"{depth}-deep nesting in line {i + 1}", b"\n".join(lines)
    kind = rng.choice(["UTF-16", "BOM", "CRLF", "trailing data", "trailing spaces", "empty", "spaces only",
                       "UTF-8 name"])
    data = {
        "UTF-16": raw.decode().encode("utf-16"), "BOM": b"\xef\xbb\xbf" + raw, "CRLF": raw.replace(b"\n", b"\r\n"),
        "trailing data": raw + b"}\n", "trailing spaces": raw + b" \n\t\n", "empty": b"", "spaces only": b" \n",
        "UTF-8 name": raw.replace(b'"NVIDIA H200": {', '"NVIDIA H200": {"Δ-note": "ΔΣ ✓", '.encode(), 1),
    }[kind]
    return kind, data


def inputs(rng: random.Random, per_class: int) -> list[Altered]:
    out = []
    for probe in STRUCTURE_PROBES + BYTE_PROBES:
        for _ in range(per_class):
            src = rng.choice(sources())
            if probe in STRUCTURE_PROBES:
                describe, doc = structure_input(rng, probe, src)
                data = written(doc)
            else:
                describe, data = byte_input(rng, probe, src)
            trace = rng.choice(src.traces)
            update = rng.random() < 0.25
            out.append(Altered(probe, src, describe + (", in an update" if update else ""), data, trace, update))
    return out


def _shown(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


# ---- what the file may hold, worked out from the format -------------------------------

def read_independently(data: bytes) -> tuple[Any, str | None]:
    """(document, None), or (None, why it is no JSON document gpuprof may read)."""
    def unique(pairs):
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names):
            raise ValueError("a name twice in one object")
        return dict(pairs)
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=unique), None
    except UnicodeDecodeError:
        return None, "not UTF-8"
    except (ValueError, RecursionError) as exc:
        return None, f"not JSON: {str(exc)[:60]}"


def integer(v: Any, least: int = 0) -> bool:
    return type(v) is int and least <= v < LIMIT


def number(v: Any) -> bool:
    return type(v) in (int, float) and 0 <= v < LIMIT  # (NaN and infinities fail the comparison)


def _ratio(v: Any) -> bool:
    return number(v) and v <= 1


def refusal(doc: Any, src: Source) -> str | None:
    """Why the file must be refused when SRC's test is judged, or None."""
    if not isinstance(doc, dict) or not isinstance(doc.get("tests"), dict):
        return "no tests object"
    if not (integer(doc.get("schema_version")) and doc["schema_version"] == 1):
        return "schema_version is not 1"
    if not all(isinstance(by_gpu, dict) and all(isinstance(e, dict) for e in by_gpu.values())
               for by_gpu in doc["tests"].values()):
        return "a test or an entry that is not an object"
    entry = doc["tests"].get(src.nodeid, {}).get(src.gpu)
    return None if entry is None else entry_refusal(in_todays_form(entry))


def _positive(v: Any) -> bool:
    return number(v) and v > 0


#: Metrics an entry may lack (recorded only since 2026-11-25), and the check of a value of one:
#: the host-speed reading and the copy bandwidths above 0, the PCIe utilization any number
#: (past 1 where the link is faster than NVML said).
OPTIONAL_METRICS = {"launch_call_us": _positive, "pcie_utilization": number,
                    **{f"memcpy_{kind}_gbps": _positive for kind in COPY_KINDS},
                    "comm_kernel_count": integer, "comm_time_us": number, "comm_compute_overlap": _ratio,
                    "exposed_comm_us": number}


def check_of(name: str):
    """How a value of the metric or series NAME is checked."""
    if name in OPTIONAL_METRICS:
        return OPTIONAL_METRICS[name]
    return _ratio if METRICS[name].kind == "ratio" else number


def null_allowed(per_step: dict, name: str, i: int) -> bool:
    """A step may have no value of NAME: a ratio where its window is 0, the overlap where it
    copied nothing, a copy kind's bandwidth where that kind moved nothing, the PCIe
    utilization where the trace does not say its link (anywhere), the communication overlap
    where the step ran no communication kernel."""
    def held(series: str) -> bool:  # a list that tells such a step (without it, no null is allowed)
        return isinstance(per_step.get(series), list) and i < len(per_step[series])

    if name == "pcie_utilization":
        return True
    if name == "comm_compute_overlap":
        return held("comm_time_us") and not per_step["comm_time_us"][i]
    if name.endswith("_gbps"):
        told = [name.replace("_gbps", "_bytes"), name.replace("_gbps", "_time_us")]
        return all(held(series) for series in told) and not all(per_step[series][i] for series in told)
    if name == "overlap_efficiency":
        return not any(per_step[c][i] for c in COPY_TIMES)
    return METRICS[name].kind == "ratio" and not per_step["window_us"][i]


def entry_refusal(e: dict) -> str | None:
    if e.get("backend", "torch") not in ("torch", "nsys"):
        return "backend"
    m = e.get("metrics")
    if not isinstance(m, dict) or any(name not in m for name in METRICS if name not in OPTIONAL_METRICS):
        return "metrics missing"
    no_copies = all(m[name] == 0 for name in COPY_TIMES)
    for name, spec in METRICS.items():
        v = m.get(name)
        if name in OPTIONAL_METRICS:  # absent before 2026-11-25, null where nothing was measured
            ok = v is None or OPTIONAL_METRICS[name](v)
        elif name == "step_count":
            ok = integer(v, least=1)
        elif name == "peak_memory_allocated_bytes":  # null: not recorded in the trace
            ok = v is None or integer(v)
        elif spec.kind in ("count", "bytes"):
            ok = integer(v)
        elif spec.kind == "ratio":  # null: nothing to divide by
            ok = _ratio(v) or (v is None and name == "overlap_efficiency" and no_copies)
        else:
            ok = number(v)
        if not ok:
            return f"metrics.{name}"
    kernels = m.get("kernels")
    if not isinstance(kernels, dict) or (m["kernel_count"] and not kernels) or not all(
            isinstance(k, dict) and integer(k.get("count")) and number(k.get("time_us")) for k in kernels.values()):
        return "metrics.kernels"
    runs = e.get("runs")
    if "per_step" not in e and isinstance(runs, list) and runs and all(isinstance(r, dict) and "per_step" not in r
                                                                       for r in runs):
        return None  # an entry of before samples were kept (in today's form, its one run): judged on its metrics
    if ("per_step" in e) != ("runs" in e):  # samples come with the runs they pool
        return "per_step without runs, or runs without per_step"
    why = samples_refusal(e["per_step"], e.get("distribution", {}), complete=False)
    if why or (m["kernels"] and not e["per_step"]["kernels"]):
        return f"per_step: {why or 'no kernel samples'}"
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
        return "runs"
    for r in runs:
        if "per_step" not in r or "distribution" not in r or not isinstance(r.get("environment", {}), dict):
            return "a run's parts"
        why = samples_refusal(r["per_step"], r["distribution"], complete=True)
        if why:
            return f"a run's {why}"
        machine = r.get("machine", {})
        if not isinstance(machine, dict) or not all(v is None or number(v) for v in machine.values()):
            return "a run's machine"
    return None


def samples_refusal(per_step: Any, summaries: Any, complete: bool) -> str | None:
    """Per-step lists: one value per step in each judged series, ``stalled`` and each kernel's
    times; a ratio null only where the step has nothing to divide by.  Summaries of them:
    ordered, and with ``complete`` one for each series with a step to summarize (a run's)."""
    if not isinstance(per_step, dict) or not isinstance(per_step.get("kernels"), dict):
        return "per_step's lists"
    judged = [name for name in JUDGED if name not in OPTIONAL_METRICS or name in per_step]
    if any(not isinstance(per_step.get(name), list) for name in [*judged, "stalled"]):
        return "per_step's lists"
    lists = [per_step[name] for name in [*judged, "stalled"]] + list(per_step["kernels"].values())
    if not all(isinstance(values, list) for values in lists) or len({len(values) for values in lists}) != 1:
        return "per_step's lists of different lengths"
    if not all(v in (0, 1) and type(v) is int for v in per_step["stalled"]):
        return "stalled"
    readings = per_step.get("launch_call_us")
    if isinstance(readings, list) and not all(v is None or number(v) and v > 0 for v in readings):
        return "per_step.launch_call_us"
    for name in judged:
        for i, v in enumerate(per_step[name]):
            if METRICS[name].kind == "time" or v is not None:
                if not check_of(name)(v):
                    return f"per_step.{name}[{i}]"
            elif not null_allowed(per_step, name, i):
                return f"per_step.{name}[{i}] null"
    if not all(number(v) for values in per_step["kernels"].values() for v in values):
        return "per_step.kernels"
    if not isinstance(summaries, dict) or not isinstance(summaries.get("kernels", {}), dict):
        return "distribution"
    stalled = per_step["stalled"]
    for name, values, summary, check in [
            *((n, per_step[n], summaries.get(n), check_of(n)) for n in judged),
            *((k, v, summaries.get("kernels", {}).get(k), number) for k, v in per_step["kernels"].items())]:
        has_steps = any(v is not None and not stalled[i] for i, v in enumerate(values))
        if summary is None and complete and has_steps:
            return f"distribution.{name} missing"
        if summary is not None and not summary_ok(summary, check):
            return f"distribution.{name}"
    return None


def in_todays_form(entry: Any) -> Any:
    """An entry as gpuprof reads it (docs/results.md, "Baseline files"): one of an object
    with neither ``runs`` nor ``per_step`` (written before runs were kept) gets one run of its
    ``distribution`` and ``environment`` (those that are not empty); a distributed test's
    ranks alike."""
    if not isinstance(entry, dict):
        return entry
    if "ranks" in entry:
        ranks = entry["ranks"]
        return entry if not isinstance(ranks, dict) else {**entry, "ranks": {r: in_todays_form(e)
                                                                              for r, e in ranks.items()}}
    if "runs" in entry or "per_step" in entry:
        return entry
    return {**entry, "runs": [{k: entry[k] for k in ("distribution", "environment") if entry.get(k)}]}


def summary_ok(summary: Any, check) -> bool:
    if not isinstance(summary, dict) or not integer(summary.get("n"), least=1):
        return False
    values = [summary.get(k) for k in ("min", "q1", "median", "q3", "max")]
    return all(check(v) for v in values) and values == sorted(values)


#: Members of an entry the verdicts do not read.
FREE = ("environment", "step_source", "timeline")


def judged_part(doc: Any, src: Source) -> str:
    """What of the file the verdicts on SRC's test read: its entry without the free members
    and the runs' environments and machine probes (a replay has no machine to compare)."""
    try:
        entry = doc["tests"][src.nodeid][src.gpu]
    except (KeyError, TypeError):
        return "no entry"
    part = {k: v for k, v in entry.items() if k not in FREE}
    part["runs"] = [{k: v for k, v in r.items() if k not in ("environment", "machine")} for r in part.get("runs", [])]
    return json.dumps(part, sort_keys=True)


# ---- judging --------------------------------------------------------------------------

@functools.cache
def traced(path: Path):
    return load_kineto(path)


def session(folder: Path, update: bool) -> Settings:
    """A run under --gpuprof (or --gpuprof-update-baseline) replaying FOLDER, with every report."""
    reports = {"json": folder / "r.json", "summary": folder / "s.md", "html": folder / "r.html",
               "benchmark-json": folder / "b.json"}
    settings = Settings(update_baseline=update, strict=False, baseline_dir=folder / "baselines",
                        output_dir=folder / "out", keep_traces=False, replay_dir=folder, plan=StepPlan(),
                        rules=Rules(), reports=reports)
    return settings


def verdicts_of(result) -> str:
    return json.dumps([result.status, result.message, [v.to_json() for v in result.verdicts], result.unstable,
                       result.notes], sort_keys=True)


def judged_directly(src: Source, trace: Path, entry: dict | None) -> str:
    """The verdicts on ENTRY evaluated without reading a file."""
    m = measure(traced(trace))
    run = Measured.of(m, "torch")
    return verdicts_of(TestResult.of(src.nodeid, run, evaluate(run, m, entry, Rules(), update=False)))


@functools.cache
def unaltered(src: Source, trace: Path) -> tuple[Any, str]:
    """The shipped file's document, and its verdicts on TRACE."""
    doc, _ = read_independently(src.path.read_bytes())
    return doc, judged_directly(src, trace, doc["tests"][src.nodeid][src.gpu])


def judge(item: Altered, folder: Path) -> tuple[str, str]:
    """(one of fuzz_loaders.OUTCOMES, why)."""
    src = item.source
    shutil.rmtree(folder / "baselines", ignore_errors=True)
    path = folder / "baselines" / src.path.relative_to(BASELINES)
    path.parent.mkdir(parents=True)
    path.write_bytes(item.data)
    try:
        settings = session(folder, item.update)
        run = Outcomes(settings, ReplayBackend(folder).kept_traces)
        result = run.add(settings.judge().judge(src.nodeid, {}, lambda: {0: (traced(item.trace), item.trace)}))
        wrote = run.finish(None, records_again=False, writes_reports=True)
        "\n".join(run.lines() + ([failure_message(result)] if result.failed else [])).encode()  # as a terminal takes it
    except Exception:  # any exception: what this script counts
        return "traceback", traceback.format_exc(limit=-4)
    doc, unreadable = read_independently(item.data)
    must = unreadable or refusal(doc, src)
    message = result.message if result.status == "error" else "" if wrote else \
        next(line for line in run.written if line.startswith("no baseline written"))
    if message:
        if str(path) not in message:
            return "silently wrong", f"the error does not name the file: {message}"
        return "clean error", message
    if must:
        return "silently wrong", f"accepted, yet the file must be refused ({must})"
    if item.update:
        return updated(path, doc, item)
    got = verdicts_of(result)
    original, verdicts = unaltered(src, item.trace)
    if judged_part(doc, src) == judged_part(original, src):
        if got != verdicts:
            return "silently wrong", "judged otherwise than the unaltered file, yet nothing the verdicts read changed"
    elif got != judged_directly(src, item.trace, in_todays_form(doc["tests"].get(src.nodeid, {}).get(src.gpu))):
        return "silently wrong", "judged otherwise than the entry as written"
    return "accepted", ""


def updated(path: Path, before: dict, item: Altered) -> tuple[str, str]:
    """An update: it wrote a file gpuprof reads, with this run's metrics in the test's entry
    and every other entry as stored, byte for byte once parsed: an entry of an older form
    too, which takes today's form only when it is recorded again (docs/results.md,
    "Baseline files"; ``in_todays_form`` is how it is read, not how it is kept)."""
    src = item.source
    after, unreadable = read_independently(path.read_bytes())
    why = unreadable or refusal(after, src)
    if why:
        return "silently wrong", f"the update wrote a file that must be refused ({why})"
    new = after["tests"][src.nodeid].pop(src.gpu)
    if new["metrics"] != json.loads(json.dumps(measure(traced(item.trace)).metrics)):
        return "silently wrong", "the update recorded other metrics than the run's"
    before["tests"].get(src.nodeid, {}).pop(src.gpu, None)
    for doc in (before, after):  # a test the update added its first entry to
        doc["tests"] = {k: v for k, v in doc["tests"].items() if v or k != src.nodeid}
    if json.dumps(after, sort_keys=True) != json.dumps(before, sort_keys=True):
        return "silently wrong", f"the update changed what it does not record: {changed(before, after)}"
    return "accepted", ""


def changed(before: Any, after: Any, where: str = "") -> str | None:
    """Where AFTER first differs from BEFORE (a member added or left out, or a value written
    otherwise), with the values shortened; None where they are the same."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=repr):
            at = f"{where}[{key!r}]"
            if key not in before:
                return f"{at} added: {_shown(after[key])}"
            if key not in after:
                return f"{at} left out (was {_shown(before[key])})"
            found = changed(before[key], after[key], at)
            if found:
                return found
        return None
    if json.dumps(before, sort_keys=True) != json.dumps(after, sort_keys=True):
        return f"{where} was {_shown(before)}, written {_shown(after)}"
    return None


if __name__ == "__main__":
    sys.exit(main(__doc__, inputs, judge, OUTCOMES[:4]))
