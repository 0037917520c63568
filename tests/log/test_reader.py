"""The structured-trace reader on small hand-made logs: damage is counted and named, reading goes on, no torch."""

from __future__ import annotations

import gzip
import io

import pytest

from graphtool.capture.torch_trace import LogReader, log_files
from tests.log.handmade import BREAK_PAYLOAD, record, small_log


def read(data: bytes, want=lambda name, meta: True, name="x.log"):
    reader = LogReader([(name, io.BytesIO(data))], want=want)
    return reader, list(reader.records())


def test_records_payloads_and_interning():
    reader, recs = read(small_log())
    assert [r.name for r in recs][:3] == ["dynamo_start", "artifact", "dynamo_output_graph"]
    brk = recs[1]
    assert brk.artifact == "dynamo_graph_break_reason" and brk.payload == BREAK_PAYLOAD and brk.payload_ok
    assert brk.compile_id == "0/0" and brk.attempt == 0
    assert reader.interned == [{0: "/app/model.py"}]
    assert reader.damage.total() == 0
    f = reader.files[0]
    assert (f.lines, f.records) == (small_log().count(b"\n"), 12)  # the str record is read, not handed out


def test_payloads_not_asked_for_are_dropped():
    _, recs = read(small_log(), want=lambda name, meta: False)
    assert all(r.payload is None and r.payload_ok for r in recs)


def test_md5_mismatch_is_counted_and_the_payload_not_trusted():
    bad = record("artifact", {"name": "dynamo_graph_break_reason"}, BREAK_PAYLOAD.replace("13", "14"),
                 md5="0" * 32, frame_id=0, frame_compile_id=0, attempt=0)
    reader, recs = read(small_log() + bad)
    last = recs[-1]
    assert last.payload is None and not last.payload_ok
    assert reader.damage.bad_payloads == 1
    (d,) = reader.damage.payload_examples
    assert d.why.startswith("md5 mismatch") and d.record == "artifact" and d.line == small_log().count(b"\n") + 1


def test_truncated_mid_payload():
    data = small_log()
    cut = data[: data.index(b"Failed to trace builtin")]
    reader, recs = read(cut)
    assert [r.name for r in recs] == ["dynamo_start", "artifact"]
    assert not recs[-1].payload_ok and recs[-1].payload is None
    (d,) = reader.damage.payload_examples
    assert "cut off" in d.why


def test_truncated_mid_envelope_line():
    data = small_log()
    cut = data[: data.rindex(b'"compile_id": "0/1"') + 5]
    reader, recs = read(cut)
    assert reader.damage.bad_lines == 1 and reader.damage.line_examples[0].why == "cut off at the end of the file"
    assert recs[-1].name == "dynamo_output_graph"


def test_binary_garbage_lines():
    data = small_log()
    i = data.index(b"V1128", 100)
    garbage = b"\x00\xff\xfe garbage \x89PNG\r\n" + bytes(range(256)).replace(b"\n", b"") + b"\n"
    reader, recs = read(data[:i] + garbage + data[i:])
    assert len(recs) == len(read(data)[1])
    assert reader.damage.bad_lines == 2  # the two lines the garbage makes
    assert reader.damage.bad_payloads == 0


def test_garbage_starting_with_a_tab_joins_the_payload_before_it():
    data = small_log()
    i = data.index(b"V1128", data.index(b"gb0059"))  # the line after the break's payload
    reader, recs = read(data[:i] + b"\t\x00\x01 not torch's\n" + data[i:])
    assert reader.damage.bad_payloads == 1 and reader.damage.payload_examples[0].record == "artifact"
    assert recs[1].payload is None


def test_an_envelope_key_from_a_newer_torch_is_named_and_the_record_kept():
    rec = record("compilation_metrics", {"compile_id": "2/0"}, frame_id=2, frame_compile_id=0, attempt=0, trace_epoch=3)
    new = record("dynamo_shiny_new_record", {"x": 1}, frame_id=2, frame_compile_id=0, attempt=0)
    reader, recs = read(small_log() + rec + new)
    assert recs[-2].name == "compilation_metrics" and recs[-2].compile_id == "2/0"
    assert recs[-1].name == "dynamo_shiny_new_record"
    assert {k: v[0] for k, v in reader.damage.unknown.items()} == {("envelope key", "trace_epoch"): 1,
                                                                  ("record", "dynamo_shiny_new_record"): 1}


def test_not_a_trace_at_all():
    reader, recs = read(b"hello\nthis is a README\n\n")
    assert recs == [] and reader.files[0].records == 0 and reader.damage.bad_lines == 2


def test_payload_lines_with_no_record_are_one_damage():
    reader, recs = read(b"\tstray\n\tlines\n" + small_log())
    assert reader.damage.bad_lines == 1 and len(recs) == 11


def test_gzip_gives_the_same_records(tmp_path):
    plain = tmp_path / "dedicated_log_torch_trace_rank_3_abc.log"
    plain.write_bytes(small_log())
    gz = tmp_path / "copy" / "dedicated_log_torch_trace_rank_3_abc.log.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(small_log()))
    a, b = LogReader([plain], want=lambda n, m: True), LogReader([gz], want=lambda n, m: True)
    key = lambda r: (r.name, r.compile_id, r.payload, r.line)  # noqa: E731
    assert [key(r) for r in a.records()] == [key(r) for r in b.records()]
    assert a.files[0].rank == b.files[0].rank == 3 and b.files[0].compressed


def test_a_cut_gzip_keeps_what_was_read(tmp_path):
    gz = tmp_path / "x.log.gz"
    gz.write_bytes(gzip.compress(small_log() * 20)[:-200])
    reader = LogReader([gz])
    recs = list(reader.records())
    assert len(recs) > 100 and reader.damage.total() >= 1


def test_chunks_split_anywhere(monkeypatch):
    """A chunk boundary inside an envelope, a payload, or between a payload's newline and its tab changes nothing."""
    from graphtool.capture import torch_trace

    data = small_log(rank=0)
    _, whole = read(data)
    for size in (7, 64, 333):
        monkeypatch.setattr(torch_trace, "CHUNK", size)
        _, parts = read(data)
        assert [(r.name, r.payload, r.line) for r in parts] == [(r.name, r.payload, r.line) for r in whole]


def test_log_files_of_a_folder(tmp_path):
    (tmp_path / "a.log").write_bytes(b"")
    (tmp_path / "b.log.gz").write_bytes(gzip.compress(b""))
    (tmp_path / "README.md").write_text("x")
    assert [p.name for p in log_files([tmp_path])] == ["a.log", "b.log.gz"]
    with pytest.raises(FileNotFoundError):
        log_files([tmp_path / "nope"])


def test_records_not_asked_for_are_counted_and_their_payloads_still_checked():
    ev = record("chromium_event", {}, '{\n"name": "dynamo"\n}', frame_id=0, frame_compile_id=0, attempt=0)
    bad = record("chromium_event", {}, '{\n"name": "x"\n}', md5="f" * 32, frame_id=0, frame_compile_id=0, attempt=0)
    new = record("shiny_record", {"a": 1})
    reader = LogReader([("x.log", io.BytesIO(ev + small_log() + bad + new))], names={"dynamo_start"})
    recs = list(reader.records())
    assert [r.name for r in recs] == ["dynamo_start"] * 3
    assert reader.files[0].records == 15  # every envelope: 12 of the small log's, two events, the new record
    assert reader.damage.bad_payloads == 1 and reader.damage.payload_examples[0].record == "chromium_event"
    assert ("record", "shiny_record") in reader.damage.unknown


def test_nan_and_infinity_as_torch_writes_them():
    """torch's json.dumps writes NaN and Infinity (a float metric): read, not a bad line (orjson and msgspec refuse them)."""
    rec = record("compilation_metrics", {"compile_id": "0/0", "guard_latency_us": float("nan"), "x": float("inf")},
                 frame_id=0, frame_compile_id=0, attempt=0)
    reader, recs = read(rec)
    assert reader.damage.total() == 0 and recs[0].meta["compile_id"] == "0/0"


def test_memory_does_not_grow_with_the_log(tmp_path):
    """Reading holds a chunk and the payload being read: a log eight times longer (its records repeated with new
    frame ids, as benchmarks/bench_log.py makes its 600 MB log) peaks at about the same memory."""
    import importlib.util
    import tracemalloc

    from graphtool.analysis.run_log import read_run_log
    from tests.helpers import ROOT
    from tests.log.recorded import LOOP_215

    spec = importlib.util.spec_from_file_location("bench_log", ROOT / "benchmarks" / "bench_log.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    source = tmp_path / "one.log"
    source.write_bytes(gzip.decompress(next((LOOP_215 / "trace").glob("*.gz")).read_bytes()))
    peaks = {}
    for mb in (1, 8):
        big = tmp_path / f"dedicated_log_torch_trace_{mb}.log"
        bench.make_big_log(source, big, mb)
        tracemalloc.start()
        facts = read_run_log([big])
        peaks[mb] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert facts.log.bad_payloads == 0 and facts.log.bad_lines == 0
    # eight times the log: the facts of eight times the compiles, and still far from eight times the memory
    assert peaks[8] < 2 * peaks[1], peaks
