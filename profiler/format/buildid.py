"""GNU build-ids and ELF notes: the one parser both sides use.

A capture names every binary by its build-id (lowercase hex, docs/format.md), so the recorder
(which reads it from mapped files) and the reporter (which checks a file found on this machine
against the recorded one) must compute it the same way: this module is that single definition.
It lives in ``format`` because both ``record`` and ``report`` may import ``format`` and
neither may import the other.

The build-id is the descriptor of an ``NT_GNU_BUILD_ID`` note (type 3, name "GNU") in a
``SHT_NOTE`` section or ``PT_NOTE`` segment (elf(5)). Only the ELF header, the section or
program header table and the notes are read, each with a size limit, so a hostile or huge
file costs at most a few reads. The
kernel's own build-id comes from ``/sys/kernel/notes``, which holds the raw notes of the
running kernel's ``.notes`` section.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Iterator

NT_GNU_BUILD_ID = 3
PT_NOTE = 4
SHT_NOTE = 7
MAX_SHNUM = 4096
ELF_MAGIC = b"\x7fELF"
MAX_PHNUM = 512
MAX_NOTE_BYTES = 1 << 16
KERNEL_NOTES = "/sys/kernel/notes"


def iter_notes(data: bytes, byte_order: str = "<", align: int = 4) -> Iterator[tuple[int, bytes, bytes]]:
    """(type, name, desc) of each ``ElfN_Nhdr`` note in ``data``.

    Each note is ``namesz, descsz, type`` (u32 in ``byte_order``) then the name and the
    descriptor, each padded to the region's alignment: 4, or 8 for 8-aligned note sections
    (``sh_addralign``/``p_align`` 8). Iteration stops at the first truncated note.
    """
    step = 8 if align == 8 else 4
    head = struct.Struct(byte_order + "III")
    pos = 0
    while pos + head.size <= len(data):
        namesz, descsz, ntype = head.unpack_from(data, pos)
        pos += head.size
        name_end = pos + namesz
        desc_start = pos + _round_up(namesz, step)
        desc_end = desc_start + descsz
        if desc_end > len(data):
            return
        yield ntype, data[pos:name_end].rstrip(b"\0"), data[desc_start:desc_end]
        pos = desc_start + _round_up(descsz, step)


def build_id_from_notes(data: bytes, byte_order: str = "<", align: int = 4) -> str | None:
    """The ``NT_GNU_BUILD_ID`` descriptor (owner ``"GNU"``) in a note region, as lowercase hex."""
    for ntype, name, desc in iter_notes(data, byte_order, align):
        if ntype == NT_GNU_BUILD_ID and name == b"GNU" and desc:
            return desc.hex()
    return None


def _round_up(value: int, step: int) -> int:
    return (value + step - 1) // step * step


def _pread(fd: int, size: int, offset: int) -> bytes:
    return os.pread(fd, size, offset)


def read_build_id(path: str | os.PathLike[str]) -> str | None:
    """The build-id (hex) of the ELF file at ``path``, or None (not ELF, no note, unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    try:
        return _build_id_of_fd(fd)
    except (OSError, struct.error):
        return None
    finally:
        os.close(fd)


def build_id_of_fd(fd: int) -> str | None:
    """The build-id (hex) of the ELF file open at ``fd``, or None (not ELF, no note, unreadable)."""
    try:
        return _build_id_of_fd(fd)
    except (OSError, struct.error):
        return None


def _build_id_of_fd(fd: int) -> str | None:
    """``SHT_NOTE`` sections first (a separate debug file keeps its notes there while its
    segments may point at nothing), then ``PT_NOTE`` segments (a file without sections)."""
    ident = _pread(fd, 64, 0)
    if len(ident) < 52 or ident[:4] != ELF_MAGIC:
        return None
    is64 = ident[4] == 2
    bo = "<" if ident[5] == 1 else ">"
    for offset, size, align in _note_regions(fd, ident, is64, bo):
        notes = _pread(fd, min(size, MAX_NOTE_BYTES), offset)
        found = build_id_from_notes(notes, bo, align)
        if found:
            return found
    return None


def _note_regions(fd: int, ident: bytes, is64: bool, bo: str) -> list[tuple[int, int, int]]:
    """(offset, size, alignment) of the note sections, else of the note segments."""
    if is64:
        phoff, shoff = struct.unpack_from(bo + "QQ", ident, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(bo + "HHHH", ident, 54)
        phdr = struct.Struct(bo + "IIQQQQQQ")  # p_type p_flags p_offset p_vaddr p_paddr p_filesz p_memsz p_align
        shdr = struct.Struct(bo + "IIQQQQIIQQ")  # sh_name sh_type sh_flags sh_addr sh_offset sh_size ... sh_addralign
        sec_fields, seg_fields = (1, 4, 5, 8), (0, 2, 5, 7)
    else:
        phoff, shoff = struct.unpack_from(bo + "II", ident, 28)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(bo + "HHHH", ident, 42)
        phdr = struct.Struct(bo + "IIIIIIII")  # p_type p_offset p_vaddr p_paddr p_filesz p_memsz p_flags p_align
        shdr = struct.Struct(bo + "IIIIIIIIII")
        sec_fields, seg_fields = (1, 4, 5, 8), (0, 1, 4, 7)
    sections = _table(fd, shoff, shentsize, shnum, shdr, MAX_SHNUM)
    regions = [(f[sec_fields[1]], f[sec_fields[2]], f[sec_fields[3]]) for f in sections if f[sec_fields[0]] == SHT_NOTE]
    if not regions:
        segments = _table(fd, phoff, phentsize, phnum, phdr, MAX_PHNUM)
        regions = [(f[seg_fields[1]], f[seg_fields[2]], f[seg_fields[3]])
                   for f in segments if f[seg_fields[0]] == PT_NOTE]
    return regions


def _table(fd: int, offset: int, entsize: int, count: int, entry: struct.Struct, limit: int) -> list[tuple[int, ...]]:
    """The entries of a header table, none when its size is absurd."""
    if count == 0 or count > limit or entsize < entry.size or offset == 0:
        return []
    data = _pread(fd, entsize * count, offset)
    return [entry.unpack_from(data, i * entsize) for i in range(min(count, len(data) // entsize))]


def kernel_build_id(notes_path: str | os.PathLike[str] = KERNEL_NOTES) -> str | None:
    """The running kernel's build-id (hex) from /sys/kernel/notes (None when absent)."""
    try:
        with open(notes_path, "rb") as stream:
            data = stream.read()
    except OSError:
        return None
    return build_id_from_notes(data, "=")


_HEX = frozenset("0123456789abcdefABCDEF")


def is_build_id(value: object) -> bool:
    """Hex of a sane length (2 to 128 digits, whole bytes): what a build-id from an untrusted
    capture must be before it is used at all, let alone in a file name."""
    return (isinstance(value, str) and 2 <= len(value) <= 128 and len(value) % 2 == 0
            and _HEX.issuperset(value))
