"""Follow a TORCH_TRACE log while torch writes it: which of torch's timed events are open right now.

torch logs each ``dynamo_timed`` region twice as a ``chromium_event`` record, ``"ph": "B"`` at its start and
``"E"`` at its end (``ChromiumEventLogger._log_timed_event``); the events open at the end of what has been written
are the stack torch is in (``entire_frame_compile`` > ``backend_compile`` > ... > ``async_compile.wait``). Each
:meth:`TraceTail.poll` reads only the bytes added since the last one, up to the last record that is surely whole
(the one being written is read next time), with :mod:`graphtool.capture.torch_trace`'s reader. Torch-free.

Example::

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> tail = TraceTail(d)
    >>> tail.poll()
    []
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from graphtool.capture.torch_trace import LogReader

_ENVELOPE_START = b"\n"  # a record starts on a line that does not begin with a tab


class TraceTail:
    """The open events of the logs under ``folder`` (one per process; the newest file is followed)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.offsets: dict[Path, int] = {}
        self.stack: list[tuple[str, str | None]] = []  # (event name, compile id), outermost first

    def poll(self) -> list[tuple[str, str | None]]:
        """The events open now, outermost first: ``[("entire_frame_compile", "0/0"), ...]``."""
        try:
            files = sorted(p for p in self.folder.iterdir() if p.is_file() and p.name.endswith(".log"))
        except OSError:
            return list(self.stack)
        for path in files:
            self._read(path)
        return list(self.stack)

    def _read(self, path: Path) -> None:
        start = self.offsets.get(path, 0)
        try:
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read()
        except OSError:
            return
        cut = _last_record_start(data)
        if cut <= 0:
            return
        self.offsets[path] = start + cut
        reader = LogReader([(str(path), io.BytesIO(data[:cut]))], want=lambda name, meta: name == "chromium_event")
        for rec in reader.records():
            if rec.name != "chromium_event" or not rec.payload:
                continue
            try:
                event = json.loads(rec.payload)
            except ValueError:
                continue
            self._event(event)

    def _event(self, event: dict) -> None:
        name, phase = event.get("name"), event.get("ph")
        cid = (event.get("args") or {}).get("compile_id")
        if phase == "B":
            self.stack.append((str(name), str(cid) if cid is not None else None))
        elif phase == "E":
            for i in range(len(self.stack) - 1, -1, -1):
                if self.stack[i][0] == name:
                    del self.stack[i:]
                    break


def _last_record_start(data: bytes) -> int:
    """The offset of the last line that starts a record (not a payload line): everything before it is whole."""
    pos = len(data)
    while True:
        nl = data.rfind(b"\n", 0, pos)
        if nl < 0:
            return 0
        if nl + 1 < len(data) and data[nl + 1] != 9:  # the next line starts with no tab: a record's first line
            return nl + 1
        pos = nl
