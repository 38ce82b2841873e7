"""JIT dumps: ``/tmp/jit-<pid>.dump``, the binary format perf's ``jitdump-specification.txt``
documents, as CPython 3.13 ``-X perf_jit`` writes it.

A file header (magic ``JiTD``, version, header size, ``elf_mach``, pid, timestamp, flags),
then records, each ``u32 id, u32 total_size, u64 timestamp`` and a body:

* ``JIT_CODE_LOAD`` (0): pid, tid, vma, code address, code size, code index, the function's
  name (NUL-terminated), then the code bytes;
* ``JIT_CODE_MOVE`` (1): the code at an old address now lives at a new one;
* ``JIT_CODE_UNWINDING_INFO`` (4): unwinding size, ``.eh_frame_hdr`` size, mapped size, then
  ``.eh_frame`` followed by ``.eh_frame_hdr``; it describes the next code load;
* debug info (2) and close (3): read past.

perf needs ``perf inject --jit`` to turn these into one ELF file per function; this reader
gives the report the names (a symbol table, like a perf map) and, per function, the code
bytes and ``.eh_frame`` that :mod:`profiler.unwind.jitcode` makes unwind rules of. The file
is untrusted: records are bounded by the file, a record that does not fit ends the reading
(a writer still running leaves a torn last record) and is counted, names are bounded,
addresses wrap nowhere. 3.13.0 writes 0 as ``elf_mach``: it is not checked.
"""

from __future__ import annotations

import struct
from dataclasses import field

from profiler.dataclass import dataclass
from profiler.errors import FormatError

MAGIC = 0x4A695444  # "JiTD" as a native u32 (little-endian writer)
HEADER = struct.Struct("<IIIIIIQQ")
RECORD = struct.Struct("<IIQ")
CODE_LOAD = struct.Struct("<IIQQQQ")
CODE_MOVE = struct.Struct("<IIQQQQQ")
UNWINDING = struct.Struct("<QQQ")
JIT_CODE_LOAD, JIT_CODE_MOVE, JIT_CODE_DEBUG_INFO, JIT_CODE_CLOSE, JIT_CODE_UNWINDING_INFO = 0, 1, 2, 3, 4
MAX_NAME = 4096
KEPT_CODE = 64  # code bytes kept per function: enough to recognise a trampoline
MAX_RECORDS = 1 << 22


@dataclass
class JitFunction:
    """One function a JIT loaded: where, its name, its first code bytes and ``.eh_frame``."""

    start: int
    size: int
    name: str
    code: bytes
    eh_frame: bytes | None = None


@dataclass
class JitDump:
    pid: int
    functions: list[JitFunction] = field(default_factory=list)
    skipped: int = 0  # records that could not be read (a torn or damaged tail)


def parse_jitdump(data: bytes | memoryview) -> JitDump:
    """The functions of a jitdump, in the order they were loaded (a later load at the same
    address replaces an earlier one); FormatError when it is not a jitdump."""
    if len(data) < HEADER.size:
        raise FormatError("not a jitdump: shorter than its header")
    magic, version, header_size, _mach, _pad, pid, _ts, _flags = HEADER.unpack_from(data, 0)
    if magic == 0x4454694A:
        raise FormatError("a jitdump written on a big-endian machine: not read here")
    if magic != MAGIC:
        raise FormatError("not a jitdump (bad magic)")
    if version != 1 or not HEADER.size <= header_size <= len(data):
        raise FormatError(f"a jitdump of version {version} (header {header_size} bytes): not read")
    out = JitDump(pid)
    by_start: dict[int, JitFunction] = {}
    pending_unwind: bytes | None = None
    pos, end, count = header_size, len(data), 0
    while pos < end:
        count += 1
        if end - pos < RECORD.size or count > MAX_RECORDS:
            out.skipped += 1
            break
        rid, size, _time = RECORD.unpack_from(data, pos)
        if size < RECORD.size or size > end - pos:
            out.skipped += 1
            break
        body = bytes(data[pos + RECORD.size:pos + size])
        pos += size
        try:
            if rid == JIT_CODE_LOAD:
                fn = _code_load(body, pending_unwind)
                pending_unwind = None
                if fn is not None:
                    by_start[fn.start] = fn
                else:
                    out.skipped += 1
            elif rid == JIT_CODE_MOVE:
                _pid, _tid, _vma, old, new, csize, _idx = CODE_MOVE.unpack_from(body)
                moved = by_start.pop(old, None)
                if moved is not None and new + csize < 1 << 64:
                    moved.start, moved.size = new, csize
                    by_start[new] = moved
            elif rid == JIT_CODE_UNWINDING_INFO:
                pending_unwind = _unwinding(body)
        except struct.error:
            out.skipped += 1
    out.functions = [by_start[s] for s in sorted(by_start)]
    return out


def _code_load(body: bytes, unwind: bytes | None) -> JitFunction | None:
    _pid, _tid, _vma, addr, csize, _index = CODE_LOAD.unpack_from(body)
    name_end = body.find(b"\0", CODE_LOAD.size, CODE_LOAD.size + MAX_NAME + 1)
    if name_end < 0 or csize == 0 or addr + csize >= 1 << 64:
        return None
    code = body[name_end + 1:]
    if len(code) < csize:
        return None  # the record does not hold the code it announces
    name = body[CODE_LOAD.size:name_end].decode("utf-8", "surrogateescape")
    return JitFunction(addr, csize, name, code[:KEPT_CODE], unwind)


def _unwinding(body: bytes) -> bytes | None:
    """The ``.eh_frame`` of an unwinding-information record (``.eh_frame_hdr`` follows it)."""
    unwinding_size, hdr_size, _mapped = UNWINDING.unpack_from(body)
    data = body[UNWINDING.size:]
    if unwinding_size > len(data) or hdr_size > unwinding_size:
        return None
    eh_frame = data[:unwinding_size - hdr_size]
    return eh_frame or None


def jitdump_path_name(pid: int) -> str:
    return f"jit-{pid}.dump"
