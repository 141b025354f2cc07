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
        help="print the metrics of a torch.profiler trace or an Nsight Systems report",
        description="Metrics of one trace, as docs/metrics.md defines them. Steps come from "
        "ProfilerStep#N ranges, else step_N ranges; with neither, the whole trace is the window.",
    )
    analyze.add_argument("trace", help="Kineto trace (.json, .json.gz) or nsys report (.sqlite, .nsys-rep)")
    analyze.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    analyze.add_argument("--range", metavar="NAME",
                         help="nsys report of a pytest session: only the NVTX range NAME (a test's node id)")
    analyze.add_argument("--nsys", metavar="PATH", help="nsys binary, to export a .nsys-rep (default: searched)")
    args = parser.parse_args(argv)
    try:
        return _analyze(args.trace, args.json, args.range, args.nsys)
    except GpuprofError as exc:
        print(f"gpuprof: {exc}", file=sys.stderr)
        return 2


def load_any(path: str, test_range: str | None = None, nsys: str | None = None):
    """A Kineto trace or an nsys report (a .nsys-rep is exported to SQLite beside it first)."""
    if path.endswith((".sqlite", ".nsys-rep")):
        from .nsys import for_range, load_nsys

        if path.endswith(".nsys-rep"):
            from pathlib import Path

            from .nsys_run import export_sqlite, find_nsys

            path = str(export_sqlite(find_nsys(nsys, option="--nsys"), Path(path)))
        trace = load_nsys(path)
        return for_range(trace, test_range) if test_range else trace
    if test_range:
        raise GpuprofError("--range applies to nsys reports only")
    from .kineto import load_kineto

    return load_kineto(path)


def _analyze(path: str, as_json: bool, test_range: str | None, nsys: str | None) -> int:
    from .metrics import measure

    trace = load_any(path, test_range, nsys)
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
