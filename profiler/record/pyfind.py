"""Find a CPython process's ``_PyRuntime``: the interpreter's file among its mappings (a
``libpython3.X.so`` or a statically linked ``python3.X``), the symbol's value in that ELF
file's dynamic (or full) symbol table, and the file's load base from ``/proc/PID/maps``.

The file is read through the process's own view (``/proc/PID/map_files/START-END``, then
``/proc/PID/root/PATH``), as ``profiler/record/mapped.py`` reads mapped files, so a Python in
a container is found too. Only 64-bit little-endian ELF files are read (x86_64, aarch64).
"""

from __future__ import annotations

import os
import struct

from profiler.value import Value

PROC = "/proc"
SYMBOL = b"_PyRuntime"
MAX_SYMTAB = 64 << 20  # bytes of a symbol or string table read at most
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_PHDR = struct.Struct("<IIQQQQQQ")
_SYM = struct.Struct("<IBBHQQ")
SHT_SYMTAB, SHT_DYNSYM, PT_LOAD = 2, 11, 1


class Interpreter(Value):
    """Where one process's CPython runtime is: its file, version and ``_PyRuntime``'s address."""

    __slots__ = _fields = ("path", "version", "runtime")

    def __init__(self, path: str, version: tuple[int, int], runtime: int) -> None:
        self.path = path
        self.version = version
        self.runtime = runtime


def _maps(pid: int) -> list[tuple[int, int, int, str]]:
    """(start, end, offset, path) of the process's file mappings."""
    out = []
    try:
        with open(f"{PROC}/{pid}/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    start, _, end = parts[0].partition("-")
                    out.append((int(start, 16), int(end, 16), int(parts[2], 16), parts[5].rstrip("\n")))
    except (OSError, ValueError):
        return []
    return out


def interpreter_name(path: str) -> tuple[bool, tuple[int, int]] | None:
    """(is a library, version) of ``libpython3.X[flags].so[.N]`` or ``python3.X[flags]``
    (no ``re``: the recorder does not import it)."""
    name = path.rpartition("/")[2]
    lib = name.startswith("libpython")
    rest = name[len("libpython"):] if lib else name[len("python"):] if name.startswith("python") else ""
    major, dot, tail = rest.partition(".")
    digits = tail[: len(tail) - len(tail.lstrip("0123456789"))]
    if not (major.isdigit() and dot and digits):
        return None
    suffix = tail[len(digits):].lstrip("dtu")
    if lib and not suffix.startswith(".so") or not lib and suffix:
        return None
    return lib, (int(major), int(digits))


def _candidates(maps: list[tuple[int, int, int, str]]) -> list[tuple[int, int, str, tuple[int, int]]]:
    """The interpreter files mapped at offset 0, libpython before the executable."""
    found = []
    for start, end, offset, path in maps:
        named = interpreter_name(path)
        if named is not None and offset == 0:
            found.append((0 if named[0] else 1, start, end, path, named[1]))
    found.sort(key=lambda c: c[0])
    return [(start, end, path, version) for _, start, end, path, version in found]


def _open(pid: int, start: int, end: int, path: str) -> int | None:
    for through in (f"{PROC}/{pid}/map_files/{start:x}-{end:x}", f"{PROC}/{pid}/root{path}", path):
        try:
            return os.open(through, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
    return None


def elf_symbol(fd: int, name: bytes = SYMBOL) -> tuple[int, int] | None:
    """(symbol value, first ``PT_LOAD``'s page-aligned vaddr) of ``name`` in the ELF at
    ``fd``, or None. Anything out of range in the file is None, never an exception."""
    try:
        head = os.pread(fd, _EHDR.size, 0)
        if len(head) < _EHDR.size or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return None
        fields = _EHDR.unpack(head)
        phoff, shoff, phnum, shentsize, shnum = fields[5], fields[6], fields[10], fields[11], fields[12]
        if shentsize != _SHDR.size or not 0 < shnum < 4096 or not 0 < phnum < 4096:
            return None
        phdrs = [_PHDR.unpack_from(os.pread(fd, _PHDR.size * phnum, phoff), i * _PHDR.size) for i in range(phnum)]
        loads = [p[3] for p in phdrs if p[0] == PT_LOAD]
        raw = os.pread(fd, shentsize * shnum, shoff)
        shdrs = [_SHDR.unpack_from(raw, i * shentsize) for i in range(shnum)]
    except (OSError, struct.error):
        return None
    if not loads:
        return None
    for wanted in (SHT_DYNSYM, SHT_SYMTAB):
        for sh in shdrs:
            if sh[1] == wanted and sh[6] < shnum:
                value = _lookup(fd, sh, shdrs[sh[6]], name)
                if value is not None:
                    return value, min(loads) & ~0xFFF
    return None


def _lookup(fd: int, sym: tuple[int, ...], strtab: tuple[int, ...], name: bytes) -> int | None:
    if sym[5] > MAX_SYMTAB or strtab[5] > MAX_SYMTAB:
        return None
    try:
        syms = os.pread(fd, sym[5], sym[4])
        strings = os.pread(fd, strtab[5], strtab[4])
    except OSError:
        return None
    at = strings.find(b"\0" + name + b"\0")
    if at < 0:
        return None
    want = at + 1
    for st_name, _, _, _, st_value, _ in _SYM.iter_unpack(syms[: len(syms) - len(syms) % _SYM.size]):
        if st_name == want and st_value:
            return int(st_value)
    return None


def find_interpreter(pid: int) -> Interpreter | None:
    """The CPython runtime of process ``pid``, or None (not CPython, or unreadable)."""
    maps = _maps(pid)
    for start, end, path, version in _candidates(maps):
        fd = _open(pid, start, end, path)
        if fd is None:
            continue
        try:
            found = elf_symbol(fd)
        finally:
            os.close(fd)
        if found is not None:
            value, first_load = found
            return Interpreter(path, version, start - first_load + value)
    return None
