"""The vectorised unwinder on synthetic samples: real rule tables (the hand-written CFI of
fixtures/dwarf/cfi/cfi_cases.so), hand-built registers and stack copies, all unwound together."""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from profiler.unwind.arch import X86_64_COLUMNS
from profiler.unwind.cfi import compile_path
from profiler.unwind.unwinder import (
    END_OF_STACK,
    LOC_FRAME_POINTER,
    LOC_NO_MAP,
    LOC_TABLE,
    NO_CFI,
    STACK_SHORT,
    CombinedTables,
    StackCopies,
    unwind,
)
from tests.unit.unwind.test_unwind_cfi import SO, symbols

COLS = X86_64_COLUMNS
RA, SP, RBP, RBX = 0, 1, 2, 3
JIT = 0x7000_0000  # an "anonymous" mapping: frame pointers


class FakeCode:
    """Every address in [0x1000, 0x1040) is in slot 0 at that address; JIT is frame-pointer code."""

    def locate(self, sample: npt.NDArray[np.int64], pc: npt.NDArray[np.uint64]):  # type: ignore[no-untyped-def]
        inside = (pc >= 0x1000) & (pc < 0x1040)
        jit = (pc >= JIT) & (pc < JIT + 0x1000)
        kind = np.where(inside, LOC_TABLE, np.where(jit, LOC_FRAME_POINTER, LOC_NO_MAP)).astype(np.int8)
        return np.where(inside, 0, -1).astype(np.int64), pc.copy(), kind


def stack(base: int, words: dict[int, int], size: int = 512) -> bytes:
    buf = bytearray(size)
    for addr, value in words.items():
        struct.pack_into("<Q", buf, addr - base, value)
    return bytes(buf)


def test_all_kinds_of_frames_unwound_together() -> None:
    sym = symbols()
    table = compile_path(str(SO), COLS)
    S = 0x7FFF_0000
    copies = []
    regs = []
    pcs = []
    # 0: f_rsp_body (CFA rsp+40, rbx at CFA-16) -> f_rbp_body (CFA rbp+16) -> f_root (end)
    rbp = S + 200
    copies.append(stack(S, {S + 32: sym["f_rbp_body"] + 1, S + 24: 0x1234,
                            rbp + 8: sym["f_root"] + 1, rbp: 0}))
    regs.append((S, rbp, 0x99))
    pcs.append(sym["f_rsp_body"])
    # 1: the same, but the copy ends before the return address
    copies.append(copies[0][:16])
    regs.append((S, rbp, 0x99))
    pcs.append(sym["f_rsp_body"])
    # 2: a pc no FDE covers
    copies.append(stack(S, {}))
    regs.append((S, 0, 0))
    pcs.append(sym["f_gap"])
    # 3: a PLT entry (rip & 15 < 11: CFA = rsp + 8), returning to the root
    copies.append(stack(S, {S: sym["f_root"] + 1}))
    regs.append((S, 0, 0))
    pcs.append(sym["f_plt"])
    # 4: a signal frame: CFA, return address and rbp read from the sigcontext; the next pc is
    # the interrupted instruction itself (f_root's first byte: with the usual "- 1" it would
    # be looked up in f_other_expr, whose CFA is unsupported)
    copies.append(stack(S, {S + 160: S + 400, S + 168: sym["f_root"], S + 120: 0x4242}))
    regs.append((S, 0, 0))
    pcs.append(sym["f_signal"])
    # 5: JIT code without CFI: frame pointers (CFA = rbp + 16), then back into f_root
    copies.append(stack(S, {S + 64: S + 128, S + 72: sym["f_root"] + 1}))
    regs.append((S, S + 64, 0))
    pcs.append(JIT + 0x10)

    n = len(copies)
    offsets = np.zeros(n, dtype=np.int64)
    sizes = np.asarray([len(c) for c in copies], dtype=np.int64)
    offsets[1:] = np.cumsum(-(-sizes // 8) * 8)[:-1]
    buf = np.zeros(int(offsets[-1] + sizes[-1] + 8), dtype=np.uint8)
    for off, c in zip(offsets.tolist(), copies):
        buf[off:off + len(c)] = np.frombuffer(c, dtype=np.uint8)
    values = np.zeros((n, COLS.count), dtype=np.uint64)
    valid = np.ones((n, COLS.count), dtype=bool)
    valid[:, RA] = False
    for i, (sp, bp, bx) in enumerate(regs):
        values[i, SP], values[i, RBP], values[i, RBX] = sp, bp, bx
    sp0 = values[:, SP].copy()
    res = unwind(COLS, values, valid, np.asarray(pcs, dtype=np.uint64),
                 StackCopies(buf, offsets, sizes, sp0), FakeCode(), CombinedTables([table], COLS))

    frames = [res.frames(i).tolist() for i in range(n)]
    assert frames[0] == [sym["f_rsp_body"], sym["f_rbp_body"] + 1, sym["f_root"] + 1]
    assert res.reason[0] == END_OF_STACK
    assert frames[1] == [sym["f_rsp_body"]] and res.reason[1] == STACK_SHORT
    assert frames[2] == [sym["f_gap"]] and res.reason[2] == NO_CFI
    assert frames[3] == [sym["f_plt"], sym["f_root"] + 1] and res.reason[3] == END_OF_STACK
    assert frames[4] == [sym["f_signal"], sym["f_root"]] and res.reason[4] == END_OF_STACK
    assert frames[5] == [JIT + 0x10, sym["f_root"] + 1] and res.reason[5] == END_OF_STACK


def test_code_map_translates_through_the_segments_of_each_map() -> None:
    """(sample, pc) -> (slot, DSO address, kind) with maps of two processes, a map spanning
    two PT_LOAD segments and a gap between them, a map without a table, and unmapped pcs;
    checked against the scalar rule: offset = pc - start + pgoff, then the last segment
    starting at or before the offset, if the offset is inside it."""
    from profiler.report.maps import DsoTable, Map, MapSnapshot
    from profiler.report.unwind_samples import SnapshotCodeMap
    from profiler.unwind.table import RuleTable
    from profiler.unwind.unwinder import LOC_NO_CFI

    table = RuleTable.empty("x86_64", COLS.count)
    table.seg_offset = np.asarray([0x0, 0x3000], dtype=np.uint64)
    table.seg_vaddr = np.asarray([0x0, 0x5000], dtype=np.uint64)
    table.seg_filesz = np.asarray([0x2000, 0x1000], dtype=np.uint64)
    dsos = DsoTable()
    snaps = [MapSnapshot((Map(0x10000, 0x14000, 0, 0), Map(0x20000, 0x21000, 0, 1))),
             MapSnapshot((Map(0x7000, 0x8000, 0x3000, 0),))]
    slot_of = np.asarray([0, -1], dtype=np.int64)
    kind_of = np.asarray([LOC_TABLE, LOC_FRAME_POINTER], dtype=np.int8)
    gen = np.asarray([0, 1], dtype=np.int64)
    code = SnapshotCodeMap(gen, snaps, dsos, slot_of, kind_of, [table])
    cases = [  # (sample, pc, expected kind, expected DSO address)
        (0, 0x10010, LOC_TABLE, 0x10), (0, 0x11fff, LOC_TABLE, 0x1fff),
        (0, 0x12000, LOC_NO_CFI, 0), (0, 0x13008, LOC_TABLE, 0x5008), (0, 0x14000, LOC_NO_MAP, 0),
        (0, 0x20010, LOC_FRAME_POINTER, 0), (0, 0x7010, LOC_NO_MAP, 0),
        (1, 0x7010, LOC_TABLE, 0x5010), (1, 0x10010, LOC_NO_MAP, 0), (1, 1 << 60, LOC_NO_MAP, 0),
    ]
    slot, addr, kind = code.locate(np.asarray([c[0] for c in cases], dtype=np.int64),
                                   np.asarray([c[1] for c in cases], dtype=np.uint64))
    assert kind.tolist() == [c[2] for c in cases]
    got = [a if k == LOC_TABLE else 0 for a, k in zip(addr.tolist(), kind.tolist())]
    assert got == [c[3] for c in cases]
    assert [s for s, k in zip(slot.tolist(), kind.tolist()) if k == LOC_TABLE] == [0] * 4
