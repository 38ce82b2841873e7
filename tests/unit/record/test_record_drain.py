"""The recorder's drain pass on made-up ring buffers: one writev per pass writes the same bytes
as a frame at a time did, and the header walk's fast path for runs of samples counts exactly
what a record-by-record walk counts."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest
from tests.support.capture_factory import make_test_header

from profiler.format.container import writer
from profiler.format import records as R
from profiler.format.container.layout import FRAME_RAW, FRAME_ROUND
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter
from profiler.record import perf_event
from profiler.record.recorder import drain_scheduling
from profiler.record.ringbuf import DATA_HEAD_OFFSET, RingBuffer
from profiler.record.session import Session, StreamStats

PAGE = 2048  # the control page must reach data_tail at 1032
_HDR = struct.Struct("=IHH")


def rec(rtype: int, size: int, misc: int = 0, fill: int = 0) -> bytes:
    return _HDR.pack(rtype, misc, size) + bytes([fill]) * (size - 8)


def lost(count: int) -> bytes:
    return _HDR.pack(R.PERF_RECORD_LOST, 0, 24) + struct.pack("=QQ", 5, count)


def stream(seed: int, n: int = 300) -> bytes:
    """Samples of a few sizes (runs of one size, kernel and user misc), LOST and COMM records."""
    rnd = random.Random(seed)
    out = []
    size = 48
    for _ in range(n):
        roll = rnd.random()
        if roll < 0.05:
            out.append(lost(rnd.randint(1, 99)))
        elif roll < 0.08:
            out.append(rec(R.PERF_RECORD_COMM, 32))
        else:
            if roll > 0.95:
                size = rnd.choice((40, 48, 64, 200))
            misc = rnd.choice((R.PERF_RECORD_MISC_USER, R.PERF_RECORD_MISC_KERNEL))
            out.append(rec(R.PERF_RECORD_SAMPLE, size, misc, fill=9))  # body bytes look like headers
    return b"".join(out)


def walk(cpu: int, buf: bytes) -> tuple[dict[int, int], dict[int, int]]:
    """The plain record-by-record walk the fast path must agree with."""
    counts: dict[int, int] = {}
    lost_per_cpu: dict[int, int] = {}
    pos = 0
    while pos + 8 <= len(buf):
        rtype, _, size = _HDR.unpack_from(buf, pos)
        if size < 8 or pos + size > len(buf):
            break
        counts[rtype] = counts.get(rtype, 0) + 1
        if rtype == R.PERF_RECORD_LOST:
            lost_per_cpu[cpu] = lost_per_cpu.get(cpu, 0) + struct.unpack_from("=Q", buf, pos + 16)[0]
        pos += size
    return counts, lost_per_cpu


@pytest.mark.parametrize("seed", range(12))
def test_the_run_fast_path_counts_what_a_plain_walk_counts(seed: int) -> None:
    data = stream(seed)
    cut = data[: len(data) - random.Random(seed).randint(0, 30)]  # a torn last record is not counted
    for buf in (data, cut, memoryview(data)):
        stats = StreamStats()
        stats.scan(3, buf)
        assert (stats.counts, stats.lost_per_cpu) == walk(3, bytes(buf))
        assert stats.raw_bytes == len(buf)


@pytest.mark.parametrize("n", [8, 9, 255, 256, 257, 3000])
def test_a_run_of_samples_ending_in_another_record(n: int) -> None:
    """The byte-column check stops at the first record
    that is not a sample of the run's size, however the misc bits vary within the run."""
    samples = b"".join(rec(R.PERF_RECORD_SAMPLE, 48, misc=i % 3) for i in range(n))
    for tail in (lost(7), rec(R.PERF_RECORD_SAMPLE, 56), rec(R.PERF_RECORD_SAMPLE + 256, 48)):
        stats = StreamStats()
        stats.scan(0, samples + tail + samples)
        assert (stats.counts, stats.lost_per_cpu) == walk(0, samples + tail + samples)


class FakeRing:
    """A bytearray standing in for one CPU's mmap, written the way the kernel writes."""

    def __init__(self, data_size: int) -> None:
        self.buf = bytearray(PAGE + data_size)
        self.ring = RingBuffer(self.buf, PAGE)
        self.head = 0

    def write(self, data: bytes) -> None:
        size = self.ring.data_size
        for i, byte in enumerate(data):
            self.buf[PAGE + (self.head + i) % size] = byte
        self.head += len(data)
        struct.pack_into("=Q", self.buf, DATA_HEAD_OFFSET, self.head)


def test_one_writev_per_pass_writes_the_bytes_of_a_frame_at_a_time(tmp_path: Path) -> None:
    """Session.drain (RAW frames and the ROUND marker in one writev) against the previous path:
    write_raw per buffer with data, then write_round, over passes that wrap the rings."""
    session = Session(1, PAGE)
    rings = {cpu: FakeRing(1024) for cpu in (0, 1, 3)}
    session.rings = {cpu: (-1, None, fake.ring) for cpu, fake in rings.items()}  # type: ignore[misc]
    new = CaptureWriter.create(tmp_path / "new.prof", make_test_header())
    old = CaptureWriter.create(tmp_path / "old.prof", make_test_header())
    data = stream(1, 2000)
    records = []
    pos = 0
    while pos < len(data):
        size = _HDR.unpack_from(data, pos)[2]
        records.append(data[pos : pos + size])
        pos += size
    rnd = random.Random(2)
    while records:
        pending = {}
        for cpu in rings:
            take = rnd.choice((0, 0, 1, 2, 4))  # at most 800 bytes: the 1 KiB rings never overflow
            chunk, records = b"".join(records[:take]), records[take:]
            if chunk:
                pending[cpu] = chunk
                rings[cpu].write(chunk)
        copied = session.drain(new)
        assert copied == sum(len(c) for c in pending.values())
        for cpu, chunk in pending.items():
            old.write_raw(cpu, chunk)
        if pending:
            old.write_round()
    new.close({"samples": session.stats.samples})
    old.close({"samples": session.stats.samples})
    assert (tmp_path / "new.prof").read_bytes() == (tmp_path / "old.prof").read_bytes()
    assert session.stats.counts == walk(0, data)[0]
    with CaptureReader.open(tmp_path / "new.prof") as reader:
        kinds = [f.kind for f in reader.iter_frames()]
    assert kinds.count(FRAME_ROUND) >= 3 and FRAME_RAW in kinds


def test_a_pass_wider_than_iov_max_is_written_in_several_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raws = [(cpu, rec(R.PERF_RECORD_SAMPLE, 8 * (cpu + 1))) for cpu in range(9)]
    one = CaptureWriter.create(tmp_path / "one.prof", make_test_header())
    one.write_pass(raws)
    one.close()
    calls = []
    real = os.writev

    def counting(fd: int, parts: list[bytes]) -> int:
        calls.append(len(parts))
        return real(fd, parts)

    monkeypatch.setattr(writer, "_IOV_MAX", 4)
    monkeypatch.setattr(os, "writev", counting)
    several = CaptureWriter.create(tmp_path / "several.prof", make_test_header())
    several.write_pass(raws)
    several.close()
    assert max(calls) <= 4 and len(calls) > 3
    assert (tmp_path / "one.prof").read_bytes() == (tmp_path / "several.prof").read_bytes()


def test_a_compressed_pass_matches_raw_zstd_frames(tmp_path: Path) -> None:
    pytest.importorskip("zstandard")
    raws = [(0, rec(R.PERF_RECORD_COMM, 32) * 3), (1, b"\0" * 40)]
    one = CaptureWriter.create(tmp_path / "one.prof", make_test_header())
    one.write_pass(raws, compressed=True)
    one.close()
    old = CaptureWriter.create(tmp_path / "old.prof", make_test_header())
    for cpu, data in raws:
        old.write_raw_zstd(cpu, data)
    old.write_round()
    old.close()
    assert (tmp_path / "one.prof").read_bytes() == (tmp_path / "old.prof").read_bytes()


def test_the_drain_loop_scheduling_is_taken_and_given_back() -> None:
    before = perf_event.get_sched_attr()
    if before is None:
        pytest.skip("no sched_getattr here")
    with drain_scheduling(200_000, 5) as (applied, boosted):
        inside = perf_event.get_sched_attr()
        assert inside is not None
        if applied:
            assert inside.sched_runtime == 200_000
        assert inside.sched_policy == before.sched_policy
        if os.geteuid() == 0:  # privileged: the boost is taken, and seen by getpriority too
            assert boosted and inside.sched_nice == max(-20, before.sched_nice - 5)
            assert os.getpriority(os.PRIO_PROCESS, 0) == inside.sched_nice
        if not boosted:
            assert inside.sched_nice == before.sched_nice
    after = perf_event.get_sched_attr()
    assert after is not None
    assert (after.sched_policy, after.sched_nice, after.sched_runtime) == (
        before.sched_policy, before.sched_nice, before.sched_runtime)
    assert os.getpriority(os.PRIO_PROCESS, 0) == before.sched_nice


def test_a_kernel_that_refuses_the_slice_still_gets_the_boost(monkeypatch: pytest.MonkeyPatch) -> None:
    """The slice and the boost are asked for together, then each alone: a kernel (or a
    policy) that refuses one of them does not cost the other."""
    current = perf_event.sched_attr()
    current.sched_policy, current.sched_nice, current.sched_runtime = perf_event.SCHED_OTHER, 0, 0
    seen: list[tuple[int, int]] = []

    def refuse_slices(attr: perf_event.sched_attr) -> bool:
        seen.append((attr.sched_runtime, attr.sched_nice))
        return attr.sched_runtime == 0

    monkeypatch.setattr(perf_event, "get_sched_attr", lambda: perf_event.sched_attr.from_buffer_copy(current))
    monkeypatch.setattr(perf_event, "set_sched_attr", refuse_slices)
    with drain_scheduling(100_000, 5) as (sliced, boosted):
        assert (sliced, boosted) == (False, True)
        assert seen == [(100_000, -5), (0, -5)]
    assert seen[-1] == (0, 0)  # put back

    def refuse_boosts(attr: perf_event.sched_attr) -> bool:
        seen.append((attr.sched_runtime, attr.sched_nice))
        return attr.sched_nice == 0

    seen.clear()
    monkeypatch.setattr(perf_event, "set_sched_attr", refuse_boosts)
    with drain_scheduling(100_000, 5) as (sliced, boosted):
        assert (sliced, boosted) == (True, False)
        assert seen == [(100_000, -5), (0, -5), (100_000, 0)]


def test_an_unprivileged_drain_loop_keeps_its_nice_value() -> None:
    """Without CAP_SYS_NICE (a child that drops root) the boost is refused and the slice alone
    taken; nothing is raised."""
    if perf_event.get_sched_attr() is None:
        pytest.skip("no sched_getattr here")
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privilege in a child")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            nice = os.getpriority(os.PRIO_PROCESS, 0)
            with drain_scheduling(200_000, 5) as (_applied, boosted):
                inside = os.getpriority(os.PRIO_PROCESS, 0)
            os.write(write, f"{int(boosted)} {nice} {inside}".encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    out = os.read(read, 100).decode().split()
    os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0
    assert out[0] == "0" and out[1] == out[2]


def test_a_small_buffer_wakes_the_loop_at_three_quarters() -> None:
    from profiler.record.events import EventSpec
    from profiler.record.options import RecordOptions
    from profiler.record.recorder import SMALL_BUFFER, build_attr, wakeup_watermark

    assert wakeup_watermark(4096) == 3072
    assert wakeup_watermark(SMALL_BUFFER) == SMALL_BUFFER * 3 // 4
    assert wakeup_watermark(SMALL_BUFFER * 2) == SMALL_BUFFER
    assert wakeup_watermark(1 << 19) == 1 << 18  # the default 512 KiB: half, like the kernel and perf
    attr = build_attr(EventSpec("cpu-clock", 1, 0), RecordOptions(command=("x",)), tracking=True, several=False,
                      enable_on_exec=True, inherit=True, data_size=4096)
    assert attr.watermark == 1 and attr.wakeup_events == 3072
