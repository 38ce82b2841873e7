"""perf.data's HEADER_TRACING_DATA section: the ``format`` text of every tracepoint perf
recorded, so a tracepoint's RAW payload decodes (``sched:sched_switch``'s ``prev_state`` for
off-CPU intervals, docs/offcpu.md).

The layout, as perf writes it (tools/perf/util/trace-event-info.c) and reads it
(trace-event-read.c)::

    "\\x17\\x08\\x44tracing"  version "0.6\\0"  u8 big_endian  u8 sizeof(long)  u32 page_size
    "header_page\\0" u64 size, bytes        "header_event\\0" u64 size, bytes
    u32 count, count x (u64 size, ftrace format text)
    u32 systems, per system: name "\\0", u32 count, count x (u64 size, format text)
    u32 size, kallsyms   u32 size, printk formats   [0.6: u64 size, saved cmdlines]

Numbers are in the byte order the section's own flag names. Only the event formats are kept;
damage is a :class:`TracingDataError` the caller turns into a warning.
"""

from __future__ import annotations

import struct

MAGIC = b"\x17\x08\x44tracing"
MAX_FORMAT = 1 << 16  # a format file is a few KiB: a larger size is damage


class TracingDataError(ValueError):
    """The section contradicts its own sizes."""


class _Cursor:
    def __init__(self, buf: bytes | memoryview, start: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, start, end
        self.bo = "<"

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise TracingDataError(f"a field of {n} bytes runs past the section's end")
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def number(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        value: int = struct.unpack(self.bo + fmt, self.take(size))[0]
        return value

    def string(self) -> str:
        at = bytes(self.buf[self.pos:self.end]).find(b"\0")
        if at < 0:
            raise TracingDataError("a string runs past the section's end")
        return self.take(at + 1)[:-1].decode("utf-8", "replace")


def parse_tracing_data(buf: bytes | memoryview, start: int, end: int) -> list[dict[str, str]]:
    """``[{"event": "sched:sched_switch", "format": text}, ...]``: the entries of the
    ``tracepoint_formats`` metadata (docs/format.md) for the events the section describes."""
    cur = _Cursor(buf, start, end)
    if cur.take(len(MAGIC)) != MAGIC:
        raise TracingDataError("it does not start with perf's tracing-data magic")
    cur.string()  # version
    cur.bo = ">" if cur.take(1) != b"\0" else "<"
    cur.take(1 + 4)  # sizeof(long), page size
    for name in ("header_page", "header_event"):
        if cur.string() != name:
            raise TracingDataError(f"its {name} part is missing")
        cur.take(cur.number("Q"))
    for _ in range(cur.number("I")):  # ftrace's own formats
        cur.take(_size(cur))
    out: list[dict[str, str]] = []
    for _ in range(cur.number("I")):
        system = cur.string()
        for _ in range(cur.number("I")):
            text = cur.take(_size(cur)).decode("utf-8", "replace")
            name = next((line[5:].strip() for line in text.splitlines() if line.startswith("name:")), "")
            if name:
                out.append({"event": f"{system}:{name}", "format": text})
    return out


def _size(cur: _Cursor) -> int:
    size = cur.number("Q")
    if size > MAX_FORMAT:
        raise TracingDataError(f"a format of {size} bytes")
    return size
