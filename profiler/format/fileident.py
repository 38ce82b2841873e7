"""The content identity of an ELF file without a build-id: the one definition both sides use.

A file built without ``--build-id`` carries nothing that names its build, so a capture could
not tell the file that ran from a rebuild at the same path. The recorder therefore keeps, for
each such mapped file, its size, its mtime and a digest; the report uses a file it finds only
when that file gives the same digest (and size). The mtime is shown, never compared: a copy of
the very same bytes to another machine is the same code.

The digest is SHA-256 over, in order: the ELF header, the program header table, the section
header table, and the file bytes of every executable ``PT_LOAD`` segment (the text), each
length-prefixed. Symbols move when code or headers move, and a rebuild that changed neither
names every address the same. The text read is bounded (:data:`MAX_TEXT_BYTES`), so a huge
binary costs at most that much hashing (measured in docs/containers.md: about 1 ms per MiB
here).
"""

from __future__ import annotations

import os
import stat
import struct

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

ELF_MAGIC = b"\x7fELF"
PT_LOAD = 1
PF_X = 1
MAX_TABLE_BYTES = 1 << 20  # a header table larger than this is damage
MAX_TEXT_BYTES = 16 << 20  # the text hashed is cut here: at most ~15 ms of hashing (docs/containers.md)
CHUNK = 1 << 20


def content_identity_of_fd(fd: int) -> dict[str, int | str] | None:
    """``{"size", "mtime_ns", "digest"}`` of the ELF file open at ``fd``, or None (not a
    regular ELF file, or unreadable)."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        digest = _digest(fd)
    except (OSError, struct.error):
        return None
    if digest is None:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "digest": digest}


def content_identity(path: str | os.PathLike[str]) -> dict[str, int | str] | None:
    """:func:`content_identity_of_fd` of the file at ``path`` (a FIFO never blocks)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return content_identity_of_fd(fd)
    finally:
        os.close(fd)


def _digest(fd: int) -> str | None:
    ehdr = os.pread(fd, 64, 0)
    if len(ehdr) < 52 or ehdr[:4] != ELF_MAGIC:
        return None
    is64 = ehdr[4] == 2
    bo = "<" if ehdr[5] == 1 else ">"
    if is64:
        phoff, shoff = struct.unpack_from(bo + "QQ", ehdr, 32)
        ehsize, phentsize, phnum, shentsize, shnum = struct.unpack_from(bo + "HHHHH", ehdr, 52)
        phdr = struct.Struct(bo + "IIQQQQQQ")  # p_type p_flags p_offset p_vaddr p_paddr p_filesz ...
        type_at, flags_at, off_at, size_at = 0, 1, 2, 5
    else:
        phoff, shoff = struct.unpack_from(bo + "II", ehdr, 28)
        ehsize, phentsize, phnum, shentsize, shnum = struct.unpack_from(bo + "HHHHH", ehdr, 40)
        phdr = struct.Struct(bo + "IIIIIIII")  # p_type p_offset p_vaddr p_paddr p_filesz p_memsz p_flags
        type_at, flags_at, off_at, size_at = 0, 6, 1, 4
    import hashlib  # 2.5 ms to import: only for a file without a build-id

    h = hashlib.sha256()
    _part(h, ehdr[:max(ehsize, 52)])
    phtab = _table(fd, phoff, phentsize * phnum)
    _part(h, phtab)
    _part(h, _table(fd, shoff, shentsize * shnum))
    budget = MAX_TEXT_BYTES
    if phentsize >= phdr.size:
        for i in range(len(phtab) // phentsize):
            seg = phdr.unpack_from(phtab, i * phentsize)
            if seg[type_at] != PT_LOAD or not seg[flags_at] & PF_X:
                continue
            take = min(seg[size_at], budget)
            budget -= take
            h.update(struct.pack("<Q", take))
            _hash_range(h, fd, seg[off_at], take)
    return h.hexdigest()


def _part(h: Any, data: bytes) -> None:
    h.update(struct.pack("<Q", len(data)))
    h.update(data)


def _table(fd: int, offset: int, size: int) -> bytes:
    if offset == 0 or size == 0 or size > MAX_TABLE_BYTES:
        return b""
    return os.pread(fd, size, offset)


def _hash_range(h: Any, fd: int, offset: int, size: int) -> None:
    end = offset + size
    while offset < end:
        chunk = os.pread(fd, min(CHUNK, end - offset), offset)
        if not chunk:
            return
        h.update(chunk)
        offset += len(chunk)


def identities_match(recorded: object, found: object) -> bool:
    """Same digest and size (mtime is not compared: see the module docstring)."""
    if not isinstance(recorded, dict) or not isinstance(found, dict):
        return False
    return recorded.get("digest") == found.get("digest") and recorded.get("size") == found.get("size")


def short(identity: object) -> str:
    """``<size> bytes, digest <first 12 hex>`` for sentences."""
    if not isinstance(identity, dict):
        return "no identity"
    return f"{identity.get('size')} bytes, digest {str(identity.get('digest'))[:12]}"
