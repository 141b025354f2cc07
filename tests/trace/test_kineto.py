"""The Kineto loader: exact nanoseconds, both parsing paths identical, clear errors."""

import gzip
import json
import shutil
from pathlib import Path

import pytest

from helpers.kineto import assert_same, fast_only, generic
from pytest_gpuprof.errors import TraceError
from pytest_gpuprof.trace import kineto
from pytest_gpuprof.trace.kineto import load_kineto

DATA = Path(__file__).parents[1] / "data"
TRACES = sorted(DATA.glob("*.json.gz")) + sorted((DATA.parent.parent / "example_suite" / "traces").glob("*.json.gz"))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name[:40])
def test_fast_and_generic_paths_agree(path, monkeypatch):
    """Every real trace is read by the fast path (it does not give up) and gives the
    generic parser's tables."""
    assert_same(fast_only(path, monkeypatch), generic(path, monkeypatch))


@pytest.mark.parametrize("chunk", [4096, 12345, 1 << 16])
@pytest.mark.parametrize("path", [DATA / "overlap.pt.trace.json.gz", TRACES[-1]], ids=["overlap", "example"])
def test_events_split_across_chunk_boundaries_are_read_whole(path, chunk, monkeypatch):
    """Small chunks put hundreds of boundaries inside events, names and numbers."""
    assert_same(fast_only(path, monkeypatch, chunk), generic(path, monkeypatch))


@pytest.mark.parametrize("into", [3, len('"traceEvents"'), len('"traceEvents": ')])
def test_a_chunk_boundary_inside_the_events_key_is_read_across(tmp_path, monkeypatch, into):
    """The first chunk ends INTO bytes past the start of '"traceEvents": [' (a header
    member pads it there): the key is looked for again with the next chunk."""
    text = gzip.decompress((DATA / "overlap.pt.trace.json.gz").read_bytes()).decode()
    at = text.index('"traceEvents"')
    path = tmp_path / "t.json"
    path.write_text(text[:at] + '"pad": "' + "x" * (4096 - into - at - len('"pad": "",  ')) + '",  ' + text[at:])
    assert path.read_bytes().index(b'"traceEvents"') == 4096 - into
    assert_same(fast_only(path, monkeypatch, 4096), generic(path, monkeypatch))


def vouching(path, monkeypatch, bound):
    """The fast path's read of PATH in 4096-byte chunks, remembering BOUND checked event
    texts: for each chunk, the texts it checked (one ``json.loads`` each) and how many
    texts were remembered after it."""
    loads, vouch, checks, chunks = json.loads, kineto._vouch, 0, []

    def counted_loads(*args, **kwargs):
        nonlocal checks
        checks += 1
        return loads(*args, **kwargs)

    def spied_vouch(data, end, vouched):
        before = checks
        vouch(data, end, vouched)
        chunks.append((checks - before, len(vouched)))

    with monkeypatch.context() as m:
        m.setattr(kineto, "_VOUCHED", bound)
        m.setattr(kineto, "_vouch", spied_vouch)
        m.setattr(json, "loads", counted_loads)
        fast_only(path, monkeypatch, 4096)
    return chunks


def test_event_texts_checked_are_forgotten_past_the_bound(monkeypatch):
    """The fast path remembers the event texts it has checked, up to a bound that keeps the
    memory of a trace of ever new texts in check; past it, it checks them again."""
    path = DATA / "overlap.pt.trace.json.gz"
    bounded, unbounded = vouching(path, monkeypatch, 2), vouching(path, monkeypatch, kineto._VOUCHED)
    assert len(bounded) == len(unbounded) > 10
    # forgotten texts are checked again: more checks than with the default bound
    assert sum(n for n, _ in bounded) > sum(n for n, _ in unbounded)
    # never more remembered than the bound plus the texts one chunk checked
    assert all(size <= 2 + n for n, size in bounded)
    assert max(size for _, size in unbounded) > 2 + max(n for n, _ in bounded)  # which the default bound exceeds
    monkeypatch.setattr(kineto, "_VOUCHED", 2)
    assert_same(fast_only(path, monkeypatch, 4096), generic(path, monkeypatch))


def test_what_valid_json_allows_in_an_unread_event_keeps_the_fast_path(tmp_path, monkeypatch):
    """Numbers that look odd but are JSON (-0, 0.5, 1e05, 1E+2, NaN for Python's json), escapes,
    non-ASCII text, nested arrays and objects: the events no metric reads are checked, not
    refused for what JSON allows."""
    text = gzip.decompress((DATA / "sync.pt.trace.json.gz").read_bytes()).decode()
    extra = ('"a": -0, "b": 0.5, "c": 1e05, "d": 1E+2, "e": NaN, "f": "\\u00e9\\n\\"01", "g": "é :01", '
             '"h": [[0, [-0.0]], {"i": null, "j": true}], ')
    path = tmp_path / "odd.json"
    odd = text.replace('"External id": 515,', '"External id": 515, ' + extra, 1)  # aten::full, a CPU op
    assert odd != text  # the event is there to take the extra members
    path.write_text(odd)
    assert_same(fast_only(path, monkeypatch), generic(path, monkeypatch))


def test_an_event_in_another_layout_is_not_dropped(tmp_path, monkeypatch):
    """One kernel event with its keys in another order: the fast expression does not match
    it, the check of each event the metrics read says so, and the generic parser reads the file."""
    text = gzip.decompress((DATA / "overlap.pt.trace.json.gz").read_bytes()).decode()
    layout = '"ph": "X", "cat": "kernel", '
    assert text.count(layout) == 40
    path = tmp_path / "one_reordered.json"
    path.write_text(text.replace(layout, '"cat": "kernel", "ph": "X", ', 1))
    trace = load_kineto(path)
    assert len(trace.kernels) == 40
    assert_same(trace, generic(path, monkeypatch))


def test_a_raw_nul_byte_is_refused_as_invalid_json(tmp_path):
    """A control character inside a JSON string makes the file invalid: a kernel's args
    holding one are refused (the fast path joins args with NUL bytes and would misplace them)."""
    text = gzip.decompress((DATA / "sync.pt.trace.json.gz").read_bytes()).decode()
    path = tmp_path / "nul.json"
    path.write_text(text.replace('"External id": 517,      "queued"',
                                 '"External id": 517, "note": "a\x00b", "queued"', 1))
    assert b"\x00" in path.read_bytes()
    with pytest.raises(TraceError, match="not a Chrome-trace JSON") as err:
        load_kineto(path)
    assert str(path) in str(err.value)


def test_the_gpu_is_the_device_that_ran_most_kernels(tmp_path):
    """Two devices in the header; three kernels on device 1, one on device 0."""
    def kernel(i, device):
        return {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": device, "tid": 7, "ts": 10.0 * i, "dur": 1.0,
                "args": {"device": device, "stream": 7, "correlation": i}}
    doc = {"deviceProperties": [{"id": 0, "name": "GPU zero"}, {"id": 1, "name": "GPU one"}],
           "traceEvents": [kernel(0, 0), kernel(1, 1), kernel(2, 1), kernel(3, 1)]}
    path = tmp_path / "two.json"
    path.write_text(json.dumps(doc, indent=2))
    assert load_kineto(path).gpu_name == "GPU one"
    doc["traceEvents"] = [kernel(0, 1), kernel(1, 0), kernel(2, 0)]
    path.write_text(json.dumps(doc, indent=2))
    assert load_kineto(path).gpu_name == "GPU zero"


def test_a_reordered_file_falls_back_and_reads_the_same(tmp_path):
    """Keys in another order (as a tool that re-saves the JSON might write): same tables."""
    src = DATA / "overlap.pt.trace.json.gz"
    with gzip.open(src, "rt") as fh:
        doc = json.load(fh)
    doc["traceEvents"] = [dict(sorted(e.items())) for e in doc["traceEvents"]]
    out = tmp_path / "resaved.json"
    out.write_text(json.dumps(doc, separators=(",", ":")))
    a, b = load_kineto(src), load_kineto(out)
    assert len(b.kernels) == len(a.kernels) > 0
    assert (b.kernels["start"].to_numpy() == a.kernels["start"].to_numpy()).all()
    assert list(b.copies["bytes"]) == list(a.copies["bytes"])


def test_timestamps_are_exact_integer_nanoseconds(tmp_path):
    # 4379007041391.974 us cannot be held exactly by a float64 in ns; the text can.
    event = {"ph": "X", "cat": "user_annotation", "name": "step_0", "pid": 1, "tid": 1,
             "ts": "TS", "dur": "DUR", "args": {"External id": 1}}
    text = json.dumps({"traceEvents": [event]}, indent=2).replace('"TS"', "4379007041391.974").replace('"DUR"', "0.5")
    path = tmp_path / "t.json"
    path.write_text(text)
    ranges = load_kineto(path).ranges
    assert ranges["start"].tolist() == [4379007041391974]
    assert ranges["end"].tolist() == [4379007041392474]


def test_plain_and_gzipped_files_read_the_same(tmp_path):
    src = DATA / "sync.pt.trace.json.gz"
    plain = tmp_path / "sync.json"
    with gzip.open(src, "rb") as fh, open(plain, "wb") as out:
        shutil.copyfileobj(fh, out)
    a, b = load_kineto(src), load_kineto(plain)
    assert a.runtime.equals(b.runtime) and a.copies.equals(b.copies)


def test_json_escapes_in_names_are_decoded(tmp_path):
    event = {"ph": "X", "cat": "user_annotation", "name": 'say "hi" \\ \u00e9', "pid": 1, "tid": 1,
             "ts": 1.0, "dur": 2.0, "args": {}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [event]}, indent=2))
    assert load_kineto(path).ranges["name"].astype(str).tolist() == ['say "hi" \\ \u00e9']


@pytest.mark.parametrize("content, words", [
    ("not json at all", "not a Chrome-trace JSON"),
    ('{"traceEvents": {}}', "no traceEvents array"),
    ('{"traceEvents": []}', "holds no kernel"),
    ("", "not a Chrome-trace JSON"),
])
def test_bad_files_name_the_file(tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TraceError, match=words) as err:
        load_kineto(path)
    assert str(path) in str(err.value)


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(TraceError, match="cannot read trace .*nope.json"):
        load_kineto(tmp_path / "nope.json")


def test_one_place_tells_each_kind_of_input_from_its_name_and_first_bytes(tmp_path):
    """trace/formats.py, which the Kineto and nsys loaders and both commands ask: a gzipped
    Kineto trace, a gzipped SQLite export (gunzipped here: its first bytes say SQLite), a
    results document (JSON, not a trace), and the nsys names."""
    from pytest_gpuprof.trace import formats

    data = Path(__file__).parents[1] / "data"
    kineto = data / "sync.pt.trace.json.gz"
    assert formats.is_gzipped(kineto) and not formats.is_nsys_input(kineto)
    with formats.open_content(kineto) as fh:
        head = fh.read(1 << 16)
    assert formats.is_chrome_trace(head) and not formats.is_sqlite(head)
    export = tmp_path / "sync.sqlite"
    with gzip.open(data / "nsys" / "sync.sqlite.gz", "rb") as src, open(export, "wb") as out:
        shutil.copyfileobj(src, out)
    assert formats.is_nsys_input(export) and not formats.is_gzipped(export)
    with formats.open_content(export) as fh:
        assert formats.is_sqlite(fh.read(16))
    assert formats.is_gzipped(data / "nsys" / "sync.sqlite.gz")
    results = tmp_path / "results.json"
    results.write_text('{"schema_version": 1, "tests": []}')
    with formats.open_content(results) as fh:
        head = fh.read()
    assert not formats.is_chrome_trace(head) and not formats.is_sqlite(head)
    assert formats.is_nsys_input("run.nsys-rep") and not formats.is_nsys_input("run.kernel_profiling-rep")


# --- the first bytes: what cannot be JSON is refused from them, what can is read on --------

def test_a_byte_order_mark_whitespace_and_a_bare_array_are_still_chrome_traces(tmp_path):
    """What JSON and Chrome's trace format allow before the events: a UTF-8 byte order mark,
    whitespace, header members (torch's ``schemaVersion`` first), or no object at all: the
    events as a bare array.  The check of the first bytes lets each through."""
    text = gzip.decompress((DATA / "sync.pt.trace.json.gz").read_bytes()).decode()
    assert text.lstrip().startswith('{\n    "schemaVersion": 1')
    marked = tmp_path / "marked.json.gz"
    marked.write_bytes(gzip.compress(b"\xef\xbb\xbf \r\n\t" + text.encode()))
    assert_same(load_kineto(marked), load_kineto(DATA / "sync.pt.trace.json.gz"))
    events = json.loads(text)["traceEvents"]
    bare, wrapped = tmp_path / "bare.json", tmp_path / "wrapped.json"
    bare.write_text("\n " + json.dumps(events))
    wrapped.write_text(json.dumps({"traceEvents": events}))
    assert len(load_kineto(bare).kernels) == 4
    assert_same(load_kineto(bare), load_kineto(wrapped))


#: A document with what JSON allows and a cut could split: every kind of number (Python's
#: json reads NaN and the infinities too), the literals, escapes, surrogate pairs, text of
#: 2 to 4 bytes a character in UTF-8, and runs of whitespace.
_FEATURES = ('{"n": [-0, 12, -3.25e-7, 1E+2, 6.02e23, NaN, Infinity, -Infinity], "l": [true, false, null], '
             '"s": ["\\u00e9\\ud83d\\ude00\\n\\"\\\\\\/", "é€😀", ""],   "o": {"a": {"b": []}}}')


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16"])
def test_no_cut_of_a_valid_document_is_taken_for_invalid_json(encoding):
    """The head of a valid document, cut anywhere, is never refused: an error ``json`` gives
    for the head within the last bytes may be the cut's, and a string cut short is
    unterminated wherever it began.  Every cut of a document repeating ``_FEATURES`` (in
    JSON's encodings: UTF-16 by its first bytes, as ``json.loads`` reads it), and the first
    2,000 cuts and 300 more of a real trace."""
    from pytest_gpuprof.trace.formats import check_json_head

    doc = ('{"traceEvents": [' + ", ".join([_FEATURES] * 12) + "]}").encode(encoding)
    json.loads(doc)  # valid
    for cut in range(len(doc)):
        check_json_head(doc[:cut])
    trace = gzip.decompress((DATA / "overlap.pt.trace.json.gz").read_bytes())
    for cut in [*range(2000), *range(2000, len(trace), len(trace) // 300)]:
        check_json_head(trace[:cut])


@pytest.mark.parametrize("doc", [
    b"\x00" * 500,  # a file of zeros: UTF-32 to json, by its first bytes
    b"{" + b"\x00" * 499,
    b"\x89PNG\r\n\x1a\n" + b"\x00" * 500,  # a binary
    b'{"traceEvents": [' + b'{"ph": "X"}, ' * 40 + b'{"ph": "X", "name": "a\x01b"}' + b", {}" * 40 + b"]}",
    b'{"traceEvents": [' + b'{"ph": "X"}, ' * 40 + b'{"ph": "X",, "name": 1}' + b", {}" * 40 + b"]}",
    b'[{"ph": "X"}] ' + b"x" * 100,  # data after the document
    b'{"a": "' + "é".encode() + b"\xff" + b"x" * 100,  # bytes that are not UTF-8
], ids=["zeros", "brace then zeros", "binary", "control character", "comma doubled", "extra data", "not utf-8"])
def test_the_head_of_invalid_json_is_refused_with_jsons_own_error(doc):
    """Whole, an invalid document is refused with the error ``json`` gives for it; cut
    anywhere, its head is refused with that same error or not at all, and never when cut
    before that error (what follows could have been anything)."""
    from pytest_gpuprof.trace.formats import check_json_head

    with pytest.raises(ValueError) as whole:
        json.loads(doc)
    at = whole.value.pos if isinstance(whole.value, json.JSONDecodeError) else whole.value.start
    for cut in range(len(doc) + 1):
        try:
            check_json_head(doc[:cut])
        except ValueError as head:
            assert cut > at and str(head) == str(whole.value), cut
        else:
            assert cut < len(doc), "the whole document was not refused"


def test_the_events_key_is_looked_for_in_the_first_two_chunks_only(tmp_path, monkeypatch):
    """The fast path looks for the events key in its first two chunks only: it used to keep
    all it had read until the key was found and search it again after each chunk (a file of
    zeros: 6.3 s for 64 MB, no answer in 500 s for 2 GB).  A header longer than two chunks
    (valid, if no Kineto trace's) goes to the generic parser, which reads it alike."""
    text = gzip.decompress((DATA / "sync.pt.trace.json.gz").read_bytes()).decode()
    at = text.index('"traceEvents"')
    path = tmp_path / "long_header.json"
    path.write_text(text[:at] + '"pad": "' + "x" * 20 * 4096 + '", ' + text[at:])
    searched = []

    class Spy:
        def search(self, data):
            searched.append(len(data))
            return pattern.search(data)

    pattern = kineto._EVENTS_START
    with monkeypatch.context() as m:
        m.setattr(kineto, "_EVENTS_START", Spy())
        m.setattr(kineto, "CHUNK", 4096)
        trace = load_kineto(path)
    assert searched == [4096, 2 * 4096]
    assert_same(trace, generic(path, monkeypatch))
    assert len(trace.kernels) == 4


def test_host_threads_are_named_as_kineto_names_them_last(monkeypatch):
    """Kineto names a thread in metadata events, some twice (``pt_autograd_0``, then
    ``python3`` for tid 1172 of the shipped MoE trace: its lines 42066 and 42090); the last
    name holds, on both paths and across chunk boundaries."""
    path = Path(__file__).parents[2] / "example_suite" / "traces" / \
        "example_suite_test_moe.py_test_moe_forward.pt.trace.json.gz"
    named = {1124: "thread 1124 (python3)", 1172: "thread 1172 (python3)", 7: "stream 7 "}
    assert fast_only(path, monkeypatch).threads == named
    assert fast_only(path, monkeypatch, chunk=4096).threads == named
    assert generic(path, monkeypatch).threads == named
