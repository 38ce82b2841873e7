"""Compaction of DWARF samples before they are written: each stack copy cut to what the
kernel really copied.

A SAMPLE with PERF_SAMPLE_STACK_USER holds ``u64 size; char data[size]; u64 dyn_size``:
``size`` bytes are reserved in the ring buffer, only ``dyn_size`` were copied (the copy stops
at the end of the stack mapping), the rest is stale ring-buffer memory. The recorder rewrites
such a record as the kernel would have written it had it been asked for ``dyn_size`` bytes
(rounded up to 8): ``size`` becomes that, the unused bytes go, the header's ``size`` shrinks.
``dyn_size`` is unchanged, and so is every other field: the result is still kernel-layout
records, read by the same decoder.

The walk over record headers is sequential; the cutting is done with whole-array operations.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from profiler.format import records as R

I64 = npt.NDArray[np.int64]


def record_offsets(buf: bytes | memoryview) -> list[int]:
    """Where each whole record of ``buf`` (native order) starts, up to the first that is not."""
    sizes = memoryview(buf).cast("B")[: len(buf) - len(buf) % 2].cast("H")
    offsets = []
    pos, end = 0, len(buf) - 8
    while pos <= end:
        size = sizes[(pos >> 1) + 3]
        if size < 8 or size & 7 or pos + size > len(buf):
            break
        offsets.append(pos)
        pos += size
    return offsets


def can_compact(layout: R.SampleLayout) -> bool:
    """Layouts whose stack field this module can find: no READ, RAW or BRANCH_STACK before it."""
    st = layout.sample_type
    return bool(st & R.PERF_SAMPLE_STACK_USER) and not st & (
        R.PERF_SAMPLE_READ | R.PERF_SAMPLE_RAW | R.PERF_SAMPLE_BRANCH_STACK)


def compact_stacks(buf: bytes | memoryview, layout: R.SampleLayout) -> bytes:
    """``buf`` (whole native-order kernel records) with every sample's stack copy cut to its
    dyn_size. Records that do not parse are left as they are."""
    offsets = record_offsets(buf)
    data = np.frombuffer(buf, dtype=np.uint8, count=len(buf) - len(buf) % 8)
    if not offsets or not can_compact(layout):
        return bytes(buf)
    w64 = data.view(np.uint64)
    w32 = data.view(np.uint32)
    w16 = data.view(np.uint16)
    off = np.asarray(offsets, dtype=np.int64)
    samples = off[w32[off >> 2] == R.PERF_RECORD_SAMPLE]
    if not len(samples):
        return bytes(buf)
    base = samples >> 3
    end = base + (w16[(samples >> 1) + 3].astype(np.int64) >> 3)
    limit = len(w64) - 1
    cur = base + layout.fixed_words
    if layout.sample_type & R.PERF_SAMPLE_CALLCHAIN:
        cur = cur + 1 + w64[np.clip(cur, 0, limit)].astype(np.int64).clip(0, 0x10000)
    if layout.sample_type & R.PERF_SAMPLE_REGS_USER:
        nregs = bin(layout.sample_regs_user).count("1")
        abi = w64[np.clip(cur, 0, limit)]
        cur = cur + 1 + np.where(abi != 0, nregs, 0)
    size = w64[np.clip(cur, 0, limit)].astype(np.int64)
    ok = (cur < end) & (size > 0) & (size % 8 == 0) & (cur + 2 + size // 8 <= end)
    dyn = np.where(ok, w64[np.clip(cur + 1 + size // 8, 0, limit)].astype(np.int64), 0)
    keep = np.where(ok, np.minimum((dyn + 7) // 8 * 8, size), size)
    cut = np.where(ok, size - keep, 0)
    sel = np.flatnonzero(cut > 0)
    if not len(sel):
        return bytes(buf)
    out = data.copy()
    o64, o16 = out.view(np.uint64), out.view(np.uint16)
    o64[cur[sel]] = keep[sel].astype(np.uint64)
    o16[(samples[sel] >> 1) + 3] = (w16[(samples[sel] >> 1) + 3].astype(np.int64) - cut[sel]).astype(np.uint16)
    # keep everything but [data start + keep, data start + size) of every cut sample
    first = ((cur[sel] + 1) * 8 + keep[sel]).tolist()
    last = (np.asarray(first) + cut[sel]).tolist()
    view = memoryview(out.data).cast("B")
    pieces = []
    pos = 0
    for a, b in zip(first, last):
        pieces.append(view[pos:a])
        pos = b
    pieces.append(view[pos:])
    return b"".join(pieces) + bytes(buf[len(data):])
