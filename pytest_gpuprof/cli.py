"""The ``gpuprof`` command (also ``python -m pytest_gpuprof``)."""

from __future__ import annotations

import argparse
import json
import sys

from .errors import GpuprofError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpuprof", description="GPU performance metrics from profiler traces.")
    sub = parser.add_subparsers(dest="command", required=True)
    analyze = sub.add_parser(
        "analyze",
        help="print the metrics of a torch.profiler (Kineto) Chrome-trace JSON",
        description="Metrics of one trace, as docs/metrics.md defines them. Steps come from "
        "ProfilerStep#N ranges, else step_N ranges; with neither, the whole trace is the window.",
    )
    analyze.add_argument("trace", help="Kineto trace (.json or .json.gz)")
    analyze.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    try:
        return _analyze(args.trace, args.json)
    except GpuprofError as exc:
        print(f"gpuprof: {exc}", file=sys.stderr)
        return 2


def _analyze(path: str, as_json: bool) -> int:
    from .kineto import load_kineto
    from .metrics import measure

    trace = load_kineto(path)
    try:
        measurement = measure(trace)
    except ValueError as exc:
        raise GpuprofError(f"{path}: {exc}") from None
    if as_json:
        print(json.dumps({"trace": path, **measurement.to_json()}, indent=2))
    else:
        from .report import analysis_lines

        print("\n".join(analysis_lines(path, measurement)))
    return 0
