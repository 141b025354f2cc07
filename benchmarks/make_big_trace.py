"""Build a large Kineto trace from a real one by replaying its steps, for benchmarking.

The events of the source trace (all but the ``"ph": "M"`` metadata, which a
longer recording would also hold only once) are written COPIES times, one copy
after the other on the clock: copy k is shifted by k times the source's span,
its correlation, External and flow ids are offset by k times a stride above
every id of the source, and ``ProfilerStep#n`` becomes ``ProfilerStep#(n + k *
steps)``, so each copy is a run of new, distinct steps with its own launches.

The work is done on the event text, not on parsed JSON, so the output keeps
Kineto's exact layout (key order, indentation, three fractional digits) and the
loader's fast path reads it the way it reads a real trace; timestamps are
shifted in exact integer nanoseconds.

    python benchmarks/make_big_trace.py SOURCE.pt.trace.json.gz OUT.json [--events 1500000 | --copies N]
    python benchmarks/make_big_trace.py --smoke
        two copies of the smallest example trace in a temporary directory, read back
        as JSON: the event count and the distinct steps must be what was written.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import sys
import tempfile
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: The smallest trace of the example suite (about 4,000 events), the source of the smoke runs.
SMOKE_SOURCE = (ROOT / "example_suite/traces"
                / "example_suite_test_weight_streaming.py_test_weight_streaming.pt.trace.json.gz")

#: Numbers the copies change: timestamps, ids that link a launch to its GPU work
#: (and flow arrows to their ends), and the step number of ProfilerStep ranges.
_SLOT = re.compile(
    r'(?P<ts>"ts": )(?P<us>\d+)\.(?P<frac>\d{3})(?!\d)'
    r'|(?P<id>"(?:correlation|External id|id)": )(?P<num>\d+)'
    r'|(?P<step>"name": "ProfilerStep#)(?P<n>\d+)(?=")'
)


def read_text(path: Path) -> str:
    raw = path.read_bytes()
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")


def event_spans(text: str) -> Iterator[tuple[int, int, Any]]:
    """(start, end, event) of each event of the ``traceEvents`` array, in order, found by
    the standard JSON decoder: ``text[start:end]`` is the event's exact text."""
    pos = text.index("[", text.index('"traceEvents"')) + 1
    decoder = json.JSONDecoder()
    while True:
        while text[pos] in " \t\r\n,":
            pos += 1
        if text[pos] == "]":
            return
        event, end = decoder.raw_decode(text, pos)
        yield pos, end, event
        pos = end


def split_events(text: str) -> tuple[str, list[str], str, str]:
    """Header (through ``[``), each event's exact text, the separator between events, trailer."""
    spans = [(start, end) for start, end, _ in event_spans(text)]
    events = [text[start:end] for start, end in spans]
    separator = text[spans[0][1]:spans[1][0]]
    return text[:spans[0][0]], events, separator, text[spans[-1][1]:]


class Template:
    """The replicated events as literal text around the numbers each copy rewrites."""

    def __init__(self, body: str) -> None:
        self.pieces: list[str] = []
        self.slots: list[tuple[str, int]] = []
        pos = 0
        for m in _SLOT.finditer(body):
            if m["ts"]:
                self.pieces.append(body[pos:m.end("ts")])
                self.slots.append(("ts", int(m["us"]) * 1000 + int(m["frac"])))
            elif m["id"]:
                self.pieces.append(body[pos:m.end("id")])
                self.slots.append(("id", int(m["num"])))
            else:
                self.pieces.append(body[pos:m.end("step")])
                self.slots.append(("step", int(m["n"])))
            pos = m.end()
        self.pieces.append(body[pos:])

    def render(self, shift_ns: int, id_offset: int, step_offset: int) -> str:
        out = []
        for piece, (kind, value) in zip(self.pieces, self.slots):
            out.append(piece)
            if kind == "ts":
                ns = value + shift_ns
                out.append(f"{ns // 1000}.{ns % 1000:03d}")
            else:
                out.append(str(value + (id_offset if kind == "id" else step_offset)))
        out.append(self.pieces[-1])
        return "".join(out)


def build(source: Path, out: Path, events: int = 1_500_000, copies: int | None = None) -> tuple[int, int, int]:
    """Write the big trace of at least ``events`` events, or of exactly ``copies`` copies
    (gzipped, level 1 like ``gzip -1``, when ``out`` ends in .gz); returns (copies, events
    written, bytes written)."""
    header, texts, separator, trailer = split_events(read_text(source))
    exact = json.JSONDecoder(parse_float=Decimal)
    parsed = [exact.decode(t) for t in texts]
    once = [t for t, ev in zip(texts, parsed) if ev.get("ph") == "M"]
    copied = [t for t, ev in zip(texts, parsed) if ev.get("ph") != "M"]
    timed = [ev for ev in parsed if ev.get("ph") != "M" and "ts" in ev]
    first = min(int(ev["ts"] * 1000) for ev in timed)
    last = max(int((ev["ts"] + ev.get("dur", 0)) * 1000) for ev in timed)
    span_ns = last - first
    ids = [
        int(v) for ev in parsed
        for v in [ev.get("id"), *((ev.get("args") or {}).get(k) for k in ("correlation", "External id"))]
        if isinstance(v, int)
    ]
    id_stride = 10 ** len(str(max(ids, default=0)))  # every id of a copy stays below the next copy's
    step_numbers = [int(m[1]) for ev in parsed if (m := re.fullmatch(r"ProfilerStep#(\d+)", str(ev.get("name"))))]
    steps = max(step_numbers) - min(step_numbers) + 1 if step_numbers else 0
    copies = copies or max(1, math.ceil((events - len(once)) / len(copied)))

    template = Template(separator.join(copied))
    if sum(kind == "ts" for kind, _ in template.slots) != len(timed):
        raise ValueError(f"{source}: some timestamps are not decimal microseconds with three digits")
    gzipped = out.suffix == ".gz"
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=1) if gzipped else open(out, "w", encoding="utf-8") as fh:
        fh.write(header)
        for k in range(copies):
            if k:
                fh.write(separator)
            fh.write(template.render(k * span_ns, k * id_stride, k * steps))
        for text in once:
            fh.write(separator + text)
        fh.write(trailer)
    return copies, copies * len(copied) + len(once), out.stat().st_size


def step_names(path: Path) -> list[str]:
    """The ``ProfilerStep#N`` names of a trace, parsed as JSON."""
    events = json.loads(read_text(path))["traceEvents"]
    return [ev["name"] for ev in events if str(ev.get("name")).startswith("ProfilerStep#")]


def smoke() -> int:
    """Build two copies of SMOKE_SOURCE and read them back: every event and distinct step there."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "big.json"
        copies, count, size = build(SMOKE_SOURCE, out, copies=2)
        print(f"{out}: {count:,} events ({copies} copies of {SMOKE_SOURCE.name}), {size:,} bytes")
        written = len(json.loads(read_text(out))["traceEvents"])
        steps, source_steps = step_names(out), step_names(SMOKE_SOURCE)
    if written != count or len(set(steps)) != len(steps) or len(steps) != copies * len(source_steps):
        print(f"smoke FAILED: {written:,} events read back, {len(set(steps))} distinct of {len(steps)} steps, "
              f"the source has {len(source_steps)}")
        return 1
    print(f"smoke passed: {written:,} events read back as JSON, {len(steps)} distinct steps "
          f"({copies} x the source's {len(source_steps)})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, nargs="?", help="real Kineto trace (.json or .json.gz)")
    parser.add_argument("out", type=Path, nargs="?", help="where to write the big trace (.json, or .json.gz: gzip -1)")
    parser.add_argument("--events", type=int, default=1_500_000, help="at least this many events (default 1.5 million)")
    parser.add_argument("--copies", type=int, help="exactly this many copies (instead of --events)")
    parser.add_argument("--smoke", action="store_true", help="a two-copy trace of a small source, read back")
    args = parser.parse_args()
    if args.smoke:
        return smoke()
    if args.out is None:
        parser.error("SOURCE and OUT are required (or --smoke)")
    copies, count, size = build(args.source, args.out, args.events, args.copies)
    print(f"{args.out}: {count:,} events ({copies} copies of {args.source.name}), {size:,} bytes ({size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
