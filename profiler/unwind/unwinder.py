"""Unwind every sample together: one vectorised step per frame depth.

Input: per sample the user registers at the sample (as :mod:`arch` columns), the copy of the
user stack the kernel made (``sp0``: the address it starts at, its bytes somewhere in one
``uint8`` buffer) and a :class:`CodeMap` that says, for (sample, pc) pairs, which rule table
(and which address inside that DSO) covers the pc. At each depth, every still-active sample's
pc is looked up in the rule tables of all DSOs at once (one ``searchsorted`` over a combined
key ``slot << 40 | address``), the CFA and the saved registers are computed with whole-array
operations, and saved values are gathered from the stack copies. No Python loop runs per
sample; the loop runs per depth (at most ``max_depth``).

Each sample ends with a reason (``REASONS``): the end of the stack (the CFI marks the return
address undefined, as ``_start`` and thread-start code do, or it is 0), or where unwinding had
to stop.

With the compiled kernels (``profiler/native/compiled.c``) and a code map that gives its arrays
(``lookup_arrays``: report/unwind_samples.SnapshotCodeMap), the same unwinding runs in C one
sample at a time to its end (``unwind_all``: the lookups and every step, with the GIL released);
the numpy code below is its reference (a differential test compares them) and the fallback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.unwind.arch import RA, SP, ArchColumns
from profiler.unwind.table import (
    AT_CFA,
    AT_REG,
    CFA_DEREF,
    CFA_NONE,
    CFA_PLT,
    CFA_REG,
    FLAG_SIGNAL,
    SAME,
    VAL_CFA,
    RuleTable,
)

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
Bools = npt.NDArray[np.bool_]

# Where a code address is (CodeMap.locate).
LOC_TABLE, LOC_NO_MAP, LOC_NO_CFI, LOC_FRAME_POINTER = 0, 1, 2, 3

# Why a sample's unwinding ended.
END_OF_STACK, NO_MAP, NO_CFI, STACK_SHORT, UNSUPPORTED_RULE, NO_PROGRESS, MAX_DEPTH, NO_REGS = range(8)
REASONS = {
    END_OF_STACK: "end of stack",
    NO_MAP: "address in no mapped file",
    NO_CFI: "no CFI for the address",
    STACK_SHORT: "stack copy too short",
    UNSUPPORTED_RULE: "unsupported CFI rule",
    NO_PROGRESS: "stack pointer did not move up",
    MAX_DEPTH: "maximum depth reached",
    NO_REGS: "no user registers in the sample",
}
ACTIVE = 255

KEY_SHIFT = 40  # composite lookup key: slot << 40 | address (DSO addresses below 1 TiB)
MAX_DEPTH_DEFAULT = 127  # perf's default (kernel.perf_event_max_stack)


class CodeMap(Protocol):
    def locate(self, sample: I64, pc: U64) -> tuple[I64, U64, npt.NDArray[np.int8]]:
        """For each (sample, pc): (table slot or -1, address in that DSO, LOC_* kind)."""


@dataclass
class LookupArrays:
    """What a code map's ``locate`` searches, for the compiled unwinder (``unwind_all``, which
    does the same lookup per pc): per sample its maps' rank and its JIT code's rank, the maps
    (keyed ``rank << 48 | start``, each one's end and DSO id), per DSO id its table slot and
    LOC_* kind, the parts of maps with rule tables (key, end, slot, bias: DSO address = pc +
    bias) and the JIT code with rules of its own (key, end, slot). ``report.unwind_samples.
    SnapshotCodeMap.lookup_arrays`` gives them; a code map without that method is unwound a
    depth at a time."""

    rank: U64
    jit_rank: U64
    key: U64
    end: U64
    dso: I64
    kind_of_dso: npt.NDArray[np.int8]
    slot_of_dso: I64
    part_key: U64
    part_end: U64
    part_slot: I64
    part_bias: U64
    jit_key: U64
    jit_end: U64
    jit_slot: I64

    def buffers(self) -> list[npt.NDArray[Any]]:
        u64, i64 = np.uint64, np.int64
        types = [u64, u64, u64, u64, i64, np.int8, i64, u64, u64, i64, u64, u64, u64, i64]
        values = [self.rank, self.jit_rank, self.key, self.end, self.dso, self.kind_of_dso, self.slot_of_dso,
                  self.part_key, self.part_end, self.part_slot, self.part_bias, self.jit_key, self.jit_end,
                  self.jit_slot]
        return [np.ascontiguousarray(v, dtype=t) for v, t in zip(values, types)]


@dataclass
class StackCopies:
    """The user stack bytes of every sample: ``buf[offset[i]:offset[i] + size[i]]`` holds the
    memory from address ``sp0[i]`` up."""

    buf: U8
    offset: I64
    size: I64
    sp0: U64

    def read(self, sample: I64, addr: U64) -> tuple[U64, Bools]:
        """The little-endian u64 at ``addr`` in each sample's copy, and whether it is inside."""
        return read_words(self.buf, self.offset[sample], self.size[sample], self.sp0[sample], addr)


def read_words(buf: U8, offset: I64, size: I64, sp0: U64, addr: U64) -> tuple[U64, Bools]:
    """Per entry: the little-endian u64 at ``addr`` in the stack copy ``buf[offset:offset +
    size]`` of the memory from ``sp0`` up, and whether it is inside (0 where not)."""
    with np.errstate(over="ignore"):
        rel = (addr - sp0).view(np.int64)
    ok = (rel >= 0) & (rel <= size - 8)
    pos = np.where(ok, offset + rel, 0)
    if not len(pos) or not len(buf):
        return np.zeros(len(pos), dtype=np.uint64), ok & False
    if not (pos & 7).any():  # the usual case: 8-aligned slots in 8-aligned copies
        words = buf[: len(buf) - len(buf) % 8].view("<u8")
        out: U64 = words.take(pos >> 3)
        if not ok.all():
            out[~ok] = 0
        return out, ok
    idx = np.minimum(pos[:, None] + np.arange(8, dtype=np.int64), len(buf) - 1)
    got = np.ascontiguousarray(buf[idx]).view("<u8")[:, 0]
    return np.where(ok, got, np.uint64(0)).astype(np.uint64, copy=False), ok


class CombinedTables:
    """Every DSO's rule table concatenated, searchable with one key per (slot, address)."""

    def __init__(self, tables: list[RuleTable], cols: ArchColumns) -> None:
        t = cols.count
        parts = [tb for tb in tables]
        limit = np.uint64(1 << KEY_SHIFT)
        keys, kinds, regs, offs, thr, rk, ra, rr, fl = [], [], [], [], [], [], [], [], []
        for slot, tb in enumerate(parts):
            if not len(tb) or tb.columns != t:
                continue
            inside = tb.start < limit
            keys.append((np.uint64(slot) << np.uint64(KEY_SHIFT)) | tb.start[inside])
            kinds.append(tb.cfa_kind[inside])
            regs.append(tb.cfa_reg[inside])
            offs.append(tb.cfa_off[inside])
            thr.append(tb.plt_threshold[inside])
            rk.append(tb.rule_kind[inside])
            ra.append(tb.rule_arg[inside])
            rr.append(tb.rule_reg[inside])
            fl.append(tb.flags[inside])
        cat = concat
        self.key = cat(keys, np.uint64)
        self.cfa_kind = cat(kinds, np.uint8)
        self.cfa_reg = cat(regs, np.int8).astype(np.int64)
        self.cfa_off = cat(offs, np.int64)
        self.plt = cat(thr, np.uint8).astype(np.uint64)
        self.rule_kind = cat(rk, np.uint8, (t,))
        self.rule_arg = cat(ra, np.int64, (t,))
        self.rule_reg = cat(rr, np.int8, (t,)).astype(np.int64)
        self.flags = cat(fl, np.uint8)
        self.fp_row = _frame_pointer_row(cols)
        # The frame-pointer rule as one more row (after every keyed row): JIT frames use it.
        fcol, foff, fkinds, fargs = self.fp_row
        self.fp_index = len(self.key)
        self.cfa_kind = np.append(self.cfa_kind, np.uint8(CFA_REG))
        self.cfa_reg = np.append(self.cfa_reg, fcol)
        self.cfa_off = np.append(self.cfa_off, foff)
        self.plt = np.append(self.plt, np.uint64(0))
        self.rule_kind = np.concatenate([self.rule_kind, np.asarray([fkinds], dtype=np.uint8)])
        self.rule_arg = np.concatenate([self.rule_arg, np.asarray([fargs], dtype=np.int64)])
        self.rule_reg = np.concatenate([self.rule_reg, np.full((1, t), -1, dtype=np.int64)])
        self.flags = np.append(self.flags, np.uint8(0))
        # the offsets as u64 (two's complement) for address arithmetic, without a copy per step
        self.cfa_off_u64 = self.cfa_off.view(np.uint64)
        self.rule_arg_u64 = self.rule_arg.view(np.uint64)

    def rows(self, slot: I64, addr: U64) -> tuple[I64, Bools]:
        """Row index per lookup (valid where the second array is True)."""
        if not len(self.key):
            return np.zeros(len(slot), dtype=np.int64), np.zeros(len(slot), dtype=bool)
        key = (slot.astype(np.uint64) << np.uint64(KEY_SHIFT)) | addr
        row = np.searchsorted(self.key, key, side="right").astype(np.int64) - 1
        safe = np.maximum(row, 0)
        ok = ((row >= 0) & (slot >= 0) & (addr < np.uint64(1 << KEY_SHIFT))
              & ((self.key.take(safe) >> np.uint64(KEY_SHIFT)) == slot.astype(np.uint64))
              & (self.cfa_kind.take(safe) != CFA_NONE))
        return safe, ok


def concat(xs: Sequence[npt.NDArray[Any]], dtype: type, shape: tuple[int, ...] = ()) -> npt.NDArray[Any]:
    return np.concatenate(xs) if xs else np.zeros((0, *shape), dtype=dtype)


def _frame_pointer_row(cols: ArchColumns) -> tuple[int, int, list[int], list[int]]:
    """The rule of a frame-pointer frame (JIT code): CFA = fp + 16, return address at CFA - 8,
    the caller's frame pointer at CFA - 16 (x86_64 and aarch64 frame records alike)."""
    kinds = [SAME] * cols.count
    args = [0] * cols.count
    kinds[RA], args[RA] = AT_CFA, -8
    kinds[cols.fp], args[cols.fp] = AT_CFA, -16
    return cols.fp, 16, kinds, args


@dataclass
class UnwindResult:
    """Per sample: its user frames (CSR, leaf first, the sampled pc first) and why it ended."""

    start: I64
    pcs: U64
    reason: U8

    def frames(self, i: int) -> U64:
        return self.pcs[self.start[i]:self.start[i + 1]]


def unwind(cols: ArchColumns, regs: U64, valid: Bools, pc: U64, stacks: StackCopies,
           code: CodeMap, tables: CombinedTables, max_depth: int = MAX_DEPTH_DEFAULT) -> UnwindResult:
    """Unwind all samples. ``regs``/``valid`` are (n, columns): each column's value at the
    sample (the return-address column invalid on x86_64, x30 on aarch64).

    The state of the samples still unwinding is kept compact (one row per active sample, in
    sample order): each depth works on those rows only and drops the samples that stop."""
    n = len(pc)
    module = step_kernel()
    lookup = getattr(code, "lookup_arrays", None)
    if module is not None and lookup is not None and n:
        return _unwind_compiled(module, cols, regs, valid, pc, stacks, lookup(np.arange(n, dtype=np.int64)),
                                tables, max_depth)
    reason = np.full(n, ACTIVE, dtype=np.uint8)
    st = _State(np.arange(n, dtype=np.int64), pc.astype(np.uint64).copy(),
                np.ascontiguousarray(regs, dtype=np.uint64).copy(), np.ascontiguousarray(valid, dtype=bool).copy(),
                np.zeros(n, dtype=bool), stacks.offset.astype(np.int64), stacks.size.astype(np.int64),
                stacks.sp0.astype(np.uint64))
    out_sample: list[I64] = []
    out_pc: list[U64] = []
    for depth in range(max_depth):
        if not len(st.sid):
            break
        out_sample.append(st.sid)
        out_pc.append(st.pc)
        if depth == max_depth - 1:
            reason[st.sid] = MAX_DEPTH
            break
        why = _step(cols, st, depth, stacks.buf, code, tables, module)
        stopped = why != ACTIVE
        reason[st.sid[stopped]] = why[stopped]
        st = st.keep(~stopped)
    return _collect(n, out_sample, out_pc, reason)


def _unwind_compiled(module: ModuleType, cols: ArchColumns, regs: U64, valid: Bools, pc: U64, stacks: StackCopies,
                     maps: LookupArrays, tables: CombinedTables, max_depth: int) -> UnwindResult:
    """:func:`unwind` in the compiled kernel, each sample to its end (the GIL released: two
    threads can unwind two batches at once); the depth-at-a-time numpy code is its reference."""
    i64 = np.int64
    start, pcs, reason = module.unwind_all(
        np.ascontiguousarray(stacks.buf), np.ascontiguousarray(stacks.offset, dtype=i64),
        np.ascontiguousarray(stacks.size, dtype=i64),
        *_sample_args(cols, regs, valid, pc, stacks.sp0, maps, tables, max_depth))
    return _result(start, pcs, reason)


def unwind_frames(module: ModuleType, image: Any, rec: I64, frames: I64, fields: tuple[bytes | memoryview, ...],
                  cols: ArchColumns, regs: U64, valid: Bools, pc: U64, sp0: U64, maps: LookupArrays,
                  tables: CombinedTables, max_depth: int) -> tuple[UnwindResult, npt.NDArray[np.uint8]] | None:
    """The samples of some FLAG_STACKS frames read lean unwound by the compiled kernel
    (``unwind_frames``), which inflates each frame's stack fields (``fields``, compressed) into
    one buffer and unwinds its samples from it while it is in the CPU's cache: the result, and
    per frame whether its fields were damaged (1: its samples have no frames). ``frames``: per
    frame (start and length of its lean records in ``image``, the size its fields inflate to,
    its first sample, its samples), the samples grouped by frame and in file order within one;
    ``rec``: each sample's record offset in ``image``. None when the kernel cannot inflate
    (libzstd not found): the caller inflates in Python and calls :func:`unwind`."""
    got = module.unwind_frames(image, np.ascontiguousarray(rec, dtype=np.int64),
                               np.ascontiguousarray(frames, dtype=np.int64),
                               *_sample_args(cols, regs, valid, pc, sp0, maps, tables, max_depth), fields)
    if got is None:
        return None
    start, pcs, reason, status = got
    return _result(start, pcs, reason), np.frombuffer(status, dtype=np.uint8)


def _sample_args(cols: ArchColumns, regs: U64, valid: Bools, pc: U64, sp0: U64, maps: LookupArrays,
                 tables: CombinedTables, max_depth: int) -> list[Any]:
    """The arguments ``unwind_all`` and ``unwind_frames`` share after the stack copies."""
    return [np.ascontiguousarray(sp0, dtype=np.uint64), np.ascontiguousarray(pc, dtype=np.uint64),
            np.ascontiguousarray(regs, dtype=np.uint64), np.ascontiguousarray(valid, dtype=bool), *maps.buffers(),
            np.ascontiguousarray(tables.key, dtype=np.uint64), tables.cfa_kind, tables.cfa_reg, tables.cfa_off,
            tables.plt, tables.rule_kind, tables.rule_arg, tables.rule_reg, tables.flags, tables.fp_index,
            cols.count, RA, SP, cols.ra_mask, int(cols.ra_is_register), max_depth]


def _result(start: Any, pcs: Any, reason: Any) -> UnwindResult:
    return UnwindResult(np.frombuffer(start, dtype=np.int64), np.frombuffer(pcs, dtype=np.uint64),
                        np.frombuffer(reason, dtype=np.uint8))


@dataclass
class _State:
    """The samples still unwinding: sample index, pc, registers (m, columns) and their
    validity, whether the frame was entered by a signal, and each one's stack copy."""

    sid: I64
    pc: U64
    regs: U64
    valid: Bools
    after_signal: Bools
    offset: I64
    size: I64
    sp0: U64

    def keep(self, go: Bools) -> _State:
        if go.all():
            return self
        return _State(self.sid[go], self.pc[go], self.regs[go], self.valid[go], self.after_signal[go],
                      self.offset[go], self.size[go], self.sp0[go])


def step_kernel() -> ModuleType | None:
    """The compiled unwind step (``profiler/native/compiled.c``), or None: not built,
    ``PROFILER_NO_NATIVE=1``, or a big-endian machine (it reads the stack copies natively)."""
    from profiler.native import kernels

    module = kernels()
    return module if module is not None and sys.byteorder == "little" else None


def _step(cols: ArchColumns, st: _State, depth: int, buf: U8, code: CodeMap, tables: CombinedTables,
          module: ModuleType | None = None) -> U8:
    """One frame for every active sample: updates ``st`` in place (pc, registers) and returns
    each sample's reason to stop (``ACTIVE``: it goes on). The rule lookup is numpy's; the
    rest runs in the compiled kernel when there is one (the numpy code below is its reference)."""
    pc = st.pc
    lookup = pc
    if depth > 0:
        # a return address is the instruction after the call: look up the call itself
        lookup = pc - (~st.after_signal & (pc > 0)).astype(np.uint64)
    slot, addr, kind = code.locate(st.sid, lookup)
    row, ok = tables.rows(slot, addr)
    if module is not None:
        st.pc = pc.copy()  # the caller keeps this depth's pcs: the kernel writes the next ones
        why = module.unwind_step(
            np.ascontiguousarray(buf), st.offset, st.size, st.sp0, st.pc, st.regs, st.valid, st.after_signal,
            np.ascontiguousarray(row, dtype=np.int64), np.ascontiguousarray(kind, dtype=np.int8),
            np.ascontiguousarray(ok, dtype=bool), tables.cfa_kind, tables.cfa_reg, tables.cfa_off, tables.plt,
            tables.rule_kind, tables.rule_arg, tables.rule_reg, tables.flags, tables.fp_index, cols.count, RA, SP,
            cols.ra_mask, int(cols.ra_is_register))
        out: U8 = np.frombuffer(why, dtype=np.uint8)
        return out
    return _step_numpy(cols, st, pc, kind, row, ok, buf, tables)


def _step_numpy(cols: ArchColumns, st: _State, pc: U64, kind: npt.NDArray[np.int8], row: I64, ok: Bools, buf: U8,
                tables: CombinedTables) -> U8:
    m = len(st.sid)
    t = cols.count
    fp = kind == LOC_FRAME_POINTER  # JIT code: the frame-pointer rule
    row = np.where(fp, tables.fp_index, row)
    no_map = kind == LOC_NO_MAP
    no_cfi = ~no_map & ~fp & ((kind == LOC_NO_CFI) | ~ok)
    cfa_kind = tables.cfa_kind.take(row)
    cfa_reg = tables.cfa_reg.take(row)
    signal = (tables.flags.take(row) & FLAG_SIGNAL) != 0
    unsupported = ((cfa_kind != CFA_REG) & (cfa_kind != CFA_DEREF) & (cfa_kind != CFA_PLT)) | (cfa_reg < 0)
    regs, valid = st.regs, st.valid
    flat_regs, flat_valid = regs.reshape(-1), valid.reshape(-1)
    base_at = np.arange(0, m * t, t, dtype=np.int64) + np.maximum(cfa_reg, 0)
    base_ok = flat_valid.take(base_at) & ~unsupported
    with np.errstate(over="ignore"):
        cfa = flat_regs.take(base_at) + tables.cfa_off_u64.take(row)
        plt = tables.plt.take(row)
        cfa += ((cfa_kind == CFA_PLT) & ((pc & np.uint64(15)) >= plt)).astype(np.uint64) << np.uint64(3)
    deref = np.flatnonzero(cfa_kind == CFA_DEREF)
    if len(deref):
        value, inside = read_words(buf, st.offset[deref], st.size[deref], st.sp0[deref], cfa[deref])
        cfa[deref] = value
        base_ok[deref] &= inside
    # the columns with a rule other than "same value": typically the return address and a
    # few callee-saved registers, each read from the stack copy
    kinds = tables.rule_kind.take(row, axis=0)
    nz = np.flatnonzero(kinds.reshape(-1) != SAME)
    owner = nz // t
    col = nz - owner * t
    k = kinds.reshape(-1).take(nz)
    at_table = row.take(owner) * t + col
    arg = tables.rule_arg_u64.reshape(-1).take(at_table)
    at_reg = k == AT_REG
    src_at = owner * t + np.maximum(tables.rule_reg.reshape(-1).take(at_table), 0)
    with np.errstate(over="ignore"):
        where = np.where(at_reg, flat_regs.take(src_at), cfa.take(owner)) + arg
    src_ok = np.where(at_reg, flat_valid.take(src_at), base_ok.take(owner))
    in_memory = at_reg | (k == AT_CFA)
    value, inside = read_words(buf, st.offset.take(owner), st.size.take(owner), st.sp0.take(owner), where)
    ra_short = np.zeros(m, dtype=bool)
    ra_short[owner[(col == RA) & in_memory & ~inside & src_ok]] = True
    old_sp = regs[:, SP].copy()
    # every value is computed from the old registers before any is written
    flat_regs[nz] = np.where(in_memory, value, where)
    flat_valid[nz] = np.where(in_memory, inside & src_ok, (k == VAL_CFA) & src_ok)  # UNDEF, UNSUPPORTED: lost
    sp_same = kinds[:, SP] == SAME
    regs[:, SP] = np.where(sp_same, cfa, regs[:, SP])
    valid[:, SP] = np.where(sp_same, base_ok, valid[:, SP])
    ra = regs[:, RA] & np.uint64(cols.ra_mask)
    ra_ok = valid[:, RA]
    # reasons, most specific first
    why: U8 = np.select(
        [no_map, no_cfi,
         unsupported | ~base_ok & (cfa_kind == CFA_REG),
         ~base_ok | ra_short,
         ~ra_ok | (ra == 0),
         ~valid[:, SP] | ((regs[:, SP] <= old_sp) & ~signal)],
        [NO_MAP, NO_CFI, UNSUPPORTED_RULE, STACK_SHORT, END_OF_STACK, NO_PROGRESS], ACTIVE).astype(np.uint8)
    if not cols.ra_is_register:
        valid[:, RA] = False  # x86_64: a pseudo-column, never a register of the caller
    # (aarch64: the return-address column is x30 itself: its restored value is the caller's)
    st.pc = ra
    st.after_signal = signal
    return why


def _collect(n: int, samples: list[I64], pcs: list[U64], reason: U8) -> UnwindResult:
    """Frames of sample ``s`` at depth ``d`` go to ``start[s] + d``: every depth's samples are
    a subset of the previous depth's, so a sample's count is the number of depths it is in."""
    counts = np.zeros(n, dtype=np.int64)
    for s in samples:
        counts[s] += 1
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    out = np.zeros(int(start[-1]), dtype=np.uint64)
    for d, (s, p) in enumerate(zip(samples, pcs)):
        out[start[s] + d] = p
    return UnwindResult(start, out, reason)
