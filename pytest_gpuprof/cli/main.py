"""The ``gpuprof`` command (also ``python -m pytest_gpuprof``)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .. import __version__
from ..compare.rules import Rules, parse_threshold
from ..errors import ConfigError, GpuprofError
from ..metrics.counters import ncu_counters, needs_lines, not_computed
from ..metrics.skew import rank_skew
from ..numbers import format_number
from ..options import REPORT_OPTIONS, RULE_OPTIONS, add_report_options, add_rule_options, count
from ..report.escaping import terminal_text
from ..report.names import function_name
from ..report.terminal import analysis_lines, counter_lines
from ..report.writers import write_reports
from ..trace.formats import is_ncu_input, is_nsys_input
from .diff import diff
from .inputs import check_range, measure_any, measure_processes, measure_ranks, ncu_launches
from .merge import merge_status, merged


def main(argv: list[str] | None = None) -> int:
    """The ``gpuprof`` command: run the subcommand ARGV names and print what it gives; the
    exit status (2: bad input, which is printed to stderr)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "merge":
            status, lines = _merge(args)
        elif args.command == "diff":
            status, lines = _diff(args)
        else:
            status, lines = _analyze(args.trace, args.json, args.range, args.nsys, args.ncu)
    except GpuprofError as exc:
        print(f"gpuprof: {terminal_text(exc)}", file=sys.stderr)
        return 2
    return _emit(status, lines)


def _parser() -> argparse.ArgumentParser:
    """The command line: ``gpuprof analyze``, ``diff`` and ``merge``, each with its options."""
    parser = argparse.ArgumentParser(prog="gpuprof", description="GPU performance metrics from profiler traces.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_analyze(sub)
    _add_diff(sub)
    _add_merge(sub)
    return parser


def _add_analyze(sub) -> None:
    """``gpuprof analyze``: the metrics of one trace or report."""
    analyze = sub.add_parser(
        "analyze",
        help="print the metrics of a torch.profiler trace, an Nsight Systems or an Nsight Compute report",
        description="Metrics of one trace, as docs/metrics.md defines them. Steps come from "
        "ProfilerStep#N ranges, else step_N ranges; with neither, the whole trace is the window.",
    )
    analyze.add_argument("trace", help="Kineto trace (.json, .json.gz), nsys report (.sqlite, .nsys-rep), a folder of "
                                       "one distributed run's per-rank Kineto traces, or an Nsight Compute report "
                                       "(.ncu-rep, or its raw page as CSV: ncu --import REPORT --csv --page raw "
                                       "--print-units base --print-kernel-base mangled)")
    analyze.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    analyze.add_argument("--range", metavar="NAME",
                         help="only the test whose node id is NAME: for an nsys report of a pytest session "
                              "(.sqlite, .nsys-rep), each test in an NVTX range of that name; refused for any other "
                              "input")
    analyze.add_argument("--nsys", metavar="PATH", help="nsys binary, to export a .nsys-rep (default: searched)")
    analyze.add_argument("--ncu", metavar="PATH", help="ncu binary, to print an .ncu-rep where NVIDIA's ncu_report "
                                                      "module is not installed (default: searched)")


def _add_diff(sub) -> None:
    """``gpuprof diff``: run B against run A under the plugin's rules."""
    diff = sub.add_parser(
        "diff",
        help="what changed from run A to run B: verdicts in the plugin's words and a per-kernel table",
        description="Compare run B (current) with run A (baseline) under the plugin's rules. A and B are "
        "each a trace (.json, .json.gz, .sqlite, .nsys-rep) or a results file written by --gpuprof-json "
        "(two results files are compared test by test, matched by node id). Exit status: 0 nothing broke, "
        "1 a metric broke, 2 bad input.",
    )
    diff.add_argument("a", metavar="A", help="the baseline run: trace or results file")
    diff.add_argument("b", metavar="B", help="the current run: trace or results file")
    add_rule_options(diff.add_argument)
    diff.add_argument("--threshold", action="append", default=[], metavar="EXPR",
                      help="absolute requirement on B such as 'sync_count == 0'; repeatable")
    diff.add_argument("--top", type=count, default=20, metavar="N",
                      help="kernel rows shown per comparison (default: 20; 0: all)")
    diff.add_argument("--test", metavar="NODEID", help="compare only this test of the results file(s)")
    diff.add_argument("--range", metavar="NAME",
                      help="only the test whose node id is NAME, cut out of each side that is an nsys report of a "
                           "pytest session (.sqlite, .nsys-rep: each test in an NVTX range of that name); a side "
                           "of another kind is read whole; refused when neither side is an nsys report")
    diff.add_argument("--nsys", metavar="PATH", help="nsys binary, to export a .nsys-rep (default: searched)")


def _add_merge(sub) -> None:
    """``gpuprof merge``: the results files of a sharded suite as one run."""
    merge = sub.add_parser(
        "merge",
        help="the --gpuprof-json files of a suite sharded over several runners as one run",
        description="One results document of several (a CI matrix, one runner per GPU or machine), written "
        "with the reports asked for. Exit status: 0 no test failed, 1 a test failed or errored, 2 bad input "
        "(a file that is not a results file, shards that overlap).",
    )
    merge.add_argument("results", nargs="+", metavar="RESULTS", help="results files written by --gpuprof-json")
    add_report_options(merge.add_argument)



def _emit(status: int, lines: list[str]) -> int:
    """Print the lines (each already fit for a terminal); a reader that stops early
    (``| head``) ends the output quietly."""
    try:
        print("\n".join(lines))
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would report the pipe again while flushing stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return status


def _merge(args: argparse.Namespace) -> tuple[int, list[str]]:
    doc = merged(args.results)
    reports = {o.name: getattr(args, o.name.replace("-", "_")) for o in REPORT_OPTIONS}
    counts = ", ".join(f"{n} {status}" for status, n in doc["counts"].items() if n)
    lines = [terminal_text(f"gpuprof: merged {len(args.results)} results file(s): {counts or 'no test'}")]
    written, all_written = write_reports(doc, reports)
    return max(merge_status(doc), int(not all_written)), lines + [terminal_text(line) for line in written]


def _analyze(path: str, as_json: bool, test_range: str | None, nsys: str | None,
             ncu: str | None = None) -> tuple[int, list[str]]:
    check_range(path, test_range)
    if is_ncu_input(path):
        launches = ncu_launches(path, ncu)
        counters, lacking = ncu_counters(launches, function_name), not_computed(launches)
        if as_json:
            return 0, [json.dumps({"report": path, **counters, "not_computed": lacking}, indent=2)]
        return 0, counter_lines(path, counters) + _not_computed_lines(lacking)
    if os.path.isdir(path):
        return 0, _rank_lines(path, measure_ranks(path), as_json)
    if is_nsys_input(path) and not test_range:
        processes = measure_processes(path, nsys)
        if len(processes) > 1:
            return 0, _rank_lines(path, processes, as_json)
        measurement = processes[0][1]
    else:
        measurement = measure_any(path, test_range, nsys)
    if as_json:
        return 0, [json.dumps({"trace": path, **measurement.to_json()}, indent=2)]
    return 0, analysis_lines(path, measurement)


def _not_computed_lines(lacking: dict[str, list[str]]) -> list[str]:
    """What the report could not give (``n/a`` above), once for all its kernels, and the
    metrics that would give it."""
    if not lacking:
        return []
    return ["", "not computed (n/a above): the report lacks the metrics they need",
            *(terminal_text(f"  {line}") for line in needs_lines(lacking))]


def _rank_lines(path: str, ranks: dict, as_json: bool) -> list[str]:
    """A distributed run (a folder of per-rank traces, an nsys report of several processes):
    each rank's metrics, then ``rank_skew``."""
    skew = rank_skew({r: m for r, (_, m) in ranks.items()})
    if as_json:
        return [json.dumps({"trace": path,
                            "ranks": {str(r): {"trace": f, **m.to_json()} for r, (f, m) in ranks.items()},
                            "rank_skew": skew}, indent=2)]
    lines = []
    for rank, (file, m) in ranks.items():
        lines += [terminal_text(f"rank {rank}:")] + [f"  {line}" for line in analysis_lines(file, m)]
    return lines + [f"rank_skew: {format_number(skew)} ({len(ranks)} rank(s): the slowest rank's median step "
                    "span against the ranks' mean)"]


def _diff(args: argparse.Namespace) -> tuple[int, list[str]]:
    try:
        rules = Rules.from_options({o.name: getattr(args, o.name.replace("-", "_")) for o in RULE_OPTIONS},
                                   tuple(parse_threshold(t, "--threshold") for t in args.threshold),
                                   origin=lambda name: f"--{name}")
    except ConfigError as exc:
        raise GpuprofError(str(exc)) from None
    return diff(args.a, args.b, rules, args.top, args.test, args.range, args.nsys)
