"""Synthesized ``name@plt`` symbols for procedure linkage table entries.

Linkers emit no symbols for PLT entries, so a sample in one would show as ``[unknown]``.
On x86 each entry is decoded: its indirect ``jmp`` reads a GOT slot, and the dynamic
relocation (``R_*_JUMP_SLOT`` in ``.rela.plt``, or ``R_*_GLOB_DAT`` for ``.plt.got``)
whose ``r_offset`` is that slot names the function (``R_*_IRELATIVE``: see below). This covers lazy ``.plt`` entries,
IBT's ``.plt.sec`` (``endbr64; bnd jmp *slot(%rip)``) and ``.plt.got``. On AArch64 the
entries follow the ``.rela.plt`` order after a 32-byte header. Other machines get none.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from profiler.symbols.elfheaders import SectionHeader

PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got")
# (R_*_JUMP_SLOT, R_*_GLOB_DAT, R_*_IRELATIVE) per machine, from the psABI documents.
SLOT_TYPES = {"EM_X86_64": (7, 6, 37), "EM_386": (7, 6, 42), "EM_AARCH64": (1026, 1025, 1032)}
STT_GNU_IFUNC = 10
_BIND_RANK = {1: 0, 2: 1, 0: 2}  # STB_GLOBAL, STB_WEAK, STB_LOCAL
ENDBR64 = b"\xf3\x0f\x1e\xfa"
ENDBR32 = b"\xf3\x0f\x1e\xfb"

PltEntry = tuple[int, int, bytes]  # (address, size, function name)


class ElfFile(Protocol):
    """What this module reads of an ELF file (:class:`profiler.symbols.elf.ElfFile`)."""

    @property
    def machine(self) -> str: ...
    @property
    def elfclass(self) -> int: ...
    @property
    def little_endian(self) -> bool: ...
    @property
    def sections(self) -> Sequence[SectionHeader]: ...
    def section(self, name: str) -> SectionHeader | None: ...
    def read_section(self, sec: SectionHeader) -> bytes: ...
    def dynamic_symbol_names(self) -> tuple[npt.NDArray[Any], bytes] | None: ...


Relocations = tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.int64]]


def plt_symbols(elf: ElfFile) -> list[PltEntry]:
    """``(address, size, name)`` for each PLT entry whose target function is known."""
    types = SLOT_TYPES.get(elf.machine)
    if types is None:
        return []
    slots, ordered = _relocated_slots(elf, types, elf.dynamic_symbol_names())
    if elf.machine == "EM_AARCH64":
        return _aarch64_entries(elf, ordered)
    entries: list[PltEntry] = []
    for name in PLT_SECTIONS:
        sec = elf.section(name)
        if sec is not None and sec.has_file_data:
            entries.extend(_x86_entries(elf, sec, slots))
    return entries


def _relocated_slots(
    elf: ElfFile, types: tuple[int, int, int], dyn: tuple[npt.NDArray[Any], bytes] | None
) -> tuple[dict[int, bytes], list[bytes]]:
    """GOT slot address -> function name, and the ``.rela.plt`` names in order.

    ``R_*_IRELATIVE`` slots (calls to a GNU indirect function inside the same object)
    carry no symbol, only the resolver's address as addend: they are named after the
    ``STT_GNU_IFUNC`` symbol with that value, else ``*ABS*+0x<addend>`` like objdump.
    """
    syms: npt.NDArray[Any] = dyn[0] if dyn is not None else np.zeros(0, [("st_name", "u4")])
    strtab = dyn[1] if dyn is not None else b""
    dynsym_index = next((i for i, s in enumerate(elf.sections) if s.sh_type == "SHT_DYNSYM"), -1)
    ifuncs = _ifunc_names(syms, strtab) if dyn is not None else {}
    slots: dict[int, bytes] = {}
    ordered: list[bytes] = []
    named = np.array(types[:2], dtype=np.uint64)
    for sec in elf.sections:
        if sec.sh_type not in ("SHT_RELA", "SHT_REL"):
            continue
        r_offset, r_sym, r_type, r_addend = _relocations(elf, sec)
        is_plt = sec.name.endswith(".plt")
        if sec.sh_link == dynsym_index >= 0:
            keep = np.isin(r_type, named) & (r_sym > 0) & (r_sym < syms.shape[0])
            for off, sym, rtype in zip(r_offset[keep].tolist(), r_sym[keep].tolist(), r_type[keep].tolist()):
                name = _cstring(strtab, int(syms["st_name"][sym]))
                if name:
                    slots.setdefault(off, name)
                    if rtype == types[0] and is_plt:
                        ordered.append(name)
        if sec.sh_type == "SHT_RELA":
            irel = r_type == np.uint64(types[2])
            for off, addend in zip(r_offset[irel].tolist(), r_addend[irel].tolist()):
                slots.setdefault(off, ifuncs.get(addend) or b"*ABS*+0x%x" % addend)
    return slots, ordered


def _ifunc_names(syms: npt.NDArray[Any], strtab: bytes) -> dict[int, bytes]:
    """Resolver address -> STT_GNU_IFUNC name with that value, chosen by the alias rule
    of :mod:`profiler.symbols.table` (global, weak, local; then shortest; then smallest)."""
    best: dict[int, tuple[int, int, bytes]] = {}
    ifunc = (syms["st_info"] & 0xF) == STT_GNU_IFUNC
    for value, name_off, info in zip(
        syms["st_value"][ifunc].tolist(), syms["st_name"][ifunc].tolist(), syms["st_info"][ifunc].tolist()
    ):
        name = _cstring(strtab, int(name_off))
        key = (_BIND_RANK.get(info >> 4, 3), len(name), name)
        if name and (value not in best or key < best[value]):
            best[value] = key
    return {value: key[2] for value, key in best.items()}


def _relocations(elf: ElfFile, sec: SectionHeader) -> Relocations:
    """``r_offset``, symbol index, type and addend arrays of a relocation section."""
    order = "<" if elf.little_endian else ">"
    word = "u8" if elf.elfclass == 64 else "u4"
    fields = [("r_offset", order + word), ("r_info", order + word)]
    if sec.sh_type == "SHT_RELA":
        fields.append(("r_addend", order + ("i8" if elf.elfclass == 64 else "i4")))
    dtype = np.dtype(fields)
    data = elf.read_section(sec)
    rel = np.frombuffer(data, dtype=dtype, count=len(data) // dtype.itemsize)
    info = rel["r_info"].astype(np.uint64)
    if elf.elfclass == 64:
        r_sym, r_type = info >> np.uint64(32), info & np.uint64(0xFFFFFFFF)
    else:
        r_sym, r_type = info >> np.uint64(8), info & np.uint64(0xFF)
    addend = rel["r_addend"].astype(np.int64) if sec.sh_type == "SHT_RELA" else np.zeros(rel.shape, np.int64)
    return rel["r_offset"].astype(np.uint64), r_sym, r_type, addend


def _x86_entries(elf: ElfFile, sec: SectionHeader, slots: dict[int, bytes]) -> list[PltEntry]:
    data = elf.read_section(sec)
    size = sec.sh_entsize if sec.sh_entsize in (8, 16, 32) else 16
    got_plt = elf.section(".got.plt") or elf.section(".got")
    got_base = got_plt.sh_addr if got_plt is not None else 0
    out: list[PltEntry] = []
    for base in range(0, len(data) - size + 1, size):
        slot = _jump_slot(data[base : base + size], sec.sh_addr + base, elf.machine, got_base)
        name = slots.get(slot) if slot is not None else None
        if name is not None:
            out.append((sec.sh_addr + base, size, name))
    return out


def _jump_slot(entry: bytes, addr: int, machine: str, got_base: int) -> int | None:
    """The GOT slot read by the entry's indirect jump (``ff 25``/``ff a3``), if any.

    Accepted shapes: ``[endbr] [bnd] jmp *disp32(%rip)`` on x86-64; ``jmp *abs32`` and
    ``jmp *disp32(%ebx)`` (PIC, relative to the GOT) on i386.
    """
    pos = 4 if entry[:4] in (ENDBR64, ENDBR32) else 0
    if entry[pos : pos + 1] == b"\xf2":
        pos += 1
    opcode = entry[pos : pos + 2]
    if len(entry) < pos + 6 or opcode not in (b"\xff\x25", b"\xff\xa3"):
        return None
    disp: int = struct.unpack_from("<i", entry, pos + 2)[0]
    if machine == "EM_X86_64":
        return addr + pos + 6 + disp if opcode == b"\xff\x25" else None
    return (disp & 0xFFFFFFFF) if opcode == b"\xff\x25" else (got_base + disp) & 0xFFFFFFFF


def _aarch64_entries(elf: ElfFile, ordered: list[bytes]) -> list[PltEntry]:
    """AArch64 ``.plt``: a 32-byte PLT0, then 16-byte entries in ``.rela.plt`` order."""
    sec = elf.section(".plt")
    if sec is None:
        return []
    count = min(len(ordered), max(0, (sec.sh_size - 32) // 16))
    return [(sec.sh_addr + 32 + 16 * i, 16, ordered[i]) for i in range(count)]


def _cstring(blob: bytes, offset: int) -> bytes:
    if offset >= len(blob):
        return b""
    end = blob.find(b"\0", offset)
    return blob[offset : len(blob) if end < 0 else end]
