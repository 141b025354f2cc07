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

    python benchmarks/make_big_trace.py SOURCE.pt.trace.json.gz OUT.json [--events 1500000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
from decimal import Decimal
from pathlib import Path

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


def split_events(text: str) -> tuple[str, list[str], str, str]:
    """Header (through ``[``), each event's exact text, the separator between events, trailer."""
    open_at = text.index("[", text.index('"traceEvents"')) + 1
    decoder = json.JSONDecoder()
    events, spans = [], []
    pos = open_at
    while True:
        while text[pos] in " \t\r\n,":
            pos += 1
        if text[pos] == "]":
            break
        _, end = decoder.raw_decode(text, pos)
        spans.append((pos, end))
        events.append(text[pos:end])
        pos = end
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


def build(source: Path, out: Path, events: int = 1_500_000) -> tuple[int, int, int]:
    """Write the big trace; returns (copies, events written, bytes written)."""
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
    copies = max(1, math.ceil((events - len(once)) / len(copied)))

    template = Template(separator.join(copied))
    if sum(kind == "ts" for kind, _ in template.slots) != len(timed):
        raise ValueError(f"{source}: some timestamps are not decimal microseconds with three digits")
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(header)
        for k in range(copies):
            if k:
                fh.write(separator)
            fh.write(template.render(k * span_ns, k * id_stride, k * steps))
        for text in once:
            fh.write(separator + text)
        fh.write(trailer)
    return copies, copies * len(copied) + len(once), out.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="real Kineto trace (.json or .json.gz)")
    parser.add_argument("out", type=Path, help="where to write the big trace (plain .json)")
    parser.add_argument("--events", type=int, default=1_500_000, help="at least this many events (default 1.5 million)")
    args = parser.parse_args()
    copies, count, size = build(args.source, args.out, args.events)
    print(f"{args.out}: {count:,} events ({copies} copies of {args.source.name}), {size:,} bytes ({size / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
