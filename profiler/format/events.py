"""The capture's events: name, attr, kernel ids, and the record layout each implies.

A record is matched to its event by id: with PERF_SAMPLE_IDENTIFIER the id is the first u64
of a sample body and the last u64 of every other record's sample_id trailer (that is the point
of IDENTIFIER: "its position is fixed relative to header", perf_event.h). With one event, or
with several that share one sample_type, the first event's layout decodes everything.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, Protocol

from profiler.dataclass import dataclass
from profiler.errors import FormatError
from profiler.format import records as R


class _Warner(Protocol):
    def warn(self, message: str) -> None: ...


@dataclass(frozen=True)
class Event:
    """One event of a capture: its index in the event table, name, attr, ids and sample layout."""

    index: int
    name: str
    attr: dict[str, Any]
    ids: tuple[int, ...]
    layout: R.SampleLayout


class EventTable:
    def __init__(self, events: list[Event], byte_order: str) -> None:
        if not events:
            raise FormatError("the capture names no events.")
        self.events = events
        self.byte_order = byte_order
        self.bo = "<" if byte_order == "little" else ">"
        self.by_id: dict[int, Event] = {i: ev for ev in events for i in ev.ids}
        types = {ev.layout.sample_type for ev in events}
        self.uniform = len(types) == 1 and len({ev.layout for ev in events}) == 1
        self.identifier = all(ev.layout.sample_type & R.PERF_SAMPLE_IDENTIFIER for ev in events)

    @classmethod
    def from_header(cls, header: dict[str, Any]) -> EventTable:
        byte_order = str(header.get("byte_order", "little"))
        events = []
        for index, ev in enumerate(header.get("events") or []):
            attr = dict(ev.get("attr") or {})
            ids = tuple(int(i) for i in (ev.get("ids") or []))
            layout = R.SampleLayout.from_attr(attr, byte_order)
            events.append(Event(index, str(ev.get("name", f"event{index}")), attr, ids, layout))
        return cls(events, byte_order)

    @property
    def default(self) -> Event:
        return self.events[0]

    def event_for(self, buf: bytes | memoryview, offset: int, rtype: int, size: int) -> Event:
        """The event a record at ``offset`` belongs to."""
        if self.uniform or not self.identifier or size < 16:
            return self.default
        if rtype == R.PERF_RECORD_SAMPLE:
            (ident,) = struct.unpack_from(self.bo + "Q", buf, offset + 8)
        elif self.default.layout.sample_id_all and rtype < 64:
            (ident,) = struct.unpack_from(self.bo + "Q", buf, offset + size - 8)
        else:
            return self.default
        return self.by_id.get(int(ident), self.default)

    def decode_stream(self, buf: bytes | memoryview, warner: _Warner | None = None) -> Iterator[R.Record]:
        """Decode consecutive records; stop the stream at the first one that is damaged."""
        pos, end = 0, len(buf)
        while pos < end:
            if pos + R.HEADER_SIZE > end:
                self._warn(warner, f"{end - pos} stray bytes at the end of a record frame were skipped.")
                return
            rtype, _, size = R.decode_header(buf, pos, self.bo)
            if size < R.HEADER_SIZE or size % 8 or pos + size > end:
                self._warn(warner, f"a record claiming {size} bytes is damaged: skipped the last "
                                   f"{end - pos} bytes of its frame.")
                return
            try:
                yield R.decode_record(buf, pos, self.event_for(buf, pos, rtype, size).layout)
            except FormatError as exc:
                self._warn(warner, f"a {R.record_name(rtype)} record is damaged ({exc}); skipped it.")
            pos += size

    @staticmethod
    def _warn(warner: _Warner | None, message: str) -> None:
        if warner is not None:
            warner.warn(message)
