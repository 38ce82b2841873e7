"""GNU build-ids, read with a small bounded reader instead of a full ELF parser.

The build-id is the descriptor of an ``NT_GNU_BUILD_ID`` note (type 3, name "GNU") in a
``PT_NOTE`` segment (elf(5)). Only the ELF header, the program headers and the note segments
are read, each with a size limit, so a hostile or huge file costs at most a few reads. The
kernel's own build-id comes from ``/sys/kernel/notes``, which holds the raw notes of the
running kernel's ``.notes`` section.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

NT_GNU_BUILD_ID = 3
PT_NOTE = 4
ELF_MAGIC = b"\x7fELF"
MAX_PHNUM = 512
MAX_NOTE_BYTES = 1 << 16
KERNEL_NOTES = Path("/sys/kernel/notes")


def iter_notes(data: bytes, byte_order: str) -> Iterator[tuple[int, bytes, bytes]]:
    """(type, name, desc) of each ``ElfN_Nhdr`` note in ``data`` (4-byte aligned fields)."""
    head = struct.Struct(byte_order + "III")
    pos = 0
    while pos + head.size <= len(data):
        namesz, descsz, ntype = head.unpack_from(data, pos)
        pos += head.size
        name_end = pos + namesz
        desc_start = pos + ((namesz + 3) & ~3)
        desc_end = desc_start + descsz
        if desc_end > len(data):
            return
        yield ntype, data[pos:name_end].rstrip(b"\0"), data[desc_start:desc_end]
        pos = desc_start + ((descsz + 3) & ~3)


def build_id_from_notes(data: bytes, byte_order: str = "<") -> bytes | None:
    for ntype, name, desc in iter_notes(data, byte_order):
        if ntype == NT_GNU_BUILD_ID and name == b"GNU" and desc:
            return desc
    return None


def _pread(fd: int, size: int, offset: int) -> bytes:
    return os.pread(fd, size, offset)


def read_build_id(path: str | os.PathLike[str]) -> bytes | None:
    """The build-id of the ELF file at ``path``, or None (not ELF, no note, unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return _build_id_of_fd(fd)
    except (OSError, struct.error):
        return None
    finally:
        os.close(fd)


def _build_id_of_fd(fd: int) -> bytes | None:
    ident = _pread(fd, 64, 0)
    if len(ident) < 52 or ident[:4] != ELF_MAGIC:
        return None
    is64 = ident[4] == 2
    bo = "<" if ident[5] == 1 else ">"
    if is64:
        phoff, = struct.unpack_from(bo + "Q", ident, 32)
        phentsize, phnum = struct.unpack_from(bo + "HH", ident, 54)
        phdr = struct.Struct(bo + "IIQQQQQQ")  # p_type p_flags p_offset p_vaddr p_paddr p_filesz ...
    else:
        phoff, = struct.unpack_from(bo + "I", ident, 28)
        phentsize, phnum = struct.unpack_from(bo + "HH", ident, 42)
        phdr = struct.Struct(bo + "IIIIIIII")  # p_type p_offset p_vaddr p_paddr p_filesz ...
    if phnum == 0 or phnum > MAX_PHNUM or phentsize < phdr.size:
        return None
    table = _pread(fd, phentsize * phnum, phoff)
    for i in range(min(phnum, len(table) // phentsize)):
        fields = phdr.unpack_from(table, i * phentsize)
        if fields[0] != PT_NOTE:
            continue
        offset, filesz = (fields[2], fields[5]) if is64 else (fields[1], fields[4])
        notes = _pread(fd, min(filesz, MAX_NOTE_BYTES), offset)
        found = build_id_from_notes(notes, bo)
        if found:
            return found
    return None


def kernel_build_id(notes_path: Path = KERNEL_NOTES) -> bytes | None:
    """The running kernel's build-id from /sys/kernel/notes (None when absent)."""
    try:
        data = notes_path.read_bytes()
    except OSError:
        return None
    return build_id_from_notes(data, "=")
