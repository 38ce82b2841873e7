"""Unwind rules for JIT code, which has no file and so no CFI a rule table could be read from.

CPython's perf support (3.12 ``-X perf``, 3.13 ``-X perf_jit``) runs every Python function
through a small trampoline copied into anonymous memory. The trampoline pushes no frame
pointer, so neither the frame-pointer rule nor "no CFI" can walk through it: DWARF unwinding
stopped at the first Python frame (perf 6.1 too). Its frame is simple, and this module turns
it into a :class:`RuleTable` whose addresses are offsets from the code's start:

* from the code's bytes (:func:`rules_from_code`): a decoder for the few instructions a
  trampoline is made of (x86_64: ``endbr64``, ``push %rbp``, ``mov %rsp,%rbp``, ``sub/add
  $imm8,%rsp``, ``call *%reg``, ``pop %rbp``, ``ret``; aarch64: ``bti``, ``stp x29, x30,
  [sp, #-N]!``, ``mov x29, sp``, ``blr xN``, ``ldp x29, x30, [sp], #N``, ``ret``). Anything
  else is not a trampoline it knows: None, and unwinding stops there as before.
* from a jitdump's unwinding-information record (:func:`rules_from_eh_frame`): the
  ``.eh_frame`` the JIT wrote for the code, interpreted like a DSO's CFI.

A ``perf-PID.map`` carries names and sizes but no bytes: a ``py::`` entry of the size of a
known CPython trampoline (:data:`TRAMPOLINES`, the bytes of ``Python/asm_trampoline.S`` as
3.12 and 3.13 build it) gets that trampoline's rules (:func:`perf_map_rules`).

:class:`JitCodeOf` gives the unwinder each process's :class:`JitCode` from what its JIT files
say (:mod:`profiler.symbols.jitsources`); a process that forked gets its parent's code under
its own (a forked child runs its parent's trampolines but starts an empty map).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from dataclasses import field

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.names import PYTHON_PREFIX
from profiler.symbols.jitsources import JitSymbols, lineage
from profiler.unwind.arch import RA, SP, ArchColumns
from profiler.unwind.table import AT_CFA, CFA_NONE, CFA_REG, SAME, RuleTable

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]


# CPython's trampoline (Python/asm_trampoline.S) as built, by architecture and size.
TRAMPOLINES: dict[str, dict[int, bytes]] = {
    "x86_64": {
        11: bytes.fromhex("4883ec08" "ffd1" "4883c408" "c3"),
        15: bytes.fromhex("f30f1efa" "4883ec08" "ffd1" "4883c408" "c3"),  # with CET (endbr64)
    },
    "aarch64": {
        20: bytes.fromhex("fd7bbfa9" "fd030091" "60003fd6" "fd7bc1a8" "c0035fd6"),
        24: bytes.fromhex("5f2403d5" "fd7bbfa9" "fd030091" "60003fd6" "fd7bc1a8" "c0035fd6"),  # with BTI
    },
}

Row = tuple[int, int, int, dict[int, int]]  # start, CFA column, CFA offset, {column: offset from CFA}


def rules_from_code(code: bytes, cols: ArchColumns) -> RuleTable | None:
    """The rule table of a trampoline from its machine code, or None when it is not one."""
    rows = (_x86_64_rows if cols.arch == "x86_64" else _aarch64_rows if cols.arch == "aarch64" else None)
    got = None if rows is None else rows(code, cols)
    return None if got is None else _table(got, len(code), cols)


def perf_map_rules(name: str, size: int, cols: ArchColumns) -> RuleTable | None:
    """The rules of a perf-map entry that is a CPython trampoline (by its name and size)."""
    if not name.startswith(PYTHON_PREFIX):
        return None
    code = TRAMPOLINES.get(cols.arch, {}).get(size)
    return None if code is None else rules_from_code(code, cols)


def _x86_64_rows(code: bytes, cols: ArchColumns) -> list[Row] | None:
    """CFA = rsp + 8 + what the code pushed so far; the return address at CFA - 8."""
    rows: list[Row] = []
    depth, saved_fp, pos = 0, None, 0
    while pos < len(code):
        rows.append((pos, SP, 8 + depth, {RA: -8, **({} if saved_fp is None else {cols.fp: saved_fp})}))
        rest = code[pos:]
        if rest[:4] == b"\xf3\x0f\x1e\xfa":  # endbr64
            pos += 4
        elif rest[:1] == b"\x55":  # push %rbp
            depth += 8
            saved_fp = -(8 + depth)
            pos += 1
        elif rest[:3] in (b"\x48\x89\xe5", b"\x48\x8b\xec"):  # mov %rsp,%rbp
            pos += 3
        elif rest[:1] == b"\x5d":  # pop %rbp
            depth -= 8
            saved_fp = None
            pos += 1
        elif len(rest) >= 4 and rest[:3] in (b"\x48\x83\xec", b"\x48\x83\xc4"):  # sub/add $imm8,%rsp
            depth += rest[3] if rest[2] == 0xEC else -rest[3]
            pos += 4
        elif len(rest) >= 2 and rest[0] == 0xFF and 0xD0 <= rest[1] <= 0xD7:  # call *%reg
            pos += 2
        elif len(rest) >= 3 and rest[0] == 0x41 and rest[1] == 0xFF and 0xD0 <= rest[2] <= 0xD7:  # call *%r8..15
            pos += 3
        elif rest[:1] == b"\xc3":  # ret
            pos += 1
        else:
            return None
        if depth < 0 or depth > 4096:
            return None
    return rows


def _aarch64_rows(code: bytes, cols: ArchColumns) -> list[Row] | None:
    """CFA = sp + what the code pushed; x29 and x30 saved at CFA - N and CFA - N + 8 by ``stp``."""
    if len(code) % 4:
        return None
    rows: list[Row] = []
    depth, saved = 0, False
    for pos in range(0, len(code), 4):
        word = int.from_bytes(code[pos:pos + 4], "little")
        rows.append((pos, SP, depth, {RA: -depth + 8, cols.fp: -depth} if saved else {}))
        if word & 0xFFFFFF3F == 0xD503241F:  # bti (c, j, jc)
            continue
        if word & 0xFFC07FFF == 0xA9807BFD:  # stp x29, x30, [sp, #imm]!
            imm = _signed7(word >> 15 & 0x7F) * 8
            if imm >= 0:
                return None
            depth, saved = depth - imm, True
        elif word == 0x910003FD:  # mov x29, sp
            continue
        elif word & 0xFFFFFC1F == 0xD63F0000:  # blr xN
            continue
        elif word & 0xFFC07FFF == 0xA8C07BFD:  # ldp x29, x30, [sp], #imm
            depth, saved = depth - _signed7(word >> 15 & 0x7F) * 8, False
        elif word == 0xD65F03C0:  # ret
            continue
        else:
            return None
        if depth < 0 or depth > 4096:
            return None
    return rows


def _signed7(v: int) -> int:
    return v - 128 if v & 64 else v


def _table(rows: list[Row], size: int, cols: ArchColumns) -> RuleTable:
    t = cols.count
    n = len(rows) + 1  # and a gap row at the end of the code
    table = RuleTable.empty(cols.arch, t, source="trampoline")
    table.start = np.asarray([r[0] for r in rows] + [size], dtype=np.uint64)
    table.cfa_kind = np.asarray([CFA_REG] * len(rows) + [CFA_NONE], dtype=np.uint8)
    table.cfa_reg = np.asarray([r[1] for r in rows] + [-1], dtype=np.int8)
    table.cfa_off = np.asarray([r[2] for r in rows] + [0], dtype=np.int64)
    table.plt_threshold = np.zeros(n, dtype=np.uint8)
    table.rule_kind = np.full((n, t), SAME, dtype=np.uint8)
    table.rule_arg = np.zeros((n, t), dtype=np.int64)
    table.rule_reg = np.full((n, t), -1, dtype=np.int8)
    table.flags = np.zeros(n, dtype=np.uint8)
    for i, (_, _, _, saved) in enumerate(rows):
        for col, off in saved.items():
            table.rule_kind[i, col], table.rule_arg[i, col] = AT_CFA, off
    table.check()
    return table


def rules_from_eh_frame(eh_frame: bytes, code_size: int, cols: ArchColumns) -> RuleTable | None:
    """The rules a jitdump's ``.eh_frame`` gives its code (addresses from the code's start),
    or None when it cannot be read. Its FDE locates the code relative to where the JIT
    placed the section; only the offsets within the code matter here."""
    from elftools.common.exceptions import ELFError, ELFParseError
    from elftools.dwarf.callframe import FDE, CallFrameInfo
    from elftools.dwarf.structs import DWARFStructs

    from profiler.unwind.cfi import CfiError, compile_entries

    base = 1 << 40  # where the section is said to be: pc-relative locations stay positive
    try:
        structs = DWARFStructs(little_endian=True, dwarf_format=32, address_size=8)
        entries = CallFrameInfo(io.BytesIO(eh_frame), len(eh_frame), base, structs, for_eh_frame=True).get_entries()
        fdes = [e for e in entries if isinstance(e, FDE)]
        if len(fdes) != 1:
            return None
        lo = int(fdes[0]["initial_location"])
        table = compile_entries(fdes, cols, ".eh_frame")
    except (CfiError, ELFError, ELFParseError, ValueError, KeyError, TypeError, IndexError, AttributeError,
            AssertionError, OverflowError, RecursionError):
        return None
    if not len(table) or int(fdes[0]["address_range"]) > code_size:
        return None
    with np.errstate(over="ignore"):
        table.start = table.start - np.uint64(lo)
    if (table.start > np.uint64(code_size)).any():
        return None
    return table


@dataclass
class JitCode:
    """A process's JIT code that has unwind rules: ``[start[i], end[i])`` is unwound with
    ``tables[slot[i]]``, whose addresses are offsets from ``start[i]``."""

    start: U64 = field(default_factory=lambda: np.zeros(0, np.uint64))
    end: U64 = field(default_factory=lambda: np.zeros(0, np.uint64))
    slot: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    tables: list[RuleTable] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.start.shape[0])

    @classmethod
    def of_entries(cls, entries: list[tuple[int, int, RuleTable | None]]) -> JitCode:
        """From (start, size, rules) entries; later entries win where they overlap earlier
        ones at the same start; entries without rules are left out."""
        latest: dict[int, tuple[int, RuleTable]] = {}
        for at, size, rules in entries:
            if rules is not None and size > 0:
                latest[at] = (size, rules)
            else:
                latest.pop(at, None)
        ids: dict[int, int] = {}
        tables: list[RuleTable] = []
        starts = sorted(latest)
        slots = []
        for at in starts:
            rules = latest[at][1]
            if id(rules) not in ids:
                ids[id(rules)] = len(tables)
                tables.append(rules)
            slots.append(ids[id(rules)])
        start = np.asarray(starts, dtype=np.uint64)
        end = np.asarray([at + latest[at][0] for at in starts], dtype=np.uint64)
        if len(start) > 1:  # an entry ends where the next begins (a reused address)
            end[:-1] = np.minimum(end[:-1], start[1:])
        return cls(start, end, np.asarray(slots, dtype=np.int64), tables)

    def merged_under(self, parent: JitCode) -> JitCode:
        """This code, and the parent's where this one has none (a forked child runs its
        parent's trampolines but starts an empty map)."""
        if not len(parent):
            return self
        if not len(self):
            return parent
        keep = ~_covered(parent.start, parent.end, self.start, self.end)
        entries = [(int(s), int(e - s), self.tables[k]) for s, e, k in zip(self.start, self.end, self.slot.tolist())]
        entries = [(int(s), int(e - s), parent.tables[k]) for s, e, k in
                   zip(parent.start[keep], parent.end[keep], parent.slot[keep].tolist())] + entries
        return JitCode.of_entries(entries)


def _covered(start: U64, end: U64, by_start: U64, by_end: U64) -> npt.NDArray[np.bool_]:
    """Which [start, end) ranges overlap one of the sorted, disjoint ``by`` ranges."""
    i = np.searchsorted(by_start, end, side="left").astype(np.int64) - 1
    safe = np.maximum(i, 0)
    return (i >= 0) & (by_end.take(safe) > start) if len(by_start) else np.zeros(len(start), dtype=bool)


class JitCodeOf:
    """Per process, its JIT code with unwind rules (cached), for the DWARF unwinder."""

    def __init__(self, symbols_of: Callable[[int], JitSymbols | None], cols: ArchColumns,
                 parent: Mapping[int, int] | None = None) -> None:
        self.symbols_of = symbols_of
        self.cols = cols
        self.parent = dict(parent or {})
        self._own: dict[int, JitCode] = {}
        self._rules: dict[tuple[bytes, bytes], RuleTable | None] = {}
        self._map_rules: dict[int, RuleTable | None] = {}  # by a py:: entry's size

    def __call__(self, pid: int) -> JitCode:
        ancestors = lineage(pid, self.parent)
        code = self.own(next(ancestors))
        for p in ancestors:
            code = code.merged_under(self.own(p))
        return code

    def own(self, pid: int) -> JitCode:
        found = self._own.get(pid)
        if found is None:
            found = self._own[pid] = self._build(self.symbols_of(pid))
        return found

    def _build(self, syms: JitSymbols | None) -> JitCode:
        if syms is None:
            return JitCode()
        entries: list[tuple[int, int, RuleTable | None]] = []
        table = syms.table
        if table is not None:
            for i in range(len(table)):
                name = table.name(i)
                if name.startswith(PYTHON_PREFIX):
                    size = int(table.ends[i]) - int(table.starts[i])
                    entries.append((int(table.starts[i]), size, self._perf_map_rules(size)))
        b = syms.blobs
        for start, size, k in zip(b.start, b.size, b.blob):
            entries.append((start, size, self._blob_rules(b.blobs[k], size)))
        return JitCode.of_entries(entries)

    def _perf_map_rules(self, size: int) -> RuleTable | None:
        if size not in self._map_rules:
            self._map_rules[size] = perf_map_rules(PYTHON_PREFIX, size, self.cols)
        return self._map_rules[size]

    def _blob_rules(self, blob: tuple[bytes, bytes], size: int) -> RuleTable | None:
        key = (blob[0], blob[1] + size.to_bytes(8, "little"))
        if key not in self._rules:
            code, eh = blob
            rules = rules_from_eh_frame(eh, size, self.cols) if eh else None
            if rules is None and len(code) == size:
                rules = rules_from_code(code, self.cols)
            self._rules[key] = rules
        return self._rules[key]
