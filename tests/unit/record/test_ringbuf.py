"""The ring-buffer logic over a bytearray standing in for the kernel's mmap."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler.record.ringbuf import (
    DATA_HEAD_OFFSET,
    DATA_TAIL_OFFSET,
    RingBuffer,
    is_valid_page_count,
)

DATA = 256  # a small data area keeps the wrap-around cases short; the logic does not care
CONTROL = 2048  # the control page must reach data_tail at 1032


class FakeKernel:
    """Writes perf-style records (u32 type, u16 misc, u16 size + body) the way the kernel
    does: at data_head modulo the data size, wrapping, then publishing data_head."""

    def __init__(self, buf: bytearray) -> None:
        self.buf = buf
        self.head = 0

    def write(self, record: bytes) -> None:
        for i, byte in enumerate(record):
            self.buf[CONTROL + (self.head + i) % DATA] = byte
        self.head += len(record)
        struct.pack_into("=Q", self.buf, DATA_HEAD_OFFSET, self.head)


def record(type_: int, body: bytes) -> bytes:
    return struct.pack("=IHH", type_, 0, 8 + len(body)) + body


def setup() -> tuple[bytearray, RingBuffer, FakeKernel]:
    buf = bytearray(CONTROL + DATA)
    return buf, RingBuffer(buf, CONTROL), FakeKernel(buf)


def collect(ring: RingBuffer) -> tuple[int, list[bytes]]:
    got: list[bytes] = []
    n = ring.drain(lambda *chunks: got.extend(bytes(c) for c in chunks))
    return n, got


def test_empty_buffer_calls_nothing() -> None:
    _, ring, _ = setup()
    calls: list[object] = []
    assert ring.drain(lambda *c: calls.append(c)) == 0
    assert calls == []
    assert ring.data_tail == 0


def test_one_slice_then_tail_is_stored() -> None:
    buf, ring, kernel = setup()
    rec = record(9, b"A" * 24)
    kernel.write(rec)
    n, got = collect(ring)
    assert n == len(rec)
    assert got == [rec]
    assert struct.unpack_from("=Q", buf, DATA_TAIL_OFFSET)[0] == len(rec)
    assert ring.pending() == 0


def test_wrap_around_gives_two_slices_with_a_record_split_across_the_end() -> None:
    _, ring, kernel = setup()
    first = record(1, b"x" * (DATA - 8 - 40))  # leaves 40 bytes before the end
    kernel.write(first)
    assert collect(ring)[1] == [first]
    split = record(2, bytes(range(64)))  # 72 bytes: 40 before the end, 32 after
    kernel.write(split)
    n, got = collect(ring)
    assert n == 72
    assert [len(c) for c in got] == [40, 32]
    assert b"".join(got) == split
    assert ring.data_tail == len(first) + len(split)


def test_range_ending_exactly_at_the_end_is_one_slice() -> None:
    _, ring, kernel = setup()
    kernel.write(record(1, b"y" * (DATA - 8)))
    n, got = collect(ring)
    assert (n, len(got), len(got[0])) == (DATA, 1, DATA)
    kernel.write(record(3, b"z" * 8))
    assert collect(ring)[1] == [record(3, b"z" * 8)]


def test_failing_sink_leaves_the_tail_alone() -> None:
    _, ring, kernel = setup()
    kernel.write(record(1, b"q" * 8))

    def boom(*chunks: memoryview) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError):
        ring.drain(boom)
    assert ring.data_tail == 0
    assert ring.pending() == 16


def test_overrun_is_reported() -> None:
    buf, ring, _ = setup()
    struct.pack_into("=Q", buf, DATA_HEAD_OFFSET, DATA + 8)
    with pytest.raises(ValueError):
        ring.drain(lambda *c: None)


def test_data_area_must_be_a_power_of_two() -> None:
    with pytest.raises(ValueError):
        RingBuffer(bytearray(2048 + 100), 2048)


@pytest.mark.parametrize(("pages", "ok"),
                         [(1, False), (2, True), (3, True), (4, False), (5, True), (129, True), (130, False)])
def test_page_counts(pages: int, ok: bool) -> None:
    assert is_valid_page_count(pages) is ok


@given(st.lists(st.integers(min_value=0, max_value=DATA // 2 - 8), min_size=1, max_size=60), st.integers(1, 4))
def test_stream_survives_any_sequence_of_writes(bodies: list[int], batch: int) -> None:
    """Whatever the record sizes and how many are written between drains, the drained
    bytes are exactly the written stream, in order."""
    _, ring, kernel = setup()
    written = bytearray()
    drained = bytearray()
    pending = 0
    for i, length in enumerate(bodies):
        rec = record(i, bytes([i % 251]) * (length - length % 8))
        if pending + len(rec) > DATA:
            drained += b"".join(collect(ring)[1])
            pending = 0
        kernel.write(rec)
        written += rec
        pending += len(rec)
        if i % batch == 0:
            drained += b"".join(collect(ring)[1])
            pending = 0
    drained += b"".join(collect(ring)[1])
    assert bytes(drained) == bytes(written)
