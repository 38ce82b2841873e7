"""perf.data's HEADER_TRACING_DATA section: the tracepoint formats perf stored."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from profiler.format.perfdata.tracing import MAGIC, TracingDataError, parse_tracing_data

FORMAT = (Path(__file__).resolve().parents[3] / "fixtures" / "tracepoints" / "sched_switch.format").read_text()


def section(bo: str = "<", formats: dict[str, list[str]] | None = None) -> bytes:
    """A TRACING_DATA section laid out as perf's trace-event-info.c writes it."""
    out = bytearray(MAGIC + b"0.6\0" + (b"\1" if bo == ">" else b"\0") + b"\x08" + struct.pack(bo + "I", 4096))
    for name in (b"header_page", b"header_event"):
        out += name + b"\0" + struct.pack(bo + "Q", 3) + b"abc"
    out += struct.pack(bo + "I", 1) + struct.pack(bo + "Q", 5) + b"ftrce"
    systems = formats if formats is not None else {"sched": [FORMAT]}
    out += struct.pack(bo + "I", len(systems))
    for system, texts in systems.items():
        out += system.encode() + b"\0" + struct.pack(bo + "I", len(texts))
        for text in texts:
            out += struct.pack(bo + "Q", len(text)) + text.encode()
    out += struct.pack(bo + "I", 0) + struct.pack(bo + "I", 0)
    return bytes(out)


@pytest.mark.parametrize("bo", ["<", ">"])
def test_formats_by_system_and_name(bo: str) -> None:
    data = b"xx" + section(bo)
    got = parse_tracing_data(data, 2, len(data))
    assert got == [{"event": "sched:sched_switch", "format": FORMAT}]


def test_damage_is_an_error_not_a_read_past_the_end() -> None:
    data = section()
    with pytest.raises(TracingDataError):
        parse_tracing_data(data, 0, len(data) - len(FORMAT))
    with pytest.raises(TracingDataError):
        parse_tracing_data(b"\0" * 40, 0, 40)
