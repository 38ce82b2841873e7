"""Unwind rules of CPython's perf trampolines: from their bytes (x86_64, aarch64) and from the
.eh_frame a jitdump carries, which must agree."""

from __future__ import annotations

import numpy as np

from profiler.unwind.arch import AARCH64_COLUMNS, RA, SP, X86_64_COLUMNS
from profiler.unwind.jitcode import TRAMPOLINES, JitCode, perf_map_rules, rules_from_code, rules_from_eh_frame
from profiler.unwind.table import AT_CFA, CFA_NONE, CFA_REG, SAME

EH_FRAME = bytes.fromhex("1400000000000000017a5200017810011b0c070890010000"
                         "140000001c000000d0ffffff0b00000000440e10460e0800")


def cfa_at(table, pc: int) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    row = table.row_at(pc)
    assert row is not None
    return int(table.cfa_reg[row]), int(table.cfa_off[row])


def test_x86_64_trampoline_from_its_bytes_matches_cpythons_cfi() -> None:
    code = rules_from_code(TRAMPOLINES["x86_64"][11], X86_64_COLUMNS)
    cfi = rules_from_eh_frame(EH_FRAME, 11, X86_64_COLUMNS)
    assert code is not None and cfi is not None
    for pc in range(11):  # sub $8,%rsp (4) · call *%rcx (2) · add $8,%rsp (4) · ret
        want = 16 if 4 <= pc < 10 else 8
        assert cfa_at(code, pc) == cfa_at(cfi, pc) == (SP, want)
        for t in (code, cfi):
            row = t.row_at(pc)
            assert t.rule_kind[row, RA] == AT_CFA and t.rule_arg[row, RA] == -8
    assert code.row_at(11) is None and cfi.row_at(11) is None  # past the code: no rule


def test_endbr64_and_frame_pointer_prologues() -> None:
    cet = rules_from_code(TRAMPOLINES["x86_64"][15], X86_64_COLUMNS)
    assert cet is not None and cfa_at(cet, 0) == (SP, 8) and cfa_at(cet, 9) == (SP, 16)
    fp = rules_from_code(bytes.fromhex("554889e5ffd15dc3"), X86_64_COLUMNS)  # push rbp; mov; call; pop; ret
    assert fp is not None and cfa_at(fp, 4) == (SP, 16)
    row = fp.row_at(4)
    assert fp.rule_kind[row, X86_64_COLUMNS.fp] == AT_CFA and fp.rule_arg[row, X86_64_COLUMNS.fp] == -16


def test_aarch64_trampoline_saves_the_frame_record() -> None:
    t = rules_from_code(TRAMPOLINES["aarch64"][20], AARCH64_COLUMNS)
    assert t is not None
    assert cfa_at(t, 0) == (SP, 0) and t.rule_kind[t.row_at(0), RA] == SAME  # x30 still holds it
    row = t.row_at(8)  # at blr x3: after stp x29, x30, [sp, #-16]!
    assert cfa_at(t, 8) == (SP, 16)
    assert t.rule_arg[row, RA] == -8 and t.rule_arg[row, AARCH64_COLUMNS.fp] == -16
    assert cfa_at(t, 16) == (SP, 0)  # after ldp
    assert rules_from_code(TRAMPOLINES["aarch64"][24], AARCH64_COLUMNS) is not None  # with bti


def test_unknown_code_has_no_rules() -> None:
    assert rules_from_code(b"\x90\x90\xc3", X86_64_COLUMNS) is None
    assert rules_from_code(b"\x48\x83\xc4\x08\xc3", X86_64_COLUMNS) is None  # pops what it never pushed
    assert rules_from_code(b"\x00\x00\x00\x00", AARCH64_COLUMNS) is None
    assert perf_map_rules("py::f:/a.py", 12, X86_64_COLUMNS) is None  # not a trampoline's size
    assert perf_map_rules("java_method", 11, X86_64_COLUMNS) is None
    assert perf_map_rules("py::f:/a.py", 11, X86_64_COLUMNS) is not None
    for junk in (b"", b"\xff" * 40, EH_FRAME[:30], EH_FRAME.replace(b"\x0b\x00\x00\x00", b"\xff\xff\x00\x00")):
        assert rules_from_eh_frame(junk, 11, X86_64_COLUMNS) is None


def test_later_entries_win_and_overlaps_are_cut() -> None:
    t = rules_from_code(TRAMPOLINES["x86_64"][11], X86_64_COLUMNS)
    code = JitCode.of_entries([(0x1000, 11, t), (0x1008, 11, t), (0x1000, 11, None), (0x2000, 11, t)])
    assert code.start.tolist() == [0x1008, 0x2000] and code.end.tolist() == [0x1013, 0x200B]
    assert len(code.tables) == 1 and np.array_equal(code.slot, [0, 0])
    assert t is not None and t.cfa_kind[-1] == CFA_NONE and t.cfa_kind[0] == CFA_REG
