"""REGS_USER and STACK_USER of every sample, read with whole-array operations.

The sample columns carry each record's file offset; from there the variable-length fields
before REGS_USER (READ, CALLCHAIN, RAW) are skipped for all samples at once, then the
registers are gathered and the stack copy located (``u64 size; char data[size];
u64 dyn_size`` — perf_event.h: "dyn_size ... the actual dumped size"). Nothing is copied: the
stack copies stay in the memory-mapped capture and are addressed by file offset.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.format import records as R
from profiler.format.decode.columns import SampleColumns

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


@dataclass
class UserData:
    """Per sample: the REGS_USER abi (0: no registers), the registers (n, popcount(mask)),
    and the stack copy: file offset of its bytes, dyn_size (bytes really copied)."""

    abi: U64
    regs: U64
    stack_offset: I64
    stack_size: I64
    ok: Bools  # the record holds every field it claims

    def __len__(self) -> int:
        return int(self.abi.shape[0])


def has_user_stacks(layout: R.SampleLayout) -> bool:
    st = layout.sample_type
    return bool(st & R.PERF_SAMPLE_REGS_USER and st & R.PERF_SAMPLE_STACK_USER
                and layout.sample_regs_user)


def read_user_data(w64: U64, s: SampleColumns, layout: R.SampleLayout) -> UserData:
    """The REGS_USER / STACK_USER fields of the samples ``s`` (all of one event's layout);
    ``w64`` is the capture as native-order u64 words."""
    n = len(s)
    st = layout.sample_type
    nregs = bin(layout.sample_regs_user).count("1")
    base = s.offset >> 3
    size_words = np.zeros(n, dtype=np.int64)
    if n:
        w16 = w64.view(np.uint16)
        size_words = w16[(s.offset >> 1) + 3].astype(np.int64) >> 3
    end = base + size_words
    limit = len(w64) - 1

    def at(pos: I64) -> U64:
        out: U64 = w64[np.clip(pos, 0, limit)]
        return out

    cur = base + layout.fixed_words
    ok = cur <= end
    if st & R.PERF_SAMPLE_READ:
        if layout.read_format & R.PERF_FORMAT_GROUP:
            nr = at(cur).astype(np.int64).clip(0, 0x10000)
            per = 1 + bool(layout.read_format & R.PERF_FORMAT_ID) + bool(layout.read_format & R.PERF_FORMAT_LOST)
            cur = cur + 1 + bin(layout.read_format & 3).count("1") + nr * per
        else:
            cur = cur + 1 + bin(layout.read_format & 0x17).count("1")  # TIME_*, ID, LOST
    if st & R.PERF_SAMPLE_CALLCHAIN:
        cur = cur + 1 + at(cur).astype(np.int64).clip(0, 0x10000)
    if st & R.PERF_SAMPLE_RAW:
        raw = w64.view(np.uint32)[np.clip(cur * 2, 0, 2 * limit)].astype(np.int64)
        cur = cur + (4 + raw + 7) // 8
    if st & R.PERF_SAMPLE_BRANCH_STACK:
        nr = at(cur).astype(np.int64).clip(0, 0x10000)
        hw = 1 if layout.branch_sample_type & R.PERF_SAMPLE_BRANCH_HW_INDEX else 0
        cur = cur + 1 + hw + 3 * nr
    ok &= cur < end
    abi = np.where(ok, at(cur), 0).astype(np.uint64)
    has_regs = abi != 0
    reg_pos = (cur + 1)[:, None] + np.arange(nregs, dtype=np.int64)
    regs = np.where(has_regs[:, None], w64[np.clip(reg_pos, 0, limit)], 0).astype(np.uint64)
    cur = cur + 1 + np.where(has_regs, nregs, 0)
    ok &= cur < end
    size = np.where(ok, at(cur), 0).astype(np.int64)
    ok &= (size >= 0) & (size % 8 == 0) & (cur + 1 + size // 8 + (size > 0) <= end)
    size = np.where(ok, size, 0)
    dyn = np.where(ok & (size > 0), at(cur + 1 + size // 8), 0).astype(np.int64)
    dyn = np.clip(dyn, 0, size)
    return UserData(abi, regs, (cur + 1) * 8, dyn, ok)
