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
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from profiler.report.unwind.arch import RA, SP, ArchColumns
from profiler.report.unwind.table import (
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
class StackCopies:
    """The user stack bytes of every sample: ``buf[offset[i]:offset[i] + size[i]]`` holds the
    memory from address ``sp0[i]`` up."""

    buf: U8
    offset: I64
    size: I64
    sp0: U64

    def read(self, sample: I64, addr: U64) -> tuple[U64, Bools]:
        """The little-endian u64 at ``addr`` in each sample's copy, and whether it is inside."""
        with np.errstate(over="ignore"):
            rel = (addr - self.sp0[sample]).view(np.int64)
        ok = (rel >= 0) & (rel <= self.size[sample] - 8)
        pos = np.where(ok, self.offset[sample] + rel, 0)
        out = np.zeros(len(sample), dtype=np.uint64)
        if not ok.any():
            return out, ok
        aligned = ok & (pos & 7 == 0)
        buf = self.buf
        if aligned.any():
            words = buf[: len(buf) - len(buf) % 8].view("<u8")
            out[aligned] = words[pos[aligned] >> 3]
        odd = np.flatnonzero(ok & ~aligned)
        if len(odd):
            idx = pos[odd][:, None] + np.arange(8, dtype=np.int64)
            out[odd] = np.ascontiguousarray(buf[idx]).view("<u8")[:, 0]
        return out, ok


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
        cat = _cat
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

    def rows(self, slot: I64, addr: U64) -> tuple[I64, Bools]:
        """Row index per lookup (valid where the second array is True)."""
        if not len(self.key):
            return np.zeros(len(slot), dtype=np.int64), np.zeros(len(slot), dtype=bool)
        key = (slot.astype(np.uint64) << np.uint64(KEY_SHIFT)) | addr
        row = np.searchsorted(self.key, key, side="right").astype(np.int64) - 1
        safe = np.maximum(row, 0)
        ok = ((row >= 0) & (slot >= 0) & (addr < np.uint64(1 << KEY_SHIFT))
              & ((self.key[safe] >> np.uint64(KEY_SHIFT)) == slot.astype(np.uint64))
              & (self.cfa_kind[safe] != CFA_NONE))
        return safe, ok


def _cat(xs: Sequence[npt.NDArray[Any]], dtype: type, shape: tuple[int, ...] = ()) -> npt.NDArray[Any]:
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
    sample (the return-address column invalid on x86_64, x30 on aarch64)."""
    n = len(pc)
    regs = regs.copy()
    valid = valid.copy()
    cur = pc.astype(np.uint64).copy()
    reason = np.full(n, ACTIVE, dtype=np.uint8)
    after_signal = np.zeros(n, dtype=bool)
    out_sample: list[I64] = []
    out_pc: list[U64] = []
    active = np.arange(n, dtype=np.int64)
    for depth in range(max_depth):
        if not len(active):
            break
        out_sample.append(active)
        out_pc.append(cur[active])
        if depth == max_depth - 1:
            reason[active] = MAX_DEPTH
            break
        stop, cont = _step(cols, regs, valid, cur, after_signal, active, depth, stacks, code, tables)
        for why, idx in stop.items():
            reason[idx] = why
        active = cont
    return _collect(n, out_sample, out_pc, reason)


def _step(cols: ArchColumns, regs: U64, valid: Bools, cur: U64, after_signal: Bools, act: I64,
          depth: int, stacks: StackCopies, code: CodeMap, tables: CombinedTables,
          ) -> tuple[dict[int, I64], I64]:
    """One frame for every active sample: updates regs/valid/cur in place; returns the samples
    that stop (by reason) and those that go on."""
    stops: dict[int, list[I64]] = {}

    def stop(why: int, mask: Bools, idx: I64) -> I64:
        stops.setdefault(why, []).append(idx[mask])
        return idx[~mask]

    pc = cur[act]
    lookup = pc.copy()
    if depth > 0:
        # a return address is the instruction after the call: look up the call itself
        adjust = ~after_signal[act] & (pc > 0)
        lookup[adjust] -= np.uint64(1)
    slot, addr, kind = code.locate(act, lookup)
    act_keep = act
    act = stop(NO_MAP, kind == LOC_NO_MAP, act_keep)
    keep = kind != LOC_NO_MAP
    slot, addr, kind, pc = slot[keep], addr[keep], kind[keep], pc[keep]
    act2 = stop(NO_CFI, kind == LOC_NO_CFI, act)
    keep = kind != LOC_NO_CFI
    slot, addr, kind, pc = slot[keep], addr[keep], kind[keep], pc[keep]
    act = act2
    row, ok = tables.rows(slot, addr)
    fp = kind == LOC_FRAME_POINTER
    bad = ~ok & ~fp
    act = stop(NO_CFI, bad, act)
    row, fp, pc = row[~bad], fp[~bad], pc[~bad]
    t = cols.count
    m = len(act)
    # the rules of each sample's row, frame-pointer rows substituted for JIT code
    cfa_kind = tables.cfa_kind[row].copy()
    cfa_reg = tables.cfa_reg[row].copy()
    cfa_off = tables.cfa_off[row].copy()
    plt = tables.plt[row]
    rule_kind = tables.rule_kind[row].copy()
    rule_arg = tables.rule_arg[row].copy()
    rule_reg = tables.rule_reg[row]
    signal = (tables.flags[row] & FLAG_SIGNAL) != 0
    if fp.any():
        fcol, foff, fkinds, fargs = tables.fp_row
        cfa_kind[fp], cfa_reg[fp], cfa_off[fp] = CFA_REG, fcol, foff
        rule_kind[fp] = np.asarray(fkinds, dtype=np.uint8)
        rule_arg[fp] = np.asarray(fargs, dtype=np.int64)
        signal[fp] = False
    unsupported = ~np.isin(cfa_kind, (CFA_REG, CFA_DEREF, CFA_PLT)) | (cfa_reg < 0)
    ar = np.arange(m)
    base = regs[act, np.maximum(cfa_reg, 0)]
    base_ok = valid[act, np.maximum(cfa_reg, 0)] & ~unsupported
    with np.errstate(over="ignore"):
        cfa = base + cfa_off.astype(np.uint64)
        is_plt = cfa_kind == CFA_PLT
        if is_plt.any():
            cfa[is_plt] += np.where((pc[is_plt] & np.uint64(15)) >= plt[is_plt], np.uint64(8), np.uint64(0))
    deref = np.flatnonzero(cfa_kind == CFA_DEREF)
    if len(deref):
        value, inside = stacks.read(act[deref], cfa[deref])
        cfa[deref] = value
        base_ok[deref] &= inside
    # every tracked column of the caller, all columns at once on (m, t) arrays
    old, old_ok = regs[act], valid[act]
    new = old.copy()
    new_ok = old_ok.copy()
    k = rule_kind
    a = rule_arg.astype(np.uint64)
    at_cfa, val_cfa, at_reg = k == AT_CFA, k == VAL_CFA, k == AT_REG
    base_col = np.maximum(rule_reg, 0)
    with np.errstate(over="ignore"):
        addr2 = np.where(at_reg, np.take_along_axis(old, base_col, axis=1), cfa[:, None]) + a
    src_ok = np.where(at_reg, np.take_along_axis(old_ok, base_col, axis=1), base_ok[:, None])
    flat = np.flatnonzero((at_cfa | at_reg).ravel())
    ra_short = np.zeros(m, dtype=bool)
    if len(flat):
        owner = flat // t
        v, inside = stacks.read(act[owner], addr2.ravel()[flat])
        ok_flat = inside & src_ok.ravel()[flat]
        new.ravel()[flat] = v
        new_ok.ravel()[flat] = ok_flat
        is_ra = flat % t == RA
        ra_short[owner[is_ra]] = ~inside[is_ra] & src_ok.ravel()[flat][is_ra]
    new[val_cfa] = addr2[val_cfa]
    new_ok[val_cfa] = src_ok[val_cfa]
    new_ok[(k != SAME) & ~at_cfa & ~val_cfa & ~at_reg] = False  # UNDEF, UNSUPPORTED
    sp_same = rule_kind[:, SP] == SAME
    new[sp_same, SP] = cfa[sp_same]
    new_ok[sp_same, SP] = base_ok[sp_same]
    ra = new[:, RA] & np.uint64(cols.ra_mask)
    ra_ok = new_ok[:, RA]
    # reasons, most specific first
    done = np.zeros(m, dtype=bool)
    for why, mask in (
        (UNSUPPORTED_RULE, unsupported | ~base_ok & (cfa_kind == CFA_REG)),
        (STACK_SHORT, ~base_ok | ra_short),
        (END_OF_STACK, ~ra_ok | (ra == 0)),
        (NO_PROGRESS, ~new_ok[:, SP] | ((new[:, SP] <= old[:, SP]) & ~signal)),
    ):
        mask = mask & ~done
        if mask.any():
            stops.setdefault(why, []).append(act[mask])
            done |= mask
    go = ~done
    nxt = act[go]
    regs[nxt] = new[go]
    valid[nxt] = new_ok[go]
    if cols.ra_is_register:
        pass  # the return-address column is x30 itself: its restored value is the caller's
    else:
        valid[nxt, RA] = False  # x86_64: a pseudo-column, never a register of the caller
    cur[nxt] = ra[go]
    after_signal[nxt] = signal[go]
    out = {why: np.concatenate(parts) for why, parts in stops.items()}
    return out, nxt


def _collect(n: int, samples: list[I64], pcs: list[U64], reason: U8) -> UnwindResult:
    if not samples:
        return UnwindResult(np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.uint64), reason)
    s = np.concatenate(samples)
    p = np.concatenate(pcs)
    order = np.argsort(s, kind="stable")  # within a sample, depth order is kept
    counts = np.bincount(s, minlength=n)
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    return UnwindResult(start, p[order], reason)
