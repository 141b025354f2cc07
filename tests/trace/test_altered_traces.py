"""Hostile inputs for the trace loaders and ``gpuprof analyze``: real traces of tests/data
altered.  Every outcome is one clear error naming the file, or metrics that are right:
never a traceback, never a silently wrong number, and the fast and generic Kineto
parsers agree.  The property tests draw alterations with Hypothesis and judge them with
benchmarks/fuzz_loaders.py (its longer run gives the figures of docs/benchmarks.md)."""

from __future__ import annotations

import collections
import contextlib
import csv
import gzip
import json
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.kineto import assert_same, generic
from helpers.nsys import unpack
from pytest_gpuprof.cli.main import main
from pytest_gpuprof.errors import TraceError
from pytest_gpuprof.metrics import timeline
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.run.kept_traces import trace_name
from pytest_gpuprof.trace import kineto, kineto_columns, kineto_generic
from pytest_gpuprof.trace.kineto import load_kineto
from pytest_gpuprof.trace.model import Trace
from pytest_gpuprof.trace.nsys_sqlite import load_nsys

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import fuzz_loaders as fuzz

DATA = Path(__file__).parents[1] / "data"
SYNC = DATA / "sync.pt.trace.json.gz"
MOE_TRACE = (Path(__file__).parents[2] / "example_suite" / "traces"
             / "example_suite_test_moe.py_test_moe_forward.pt.trace.json.gz")
SYNC_NSYS = DATA / "nsys" / "sync.sqlite.gz"
FUZZ = settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def judged(item: fuzz.Altered) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        return fuzz.judge(item, Path(tmp))


#: Each probe with the function that builds its inputs from a random source.
PROBES = [(p, fuzz._kineto_input) for p in fuzz.KINETO_PROBES] + [(p, fuzz._nsys_input) for p in fuzz.NSYS_PROBES]


@settings(FUZZ, max_examples=260)
@given(probe=st.sampled_from(PROBES), rng=st.randoms(use_true_random=False))
def test_altered_traces_give_a_clean_error_or_right_metrics(probe, rng):
    """Kineto traces and nsys reports, each probe about 20 times (about 12 s); a Kineto
    input is also read by the generic parser alone, which must give the same outcome."""
    name, build = probe
    item = build(rng, name)
    verdict, why = judged(item)
    assert verdict in ("clean error", "accepted"), f"{item.probe} of {item.source.name} ({item.describe}): {why}"


# ---- the judge itself: it must catch what it is there to catch ------------------------

def test_the_judge_calls_a_negative_time_silently_wrong():
    metrics = json.loads(fuzz.reference(SYNC))
    metrics["metrics"]["kernel_time_us"] = -4.0
    assert fuzz.wrong_numbers(json.dumps(metrics)) == "kernel_time_us = -4.0"
    metrics["metrics"]["kernel_time_us"] = 1.0
    metrics["metrics"]["overlap_efficiency"] = -0.0197
    assert fuzz.wrong_numbers(json.dumps(metrics)) == "overlap_efficiency = -0.0197"


def test_the_judge_calls_an_accepted_truncation_a_disagreement(monkeypatch):
    raw = gzip.decompress(SYNC.read_bytes())
    cut = raw.rindex(b'"traceName"')
    item = fuzz.Altered("kineto truncate", SYNC, "cut", raw[:cut], must_fail=True)
    # the check that the document closes, undone: the last event taken as it stands
    monkeypatch.setattr(kineto, "_trailer", lambda tail: (tail[:tail.rindex(b"}")] + kineto._SEP, {}))
    assert judged(item)[0] == "parsers disagree"


def test_the_judge_calls_a_broken_unread_event_read_by_one_parser_a_disagreement(monkeypatch):
    text = sync_text()
    start, end = first_event(text, "cpu_op")
    broken = text[:start] + text[start:end].replace('", "pid"', '" "pid"', 1) + text[end:]
    item = fuzz.Altered("kineto unread event", SYNC, "a comma dropped", broken.encode(), untouched=True)
    assert judged(item)[0] == "clean error"
    monkeypatch.setattr(kineto, "_vouch", lambda *_: None)  # the fast path's check of every event, undone
    # and that of the first bytes (all of this file)
    monkeypatch.setattr(kineto_columns, "check_json_head", lambda _: None)
    assert judged(item)[0] == "parsers disagree"


# ---- Kineto: each kind of input that crashed the loader ---------------------------------

def sync_text() -> str:
    return gzip.decompress(SYNC.read_bytes()).decode()


def first_event(text: str, cat: str) -> tuple[int, int]:
    """Where the first CAT event's JSON text lies."""
    start = text.index(f'"ph": "X", "cat": "{cat}"')
    start = text.rindex("{", 0, start)
    return start, json.JSONDecoder().raw_decode(text, start)[1]


def with_event(text: str, cat: str, change) -> str:
    """The trace with its first CAT event replaced by change(event dict), in Kineto's layout."""
    start, end = first_event(text, cat)
    event = json.loads(text[start:end])
    return text[:start] + json.dumps(change(event)) + text[end:]


def refused(tmp_path: Path, content: str | bytes, words: str, name: str = "t.json") -> str:
    """The message of the one error loading CONTENT gives, through both Kineto parsers."""
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    messages = []
    for generic_alone in (False, True):
        with fuzz.generic_only() if generic_alone else contextlib.nullcontext():
            with pytest.raises(TraceError) as err:
                load_kineto(path)
        messages.append(str(err.value))
    assert messages[0] == messages[1], "the fast and generic parsers disagree"
    assert str(path) in messages[0] and words in messages[0], messages[0]
    return messages[0]


def test_a_truncated_plain_json_is_refused_wherever_it_is_cut(tmp_path):
    """The worst finding: cut after the last kernel, a plain .json was read as a whole trace.
    Every cut in the last 1,200 bytes (the trailing events and members) and 150 spread over
    the file is refused."""
    raw = gzip.decompress(SYNC.read_bytes())
    body = len(raw.rstrip())
    cuts = list(range(body - 1200, body)) + list(range(1, body, body // 150))
    path = tmp_path / "cut.json"
    accepted = []
    for at in cuts:
        path.write_bytes(raw[:at])
        try:
            load_kineto(path)
            accepted.append(at)
        except TraceError as exc:
            assert str(path) in str(exc)
    assert not accepted, f"{len(accepted)} truncations accepted, the first at {accepted[0]} of {len(raw)}"


def test_a_complete_document_is_still_read_by_the_fast_path(monkeypatch, tmp_path):
    """Trailing whitespace is not truncation, and the fast path does not give up on it."""
    path = tmp_path / "t.json"
    path.write_bytes(gzip.decompress(SYNC.read_bytes()) + b"\n\n")
    monkeypatch.setattr(kineto, "read_generic", lambda _: pytest.fail("the fast path gave up"))
    assert len(load_kineto(path).kernels) == 4


@pytest.mark.parametrize("damage, words", [
    (lambda gz: gz[:len(gz) // 2], "ends early"),
    (lambda gz: gz[:40] + bytes(b ^ 0x55 for b in gz[40:80]) + gz[80:], "not a readable gzip file"),
    (lambda gz: gz[:-8] + b"\0" * 8, "not a readable gzip file"),  # CRC and size
])
def test_corrupt_gzip_is_one_error(tmp_path, damage, words):
    path = tmp_path / "t.json.gz"
    path.write_bytes(damage(SYNC.read_bytes()))
    with pytest.raises(TraceError, match=words) as err:
        load_kineto(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("cat, change, words", [
    ("kernel", lambda e: {k: v for k, v in e.items() if k != "ts"}, "ts is missing"),
    ("kernel", lambda e: {**e, "ts": "12"}, 'ts is "12"'),
    ("kernel", lambda e: {**e, "ts": 2 ** 63}, "out of range"),
    ("kernel", lambda e: {**e, "dur": -5}, "ends before it starts"),
    ("kernel", lambda e: {**e, "dur": 2 ** 62}, "out of range"),
    ("kernel", lambda e: {**e, "dur": 9223372036854775.0}, "beyond 2^63 ns"),
    ("kernel", lambda e: {**e, "args": "x"}, 'args is "x", not an object'),
    ("kernel", lambda e: {**e, "args": None}, "args is null, not an object"),
    ("kernel", lambda e: {**e, "name": 5}, "name 5, not a string"),
    ("gpu_memcpy", lambda e: {**e, "args": {**e["args"], "bytes": None}}, "args.bytes is null"),
    ("gpu_memcpy", lambda e: {**e, "args": {**e["args"], "bytes": -4}}, "negative"),
    ("gpu_memcpy", lambda e: {**e, "args": {**e["args"], "bytes": 2 ** 63}},
     "args.bytes 9223372036854775808 is out of range"),
    ("gpu_memcpy", lambda e: {**e, "args": {k: v for k, v in e["args"].items() if k != "bytes"}}, "no byte count"),
    ("cuda_runtime", lambda e: {**e, "tid": "main"}, 'tid is "main"'),
])
def test_bad_event_values_are_one_error_from_both_parsers(tmp_path, cat, change, words):
    refused(tmp_path, with_event(sync_text(), cat, change), words)


def test_a_huge_byte_count_sum_is_refused(tmp_path):
    """Bytes below 2^63 each, but adding up past it: the sums would wrap around."""
    text = sync_text().replace('"bytes": 4,', f'"bytes": {2 ** 62},')
    assert text.count(f'"bytes": {2 ** 62},') == 4
    refused(tmp_path, text, "add up to more than 2^62 bytes")


@pytest.mark.parametrize("value, words", [
    ("5", "deviceProperties is 5"),
    ('[{"id": "0", "name": "GPU"}]', "deviceProperties is"),
    ('{"name": "GPU"}', "not a list of objects"),
])
def test_device_properties_of_the_wrong_type_are_one_error(tmp_path, value, words):
    text = sync_text()
    start = text.index('"deviceProperties":')
    end = json.JSONDecoder().raw_decode(text, text.index("[", start))[1]
    refused(tmp_path, text[:start] + f'"deviceProperties": {value}' + text[end:], words)


def test_deep_nesting_is_one_error(tmp_path):
    text = sync_text().replace('"schemaVersion": 1', '"schemaVersion": ' + "[" * 100000 + "]" * 100000, 1)
    refused(tmp_path, text, "nest too deeply")


def test_an_sqlite_file_given_as_a_json_trace_says_to_gunzip_it(tmp_path):
    raw = gzip.decompress(SYNC_NSYS.read_bytes())
    refused(tmp_path, gzip.compress(raw), "gunzip it and pass the .sqlite file", name="x.sqlite.gz")
    refused(tmp_path, raw, "an SQLite file, not a JSON trace", name="x.json")


def test_a_name_that_is_not_utf8_is_refused_by_both_parsers(tmp_path):
    text = sync_text().encode()
    start = text.index(b'"name": "void at::native') + 9
    refused(tmp_path, text[:start] + b"\xff" + text[start:], "not a Chrome-trace JSON file")


def test_a_broken_category_byte_does_not_hide_a_needed_event(tmp_path):
    """'"cat": "cuda_\\x00runtime"' is not JSON; the fast path used to drop the event."""
    text = sync_text().replace('"cat": "cuda_runtime"', '"cat": "cuda_\x00runtime"', 1)
    refused(tmp_path, text, "not a Chrome-trace JSON file")
    text = sync_text().replace('"cat": "kernel"', '"cat" "kernel"', 1)
    refused(tmp_path, text, "not a Chrome-trace JSON file")


def cpu_op_changed(old: str, new: str) -> str:
    """The sync trace with OLD replaced by NEW in its first CPU op event, which no metric reads."""
    text = sync_text()
    start, end = first_event(text, "cpu_op")
    assert old in text[start:end]
    return text[:start] + text[start:end].replace(old, new, 1) + text[end:]


@pytest.mark.parametrize("old, new", [
    ('", "pid"', '" "pid"'),  # a comma dropped
    ('"pid"', '"pid":'),  # a colon doubled
    ('"name": "aten::', '"name": "aten::\x01'),  # a raw control character in a string
    ('"name": "aten::', '"name": "ate"n::'),  # a quote in the middle of a string
    ('"name": "aten::', '"name": "aten::\\q'),  # an escape JSON does not have
    ('"dur": ', '"dur": 0'),  # a number with a leading zero
    ('"dur": ', '"dur": +'),  # a plus sign
    ('"args": {', '"args": {"x": tru, '),  # a misspelt literal
    ('"args": {', '"args": {"x": [1, 2,], '),  # a trailing comma
    ('"args": {', '"args": {"x": ' + "[" * 100000 + "]" * 100000 + ", "),  # nesting no parser follows
], ids=["comma", "colon", "control", "quote", "escape", "leading zero", "plus", "literal", "trailing comma",
        "deep nesting"])
def test_invalid_json_in_an_event_no_metric_reads_is_refused_by_both_parsers(tmp_path, old, new):
    """The fast path used to skip such an event unread and accept the file; the generic
    parser refused it.  A file that is not valid JSON is now refused whichever path reads it."""
    refused(tmp_path, cpu_op_changed(old, new), "is not a Chrome-trace JSON file")


def test_bytes_that_are_not_utf8_in_an_unread_event_are_refused_by_both_parsers(tmp_path):
    text = cpu_op_changed('"name": "aten::', '"name": "aten::\U0010ffff')  # a mark, then its bytes made 0xFF
    refused(tmp_path, text.encode().replace("\U0010ffff".encode(), b"\xff"), "is not a Chrome-trace JSON file")


@pytest.mark.parametrize("change", [
    lambda t: t.rstrip() + "x",
    lambda t: t.rstrip() + "}",
    lambda t: t.rstrip() + ' {"traceEvents": []}',
    lambda t: t.replace("\n  ]", "\x0b]", 1),  # not JSON whitespace
    lambda t: t.replace("},\n  {", "},\n\x0c  {", 1),
    lambda t: t.replace('"traceEvents": [', '"traceEvents": [ // events\n', 1),
    lambda t: t.replace('"baseTimeNanoseconds": 1790857026000000000,',
                        '"baseTimeNanoseconds": 1790857026000000000', 1),
    lambda t: t.replace('"baseTimeNanoseconds": 1790857026000000000,',
                        '"baseTimeNanoseconds": 1790857026000000000,,', 1),
], ids=["garbage after the object", "brace after the object", "a second object", "vertical tab", "form feed",
        "comment", "comma missing before traceEvents", "comma doubled before traceEvents"])
def test_invalid_json_around_the_events_is_refused_by_both_parsers(tmp_path, change):
    refused(tmp_path, change(sync_text()), "is not a Chrome-trace JSON file")


def read_alike(tmp_path: Path, monkeypatch, content: str) -> Trace:
    """The trace both Kineto parsers read from CONTENT, which must be the same."""
    path = tmp_path / "t.json"
    path.write_text(content)
    fast = load_kineto(path)  # as analyze reads it: the fast path may give up on these
    assert_same(fast, generic(path, monkeypatch))
    return fast


@pytest.mark.parametrize("cat, change, kernels", [
    ("cpu_op", lambda e: {**e, "args": {"inner": {**json.loads(first_kernel()), "name": "nested"}}}, 4),
    ("kernel", lambda e: {**e, "ts": e["ts"] + 1}, 4),  # written twice below: JSON keeps the last
    ("kernel", lambda e: {**e, "ph": "i"}, 3),
    ("kernel", lambda e: {**e, "cat": "cpu_op"}, 3),
], ids=["an event nested in args", "ts given twice", "ph given twice", "cat given twice"])
def test_valid_json_the_fast_path_used_to_misread_is_read_alike(tmp_path, monkeypatch, cat, change, kernels):
    """A kernel inside another event's args is no event; a key given again after args
    overrides the first (the fast path used to read the first)."""
    text = sync_text()
    start, end = first_event(text, cat)
    event = json.loads(text[start:end])
    changed = json.dumps(change(event))
    if cat == "kernel":  # the event as Kineto wrote it, then the changed key again
        key = next(k for k in event if event[k] != change(event)[k])
        changed = text[start:end - 1].rstrip() + f', "{key}": {json.dumps(change(event)[key])}}}'
    trace = read_alike(tmp_path, monkeypatch, text[:start] + changed + text[end:])
    assert len(trace.kernels) == kernels and "nested" not in trace.kernels["name"].astype(str).tolist()


def first_kernel() -> str:
    text = sync_text()
    start, end = first_event(text, "kernel")
    return text[start:end]


def test_a_key_ending_in_ph_is_not_ph(tmp_path, monkeypatch):
    r"""'"a\"ph": "X"' is the key 'a"ph', so the event has no ph and is no kernel."""
    text = sync_text().replace('"ph": "X", "cat": "kernel"', '"a\\"ph": "X", "cat": "kernel"', 1)
    assert len(read_alike(tmp_path, monkeypatch, text).kernels) == 3


def test_events_under_another_key_than_trace_events_are_refused_by_both_parsers(tmp_path):
    refused(tmp_path, sync_text().replace('"traceEvents": [', '"traceEvents": 5, "other": [', 1),
            "no traceEvents array")


def test_a_kineto_trace_with_args_nulls_gives_no_negative_bytes(tmp_path):
    """'bytes: null gave -4 B in one parser and a crash in the other'."""
    text = sync_text().replace('"bytes": 4,', '"bytes": null,')
    refused(tmp_path, text, "args.bytes is null, not an integer")


# ---- nsys -----------------------------------------------------------------------------

@pytest.fixture
def report(tmp_path) -> Path:
    return unpack("sync", tmp_path)


def nsys_refused(path: Path, words: str) -> str:
    with pytest.raises(TraceError) as err:
        load_nsys(path)
    assert str(path) in str(err.value) and words in str(err.value), str(err.value)
    return str(err.value)


def test_nsys_dropped_column_is_named(report):
    fuzz._sql(report, ("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN streamId",))
    nsys_refused(report, "table CUPTI_ACTIVITY_KIND_KERNEL lacks the column(s) streamId")


@pytest.mark.parametrize("value, words",
                         [("NULL", "start is NULL"), ("'abc'", "start is 'abc'"), ("1.5", "start is 1.5")])
def test_nsys_start_that_is_not_an_integer_names_the_row(report, value, words):
    fuzz.loosen(report, "CUPTI_ACTIVITY_KIND_KERNEL")
    fuzz._sql(report, (f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = {value} WHERE rowid = 3",))
    nsys_refused(report, f"CUPTI_ACTIVITY_KIND_KERNEL row 3: {words}, not an integer")


def test_nsys_end_before_start_is_refused_not_a_negative_time(report):
    """'end < start in SQLite gives -4 us'."""
    fuzz._sql(report, ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 4000 WHERE rowid = 1",))
    nsys_refused(report, "ends before it starts")


def test_nsys_negative_copy_bytes_are_refused(report):
    fuzz._sql(report, ("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = -4 WHERE rowid = 1",))
    nsys_refused(report, "negative")


@pytest.mark.parametrize("payload, words", [("{bad", "is not valid JSON"), ("[1]", "holds list, not a JSON object")])
def test_nsys_malformed_gpuprof_mark_is_named(report, payload, words):
    fuzz._mark(payload)(report)  # a mark in the plugin's NVTX domain
    nsys_refused(report, words)


def test_nsys_kernel_whose_name_is_lost_is_refused_not_dropped(report):
    fuzz._sql(report, ("DELETE FROM StringIds WHERE id = "
                       "(SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)",))
    nsys_refused(report, "is not a string of StringIds")


def test_nsys_empty_tables_are_empty_not_an_error(report):
    fuzz._sql(report, ("DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY",))
    trace = load_nsys(report)
    assert len(trace.copies) == 0 and len(trace.kernels) == 6


def test_nsys_gzipped_report_says_to_gunzip_it(tmp_path):
    path = tmp_path / "report.sqlite"
    path.write_bytes(SYNC_NSYS.read_bytes())
    nsys_refused(path, "gunzip it and pass the .sqlite file")


def test_nsys_table_name_that_is_not_utf8_is_refused_naming_the_report(report):
    """A byte of a table's name in the schema flipped to 0xFF (``fuzz_loaders.py``'s "file bytes"
    probe found it): the list of tables cannot be read as text."""
    raw = bytearray(report.read_bytes())
    at = raw.index(b"table" + b"TARGET_INFO_GPU" * 2) + len(b"table")  # a schema row: type, name, table name
    raw[at] = 0xFF
    report.write_bytes(bytes(raw))
    nsys_refused(report, "holds text that is not UTF-8: 'utf-8' codec can't decode byte 0xff")


def test_nsys_unaltered_report_still_loads(report):
    """As many kernels as the summary nsys itself wrote (tests/data/nsys/sync_cuda_gpu_kern_sum.csv)."""
    with open(DATA / "nsys" / "sync_cuda_gpu_kern_sum.csv", newline="") as fh:
        instances = sum(int(row["Instances"]) for row in csv.DictReader(fh))
    assert len(load_nsys(report).kernels) == instances == 6


# ---- the command line -----------------------------------------------------------------

def test_analyze_escapes_control_characters_of_kernel_names(tmp_path, capsys):
    # inside the function's name: reports show kernel names without their return type
    text = sync_text().replace('"name": "void at::native::',
                               '"name": "void at::native::\\u001b[2J\\u001b]0;pwned\\u0007')
    path = tmp_path / "t.json"
    path.write_text(text)
    assert load_kineto(path).kernels["name"].astype(str).str.contains("\x1b").all()
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "at::native::\\x1b[2J\\x1b]0;pwned\\x07vectorized_elementwise_kernel" in out


def test_analyze_piped_into_head_exits_quietly():
    done = subprocess.run(f'"{sys.executable}" -m pytest_gpuprof analyze "{SYNC}" --json | head -1',
                          shell=True, capture_output=True, text=True, timeout=60)
    assert done.stdout == "{\n" and done.stderr == ""


def test_analyze_of_a_gzipped_sqlite_says_to_gunzip(capsys):
    assert main(["analyze", str(SYNC_NSYS)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gunzip it and pass the .sqlite file" in err and str(SYNC_NSYS) in err


# ---- metrics of a valid but unusual trace ----------------------------------------------

def test_timeline_sample_when_the_median_step_has_no_gpu_work(tmp_path):
    """Three steps, GPU work only in the first: the median step (by GPU time) has none.
    The sample is of the one step with work: its kernel, 2 us long."""
    def ev(cat, name, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}
    events = [ev("user_annotation", f"ProfilerStep#{i}", 100 * i, 90) for i in range(3)]
    events += [ev("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
               ev("kernel", "k", 20, 2, device=0, stream=7, correlation=1)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    m = measure(load_kineto(path))
    assert m.metrics["step_gpu_time_us"] == [2.0, 0.0, 0.0]
    sample = timeline.sample(m)
    assert sample["step"] == 0 and sample["span_ns"] == 2000
    assert [(e["kind"], e["dur_ns"], e["name"]) for e in timeline.events(sample)] == [("kernel", 2000, "k")]


@pytest.mark.parametrize("value, words", [
    ("[315382784]", "peak_memory_allocated_bytes must be a byte count (an integer >= 0), got [315382784]"),
    ("-5", "peak_memory_allocated_bytes must be a byte count (an integer >= 0), got -5"),
    ("true", "got True"),
    ("1.5", "got 1.5"),
])
def test_a_peak_memory_that_is_not_a_byte_count_is_one_error(tmp_path, value, words):
    text = gzip.decompress(MOE_TRACE.read_bytes()).decode()
    assert text.count('"peak_memory_allocated_bytes": 315382784') == 1
    message = refused(tmp_path, text.replace('"peak_memory_allocated_bytes": 315382784',
                                             f'"peak_memory_allocated_bytes": {value}'), words)
    assert message.startswith(str(tmp_path / "t.json"))


# ---- inputs that are no measurement ---------------------------------------------------

def event(cat: str, name: str, ts: int, dur: int, tid: int = 1, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def cpu_only_trace() -> str:
    """A torch.profiler trace of CPU events only: 10 steps of one CPU op each."""
    events = []
    for i in range(10):
        events += [event("user_annotation", f"ProfilerStep#{i}", 1000 * (i + 1), 900),
                   event("cpu_op", "aten::add", 1000 * (i + 1) + 10, 50)]
    return json.dumps({"schemaVersion": 1, "traceEvents": events})


def one_correlation_trace() -> str:
    """10 steps of 4 kernels of 10 us, each launched by its own cudaLaunchKernel, every
    launch and kernel carrying correlation id 1."""
    events = []
    for i in range(10):
        events.append(event("user_annotation", f"ProfilerStep#{i}", 1000 * (i + 1), 900))
        for k in range(4):
            at = 1000 * (i + 1) + 100 * k
            events += [event("cuda_runtime", "cudaLaunchKernel", at + 10, 5, correlation=1),
                       event("kernel", "k", at + 20, 10, tid=7, device=0, stream=7, correlation=1)]
    return json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                       "traceEvents": events})


#: What a trace of CPU activity alone is told, after its name.
NO_GPU_WORK = ": no GPU work to measure: it holds no kernel, memcpy or memset on any GPU"


def test_launches_sharing_one_correlation_id_are_refused_naming_the_trace(tmp_path):
    """This trace used to pass, "kernels/step 4, kernel us (median step) 0", all 400 us of
    kernel time in step 0: every kernel was tied to the first launch."""
    message = refused(tmp_path, one_correlation_trace(), "share the correlation id 1")
    assert message == (f"{tmp_path / 't.json'}: 40 runtime calls (cudaLaunchKernel) share the correlation id 1, "
                       "which GPU work carries: the work cannot be tied to the call that launched it")


def test_two_launches_of_a_real_trace_given_one_correlation_id_are_refused(tmp_path):
    """sync.pt.trace.json.gz with its second kernel launch given the first's correlation id."""
    doc = json.loads(sync_text())
    launches = [e for e in doc["traceEvents"] if e.get("name") == "cudaLaunchKernel"]
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    first = launches[0]["args"]["correlation"]
    assert first in {k["args"]["correlation"] for k in kernels}  # the id the first kernel carries
    launches[1]["args"]["correlation"] = first
    message = refused(tmp_path, json.dumps(doc), "share the correlation id")
    assert message == (f"{tmp_path / 't.json'}: 2 runtime calls (cudaLaunchKernel) share the correlation id {first}, "
                       "which GPU work carries: the work cannot be tied to the call that launched it")


def test_a_cuda_graphs_kernels_sharing_their_launchs_id_are_no_ambiguity(tmp_path):
    """The kernels of one graph replay carry their cudaGraphLaunch's one id: the torch and the
    nsys trace of record_traces.py's graph workload load, as before."""
    with gzip.open(DATA / "graph.pt.trace.json.gz", "rt") as fh:
        events = json.load(fh)["traceEvents"]
    graph = {e["args"]["correlation"] for e in events if e.get("name") == "cudaGraphLaunch"}
    by_id = collections.Counter(e["args"]["correlation"] for e in events if e.get("cat") == "kernel")
    assert graph and all(by_id[i] == 3 for i in graph)  # three kernels a launch
    assert len(load_kineto(DATA / "graph.pt.trace.json.gz").kernels) == sum(by_id.values())
    assert len(load_nsys(unpack("graph", tmp_path)).kernels) > 0


def test_nsys_launches_of_one_process_sharing_an_id_are_refused(report):
    con = sqlite3.connect(report)
    low, high = con.execute("SELECT MIN(correlationId), MAX(correlationId) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    names = con.execute("SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                        "JOIN StringIds s ON s.id = r.nameId WHERE r.correlationId IN (?, ?)", (low, high)).fetchall()
    con.close()
    assert low < high and len(names) == 1  # two launches of one kind, of the first and last kernel
    fuzz._sql(report, (f"UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = {low} WHERE correlationId = {high}",))
    assert nsys_refused(report, "share the correlation id") == (
        f"{report}: 2 runtime calls ({names[0][0]}) share the correlation id {low}, which GPU work carries: "
        "the work cannot be tied to the call that launched it")


def test_nsys_ids_repeated_by_another_process_are_no_ambiguity(tmp_path):
    """A report of two processes (a distributed run): CUPTI numbers each process's calls on its
    own, so the same ids recur, launching work in both.  Read whole, it loads as before."""
    path = tmp_path / "ddp.sqlite"
    path.write_bytes(gzip.decompress((DATA / "ranks" / "ddp.sqlite.gz").read_bytes()))
    con = sqlite3.connect(path)
    [(shared,)] = con.execute(
        "SELECT COUNT(*) FROM (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME "
        "WHERE correlationId IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL) "
        "GROUP BY correlationId HAVING COUNT(DISTINCT (globalTid >> 24) & 16777215) > 1)").fetchall()
    con.close()
    assert shared > 0
    assert len(load_nsys(path).kernels) > 0


def test_a_trace_without_gpu_work_is_an_error_of_analyze_and_diff(tmp_path, capsys):
    path = tmp_path / "cpu.pt.trace.json"
    path.write_text(cpu_only_trace())
    assert main(["analyze", str(path)]) == 2
    assert capsys.readouterr().err == f"gpuprof: {path}{NO_GPU_WORK}\n"
    assert main(["diff", str(SYNC), str(path)]) == 2
    assert capsys.readouterr().err == f"gpuprof: {path}{NO_GPU_WORK}\n"


def test_an_nsys_report_without_gpu_work_is_an_error_naming_it(report, capsys):
    fuzz._sql(report, *((f"DROP TABLE IF EXISTS CUPTI_ACTIVITY_KIND_{t}",) for t in ("KERNEL", "MEMCPY", "MEMSET")))
    trace = load_nsys(report)  # CUDA calls and NVTX ranges: a trace, of no GPU work
    assert len(trace.runtime) > 0
    with pytest.raises(TraceError) as err:
        measure(trace)
    assert str(err.value) == f"{report}{NO_GPU_WORK}"
    assert main(["analyze", str(report)]) == 2
    assert capsys.readouterr().err == f"gpuprof: {report}{NO_GPU_WORK}\n"


def test_a_session_makes_a_trace_it_cannot_measure_that_tests_error(tmp_path):
    from helpers.session import session_settings

    judge = session_settings(tmp_path).judge()
    for name, text, words in (("cpu.json", cpu_only_trace(), NO_GPU_WORK),
                              ("one.json", one_correlation_trace(), ": 40 runtime calls (cudaLaunchKernel) share")):
        path = tmp_path / name
        path.write_text(text)
        result = judge.judge("test_a.py::test_a", {}, lambda path=path: {0: (load_kineto(path), path)}).result
        assert result.status == "error" and result.message.startswith(f"{path}{words}"), result.message


def test_replayed_traces_that_measure_nothing_are_errors_naming_them(pytester):
    """Replayed, a trace of CPU activity alone and the one of one correlation id used to pass
    ("no baseline"), and a file of zeros took seconds to refuse; each is its test's error."""
    folder = pytester.path / "replay"
    folder.mkdir()
    names = {}
    for test, text in (("test_cpu", cpu_only_trace()), ("test_one_id", one_correlation_trace()), ("test_zeros", None)):
        names[test] = path = folder / trace_name(f"test_issue.py::{test}")
        if text is None:
            with open(path, "wb") as fh:
                fh.truncate(64 << 20)
        else:
            path.write_text(text)
    pytester.makepyfile(test_issue="import pytest\n" + "".join(
        f"\n@pytest.mark.gpuprof\ndef {test}():\n    pass\n" for test in names))
    result = pytester.runpytest("-p", "no:cacheprovider", f"--gpuprof-replay={folder}")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert f"gpuprof: {names['test_cpu']}{NO_GPU_WORK}" in out
    assert f"gpuprof: {names['test_one_id']}: 40 runtime calls (cudaLaunchKernel) share the correlation id 1" in out
    assert f"gpuprof: {names['test_zeros']} is not a Chrome-trace JSON file: Expecting value: line 1 column 1" in out


class CountedReads:
    """A file whose reads are counted (``read_bytes``)."""

    def __init__(self, fh) -> None:
        self.fh, self.read_bytes = fh, 0

    def read(self, size: int = -1) -> bytes:
        data = self.fh.read(size)
        self.read_bytes += len(data)
        return data

    def seek(self, offset: int) -> int:
        return self.fh.seek(offset)

    def close(self) -> None:
        self.fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *_) -> None:
        self.close()


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzipped"])
def test_a_file_of_zeros_is_refused_from_its_first_bytes(tmp_path, monkeypatch, gzipped):
    """A replayed .pt.trace.json.gz of 64 MB of zeros used to take 6.3 s and 293 MB to
    refuse (the fast path searched all it had read for "traceEvents" after each chunk, then
    the generic parser read the whole file); 2 GB gave no answer in 500 s.  Now each parser
    reads the first JSON_HEAD bytes (64 KiB) and stops: the size of the file no longer
    matters (benchmarks/bench_not_a_trace.py times files up to 2 GB)."""
    from pytest_gpuprof.trace.formats import JSON_HEAD

    path = tmp_path / "zeros.pt.trace.json.gz"
    if gzipped:  # 64 MiB of zeros, compressed to 65 KB
        with gzip.open(path, "wb") as fh:
            for _ in range(64):
                fh.write(bytes(1 << 20))
    else:
        with open(path, "wb") as fh:
            fh.truncate(64 << 20)  # sparse
    opened = []
    real = kineto_columns.open_content
    monkeypatch.setattr(kineto_columns, "open_content", lambda p: opened.append(CountedReads(real(p))) or opened[-1])
    for generic_alone in (False, True):
        with fuzz.generic_only() if generic_alone else contextlib.nullcontext():
            with pytest.raises(TraceError) as err:
                load_kineto(path)
        assert str(err.value) == f"{path} is not a Chrome-trace JSON file: Expecting value: line 1 column 1 (char 0)"
    assert len(opened) == 3 and all(f.read_bytes == JSON_HEAD for f in opened)  # fast, then generic; generic alone


@pytest.mark.parametrize("content, words", [
    (b"{" + bytes(1 << 20), "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    (b"\x89PNG\r\n\x1a\n" + bytes(1 << 20), "'utf-8' codec can't decode byte 0x89 in position 0"),
    (b'{"traceEvents": [{"ph": "X", "name": "a\x00' + bytes(1 << 20), "Invalid control character at: line 1 column"),
], ids=["brace then zeros", "binary", "nul in a string"])
def test_other_files_that_are_not_json_are_refused_by_both_parsers(tmp_path, content, words):
    refused(tmp_path, content, f"is not a Chrome-trace JSON file: {words}", name="t.pt.trace.json.gz")


def test_the_benchmark_of_files_of_zeros_runs_and_each_is_refused():
    done = subprocess.run([sys.executable, str(Path(fuzz.__file__).with_name("bench_not_a_trace.py")), "--smoke"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = re.findall(r"\((1 MiB|16 MiB, sparse)\): load [\d.e-]+ s \(process [\d.]+ s\), peak RSS \d+ MiB "
                      r"\(\d+ MiB before the load\): \S+ is not a Chrome-trace JSON file", done.stdout)
    assert len(rows) == 2 and done.stdout.endswith("all refused naming the file\n"), done.stdout


@pytest.mark.parametrize("head, tail, words", [
    (b'{"otherData": [', b"0]}", 'its member "otherData" runs past 16 MiB of JSON, which no trace\'s does'),
    (b'{"traceEvents": [', b"0]}", "traceEvents[0] is 0, not an event (an object)"),
    (b"[[", b"0]]", "the events array[0] runs past 16 MiB of JSON, which no trace's does"),
], ids=["a long member", "events that are numbers", "an array of one long array"])
def test_valid_json_that_is_no_trace_is_refused_before_it_is_read_whole(tmp_path, monkeypatch, head, tail, words):
    """256 MiB of valid JSON (1 MiB gzipped) that no trace can be: the generic parser, which
    once parsed such a file whole (2 GiB: MemoryError after minutes), refuses it having read
    no more than the longest value it decodes (kineto_generic.VALUE_CAP) and a few chunks
    (benchmarks/bench_not_a_trace.py --json 2G measures time and memory)."""
    path = tmp_path / "t.pt.trace.json.gz"
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(head)
        for _ in range(64):
            fh.write(b"0," * (2 << 20))
        fh.write(tail)
    opened = []
    real = kineto_columns.open_content
    monkeypatch.setattr(kineto_columns, "open_content", lambda p: opened.append(CountedReads(real(p))) or opened[-1])
    with pytest.raises(TraceError) as err:
        load_kineto(path)
    assert str(err.value) == f"{path}: {words}"
    assert max(f.read_bytes for f in opened) <= kineto_generic.VALUE_CAP + 2 * kineto_columns.CHUNK


@pytest.mark.parametrize("content", [b'{"traceEvents": [{"name": "abc',
                                     b'{"traceEvents": [{"name": "a"}, {"args": {"x": [1'],
                         ids=["in a string", "in an array"])
def test_a_file_cut_inside_an_event_is_refused(tmp_path, content):
    """The generic parser's stream ends inside an event: json's error for the whole text."""
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(content + b" " * (1 << 17))  # past the first bytes json judges on their own
    with fuzz.generic_only(), pytest.raises(TraceError) as err:
        load_kineto(path)
    assert str(err.value).startswith(f"{path} is not a Chrome-trace JSON file: ")
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(path.read_bytes())
    assert str(err.value).endswith(str(expected.value)), (str(err.value), str(expected.value))
