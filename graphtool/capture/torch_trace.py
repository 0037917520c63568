"""Read torch's structured-trace logs (``TORCH_TRACE``) without importing torch: record by record, in bounded memory.

What torch writes (``torch/_logging/_internal.py``: ``trace_structured`` and ``TorchLogsFormatter``; the same on
torch 2.11 to 2.15), one file per process (``dedicated_log_torch_trace_rank_{r}_XXXX.log`` under torch.distributed)::

    V1128 13:29:38.776000 9622 torch/_dynamo/convert_frame.py:303] {"dynamo_start": {"stack": [...]}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    V1128 13:29:38.774000 9622 torch/_logging/_internal.py:1328] {"artifact": {"name": "torch_version", "encoding": "json"}, "has_payload": "98696a96..."}
    \t{
    \t"pytorch_version": "2.13.0+cpu",
    \t...

- a glog prefix, then one JSON envelope: the record's name is its first key and that key's value its metadata;
  ``rank``, ``frame_id``, ``frame_compile_id``, ``attempt`` and ``compiled_autograd_id`` say whose it is;
- a payload follows on lines that start with a tab; ``has_payload`` is the md5 of those lines (tab removed)
  joined by newlines;
- ``{"str": [path, index]}`` records intern the file names that later stacks cite by index (kept per file in
  :attr:`LogReader.interned`, not yielded).

The reader hands out one :class:`Record` at a time. A payload is kept only for the records ``want(name, meta)``
asks for, and only when its md5 matches (a tampered or cut payload is never trusted: the record comes with
``payload=None`` and ``payload_ok=False``); every other payload is checked and dropped as it streams past. So
memory holds one chunk of the file and the payload being read, whatever the log's size. Damage (a line that is
neither an envelope nor a payload, a payload whose md5 does not match, an envelope key this reader does not know)
is counted and named in :attr:`LogReader.damage`, and reading goes on.

Example::

    >>> import io
    >>> text = (b'V1128 13:29:38.776000 1 torch/x.py:1] {"str": ["/m.py", 0]}\\n'
    ...         b'V1128 13:29:38.776000 1 torch/x.py:1] {"dynamo_start": {"stack": []}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}\\n'
    ...         b'V1128 13:29:38.776000 1 torch/x.py:1] {"artifact": {"name": "x"}, "has_payload": "5d41402abc4b2a76b9719d911017c592"}\\n'
    ...         b'\\thello\\n')
    >>> reader = LogReader([("m.log", io.BytesIO(text))], want=lambda name, meta: name == "artifact")
    >>> [(r.name, r.compile_id, r.payload) for r in reader.records()]
    [('dynamo_start', '0/0', None), ('artifact', None, 'hello')]
    >>> reader.interned[0], reader.damage.total()
    ({0: '/m.py'}, 0)
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

#: bytes read at a time: one chunk (and the payload being kept) is what memory holds
CHUNK = 1 << 22
#: a line longer than this without a newline is not torch's (its envelopes are short; payloads have newlines)
MAX_LINE = 64 << 20
#: examples of each kind of damage kept (the counts are exact)
EXAMPLES = 20

#: what the envelope says besides the record itself (``trace_structured``'s reserved names, and ``has_payload``,
#: ``stack``); any other key beside the record's name is from a torch this reader does not know
CONTEXT_KEYS = frozenset({"rank", "frame_id", "frame_compile_id", "attempt", "compiled_autograd_id", "has_payload",
                          "stack", "severity", "timestamp", "pathname", "thread", "subgraph_name"})

#: every record name torch 2.11-2.15 writes (``trace_structured``'s first argument) and tlparse reads
KNOWN_RECORDS = frozenset({
    "aot_autograd_backward_compilation_metrics", "aot_backward_graph", "aot_forward_graph", "aot_inference_graph",
    "aot_joint_graph", "artifact", "bwd_compilation_metrics", "bwd_compilation_metrics_runtime", "chromium_event",
    "compilation_metrics", "compilation_metrics_runtime", "compiled_autograd_graph", "create_symbol",
    "create_unbacked_symbol", "describe_source", "describe_storage", "describe_tensor", "dump_file",
    "dynamo_cpp_guards_str", "dynamo_guards", "dynamo_output_graph", "dynamo_start", "export", "exported_program",
    "expression_created", "graph_dump", "guard_added", "guard_added_fast", "guard_on_data_dependent_error",
    "inductor_input_graph", "inductor_output_code", "inductor_post_grad_graph", "inductor_pre_grad_graph", "link",
    "mismatched_fake_kernel", "missing_fake_kernel", "optimize_ddp_split_child", "optimize_ddp_split_graph",
    "propagate_real_tensors", "propagate_real_tensors_provenance", "str", "symbolic_shape_specialization",
})

# glog's prefix as TorchLogsFormatter writes it: level, MMDD, time, pid, path:line] (tlparse's own pattern)
_GLOG = re.compile(rb"(?:\[rank\d+\]:)?[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^\]\n]*:\d+\] ")
_NEXT_RECORD = re.compile(rb"\n[^\t]")  # the end of a payload: a line that does not start with a tab
_RANK_IN_NAME = re.compile(r"rank_(\d+)_")
_TAB, _NL = 9, 10


@dataclass(frozen=True, slots=True)
class Record:
    """One structured-trace record: ``name`` its kind (``dynamo_start``, ``artifact``, ``compilation_metrics``...),
    ``meta`` the value torch logged under that name, ``file``/``line`` where it was read (an index into
    :attr:`LogReader.files`, the 1-based line of its envelope)."""

    name: str
    meta: Any
    file: int
    line: int
    rank: int | None = None
    frame_id: int | None = None
    frame_compile_id: int | None = None
    attempt: int | None = None
    compiled_autograd_id: int | None = None
    digest: str | None = None  # has_payload: the md5 torch wrote, a hash of the payload's content
    payload: str | None = None  # only when asked for (``want``) and intact
    payload_ok: bool = True  # False: the payload was cut, damaged or missing (and so not given)

    @property
    def compile_id(self) -> str | None:
        """torch's own spelling (``CompileId.__str__``): ``"0/1"``, ``"!2/0/1"`` under compiled autograd."""
        if self.compiled_autograd_id is not None:
            frame = f"/{self.frame_id}/{self.frame_compile_id}" if self.frame_id is not None else ""
            return f"!{self.compiled_autograd_id}{frame}"
        if self.frame_id is None or self.frame_compile_id is None:
            return None
        return f"{self.frame_id}/{self.frame_compile_id}"

    @property
    def artifact(self) -> str | None:
        """An ``artifact`` record's name (``dynamo_graph_break_reason``, ``recompile_reasons``...)."""
        return self.meta.get("name") if self.name == "artifact" and isinstance(self.meta, dict) else None


@dataclass(frozen=True)
class LogFile:
    """One file read: ``rank`` from its records (or its name), ``records`` the envelopes read whole."""

    path: str
    rank: int | None
    lines: int
    records: int
    bytes: int
    compressed: bool

    def to_dict(self) -> dict:
        return {"path": self.path, "rank": self.rank, "lines": self.lines, "records": self.records, "bytes": self.bytes,
                "compressed": self.compressed}


@dataclass(frozen=True)
class Damaged:
    """One damaged place: ``why`` in words (``md5 mismatch``, ``cut off at the end of the file``, ``not JSON``...)."""

    file: str
    line: int
    why: str
    record: str | None = None  # the record whose payload it was

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "why": self.why, "record": self.record}


@dataclass
class Damage:
    """What could not be read, counted exactly, with the first :data:`EXAMPLES` of each kind named."""

    bad_payloads: int = 0
    bad_lines: int = 0
    payload_examples: list[Damaged] = field(default_factory=list)
    line_examples: list[Damaged] = field(default_factory=list)
    #: (kind, key) -> [count, first file, first line]; kind "envelope key" or "record"
    unknown: dict[tuple[str, str], list] = field(default_factory=dict)

    def total(self) -> int:
        return self.bad_payloads + self.bad_lines + sum(v[0] for v in self.unknown.values())

    def payload(self, d: Damaged) -> None:
        self.bad_payloads += 1
        if len(self.payload_examples) < EXAMPLES:
            self.payload_examples.append(d)

    def line(self, d: Damaged) -> None:
        self.bad_lines += 1
        if len(self.line_examples) < EXAMPLES:
            self.line_examples.append(d)

    def saw_unknown(self, kind: str, key: str, file: str, line: int) -> None:
        seen = self.unknown.get((kind, key))
        if seen is None:
            self.unknown[(kind, key)] = [1, file, line]
        else:
            seen[0] += 1


def log_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The trace files of ``paths``: each file as given, each folder's ``*.log`` and ``*.log.gz`` (walked, sorted).

    Raises :class:`FileNotFoundError` for a path that does not exist."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and (f.name.endswith(".log") or f.name.endswith(".log.gz")))
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise FileNotFoundError(str(p))
    return list(dict.fromkeys(out))


def open_log(path: Path) -> tuple[IO[bytes], bool]:
    """The file's bytes, gunzipped when it is gzip (by its magic number, not its name), and whether it was."""
    f = open(path, "rb")
    magic = f.read(2)
    f.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f, mode="rb"), True
    return f, False


class LogReader:
    """Read the records of several trace files, one file after the other.

    ``sources`` are paths or ``(name, binary stream)`` pairs; ``want(name, meta)`` says which records' payloads to
    keep (decoded as UTF-8, invalid bytes replaced); ``names``, which records to hand out at all. Everything learnt
    while reading (the files, their interned strings, the damage) is on the reader once :meth:`records` is exhausted."""

    def __init__(self, sources: Iterable, want: Callable[[str, Any], bool] = lambda name, meta: False,
                 loads: Callable[[bytes], Any] | None = None, names: Iterable[str] | None = None):
        self.sources = list(sources)
        self.want = want
        #: the record names handed out (None: every one); the others are counted and their payloads checked, but
        #: their envelopes are not parsed (most of a log is ``chromium_event`` records no fact needs)
        self.names = frozenset(names) if names is not None else None
        # the standard library's parser: torch writes json.dumps' NaN and Infinity, which orjson and msgspec refuse,
        # and with most envelopes never parsed (``names``) a faster parser saved 2% of a GPT-2 log's reading
        self.loads = loads or json.loads
        self.files: list[LogFile] = []
        self.interned: list[dict[int, str]] = []
        self.damage = Damage()

    def records(self) -> Iterator[Record]:
        for source in self.sources:
            if isinstance(source, tuple):
                name, stream = source
                compressed = False
                owned = False
            else:
                name = str(source)
                stream, compressed = open_log(Path(source))
                owned = True
            try:
                yield from _FileReader(self, len(self.files), name, stream, compressed).records()
            finally:
                if owned:
                    stream.close()


class _FileReader:
    """The records of one file: a state machine over chunks of complete lines (see the module's docstring)."""

    def __init__(self, reader: LogReader, index: int, name: str, stream: IO[bytes], compressed: bool):
        self.reader, self.index, self.name, self.stream, self.compressed = reader, index, name, stream, compressed
        m = _RANK_IN_NAME.search(os.path.basename(name))
        self.rank: int | None = int(m.group(1)) if m else None
        self.lines = 0  # lines consumed before the current chunk's position
        self.records_read = 0
        self.bytes = 0
        self.strings: dict[int, str] = {}
        reader.interned.append(self.strings)
        # the record whose payload is being read: (fields or None when not handed out, md5 expected, hasher, kept
        # pieces or None, its envelope's line, its name)
        self.open: tuple | None = None
        self.owed_newline = False
        self.orphan = False  # inside payload lines that follow no record (already counted once)

    def records(self) -> Iterator[Record]:
        pending = b""
        # read1: what one read of the file (or one gzip member's worth) gives, so a cut .gz loses only its tail
        read = getattr(self.stream, "read1", self.stream.read)
        try:
            while True:
                chunk = read(CHUNK)
                if not chunk:
                    break
                self.bytes += len(chunk)
                data = pending + chunk if pending else chunk
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    pending = data
                    if len(pending) > MAX_LINE:  # not a line torch writes: drop it whole
                        self._bad_line(self.lines + 1, "a line of more than 64 MiB without a newline")
                        pending = b""
                    continue
                pending = data[cut:]
                yield from self._lines(data[:cut] if pending else data)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:  # a cut or corrupt .gz: what was read stands
            self._bad_line(self.lines + 1, f"the file could not be read on from here ({type(exc).__name__}: {exc})")
        if pending:  # the last line has no newline: the file was cut while torch wrote it
            yield from self._lines(pending + b"\n", cut_off=True)
        rec = self._close_payload(at_end=True)
        if rec is not None:
            yield rec
        rank = self.rank
        self.reader.files.append(LogFile(self.name, rank, self.lines, self.records_read, self.bytes, self.compressed))

    # -- lines ----------------------------------------------------------------------------------------------
    def _lines(self, work: bytes, cut_off: bool = False) -> Iterator[Record]:
        pos, n = 0, len(work)
        while pos < n:
            if work[pos] == _TAB:
                m = _NEXT_RECORD.search(work, pos)
                end = m.start() + 1 if m else n
                self._payload_piece(work, pos, end)
                pos = end
                continue
            rec = self._close_payload()
            if rec is not None:
                yield rec
            nl = work.index(b"\n", pos)
            self.lines += 1
            line = work[pos:nl]
            pos = nl + 1
            if not line.strip():
                continue  # torch never writes a blank line; a stuttering log store does (tlparse skips them too)
            rec = self._envelope(line, cut_off and pos >= n)
            if rec is not None:
                yield rec

    def _payload_piece(self, work: bytes, start: int, end: int) -> None:
        first_line = self.lines + 1
        self.lines += work.count(b"\n", start, end)
        if self.open is None:
            if not self.orphan:
                self.orphan = True
                self._bad_line(first_line, "payload lines that follow no record")
            return
        fields, expected, hasher, kept, line, _ = self.open
        # "\tL1\n\tL2\n" -> "L1\nL2": a newline is owed between this piece and the next (none after the last line)
        text = work[start + 1:end - 1].replace(b"\n\t", b"\n")
        if self.owed_newline:
            hasher.update(b"\n")
            if kept is not None:
                kept.append(b"\n")
        hasher.update(text)
        if kept is not None:
            kept.append(text)
        self.owed_newline = True

    def _close_payload(self, at_end: bool = False) -> Record | None:
        self.orphan = False
        if self.open is None:
            return None
        fields, expected, hasher, kept, line, name = self.open
        self.open = None
        read_any = self.owed_newline
        self.owed_newline = False
        ok = read_any and hasher.hexdigest() == expected
        if not ok:
            if not read_any:
                why = "the payload is missing"
            elif at_end:
                why = "md5 mismatch: the file ends inside this payload (cut off)"
            else:
                why = "md5 mismatch: the payload is not what torch wrote"
            self.reader.damage.payload(Damaged(self.name, line, why, name))
        if fields is None:  # a record not handed out: its payload was only checked
            return None
        payload = None
        if ok and kept is not None:
            payload = b"".join(kept).decode("utf-8", errors="replace")
        return Record(**fields, payload=payload, payload_ok=ok)

    def _envelope(self, line: bytes, cut_off: bool) -> Record | None:
        at = self.lines
        m = _GLOG.match(line)
        if m is None:
            self._bad_line(at, "cut off at the end of the file" if cut_off else "not a trace record (no glog prefix)")
            return None
        start = m.end()
        names = self.reader.names
        if names is not None and line.endswith(b"}") and line.startswith(b'{"', start):
            # the record's name is the envelope's first key (trace_structured writes it first): a record no one
            # asked for is counted and its payload checked, its envelope never parsed
            q = line.find(b'"', start + 2)
            name = line[start + 2:q].decode("ascii", "replace")
            if name not in names and name != "str" and name not in CONTEXT_KEYS:
                if name not in KNOWN_RECORDS:
                    self.reader.damage.saw_unknown("record", name, self.name, at)
                self.records_read += 1
                h = line.rfind(b'"has_payload": "')
                if h > 0:
                    self.open = (None, line[h + 16:h + 48].decode("ascii", "replace"), hashlib.md5(usedforsecurity=False),
                                 None, at, name)
                return None
        try:
            env = self.reader.loads(line[start:])
        except (ValueError, TypeError):
            self._bad_line(at, "cut off at the end of the file" if cut_off else "not JSON after the glog prefix")
            return None
        if not isinstance(env, dict) or not env:
            self._bad_line(at, "the envelope is not a JSON object")
            return None
        name = next((k for k in env if k not in CONTEXT_KEYS), None)
        if name is None:
            self._bad_line(at, "the envelope names no record")
            return None
        meta = env[name]
        damage = self.reader.damage
        for k in env:
            if k is not name and k not in CONTEXT_KEYS:
                damage.saw_unknown("envelope key", k, self.name, at)
        if name not in KNOWN_RECORDS:
            damage.saw_unknown("record", name, self.name, at)
        self.records_read += 1
        rank = env.get("rank")
        if isinstance(rank, int) and self.rank is None:
            self.rank = rank
        if name == "str":
            if isinstance(meta, list) and len(meta) == 2 and isinstance(meta[1], int):
                self.strings[meta[1]] = str(meta[0])
            else:
                self._bad_line(at, "a str record that is not [text, index]")
            return None
        fields = {"name": name, "meta": meta, "file": self.index, "line": at,
                  "rank": rank if isinstance(rank, int) else self.rank, "frame_id": _int(env.get("frame_id")),
                  "frame_compile_id": _int(env.get("frame_compile_id")), "attempt": _int(env.get("attempt")),
                  "compiled_autograd_id": _int(env.get("compiled_autograd_id"))}
        digest = env.get("has_payload")
        if digest is None:
            return Record(**fields)
        fields["digest"] = str(digest)
        keep = [] if self._wanted(name, meta) else None
        self.open = (fields, str(digest), hashlib.md5(usedforsecurity=False), keep, at, name)
        return None

    def _wanted(self, name: str, meta: Any) -> bool:
        try:
            return bool(self.reader.want(name, meta))
        except (AttributeError, TypeError, KeyError):  # metadata of an unexpected shape: not one graphtool reads
            return False

    def _bad_line(self, line: int, why: str) -> None:
        self.reader.damage.line(Damaged(self.name, line, why))


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
