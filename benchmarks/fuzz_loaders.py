"""Hostile inputs for the trace loaders: real traces of tests/data altered, each judged.

Every altered input goes through ``gpuprof analyze``'s own path (load, then metrics);
a Kineto trace also through the generic parser alone.  Each outcome is one of

* clean error: a GpuprofError whose message names the file;
* accepted: metrics that pass the checks below;
* traceback: any other exception;
* parsers disagree: a Kineto trace on which the fast path and the generic parser give
  different metrics, different errors, or metrics and an error;
* silently wrong: metrics where the input must be refused (a document that is not valid
  JSON, a value a trace may not hold), a negative time, count or size, a ratio outside
  [0, 1], or metrics that differ from the unaltered trace's where the alteration touched
  no event the metrics read.

What must be refused is worked out here, not by the loaders: the standard ``json``
module says whether a document is valid JSON, and each alteration of a value says
whether the value is one a trace may hold.

    python benchmarks/fuzz_loaders.py [--per-class 300] [--seed 1]
    python benchmarks/fuzz_loaders.py --smoke
        a few inputs per class, in seconds (CI runs it).
    python benchmarks/fuzz_loaders.py --per-class 300 --seed 1 --input N [--folder DIR]
        input N alone (each input past "accepted" is told with its number), its file left in DIR.

Each input past "accepted" is told as it comes: its number, probe, source file and
alteration, then the reason; then the table of outcomes per probe and the summary line.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import random
import re
import sqlite3
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from make_big_trace import event_spans
from pytest_gpuprof.capture.ranges import METADATA_MARK, NVTX_DOMAIN
from pytest_gpuprof.cli.inputs import measure_any
from pytest_gpuprof.errors import GpuprofError
from pytest_gpuprof.metrics.specs import METRICS
from pytest_gpuprof.trace import kineto, kineto_columns

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
#: The small real traces (the 2 MB host traces would only slow the run down).
KINETO_SOURCES = sorted(DATA.glob("*.pt.trace.json.gz")) + [DATA / "host" / "steady.pt.trace.json.gz"]
NSYS_SOURCES = sorted((DATA / "nsys").glob("*.sqlite.gz"))
#: Values an alteration writes, as JSON text.
VALUES = ["null", '"12"', "-5", "-0.5", "true", "[]", "{}", "NaN", "1e5", str(1 << 63), "9223372036854775.808",
          "7", "0", "[" * 5000 + "]" * 5000]
#: The columns each nsys table must have (nsys writes them all).
NSYS_COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ["start", "end", "demangledName", "deviceId", "streamId", "correlationId"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["start", "end", "copyKind", "bytes", "deviceId", "streamId", "correlationId"],
    "CUPTI_ACTIVITY_KIND_MEMSET": ["start", "end", "bytes", "deviceId", "streamId", "correlationId"],
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "nameId", "globalTid", "correlationId"],
}
SQL_VALUES = [None, "abc", 1.5, (1 << 63) - 1, -5, "swap"]
RATIOS = [name for name, spec in METRICS.items() if spec.kind == "ratio"]
OUTCOMES = ("clean error", "accepted", "traceback", "silently wrong", "parsers disagree")
#: How the summary line counts each outcome.
SUMMARY_WORDS = {"clean error": "clean errors", "traceback": "tracebacks", "silently wrong": "silently wrong",
                 "parsers disagree": "parser disagreements"}


@dataclass
class Altered:
    """One hostile input: the bytes (Kineto) or the SQLite edit, and what it implies."""

    probe: str
    source: Path
    describe: str
    data: bytes | None = None  # Kineto: the altered document
    gzipped: bool = False
    edit: Callable[[Path], None] | None = None  # nsys: applied to a copy of the SQLite file
    must_fail: bool = False  # the input holds what a trace may not
    untouched: bool = False  # no event the metrics read was altered: the metrics must not change


# ---- Kineto ---------------------------------------------------------------------------

def unzipped(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


def events_and_bounds(raw: bytes) -> tuple[list[tuple[int, int, dict]], int, int]:
    """(start, end, event) of each event, with the events array's bounds: where the
    ``"traceEvents"`` key starts and where the array's ``]`` is (the sources are ASCII,
    so offsets are bytes)."""
    text = raw.decode("ascii")
    spans, first = list(event_spans(text)), text.index('"traceEvents"')
    return spans, first, text.index("]", spans[-1][1] if spans else first)


def touches(spans, lo: int, hi: int, first: int, last: int) -> bool:
    """Whether bytes lo..hi lie outside the events array or inside an event the metrics read."""
    return lo < first or hi > last or any(s < hi and lo < e for s, e, _ in spans)


#: The args keys the metrics read, per event category.
ARGS_READ = {"kernel": ("device", "stream", "correlation"), "gpu_memcpy": ("device", "stream", "correlation", "bytes"),
             "gpu_memset": ("device", "stream", "correlation", "bytes"), "cuda_runtime": ("correlation",),
             "cuda_driver": ("correlation",), "user_annotation": ()}


def value_ok(cat: str, key: str, value: str) -> bool | None:
    """Whether VALUE (JSON text) may stand for KEY of a CAT event: False where it must be
    refused, True where the metrics do not read it, None where it is valid but changes a number."""
    if key in ("ts", "dur"):  # non-negative decimal microseconds, in range
        if not re.fullmatch(r"\d+(\.\d+)?", value):
            return False
        whole, _, frac = value.partition(".")
        return None if int(whole + (frac + "000")[:3]) < 1 << 53 else False
    if key == "name":
        return None if value.startswith('"') else False
    if key == "args":
        return None if value == "{}" and "bytes" not in ARGS_READ[cat] else False
    if key != "tid" and key not in ARGS_READ[cat]:
        return True
    integer = re.fullmatch(r"-?\d+", value) and abs(int(value)) < 1 << 63
    return None if integer and not (key == "bytes" and int(value) < 0) else False


def kineto_inputs(rng: random.Random, per_class: int) -> list[Altered]:
    out = []
    for probe in KINETO_PROBES:
        for _ in range(per_class):
            out.append(_kineto_input(rng, probe))
    return out


KINETO_PROBES = ("truncate", "flip byte", "insert bytes", "set value", "drop key", "deviceProperties",
                 "unread event", "trailing bytes")
#: Bytes the insertions draw from.
JUNK = b'{}[]",:\\-0123456789 e\x00\x1b\xff'
#: What the "unread event" probe writes into one of the event's strings.
STRING_BREAKS = [b'"', b"\\", b"\x01", b"\n", b"\xff", b"\\q", b"\\u12", b"\\u00e9"]
NSYS_PROBES = ("drop column", "set value", "gpuprof mark", "lost string", "file bytes")


def _kineto_input(rng: random.Random, probe: str) -> Altered:
    src = rng.choice(KINETO_SOURCES)
    raw = unzipped(src)
    events, first, last = events_and_bounds(raw)
    spans = [span for span in events if kineto_columns.is_needed(span[2])]
    gz, probe_name = rng.random() < 0.5, "kineto " + probe
    if probe == "truncate":
        at = rng.randrange(len(raw))
        return Altered(probe_name, src, f"cut at {at}", raw[:at], gz, must_fail=bool(raw[at:].strip()))
    if probe in ("flip byte", "insert bytes"):
        at = rng.randrange(len(raw))
        if probe == "flip byte":
            data, hi = raw[:at] + bytes([raw[at] ^ (1 << rng.randrange(8))]) + raw[at + 1:], at + 1
        else:
            data, hi = raw[:at] + _junk(rng) + raw[at:], at
        return Altered(probe_name, src, f"at {at}", data, gz, untouched=not touches(spans, at, hi, first, last))
    if probe == "unread event":
        return _unread_event(rng, src, raw, [span for span in events if not kineto_columns.is_needed(span[2])], gz)
    if probe == "trailing bytes":
        junk = _junk(rng)
        return Altered(probe_name, src, f"{junk!r} appended", raw.rstrip() + junk, gz, untouched=True)
    if probe == "deviceProperties":
        value = rng.choice(["5", '"x"', "[5]", '[{"id": "0", "name": "g"}]', '[{"id": 0, "name": 5}]', "{}",
                            "[" * 5000 + "]" * 5000])
        data = raw.replace(b'"deviceProperties":', b'"deviceProperties": ' + value.encode() + b', "was":', 1)
        return Altered(probe_name, src, value[:20], data, gz, must_fail=True)
    start, end, event = rng.choice(spans)
    key = rng.choice(["ts", "dur", "name", "tid", "args"] + [k for k in ("device", "stream", "correlation", "bytes")
                                                            if k in event.get("args", {})])
    text = raw[start:end].decode()
    if probe == "drop key":
        new, expect = text.replace(f'"{key}":', f'"{key}_dropped":', 1), _dropped_ok(event["cat"], key)
    else:
        value = rng.choice(VALUES)
        lo, hi = _value_span(text, key)
        new, expect = text[:lo] + value + text[hi:], value_ok(event["cat"], key, value)
    data = raw[:start] + new.encode() + raw[end:]
    return Altered(probe_name, src, f"{event['cat']} {key}: {new[:60]!r}", data, gz,
                   must_fail=expect is False, untouched=expect is True)


def _junk(rng: random.Random) -> bytes:
    return bytes(rng.choice(JUNK) for _ in range(rng.randint(1, 4)))


def _unread_event(rng: random.Random, src: Path, raw: bytes, spans, gz: bool) -> Altered:
    """One event the metrics do not read altered: a flipped bit, inserted bytes, a string
    broken in its middle or a number given a leading zero.  Valid or not, the metrics
    must be the unaltered trace's if the document is accepted."""
    start, end, event = rng.choice(spans)
    how = rng.choice(["flip", "insert", "string", "leading zero"])
    if how == "flip":
        at = rng.randrange(start, end)
        new = bytes([raw[at] ^ (1 << rng.randrange(8))])
        data = raw[:at] + new + raw[at + 1:]
    elif how == "insert":
        at, new = rng.randrange(start, end), _junk(rng)
        data = raw[:at] + new + raw[at:]
    else:
        pattern = rb'"[^"]*"' if how == "string" else rb'(?<=": )-?(?=[0-9])'
        found = list(re.finditer(pattern, raw[start:end]))
        if not found:
            return _unread_event(rng, src, raw, spans, gz)
        match = rng.choice(found)
        if how == "string":
            at, new = start + rng.randint(match.start() + 1, match.end() - 1), rng.choice(STRING_BREAKS)
        else:
            at, new = start + match.end(), b"0"
        data = raw[:at] + new + raw[at:]
    return Altered("kineto unread event", src, f"{event.get('cat', event.get('ph'))} event, {how} {new!r} at {at}",
                   data, gz, untouched=True)


def _dropped_ok(cat: str, key: str) -> bool | None:
    """As ``value_ok``, for KEY left out of a CAT event."""
    if key in ("ts", "dur", "name", "tid") or (key in ("args", "bytes") and "bytes" in ARGS_READ[cat]):
        return False
    return True if key == "args" and not ARGS_READ[cat] else None


def _value_span(text: str, key: str) -> tuple[int, int]:
    """Where KEY's value lies in one event's JSON text."""
    at = text.index(f'"{key}":') + len(key) + 3
    at = len(text) - len(text[at:].lstrip())
    _, end = json.JSONDecoder().raw_decode(text, at)
    return at, end


# ---- nsys -----------------------------------------------------------------------------

def nsys_inputs(rng: random.Random, per_class: int) -> list[Altered]:
    return [_nsys_input(rng, probe) for probe in NSYS_PROBES for _ in range(per_class)]


def _nsys_input(rng: random.Random, probe: str) -> Altered:
    src = rng.choice(NSYS_SOURCES)
    tables = _tables_with_rows(src)
    probe_name = "nsys " + probe
    if probe == "drop column":
        table = rng.choice(tables)
        column = rng.choice(NSYS_COLUMNS[table] + ["extra"])
        return Altered(probe_name, src, f"{table}.{column}", edit=_drop(table, column), must_fail=column != "extra")
    if probe == "set value":
        table = rng.choice(tables)
        column, value = rng.choice(NSYS_COLUMNS[table]), rng.choice(SQL_VALUES)
        must = value in (None, "abc", 1.5, "swap") or (value == -5 and column in ("start", "end", "bytes")) \
            or (value == (1 << 63) - 1 and column in ("start", "end", "bytes"))
        return Altered(probe_name, src, f"{table}.{column} = {value!r}", edit=_set(table, column, value, rng.random()),
                       must_fail=must)
    if probe == "gpuprof mark":
        payload = rng.choice(["{bad", "[1]", "5", '{"a": 1}', '"x"'])
        return Altered(probe_name, src, payload, edit=_mark(payload), must_fail=not payload.startswith('{"'))
    if probe == "lost string":
        table = rng.choice([t for t in tables if t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME")])
        return Altered(probe_name, src, table, edit=_lose_string(table), must_fail=True)
    size = len(unzipped(src))
    at, cut = rng.randrange(size), rng.random() < 0.3
    return Altered(probe_name, src, f"{'cut' if cut else 'flip'} at {at}", edit=_bytes(at, cut))


def _tables_with_rows(src: Path) -> list[str]:
    with _sqlite_copy(src) as path:
        con = sqlite3.connect(path)
        try:
            have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            return [t for t in NSYS_COLUMNS if t in have and con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]]
        finally:
            con.close()


@contextlib.contextmanager
def _sqlite_copy(src: Path):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.sqlite"
        path.write_bytes(unzipped(src))
        yield path


def _sql(path: Path, *statements: tuple) -> None:
    con = sqlite3.connect(path)
    try:
        for statement in statements:
            con.execute(*statement)
        con.commit()
    finally:
        con.close()


def _drop(table: str, column: str):
    def edit(path: Path) -> None:
        if column == "extra":
            _sql(path, (f"ALTER TABLE {table} ADD COLUMN extra INTEGER",), (f"ALTER TABLE {table} DROP COLUMN extra",))
        else:
            _sql(path, (f"ALTER TABLE {table} DROP COLUMN {column}",))
    return edit


def _set(table: str, column: str, value, where: float):
    def edit(path: Path) -> None:
        con = sqlite3.connect(path)
        rowids = [r[0] for r in con.execute(f"SELECT rowid FROM {table} ORDER BY rowid")]
        con.close()
        rowid = rowids[int(where * len(rowids))]
        loosen(path, table)  # so that NULL can be written
        if value == "swap":
            _sql(path, (f"UPDATE {table} SET start = end, end = start - 1 WHERE rid = ?", (rowid,)))
        else:
            _sql(path, (f"UPDATE {table} SET {column} = ? WHERE rid = ?", (value, rowid)))
    return edit


def loosen(path: Path, table: str) -> None:
    """TABLE copied without its NOT NULL constraints (a damaged or hand-made export);
    its column ``rid`` holds each row's former rowid."""
    _sql(path, (f"CREATE TABLE loose AS SELECT rowid AS rid, * FROM {table}",), (f"DROP TABLE {table}",),
         (f"ALTER TABLE loose RENAME TO {table}",))


def _mark(payload: str):
    def edit(path: Path) -> None:
        con = sqlite3.connect(path)
        domain = con.execute("SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = ?",
                             (NVTX_DOMAIN,)).fetchone()
        start = con.execute("SELECT min(start) FROM NVTX_EVENTS").fetchone()[0]
        con.close()
        _sql(path, ("INSERT INTO NVTX_EVENTS (start, eventType, text, domainId) VALUES (?, 34, ?, ?)",
                    (start, METADATA_MARK + payload, domain[0] if domain else 0)))
    return edit


def _lose_string(table: str):
    column = "demangledName" if table.endswith("KERNEL") else "nameId"
    def edit(path: Path) -> None:
        _sql(path, (f"DELETE FROM StringIds WHERE id = (SELECT {column} FROM {table} LIMIT 1)",))
    return edit


def _bytes(at: int, cut: bool):
    def edit(path: Path) -> None:
        raw = path.read_bytes()
        path.write_bytes(raw[:at] if cut else raw[:at] + bytes([raw[at] ^ 0xFF]) + raw[at + 1:])
    return edit


# ---- judging --------------------------------------------------------------------------

@contextlib.contextmanager
def generic_only():
    """The Kineto loader with its fast path giving up on every file."""
    def give_up(_path):
        raise kineto._Fallback
    saved, kineto._read_fast = kineto._read_fast, give_up
    try:
        yield
    finally:
        kineto._read_fast = saved


def outcome(path: Path) -> tuple[str, str]:
    """("error", message), ("ok", the metrics as JSON text) or ("traceback", the exception)."""
    try:
        return "ok", json.dumps(measure_any(str(path)).to_json(), sort_keys=True)
    except GpuprofError as exc:
        return "error", str(exc)
    except Exception:  # any exception: what this script counts
        return "traceback", traceback.format_exc(limit=-3)


def wrong_numbers(metrics_json: str) -> str | None:
    """A number no trace can give: negative times, counts or sizes, a ratio outside [0, 1]."""
    metrics = json.loads(metrics_json)["metrics"]
    for key, value in metrics.items():
        values = value if isinstance(value, list) else [value]
        if key == "kernels":
            values = [v for k in value.values() for v in k.values()]
        for v in values:
            if isinstance(v, (int, float)) and (v < 0 or v != v or (key in RATIOS and v > 1)):
                return f"{key} = {v}"
    return None


_reference: dict[Path, str] = {}


def reference(src: Path) -> str:
    """The unaltered trace's metrics."""
    if src not in _reference:
        with _sqlite_copy(src) if src.name.endswith(".sqlite.gz") else contextlib.nullcontext(src) as path:
            _reference[src] = outcome(path)[1]
    return _reference[src]


def judge(item: Altered, folder: Path) -> tuple[str, str]:
    """(one of OUTCOMES, why)."""
    if item.data is not None:
        path = folder / ("t.json.gz" if item.gzipped else "t.json")
        path.write_bytes(gzip.compress(item.data, 1) if item.gzipped else item.data)
        with generic_only():
            generic = outcome(path)
    else:
        path = folder / "t.sqlite"
        path.write_bytes(unzipped(item.source))
        item.edit(path)
        generic = None
    kind, text = outcome(path)
    if kind == "traceback" or (generic and generic[0] == "traceback"):
        return "traceback", text if kind == "traceback" else generic[1]
    if generic and generic != (kind, text):
        return "parsers disagree", f"fast path {kind}, generic {generic[0]}: {text[:200]} | {generic[1][:200]}"
    if kind == "error":
        if str(path) not in text:
            return "silently wrong", f"the error does not name the file: {text}"
        return "clean error", text
    if item.data is not None and not valid_json(item.data):
        return "silently wrong", "invalid JSON accepted"
    if item.must_fail:
        return "silently wrong", f"accepted: {item.describe}"
    bad = wrong_numbers(text)
    if bad:
        return "silently wrong", bad
    if item.untouched and text != reference(item.source):
        return "silently wrong", f"metrics changed, yet no event they read was altered ({item.describe})"
    return "accepted", ""


def valid_json(data: bytes) -> bool:
    try:
        json.loads(data)
        return True
    except (ValueError, RecursionError):
        return False


def told(number: int, item: Any, verdict: str, why: str) -> str:
    """One input past "accepted", in enough words to act on: its number (``--input``), probe,
    file and alteration, then the reason, indented (a traceback keeps its lines)."""
    trace = getattr(item, "trace", None)  # (fuzz_baselines: the trace the file was judged on)
    on = f", judged on {_relative(trace)}" if trace is not None else ""
    source = _relative(getattr(item.source, "path", item.source))
    reason = "".join("\n    " + line for line in why.rstrip().splitlines())
    return f"{verdict}: input {number}, {item.probe} of {source}{on}: {item.describe}{reason}"


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def run(inputs: list, judge: Callable[[Any, Path], tuple[str, str]], only: int | None = None,
        folder: Path | None = None) -> dict[str, Counter]:
    """The outcome of each input (``judge(item, folder)``: one of OUTCOMES, why) counted per
    probe; every outcome past "accepted" is told on standard output as it comes (``told``).
    ``only``: input number ONLY alone; ``folder``: judged there (left behind) rather than in
    a temporary folder."""
    counts: dict[str, Counter] = {}
    with tempfile.TemporaryDirectory() if folder is None else contextlib.nullcontext(str(folder)) as tmp:
        for number, item in enumerate(inputs):
            if only is not None and number != only:
                continue
            verdict, why = judge(item, Path(tmp))
            counts.setdefault(item.probe, Counter())[verdict] += 1
            if verdict in OUTCOMES[2:] or only is not None:
                print(told(number, item, verdict, why), flush=True)
    return counts


def main(doc: str, make_inputs: Callable[[random.Random, int], list],
         judge: Callable[[Any, Path], tuple[str, str]], outcomes: tuple[str, ...] = OUTCOMES) -> int:
    """A fuzz script's command line (``--per-class``, ``--seed``, ``--smoke``, ``--input``,
    ``--folder``): each input past "accepted" (a traceback, a silently wrong number, ...) told
    as it comes (``told``), then a table of ``outcomes`` per probe and a summary line; 1 when
    an input was past "accepted".  (Also ``fuzz_baselines.py``'s.)"""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=300, help="inputs per probe (default 300)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="3 inputs per probe, in seconds")
    parser.add_argument("--input", type=int, metavar="N",
                        help="judge input N alone (the number a failure is told with; same --seed and --per-class)")
    parser.add_argument("--folder", type=Path, metavar="DIR",
                        help="judge in DIR and leave the last input's files there (with --input: that input's)")
    args = parser.parse_args()
    if args.folder:
        args.folder.mkdir(parents=True, exist_ok=True)
    counts = run(make_inputs(random.Random(args.seed), 3 if args.smoke else args.per_class), judge, args.input,
                 args.folder)
    print(f"| probe | inputs | {' | '.join(outcomes)} |")
    print("|---|---:|" + "---:|" * len(outcomes))
    total = Counter()
    for probe in sorted(counts):
        total += counts[probe]
        cells = " | ".join(str(counts[probe][o]) for o in outcomes)
        print(f"| {probe} | {sum(counts[probe].values())} | {cells} |")
    print(f"| all | {sum(total.values())} | " + " | ".join(str(total[o]) for o in outcomes) + " |")
    bad = sum(total[o] for o in outcomes[2:])
    print(f"{'smoke ' if args.smoke else ''}fuzz {'passed' if not bad else 'FAILED'}: {sum(total.values())} inputs, "
          + ", ".join(f"{total[o]} {SUMMARY_WORDS[o]}" for o in outcomes if o != "accepted")
          + (" (each told above the table)" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(__doc__, lambda rng, per_class: kineto_inputs(rng, per_class) + nsys_inputs(rng, per_class), judge))
