"""The drain's record walk in C (``walk_records``, profiler/native/compiled.c) against its
Python reference (``StreamStats.scan_python``): the same counts, lost samples, mapped files,
side-band copies and kernel addresses on random streams of every record kind, torn tails and
hostile bytes included."""

from __future__ import annotations

import random
import struct
import sys

import pytest

from profiler.format import records as R
from profiler.native import kernels
from profiler.record import kallsyms as K
from profiler.record.session import StreamStats, _walk_records

pytestmark = [
    pytest.mark.skipif(kernels() is None or _walk_records() is None, reason="the compiled kernels are not built"),
    pytest.mark.skipif(sys.byteorder != "little", reason="records built in this machine's order"),
]

HDR = struct.Struct("=IHH")
SAMPLE_TYPE = (R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_CPU
               | R.PERF_SAMPLE_PERIOD | R.PERF_SAMPLE_CALLCHAIN)
KERNEL_TEXT = 0xFFFFFFFF81000000


def sample(rnd: random.Random, misc: int) -> bytes:
    """A sample of SAMPLE_TYPE: ip, tid, time, cpu, period, then a callchain of kernel and user
    addresses with context markers (sometimes claiming more words than the record holds)."""
    chain = [(1 << 64) - 128]
    chain += [KERNEL_TEXT + 16 * rnd.randrange(500) for _ in range(rnd.randrange(0, 12))]
    chain += [(1 << 64) - 512] + [0x401000 + rnd.randrange(1 << 20) for _ in range(rnd.randrange(0, 6))]
    nr = len(chain) if rnd.random() > 0.05 else len(chain) + rnd.randrange(1, 1 << 40)
    ip = chain[1] if len(chain) > 2 and misc == R.PERF_RECORD_MISC_KERNEL else 0x401000
    body = struct.pack("=QIIQIIQQ", ip, 7, 7, rnd.randrange(1 << 40), 1, 0, 1000, nr)
    body += struct.pack(f"={len(chain)}Q", *chain)
    return HDR.pack(R.PERF_RECORD_SAMPLE, misc, 8 + len(body)) + body


def mmap2(rnd: random.Random) -> bytes:
    name = f"/nonexistent/lib{rnd.randrange(5)}.so".encode() + b"\0"
    name += b"\0" * (-len(name) % 8)
    body = struct.pack("=IIQQQIIQQII", 7, 7, 0x7F0000000000, 4096, 0, 8, 1, rnd.randrange(3), 0, 5, 2) + name
    return HDR.pack(R.PERF_RECORD_MMAP2, 2, 8 + len(body)) + body


def stream(seed: int, n: int = 400) -> bytes:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        roll = rnd.random()
        if roll < 0.04:
            out.append(HDR.pack(R.PERF_RECORD_LOST, 0, 24) + struct.pack("=QQ", 5, rnd.randint(1, 99)))
        elif roll < 0.06:
            out.append(HDR.pack(R.PERF_RECORD_LOST_SAMPLES, 0, 16) + struct.pack("=Q", rnd.randint(1, 99)))
        elif roll < 0.10:
            out.append(mmap2(rnd))
        elif roll < 0.13:
            kind = rnd.choice((R.PERF_RECORD_COMM, R.PERF_RECORD_FORK, R.PERF_RECORD_EXIT, R.PERF_RECORD_MMAP))
            out.append(HDR.pack(kind, 0, 32) + bytes(range(24)))
        elif roll < 0.14:
            out.append(HDR.pack(R.PERF_RECORD_SAMPLE + 256 * rnd.randrange(1, 4), 0, 16) + bytes(8))
        elif roll < 0.30:  # context-switch records between the samples
            out.append(HDR.pack(R.PERF_RECORD_SWITCH, rnd.choice((0, 0x2000)), 24) + bytes(16))
        else:
            out.append(sample(rnd, rnd.choice((R.PERF_RECORD_MISC_USER, R.PERF_RECORD_MISC_KERNEL))))
    return b"".join(out)


def both(buf: bytes | memoryview, span: K.SampleSpan | None, floor: int | None,
         keep_sideband: bool) -> tuple[StreamStats, StreamStats]:
    out = []
    indexed = []
    for python in (False, True):
        stats = StreamStats(kernel_floor=floor, span=span)
        stats.keep_sideband = keep_sideband
        for cpu, part in ((0, buf), (1, buf)):  # a second pass adds to the first
            indexed.append((stats.scan_python if python else stats.scan)(cpu, part))
        out.append(stats)
    assert indexed[:2] == indexed[2:]  # the INDEX frames' counts
    return out[0], out[1]


def same(c: StreamStats, py: StreamStats) -> None:
    assert c.counts == py.counts
    assert c.lost_per_cpu == py.lost_per_cpu
    assert c.raw_bytes == py.raw_bytes
    assert set(c.mapped.files) == set(py.mapped.files)
    assert c.sideband == py.sideband
    assert c.kernel_code_addresses() == py.kernel_code_addresses()


@pytest.mark.parametrize("seed", range(16))
def test_the_compiled_walk_sees_what_the_python_walk_sees(seed: int) -> None:
    data = stream(seed)
    span = K.SampleSpan.of([R.SampleLayout(SAMPLE_TYPE)])
    assert span is not None
    cut = data[: len(data) - random.Random(seed).randint(1, 40)]  # a torn last record
    for buf in (data, cut, memoryview(data)[3:]):  # [3:]: unaligned, and garbage first
        for floor, sp in ((K.kernel_floor(), span), (K.kernel_floor(), None), (None, span)):
            for keep in (False, True):
                same(*both(buf, sp, floor, keep))


@pytest.mark.parametrize("seed", range(8))
def test_hostile_bytes_are_walked_alike(seed: int) -> None:
    """Random bytes with plausible headers here and there: both walks stop at the same place."""
    rnd = random.Random(seed)
    data = bytearray(rnd.randbytes(4000))
    for pos in range(0, 4000, 64):
        if rnd.random() < 0.7:
            HDR.pack_into(data, pos, rnd.choice((R.PERF_RECORD_SAMPLE, R.PERF_RECORD_LOST, R.PERF_RECORD_MMAP2)),
                          R.PERF_RECORD_MISC_KERNEL, rnd.choice((8, 16, 24, 64, 72, 96)))
    span = K.SampleSpan(8, 48)
    same(*both(bytes(data), span, K.kernel_floor(), True))
    same(*both(bytes(data), None, K.kernel_floor(), False))


@pytest.mark.parametrize("python", [False, True])
def test_a_buffer_of_whole_samples_is_counted_for_the_index(python: bool) -> None:
    """The number an INDEX frame carries: the buffer's records when every one is a sample
    and the walk reached its end; 0 when any other record is there, or a torn tail."""
    rnd = random.Random(5)
    samples = b"".join(sample(rnd, R.PERF_RECORD_MISC_USER) for _ in range(37))
    stats = StreamStats()
    walk = stats.scan_python if python else stats.scan
    assert walk(0, samples) == 37
    assert walk(0, samples + mmap2(rnd)) == 0
    assert walk(0, samples[:-8]) == 0
    assert walk(0, HDR.pack(R.PERF_RECORD_LOST_SAMPLES, 0, 16) + struct.pack("=Q", 3) + samples) == 0
    assert walk(0, b"") == 0
    assert stats.counts[R.PERF_RECORD_SAMPLE] == 37 * 3 + 36
