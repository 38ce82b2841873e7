"""32-bit and big-endian ELF files, synthesized here (no cross toolchain needed).

A minimal ELF writer lays out an ELF header, PT_LOAD + PT_NOTE program headers, .text,
a build-id note, .symtab/.strtab and .shstrtab in any class and byte order; readelf run
on the result confirms the layout is valid before our reader is checked against it.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from profiler.symbols.elf import ElfFile
from profiler.symbols.dso import SymbolStatus, clear_symbol_cache, load_dso_symbols

TEXT_ADDR = 0x10000
TEXT_OFFSET = 0x200
TEXT_SIZE = 0x100
STT = {"NOTYPE": 0, "OBJECT": 1, "FUNC": 2}
STB = {"LOCAL": 0, "GLOBAL": 1, "WEAK": 2}
MACHINES = {(32, True): 3, (32, False): 20, (64, True): 62, (64, False): 21}  # 386, PPC, X86_64, PPC64


@dataclass(frozen=True)
class Sym:
    name: str
    value: int
    size: int
    type: str
    bind: str
    shndx: int = 1


SYMBOLS = [
    Sym("sized_global", TEXT_ADDR + 0x10, 0x20, "FUNC", "GLOBAL"),
    Sym("sg_weak", TEXT_ADDR + 0x10, 0x20, "FUNC", "WEAK"),
    Sym("zero_local", TEXT_ADDR + 0x40, 0, "FUNC", "LOCAL"),
    Sym("code_label", TEXT_ADDR + 0x60, 0, "NOTYPE", "GLOBAL"),
    Sym("last_func", TEXT_ADDR + 0x80, 0, "FUNC", "GLOBAL"),
    Sym("a_data_object", TEXT_ADDR + 0x90, 8, "OBJECT", "GLOBAL"),
    Sym("absolute", 0x1234, 0, "FUNC", "GLOBAL", 0xFFF1),
]


def make_elf(elfclass: int, little: bool, symbols: list[Sym], build_id: bytes | None) -> bytes:
    e = "<" if little else ">"
    wide = elfclass == 64
    symbols = sorted(symbols, key=lambda s: s.bind != "LOCAL")  # locals first (gABI)
    first_global = 1 + sum(s.bind == "LOCAL" for s in symbols)
    ehsize, phentsize, shentsize = (64, 56, 64) if wide else (52, 32, 40)
    strtab = b"\0" + b"".join(s.name.encode() + b"\0" for s in symbols)
    name_at, pos = [], 1
    for s in symbols:
        name_at.append(pos)
        pos += len(s.name) + 1
    syms = [pack_sym(e, wide, 0, 0, 0, 0, 0)]
    for s, n in zip(symbols, name_at):
        syms.append(pack_sym(e, wide, n, s.value, s.size, STB[s.bind] << 4 | STT[s.type], s.shndx))
    symtab = b"".join(syms)
    note = b""
    if build_id is not None:
        note = struct.pack(e + "3I", 4, len(build_id), 3) + b"GNU\0" + build_id
    names = [b"", b".text", b".note.gnu.build-id", b".symtab", b".strtab", b".shstrtab"]
    shstrtab = b"\0".join(names) + b"\0"
    sh_name = [shstrtab.index(n + b"\0") if n else 0 for n in names]
    body = {".text": b"\x90" * TEXT_SIZE, "note": note, "symtab": symtab, "strtab": strtab, "shstrtab": shstrtab}
    offsets, cursor = {}, TEXT_OFFSET
    for key, blob in body.items():
        cursor = (cursor + 7) & ~7
        offsets[key] = cursor
        cursor += len(blob)
    shoff = (cursor + 7) & ~7
    image = bytearray(shoff + shentsize * len(names))
    for key, blob in body.items():
        image[offsets[key] : offsets[key] + len(blob)] = blob
    ident = b"\x7fELF" + bytes([2 if wide else 1, 1 if little else 2, 1]) + bytes(9)
    phdrs = [
        (1, TEXT_OFFSET, TEXT_ADDR, TEXT_SIZE, TEXT_SIZE, 5, 0x10),  # PT_LOAD R+X
        (4, offsets["note"], 0, len(note), len(note), 4, 4),  # PT_NOTE
    ]
    head = ehsize
    for p_type, off, vaddr, filesz, memsz, flags, align in phdrs:
        if wide:
            ph = struct.pack(e + "IIQQQQQQ", p_type, flags, off, vaddr, vaddr, filesz, memsz, align)
        else:
            ph = struct.pack(e + "8I", p_type, off, vaddr, vaddr, filesz, memsz, flags, align)
        image[head : head + phentsize] = ph
        head += phentsize
    word = "Q" if wide else "I"
    image[:ehsize] = ident + struct.pack(
        e + f"HHI{word}{word}{word}IHHHHHH", 2, MACHINES[(elfclass, little)], 1, TEXT_ADDR, ehsize, shoff, 0,
        ehsize, phentsize, len(phdrs), shentsize, len(names), 5,
    )
    sections = [
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        (sh_name[1], 1, 6, TEXT_ADDR, TEXT_OFFSET, TEXT_SIZE, 0, 0, 16, 0),
        (sh_name[2], 7, 2, 0, offsets["note"], len(note), 0, 0, 4, 0),
        (sh_name[3], 2, 0, 0, offsets["symtab"], len(symtab), 4, first_global, 8, 24 if wide else 16),
        (sh_name[4], 3, 0, 0, offsets["strtab"], len(strtab), 0, 0, 1, 0),
        (sh_name[5], 3, 0, 0, offsets["shstrtab"], len(shstrtab), 0, 0, 1, 0),
    ]
    for i, (n, t, flags, addr, off, size, link, info, align, ent) in enumerate(sections):
        fmt = e + ("IIQQQQIIQQ" if wide else "10I")
        image[shoff + i * shentsize : shoff + (i + 1) * shentsize] = struct.pack(
            fmt, n, t, flags, addr, off, size, link, info, align, ent
        )
    return bytes(image)


def pack_sym(e: str, wide: bool, name: int, value: int, size: int, info: int, shndx: int) -> bytes:
    if wide:
        return struct.pack(e + "IBBHQQ", name, info, 0, shndx, value, size)
    return struct.pack(e + "IIIBBH", name, value, size, info, 0, shndx)


def readelf_symbols(path: Path) -> dict[str, tuple[int, int, str]]:
    out = subprocess.run(["readelf", "-sW", str(path)], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 8 and f[0][:-1].isdigit():
            found[f[7]] = (int(f[1], 16), int(f[2], 0), f[3])
    return found


LAYOUTS = [(32, True), (32, False), (64, True), (64, False)]


@pytest.mark.parametrize(("elfclass", "little"), LAYOUTS)
def test_synthetic_elf_headers_and_symbols(tmp_path: Path, elfclass: int, little: bool) -> None:
    path = tmp_path / f"synth{elfclass}{'le' if little else 'be'}"
    build_id = bytes(range(1, 21))
    path.write_bytes(make_elf(elfclass, little, SYMBOLS, build_id))
    elf = ElfFile(path)
    assert (elf.elfclass, elf.little_endian, elf.e_type) == (elfclass, little, "ET_EXEC")
    assert elf.build_id == build_id.hex()
    assert [(s.p_vaddr, s.p_offset, s.p_filesz) for s in elf.load_segments] == [(TEXT_ADDR, TEXT_OFFSET, TEXT_SIZE)]
    assert elf.file_offset_to_vaddr(TEXT_OFFSET + 0x15) == TEXT_ADDR + 0x15
    table = elf.symbol_table()
    assert [table.name(i) for i in range(len(table))] == ["sized_global", "zero_local", "code_label", "last_func"]
    assert table.lookup(TEXT_ADDR + 0x2F) == ("sized_global", 0x1F)
    assert table.lookup(TEXT_ADDR + 0x30) is None
    assert table.lookup(TEXT_ADDR + 0x5F) == ("zero_local", 0x1F)
    assert table.lookup(TEXT_ADDR + 0x7F) == ("code_label", 0x1F)
    # the last zero-size symbol stops at the end of its section
    assert table.lookup(TEXT_ADDR + TEXT_SIZE - 1) == ("last_func", TEXT_SIZE - 1 - 0x80)
    assert table.lookup(TEXT_ADDR + TEXT_SIZE) is None
    assert table.lookup(0x1234) is None


@pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils not installed")
@pytest.mark.parametrize(("elfclass", "little"), LAYOUTS)
def test_synthetic_elf_agrees_with_readelf(tmp_path: Path, elfclass: int, little: bool) -> None:
    path = tmp_path / "synth"
    path.write_bytes(make_elf(elfclass, little, SYMBOLS, b"\xab" * 8))
    theirs = readelf_symbols(path)
    assert set(theirs) == {s.name for s in SYMBOLS}
    table = ElfFile(path).symbol_table()
    starts = np.array([v for v, _, t in theirs.values() if t in ("FUNC", "NOTYPE")], dtype=np.uint64)
    idx, off = table.lookup_many(starts)
    looked_up = {table.name(i) for i in idx.tolist() if i >= 0}
    assert looked_up == {"sized_global", "zero_local", "code_label", "last_func"}
    assert set(off[idx >= 0].tolist()) == {0}
    header = subprocess.run(["readelf", "-hn", str(path)], check=True, capture_output=True, text=True).stdout
    assert ("ELF32" if elfclass == 32 else "ELF64") in header
    assert ("little endian" if little else "big endian") in header
    assert f"Build ID: {'ab' * 8}" in header


def test_elf_without_symbols_reports_no_symbols(tmp_path: Path) -> None:
    clear_symbol_cache()
    path = tmp_path / "bare"
    path.write_bytes(make_elf(64, True, [], None))
    elf = ElfFile(path)
    assert elf.build_id is None and not elf.has_symtab and len(elf.symbol_table()) == 0
    dso = load_dso_symbols(path)
    assert dso.status is SymbolStatus.NO_SYMBOLS and str(path) in dso.message
    mismatch = load_dso_symbols(path, "abcd")
    assert mismatch.status is SymbolStatus.BUILD_ID_MISMATCH and "none" in mismatch.message
