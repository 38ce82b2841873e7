"""ELF headers, load segments, notes and symbol tables of one file.

The ELF header, program headers and section headers are read with ``struct`` (the layouts
of the ELF specification; pyelftools took ~8 ms per file and ~40 ms to import, per report);
the symbol tables are read in bulk with ``numpy.frombuffer`` over the section bytes (a
Python object per symbol would take seconds on a large library). Every failure — not an ELF, a truncated or
damaged file, an unreadable path — is raised as :class:`ElfError` with one sentence.

Address translation: a sample's ``ip`` in a mapping ``[start, end)`` with file offset
``pgoff`` lies at file offset ``ip - start + pgoff``; the ``PT_LOAD`` segment whose
``[p_offset, p_offset + p_filesz)`` holds that offset gives the ELF virtual address
``offset - p_offset + p_vaddr``. This is right for PIE executables, shared libraries,
non-PIE executables (where it yields ``ip`` itself) and prelinked libraries alike.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from profiler.errors import ReportError
from profiler.format.buildid import build_id_from_notes
from profiler.format.localfile import open_regular
from profiler.symbols.elfheaders import ElfLayout, LoadSegment, SectionHeader
from profiler.symbols.plt import plt_symbols
from profiler.symbols.table import (
    RANK_GLOBAL,
    RANK_LOCAL,
    RANK_OTHER,
    RANK_WEAK,
    U64,
    U64_MAX,
    SymbolCandidates,
    SymbolTable,
)


class ElfError(ReportError):
    """A file that cannot be used as an ELF object (missing, not ELF, truncated, damaged)."""


ELF_MAGIC = b"\x7fELF"
SHF_EXECINSTR = 0x4
SHN_LORESERVE = 0xFF00
STT_NOTYPE, STT_FUNC, STT_GNU_IFUNC = 0, 2, 10
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2

_PARSE_ERRORS = (struct.error, ValueError, IndexError, KeyError, TypeError, OverflowError)

# Names as pyelftools (and readelf) give them; a value not listed is named by its number.
E_TYPES = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}
E_MACHINES = {0: "EM_NONE", 2: "EM_SPARC", 3: "EM_386", 4: "EM_68K", 8: "EM_MIPS", 15: "EM_PARISC",
              18: "EM_SPARC32PLUS", 20: "EM_PPC", 21: "EM_PPC64", 22: "EM_S390", 40: "EM_ARM", 42: "EM_SH",
              43: "EM_SPARCV9", 50: "EM_IA_64", 62: "EM_X86_64", 183: "EM_AARCH64", 243: "EM_RISCV",
              247: "EM_BPF", 258: "EM_LOONGARCH"}
SH_TYPES = {0: "SHT_NULL", 1: "SHT_PROGBITS", 2: "SHT_SYMTAB", 3: "SHT_STRTAB", 4: "SHT_RELA", 5: "SHT_HASH",
            6: "SHT_DYNAMIC", 7: "SHT_NOTE", 8: "SHT_NOBITS", 9: "SHT_REL", 10: "SHT_SHLIB", 11: "SHT_DYNSYM",
            14: "SHT_INIT_ARRAY", 15: "SHT_FINI_ARRAY", 16: "SHT_PREINIT_ARRAY", 17: "SHT_GROUP",
            18: "SHT_SYMTAB_SHNDX", 19: "SHT_RELR", 0x6FFFFFF5: "SHT_GNU_ATTRIBUTES", 0x6FFFFFF6: "SHT_GNU_HASH",
            0x6FFFFFF7: "SHT_GNU_LIBLIST", 0x6FFFFFFD: "SHT_GNU_verdef", 0x6FFFFFFE: "SHT_GNU_verneed",
            0x6FFFFFFF: "SHT_GNU_versym"}
PT_LOAD, PT_NOTE = 1, 4
SHN_XINDEX = 0xFFFF
MAX_HEADERS = 1 << 16  # program or section headers (e_phnum / e_shnum are 16-bit; 0 and XINDEX extend them)


class ElfFile:
    """An ELF file's headers, read once; symbol tables read on demand.

    Attributes: ``path``, ``elfclass`` (32/64), ``little_endian``, ``e_type``
    (``"ET_EXEC"``, ``"ET_DYN"``, ...), ``machine`` (``"EM_X86_64"``, ...), ``build_id``
    (lowercase hex or None), ``load_segments``, ``sections``, ``debuglink`` (``(name,
    crc)`` or None), ``layout`` (an :class:`ElfLayout`).

    Headers are read in the constructor; section contents (symbols, PLT, relocations)
    are read when asked for, by reopening ``path``: a file deleted in between gives
    :class:`ElfError` then (keep the file, or use :func:`load_dso_symbols`, which reads
    everything at once and caches the result).
    """

    def __init__(self, path: str | os.PathLike[str], data: bytes | None = None) -> None:
        """Read the headers of the file at ``path``, or of ``data`` (an ELF image in memory,
        such as a decompressed ``.gnu_debugdata``; ``path`` then only names it)."""
        self.path = Path(path)
        self._data = data
        try:
            with self._open() as stream:
                self.file_size = len(data) if data is not None else os.fstat(stream.fileno()).st_size
                if stream.read(4) != ELF_MAGIC:
                    raise ElfError(f"{self.path} is not an ELF file")
                self._read_headers(stream)
        except OSError as exc:
            raise ElfError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        except _PARSE_ERRORS as exc:
            raise ElfError(f"{self.path} is a truncated or damaged ELF file ({exc})") from exc

    def _exact(self, stream: IO[bytes], offset: int, size: int, what: str) -> bytes:
        if offset < 0 or size < 0 or offset + size > self.file_size:
            raise ValueError(f"its {what} run past the end of the file")
        stream.seek(offset)
        data = stream.read(size)
        if len(data) != size:
            raise ValueError(f"its {what} run past the end of the file")
        return data

    def _read_headers(self, stream: IO[bytes]) -> None:
        ident = self._exact(stream, 0, 16, "identification bytes")
        if ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise ValueError(f"unknown ELF class {ident[4]} or data encoding {ident[5]}")
        self.elfclass: int = 32 if ident[4] == 1 else 64
        self.little_endian: bool = ident[5] == 1
        bo = "<" if self.little_endian else ">"
        wide = self.elfclass == 64
        ehdr = struct.Struct(bo + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH"))
        (e_type, e_machine, _version, _entry, e_phoff, e_shoff, _flags, _ehsize, e_phentsize, e_phnum,
         e_shentsize, e_shnum, e_shstrndx) = ehdr.unpack(self._exact(stream, 16, ehdr.size, "ELF header"))
        self.e_type: str = E_TYPES.get(e_type, str(e_type))
        self.machine: str = E_MACHINES.get(e_machine, str(e_machine))
        shdr = struct.Struct(bo + ("IIQQQQIIQQ" if wide else "IIIIIIIIII"))
        phdr = struct.Struct(bo + ("IIQQQQQQ" if wide else "IIIIIIII"))
        raw_sections: list[tuple[int, ...]] = []
        if e_shoff:
            if e_shentsize < shdr.size:
                raise ValueError(f"section header size {e_shentsize}")
            first = shdr.unpack(self._exact(stream, e_shoff, shdr.size, "section headers"))
            count = first[5] if e_shnum == 0 else e_shnum  # sh_size of section 0 holds a large count
            if count > MAX_HEADERS:
                raise ValueError(f"{count} section headers")
            table = self._exact(stream, e_shoff, count * e_shentsize, "section headers")
            raw_sections = [shdr.unpack_from(table, i * e_shentsize) for i in range(count)]
            if e_shstrndx == SHN_XINDEX:
                e_shstrndx = first[6]  # sh_link of section 0
        segments: list[tuple[int, ...]] = []
        if e_phoff and e_phnum:
            if e_phentsize < phdr.size:
                raise ValueError(f"program header size {e_phentsize}")
            table = self._exact(stream, e_phoff, e_phnum * e_phentsize, "program headers")
            for i in range(e_phnum):
                h = phdr.unpack_from(table, i * e_phentsize)
                # (p_type, p_offset, p_vaddr, p_filesz, p_memsz, p_flags, p_align)
                segments.append((h[0], h[2], h[3], h[5], h[6], h[1], h[7]) if wide
                                else (h[0], h[1], h[2], h[4], h[5], h[6], h[7]))
        self.load_segments = tuple(LoadSegment(vaddr, offset, filesz, memsz, flags)
                                   for ptype, offset, vaddr, filesz, memsz, flags, _ in segments if ptype == PT_LOAD)
        names = b""
        if raw_sections and 0 < e_shstrndx < len(raw_sections):
            strtab = raw_sections[e_shstrndx]
            if strtab[1] != 8:  # SHT_NOBITS has no bytes
                names = self._exact(stream, strtab[4], strtab[5], "section names")
        self.sections = tuple(_section_header(i, h, names) for i, h in enumerate(raw_sections))
        self.build_id = self._find_build_id(stream, segments)
        self.debuglink = self._find_debuglink(stream)
        self.layout = ElfLayout(self.build_id, self.e_type, self.machine, self.load_segments)

    # --- public helpers -------------------------------------------------------------

    def file_offset_to_vaddr(self, offset: int) -> int | None:
        """See :meth:`ElfLayout.file_offset_to_vaddr`."""
        return self.layout.file_offset_to_vaddr(offset)

    def section(self, name: str) -> SectionHeader | None:
        """The first section called ``name``."""
        return next((s for s in self.sections if s.name == name), None)

    def section_by_type(self, sh_type: str) -> SectionHeader | None:
        """The first section of type ``sh_type`` (e.g. ``"SHT_SYMTAB"``)."""
        return next((s for s in self.sections if s.sh_type == sh_type), None)

    @property
    def has_symtab(self) -> bool:
        """True when a ``.symtab`` with at least one entry beyond the null symbol exists."""
        sec = self.section_by_type("SHT_SYMTAB")
        return sec is not None and sec.sh_size > self._sym_dtype().itemsize

    def read_section(self, sec: SectionHeader) -> bytes:
        """The section's bytes, checked against the file size (never trusting sh_size)."""
        if not sec.has_file_data:
            return b""
        if sec.sh_offset + sec.sh_size > self.file_size:
            raise ElfError(f"{self.path} is truncated: section {sec.name or sec.index} runs past the end of the file")
        return self._read(sec.sh_offset, sec.sh_size)

    def _open(self) -> IO[bytes]:
        return io.BytesIO(self._data) if self._data is not None else open_regular(self.path)

    def _read(self, offset: int, size: int) -> bytes:
        try:
            with self._open() as stream:
                stream.seek(offset)
                data = stream.read(size)
        except OSError as exc:
            raise ElfError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        if len(data) != size:
            raise ElfError(f"{self.path} is truncated (it changed while being read?)")
        return data

    # --- notes and debuglink -------------------------------------------------------

    def _find_build_id(self, stream: IO[bytes], segments: Sequence[tuple[int, ...]]) -> str | None:
        """``NT_GNU_BUILD_ID`` from ``SHT_NOTE`` sections, else from ``PT_NOTE`` segments."""
        regions = [(s.sh_offset, s.sh_size, s.sh_addralign) for s in self.sections if s.sh_type == "SHT_NOTE"]
        if not regions:
            regions = [(offset, filesz, align) for ptype, offset, _, filesz, _, _, align in segments
                       if ptype == PT_NOTE]
        for offset, size, align in regions:
            if size <= 0 or offset + size > self.file_size:
                continue
            stream.seek(offset)
            found = build_id_from_notes(stream.read(size), "<" if self.little_endian else ">", align)
            if found is not None:
                return found
        return None

    def _find_debuglink(self, stream: IO[bytes]) -> tuple[str, int] | None:
        """``.gnu_debuglink``: a NUL-terminated file name, padding to 4, then a CRC-32."""
        sec = self.section(".gnu_debuglink")
        if sec is None or not sec.has_file_data or sec.sh_offset + sec.sh_size > self.file_size:
            return None
        stream.seek(sec.sh_offset)
        data = stream.read(sec.sh_size)
        end = data.find(b"\0")
        crc_at = (end + 4) & ~3
        if end <= 0 or crc_at + 4 > len(data):
            return None
        (crc,) = struct.unpack_from("<I" if self.little_endian else ">I", data, crc_at)
        return data[:end].decode("utf-8", "surrogateescape"), crc

    # --- symbols ---------------------------------------------------------------------

    def _sym_dtype(self) -> np.dtype[Any]:
        return symbol_dtype(self.elfclass, self.little_endian)

    def symbol_candidates(self, include_plt: bool = True) -> SymbolCandidates:
        """Function symbols of ``.symtab`` (else ``.dynsym``), plus synthesized ``@plt`` ones."""
        sec = self.section_by_type("SHT_SYMTAB") if self.has_symtab else None
        sec = sec or self.section_by_type("SHT_DYNSYM")
        try:
            parts = [] if sec is None else [self._function_symbols(sec)]
        except _PARSE_ERRORS as exc:
            raise ElfError(f"{self.path} has a damaged symbol table ({exc})") from exc
        if include_plt:
            parts.append(self.plt_candidates())
        return SymbolCandidates.concat(parts)

    def symbol_table(self, include_plt: bool = True) -> SymbolTable:
        """The function symbol table (see :mod:`profiler.symbols.table` for the rules)."""
        return SymbolTable.build(self.symbol_candidates(include_plt))

    def _symbols_and_strings(self, sec: SectionHeader) -> tuple[npt.NDArray[Any], bytes]:
        dtype = self._sym_dtype()
        if sec.sh_entsize not in (0, dtype.itemsize):
            raise ElfError(f"{self.path} is damaged: symbol entry size {sec.sh_entsize} in {sec.name}")
        if not 0 <= sec.sh_link < len(self.sections):
            raise ElfError(f"{self.path} is damaged: {sec.name} links to no string table")
        data = self.read_section(sec)
        count = len(data) // dtype.itemsize
        syms = np.frombuffer(data, dtype=dtype, count=count)
        return syms, self.read_section(self.sections[sec.sh_link])

    def _function_symbols(self, sec: SectionHeader) -> SymbolCandidates:
        """Bulk-read ``sec``; keep STT_FUNC / STT_GNU_IFUNC, and named STT_NOTYPE in code."""
        syms, strtab = self._symbols_and_strings(sec)
        if syms.shape[0] == 0 or not strtab:
            return SymbolCandidates.from_names([], [], [])
        info = syms["st_info"]
        stype, bind = info & 0xF, info >> 4
        shndx = syms["st_shndx"].astype(np.int64)
        name_off = syms["st_name"].astype(np.int64)
        sec_ok = (shndx > 0) & (shndx < min(len(self.sections), SHN_LORESERVE)) & (name_off < len(strtab))
        safe_shndx = np.where(sec_ok, shndx, 0)
        exec_flags = np.array([bool(s.sh_flags & SHF_EXECINSTR) for s in self.sections], np.bool_)
        strbytes = np.frombuffer(strtab, np.uint8)
        first_char = strbytes[np.where(sec_ok, name_off, 0)]
        named = (first_char != 0) & (first_char != ord("$"))
        is_func = (stype == STT_FUNC) | (stype == STT_GNU_IFUNC)
        is_label = (stype == STT_NOTYPE) & exec_flags[safe_shndx]
        keep = sec_ok & named & (is_func | is_label)
        rank = np.full(syms.shape[0], RANK_OTHER, np.uint8)
        rank[bind == STB_GLOBAL] = RANK_GLOBAL
        rank[bind == STB_WEAK] = RANK_WEAK
        rank[bind == STB_LOCAL] = RANK_LOCAL
        sec_end = np.array([min(s.sh_addr + s.sh_size, int(U64_MAX)) for s in self.sections], dtype=U64)
        return SymbolCandidates(
            starts=syms["st_value"][keep].astype(U64),
            sizes=syms["st_size"][keep].astype(U64),
            name_off=name_off[keep],
            strtab=strtab,
            rank=rank[keep],
            limit=sec_end[safe_shndx[keep]],
        )

    def plt_candidates(self) -> SymbolCandidates:
        """Synthesized ``name@plt`` symbols for ``.plt``, ``.plt.sec`` and ``.plt.got``."""
        try:
            entries = plt_symbols(self)
        except _PARSE_ERRORS as exc:
            raise ElfError(f"{self.path} has damaged PLT relocations ({exc})") from exc
        names = [name + b"@plt" for _, _, name in entries]
        return SymbolCandidates.from_names(
            [a for a, _, _ in entries], [s for _, s, _ in entries], names
        )

    def dynamic_symbol_names(self) -> tuple[npt.NDArray[Any], bytes] | None:
        """``.dynsym`` entries and ``.dynstr`` bytes (for relocation symbol names)."""
        sec = self.section_by_type("SHT_DYNSYM")
        return None if sec is None else self._symbols_and_strings(sec)


def symbol_dtype(elfclass: int, little_endian: bool) -> np.dtype[Any]:
    """numpy dtype of ``Elf32_Sym`` / ``Elf64_Sym`` in the file's byte order (elf.h layout)."""
    order = "<" if little_endian else ">"
    if elfclass == 64:
        fields = [("st_name", "u4"), ("st_info", "u1"), ("st_other", "u1"), ("st_shndx", "u2"),
                  ("st_value", "u8"), ("st_size", "u8")]
    else:
        fields = [("st_name", "u4"), ("st_value", "u4"), ("st_size", "u4"), ("st_info", "u1"),
                  ("st_other", "u1"), ("st_shndx", "u2")]
    return np.dtype([(name, order + code) for name, code in fields])


def _section_header(index: int, h: tuple[int, ...], names: bytes) -> SectionHeader:
    """From (sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info,
    sh_addralign, sh_entsize); a name outside the name table is empty."""
    sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, _, sh_addralign, sh_entsize = h
    end = names.find(b"\0", sh_name) if sh_name < len(names) else -1
    name = names[sh_name:end if end >= 0 else len(names)].decode("utf-8", "replace") if sh_name < len(names) else ""
    return SectionHeader(
        index=index,
        name=name,
        sh_type=SH_TYPES.get(sh_type, str(sh_type)),
        sh_flags=sh_flags,
        sh_addr=sh_addr,
        sh_offset=sh_offset,
        sh_size=sh_size,
        sh_link=sh_link,
        sh_entsize=sh_entsize,
        sh_addralign=sh_addralign,
    )


__all__ = [
    "ElfError",
    "ElfFile",
    "U64_MAX",
    "symbol_dtype",
]
