"""Compile a DSO's call frame information into a :class:`RuleTable`, once.

pyelftools parses ``.eh_frame`` / ``.debug_frame`` into CIEs and FDEs with their
instructions; this module interprets the instructions (DWARF5 §6.4.2: row creation, CFA
definition, register rules, row state) itself — pyelftools' own ``get_decoded`` rejects
opcodes that glibc's hand-written CFI uses, and scales ``DW_CFA_def_cfa_sf`` wrongly — and
writes one flat row per address range. Expressions are recognised by shape: the x86_64 PLT
CFA expression, ``DW_OP_bregN off; DW_OP_deref`` for a CFA (signal frames, stack realignment)
and ``DW_OP_bregN off`` for a register's save slot; anything else becomes an "unsupported"
rule, where unwinding stops with that reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from elftools.common.exceptions import ELFError, ELFParseError
from elftools.dwarf.callframe import CIE, FDE
from elftools.elf.elffile import ELFFile

from profiler.format.localfile import open_regular
from profiler.unwind.arch import ArchColumns
from profiler.unwind.table import (
    AT_CFA,
    AT_REG,
    CFA_DEREF,
    CFA_NONE,
    CFA_PLT,
    CFA_REG,
    CFA_UNSUPPORTED,
    FLAG_SIGNAL,
    SAME,
    UNDEF,
    UNSUPPORTED,
    VAL_CFA,
    RuleTable,
)

# DW_CFA_* opcodes (DWARF5 table 7.29, GNU extensions).
ADVANCE_LOC, OFFSET, RESTORE = 0x40, 0x80, 0xC0
NOP, SET_LOC, ADVANCE_LOC1, ADVANCE_LOC2, ADVANCE_LOC4 = 0x00, 0x01, 0x02, 0x03, 0x04
OFFSET_EXTENDED, RESTORE_EXTENDED, UNDEFINED, SAME_VALUE, REGISTER = 0x05, 0x06, 0x07, 0x08, 0x09
REMEMBER_STATE, RESTORE_STATE, DEF_CFA, DEF_CFA_REGISTER, DEF_CFA_OFFSET = 0x0A, 0x0B, 0x0C, 0x0D, 0x0E
DEF_CFA_EXPRESSION, EXPRESSION, OFFSET_EXTENDED_SF, DEF_CFA_SF, DEF_CFA_OFFSET_SF = 0x0F, 0x10, 0x11, 0x12, 0x13
VAL_OFFSET, VAL_OFFSET_SF, VAL_EXPRESSION = 0x14, 0x15, 0x16
GNU_WINDOW_SAVE, GNU_ARGS_SIZE, GNU_NEGATIVE_OFFSET_EXTENDED = 0x2D, 0x2E, 0x2F

# DW_OP_* used by the recognised expression shapes.
OP_BREG0, OP_DEREF, OP_LIT0, OP_AND, OP_GE, OP_SHL, OP_PLUS = 0x70, 0x06, 0x30, 0x1A, 0x2A, 0x24, 0x22

Cfa = tuple[int, int, int, int]  # kind, DWARF register, offset, PLT threshold
Rule = tuple[int, int, int]  # kind, argument, DWARF base register (AT_REG)


class CfiError(Exception):
    """The CFI cannot be read (damaged or unsupported section)."""


def _opcode(instr: Any) -> int:
    return int(instr.opcode)


def _sleb(data: Sequence[int], pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise IndexError("truncated SLEB128")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            if byte & 0x40:
                result -= 1 << shift
            return result, pos


def cfa_expression(expr: Sequence[int]) -> Cfa:
    """The CFA rule of a ``DW_CFA_def_cfa_expression`` (kind, register, offset, threshold)."""
    try:
        if expr and OP_BREG0 <= expr[0] < OP_BREG0 + 32:
            reg = expr[0] - OP_BREG0
            off, pos = _sleb(expr, 1)
            rest = list(expr[pos:])
            if rest == [OP_DEREF]:
                return CFA_DEREF, reg, off, 0
            # x86_64 PLT: rsp+off; rip&15 >= K adds 8 (the entry's second push has happened)
            if (len(rest) == 9 and rest[:2] == [OP_BREG0 + 16, 0] and rest[2:4] == [OP_LIT0 + 15, OP_AND]
                    and OP_LIT0 <= rest[4] < OP_LIT0 + 32
                    and rest[5:] == [OP_GE, OP_LIT0 + 3, OP_SHL, OP_PLUS]):
                return CFA_PLT, reg, off, rest[4] - OP_LIT0
    except IndexError:
        pass
    return CFA_UNSUPPORTED, -1, 0, 0


def reg_expression(expr: Sequence[int]) -> Rule:
    """The rule of a ``DW_CFA_expression``: only ``DW_OP_bregN off`` (saved at reg + off)."""
    try:
        if expr and OP_BREG0 <= expr[0] < OP_BREG0 + 32:
            off, pos = _sleb(expr, 1)
            if pos == len(expr):
                return AT_REG, off, expr[0] - OP_BREG0
    except IndexError:
        pass
    return UNSUPPORTED, 0, -1


class _Interpreter:
    """Runs CIE + FDE instructions, emitting (pc, CFA rule, register rules) rows."""

    def __init__(self, cie: CIE) -> None:
        self.caf = int(cie["code_alignment_factor"])
        self.daf = int(cie["data_alignment_factor"])
        self.cfa: Cfa = (CFA_UNSUPPORTED, -1, 0, 0)
        self.rules: dict[int, Rule] = {}
        self.initial: dict[int, Rule] = {}
        self.stack: list[tuple[Cfa, dict[int, Rule]]] = []
        self.rows: list[tuple[int, Cfa, dict[int, Rule]]] = []
        self.pc = 0

    def run(self, instructions: Iterable[Any], emit: bool) -> None:
        for instr in instructions:
            self.step(_opcode(instr), list(instr.args), emit)

    def _emit(self) -> None:
        if self.rows and self.rows[-1][0] == self.pc:
            self.rows[-1] = (self.pc, self.cfa, dict(self.rules))
        else:
            self.rows.append((self.pc, self.cfa, dict(self.rules)))

    def step(self, op: int, args: list[Any], emit: bool) -> None:  # noqa: C901 - one opcode table
        daf = self.daf
        if op in (ADVANCE_LOC, ADVANCE_LOC1, ADVANCE_LOC2, ADVANCE_LOC4):
            if emit:
                self._emit()
            self.pc += int(args[0]) * self.caf
            return
        if op == SET_LOC:
            if emit:
                self._emit()
            self.pc = int(args[0])
            return
        kind, reg, off, thr = self.cfa
        if op == DEF_CFA:
            self.cfa = (CFA_REG, int(args[0]), int(args[1]), 0)
        elif op == DEF_CFA_SF:
            self.cfa = (CFA_REG, int(args[0]), int(args[1]) * daf, 0)
        elif op == DEF_CFA_REGISTER:
            self.cfa = (CFA_REG if kind != CFA_UNSUPPORTED or reg < 0 else kind, int(args[0]), off, 0)
        elif op == DEF_CFA_OFFSET:
            self.cfa = (kind, reg, int(args[0]), thr)
        elif op == DEF_CFA_OFFSET_SF:
            self.cfa = (kind, reg, int(args[0]) * daf, thr)
        elif op == DEF_CFA_EXPRESSION:
            self.cfa = cfa_expression(args[0])
        elif op in (OFFSET, OFFSET_EXTENDED, OFFSET_EXTENDED_SF):
            self.rules[int(args[0])] = (AT_CFA, int(args[1]) * daf, -1)
        elif op == GNU_NEGATIVE_OFFSET_EXTENDED:
            self.rules[int(args[0])] = (AT_CFA, -int(args[1]) * daf, -1)
        elif op in (VAL_OFFSET, VAL_OFFSET_SF):
            self.rules[int(args[0])] = (VAL_CFA, int(args[1]) * daf, -1)
        elif op in (RESTORE, RESTORE_EXTENDED):
            r = int(args[0])
            if r in self.initial:
                self.rules[r] = self.initial[r]
            else:
                self.rules.pop(r, None)
        elif op == UNDEFINED:
            self.rules[int(args[0])] = (UNDEF, 0, -1)
        elif op == SAME_VALUE:
            self.rules[int(args[0])] = (SAME, 0, -1)
        elif op == REGISTER:
            self.rules[int(args[0])] = (UNSUPPORTED, 0, -1)
        elif op == EXPRESSION:
            self.rules[int(args[0])] = reg_expression(args[1])
        elif op == VAL_EXPRESSION:
            self.rules[int(args[0])] = (UNSUPPORTED, 0, -1)
        elif op == REMEMBER_STATE:
            self.stack.append((self.cfa, dict(self.rules)))
        elif op == RESTORE_STATE:
            if self.stack:
                self.cfa, self.rules = self.stack.pop()
        # NOP, GNU_ARGS_SIZE, GNU_WINDOW_SAVE (aarch64: return address signing state) and
        # unknown opcodes change no rule the unwinder follows.


def _column_rules(cols: ArchColumns, ra_reg: int, cfa: Cfa, rules: dict[int, Rule],
                  ) -> tuple[int, int, int, int, list[int], list[int], list[int]]:
    kind, reg, off, thr = cfa
    creg = cols.column_of(reg) if reg >= 0 else None
    if kind in (CFA_REG, CFA_DEREF, CFA_PLT) and creg is None:
        kind = CFA_UNSUPPORTED
    kinds, rargs, rregs = [], [], []
    for c, dwarf in enumerate(cols.dwarf):
        src = ra_reg if c == 0 else dwarf
        rk, ra, rb = rules.get(src, (SAME, 0, -1))
        base = -1
        if rk == AT_REG:
            b = cols.column_of(rb)
            if b is None:
                rk = UNSUPPORTED
            else:
                base = b
        kinds.append(rk)
        rargs.append(ra)
        rregs.append(base)
    return kind, -1 if creg is None else creg, off, thr, kinds, rargs, rregs


def compile_entries(entries: Iterable[Any], cols: ArchColumns, source: str) -> RuleTable:
    """One table from parsed CFI entries (FDEs; CIEs are reached through them)."""
    starts: list[int] = []
    prio: list[int] = []
    cfa_kind: list[int] = []
    cfa_reg: list[int] = []
    cfa_off: list[int] = []
    plt: list[int] = []
    kinds: list[list[int]] = []
    rargs: list[list[int]] = []
    rregs: list[list[int]] = []
    flags: list[int] = []
    t = cols.count
    gap = ([SAME] * t, [0] * t, [-1] * t)
    cie_state: dict[int, _Interpreter] = {}
    for entry in entries:
        if not isinstance(entry, FDE):
            continue
        cie = entry.cie
        if not isinstance(cie, CIE):
            continue
        lo = int(entry["initial_location"])
        hi = lo + int(entry["address_range"])
        interp = _Interpreter(cie)
        base = cie_state.get(id(cie))
        if base is None:
            base = _Interpreter(cie)
            base.run(cie.instructions, emit=False)
            cie_state[id(cie)] = base
        interp.cfa, interp.rules = base.cfa, dict(base.rules)
        interp.initial = dict(base.rules)
        interp.pc = lo
        interp.run(entry.instructions, emit=True)
        interp._emit()
        signal = FLAG_SIGNAL if b"S" in bytes(cie["augmentation"] or b"") else 0
        ra_reg = int(cie["return_address_register"])
        for pc, cfa, rules in interp.rows:
            if pc >= hi:
                continue
            k, r, o, th, rk, ra, rb = _column_rules(cols, ra_reg, cfa, rules)
            starts.append(pc)
            prio.append(1)
            cfa_kind.append(k)
            cfa_reg.append(r)
            cfa_off.append(o)
            plt.append(th)
            kinds.append(rk)
            rargs.append(ra)
            rregs.append(rb)
            flags.append(signal)
        starts.append(hi)
        prio.append(0)
        cfa_kind.append(CFA_NONE)
        cfa_reg.append(-1)
        cfa_off.append(0)
        plt.append(0)
        kinds.append(gap[0])
        rargs.append(gap[1])
        rregs.append(gap[2])
        flags.append(0)
    if not starts:
        return RuleTable.empty(cols.arch, t, source)
    start = np.asarray(starts, dtype=np.uint64)
    # sorted by address; at one address a gap row (end of an FDE) sorts before a real row
    # (start of the next), and only the last row of each address is kept
    order = np.lexsort((np.asarray(prio), np.arange(len(starts)) * 0, start))
    start = start[order]
    keep = np.ones(len(order), dtype=bool)
    keep[:-1] = start[1:] != start[:-1]
    idx = order[keep]
    return RuleTable(
        arch=cols.arch,
        start=start[keep],
        cfa_kind=np.asarray(cfa_kind, dtype=np.uint8)[idx],
        cfa_reg=np.asarray(cfa_reg, dtype=np.int8)[idx],
        cfa_off=np.asarray(cfa_off, dtype=np.int64)[idx],
        plt_threshold=np.asarray(plt, dtype=np.uint8)[idx],
        rule_kind=np.asarray(kinds, dtype=np.uint8).reshape(-1, t)[idx],
        rule_arg=np.asarray(rargs, dtype=np.int64).reshape(-1, t)[idx],
        rule_reg=np.asarray(rregs, dtype=np.int8).reshape(-1, t)[idx],
        flags=np.asarray(flags, dtype=np.uint8)[idx],
        source=source,
    )


def load_segments(elf: ELFFile) -> tuple[np.ndarray[Any, Any], ...]:
    """(p_offset, p_vaddr, p_filesz) of the PT_LOAD segments, sorted by offset."""
    segs = sorted((int(s["p_offset"]), int(s["p_vaddr"]), int(s["p_filesz"]))
                  for s in elf.iter_segments() if s["p_type"] == "PT_LOAD")
    return tuple(np.asarray([s[i] for s in segs], dtype=np.uint64) for i in range(3))


def compile_elf(elf: ELFFile, cols: ArchColumns, debug: ELFFile | None = None) -> RuleTable:
    """The rule table of an ELF file: its ``.eh_frame`` when it has one, else the
    ``.debug_frame`` of the file or of its separate debug file ``debug``."""
    table = _compile_cfi(elf, cols)
    if not len(table) and debug is not None:
        table = _compile_cfi(debug, cols)
    try:
        table.seg_offset, table.seg_vaddr, table.seg_filesz = load_segments(elf)
    except (ELFError, ELFParseError, KeyError) as exc:
        raise CfiError(f"unreadable program headers ({exc})") from None
    return table


def _compile_cfi(elf: ELFFile, cols: ArchColumns) -> RuleTable:
    try:
        if elf.get_section_by_name(".eh_frame") is not None:
            info = elf.get_dwarf_info(relocate_dwarf_sections=False)
            if info.has_EH_CFI():
                return compile_entries(info.EH_CFI_entries(), cols, ".eh_frame")
        if elf.get_section_by_name(".debug_frame") is not None:
            info = elf.get_dwarf_info(relocate_dwarf_sections=False)
            if info.has_CFI():
                return compile_entries(info.CFI_entries(), cols, ".debug_frame")
    except (ELFError, ELFParseError, ValueError, KeyError, IndexError, TypeError, AttributeError,
            AssertionError) as exc:
        raise CfiError(f"unreadable call frame information ({exc})") from None
    return RuleTable.empty(cols.arch, cols.count)


def compile_path(path: str, cols: ArchColumns, debug_path: str | None = None) -> RuleTable:
    try:
        with open_regular(path) as fh:
            if debug_path is None:
                return compile_elf(ELFFile(fh), cols)
            with open_regular(debug_path) as dh:
                return compile_elf(ELFFile(fh), cols, ELFFile(dh))
    except (ELFError, ELFParseError) as exc:
        raise CfiError(f"{path}: not a readable ELF file ({exc})") from None
