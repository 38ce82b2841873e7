"""Read a running CPython's Python stacks from outside (``--python-lines``).

Per read: ``_PyRuntime`` → the first interpreter → its threads (``next``) → each thread's
current frame (3.11/3.12 through ``cframe``) → ``previous`` … to the outermost frame. A frame
owned by the C stack (3.12+ shim frames) is skipped. Per frame the code object's address and
the instruction's byte offset into its bytecode (the frame's instruction pointer less the
code object's ``co_code_adaptive``) are kept; a code object is read once (qualname, filename,
first line, location table) and cached by address, with its first line and table pointer as a
cheap check that the address still holds the same object (a freed code object's memory may
hold another one later: then it is read again and gets a new id).

Nothing is trusted: a pointer that cannot be read, a chain longer than :data:`MAX_DEPTH` or a
thread list longer than :data:`MAX_THREADS` ends that walk; a reader of an unknown version
reads nothing. Offsets: ``profiler/record/pyoffsets.py``; the runtime: ``pyfind.py``.
"""

from __future__ import annotations

import struct

from profiler.record.pyfind import Interpreter
from profiler.record.pyoffsets import DEBUG_SIZE, OWNED_BY_CSTACK, Offsets, for_version, from_debug_offsets
from profiler.record.vmread import MAX_VECTORS, Memory
from profiler.value import Value

MAX_DEPTH = 1024
MAX_THREADS = 256
MAX_STRING = 4096
MAX_LINETABLE = 1 << 20
PAGE = 4096  # the smallest page: a read within the page of a readable byte cannot fail
_PTR = struct.Struct("=Q")
_I32 = struct.Struct("=i")


class Code(Value):
    """One code object as read: what the capture's code table stores."""

    __slots__ = _fields = ("id", "qualname", "filename", "firstlineno", "linetable")

    def __init__(self, id: int, qualname: str, filename: str, firstlineno: int, linetable: bytes) -> None:
        self.id = id
        self.qualname = qualname
        self.filename = filename
        self.firstlineno = firstlineno
        self.linetable = linetable


class UnknownPython(Exception):
    """The process's runtime is of a version the reader has no offsets for."""


def offsets_for(memory: Memory, interp: Interpreter) -> Offsets:
    """3.13+: the runtime's own debug offsets; 3.11, 3.12: the tables. UnknownPython else."""
    if interp.version >= (3, 13):
        found = from_debug_offsets(memory.try_read(interp.runtime, DEBUG_SIZE) or b"")
    else:
        found = for_version(*interp.version)
    if found is None:
        raise UnknownPython(f"Python {interp.version[0]}.{interp.version[1]}")
    return found


class ProcessReader:
    """The Python stacks of one process. :meth:`read` gives (native tid, frames) per thread,
    frames innermost first as (code id, byte offset); new code objects collect in :attr:`new_codes`."""

    def __init__(self, pid: int, interp: Interpreter, next_id: list[int]) -> None:
        self.pid = pid
        self.memory = Memory(pid)
        self.interp = interp
        self.off = offsets_for(self.memory, interp)
        self.codes: dict[int, tuple[int, int, int, int]] = {}  # address -> (id, firstlineno, table ptr, bytecode)
        self.new_codes: list[Code] = []
        self._next_id = next_id  # shared between processes: ids are the capture's
        self._main = 0  # the main interpreter's address, once the runtime has one

    def _ptr(self, address: int) -> int:
        return int(_PTR.unpack(self.memory.read(address, 8))[0])

    def _state_span(self) -> tuple[int, int]:
        """(offset of the current frame or cframe pointer, bytes of a thread state to read)."""
        o = self.off
        where = o.tstate_current_frame if o.tstate_current_frame >= 0 else o.tstate_cframe
        return where, max(o.tstate_next, o.tstate_native_thread_id, where) + 8

    def threads(self) -> list[tuple[int, bytes]]:
        """The main interpreter's thread states: (address, their first bytes)."""
        o = self.off
        interp = self._main or self._ptr(self.interp.runtime + o.interpreters_head)
        self._main = interp  # the main interpreter stays where it is for the process's life
        out: list[tuple[int, bytes]] = []
        ts = self._ptr(interp + o.interp_threads_head) if interp else 0
        span = self._state_span()[1]
        while ts and len(out) < MAX_THREADS:
            state = self.memory.read(ts, span)
            out.append((ts, state))
            ts = int(_PTR.unpack_from(state, o.tstate_next)[0])
        return out

    def read(self) -> list[tuple[int, list[tuple[int, int]]]]:
        """Every thread's (native tid, frames); a thread whose walk fails is left out, an
        unreadable process gives []."""
        try:
            states = self.threads()
        except OSError:
            return []
        out = []
        for _, state in states:
            try:
                out.append(self._thread(state))
            except OSError:
                continue
        return out

    def _thread(self, state: bytes) -> tuple[int, list[tuple[int, int]]]:
        o = self.off
        where = self._state_span()[0]
        tid = int(_PTR.unpack_from(state, o.tstate_native_thread_id)[0]) & 0xFFFFFFFF
        frame = int(_PTR.unpack_from(state, where)[0])
        if o.tstate_current_frame < 0 and frame:
            frame = self._ptr(frame + o.cframe_current_frame)
        chain: list[tuple[int, int]] = []  # (code object, instruction pointer)
        span = max(o.frame_code, o.frame_previous, o.frame_instr, o.frame_owner) + 8
        lo, window = 0, b""
        while frame and len(chain) < MAX_DEPTH:
            if not lo <= frame <= lo + len(window) - span:
                # frames sit one after another in the thread's data stack, callers below their
                # callees: one read of the frame and its page below it gives most of a chain
                lo = frame & ~(PAGE - 1)
                window = self.memory.read(lo, frame - lo + span)
            at = frame - lo
            code = int(_PTR.unpack_from(window, at + o.frame_code)[0])
            if window[at + o.frame_owner] != OWNED_BY_CSTACK and code:
                chain.append((code, int(_PTR.unpack_from(window, at + o.frame_instr)[0])))
            frame = int(_PTR.unpack_from(window, at + o.frame_previous)[0])
        return tid, self._frames(chain)

    def _frames(self, chain: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """(code id, byte offset) per frame; every code object's first line and line-table
        pointer read in one system call per :data:`MAX_VECTORS` and checked against the cache."""
        o = self.off
        first, table = o.code_firstlineno, o.code_linetable
        lo, size = min(first, table), max(first + 4, table + 8) - min(first, table)
        codes = list(dict.fromkeys(code for code, _ in chain))
        heads: dict[int, tuple[int, int]] = {}
        for at in range(0, len(codes), MAX_VECTORS):
            part = codes[at : at + MAX_VECTORS]
            for code, raw in zip(part, self.memory.read_many([(c + lo, size) for c in part])):
                heads[code] = (_I32.unpack_from(raw, first - lo)[0], int(_PTR.unpack_from(raw, table - lo)[0]))
        out = []
        for code, instr in chain:
            firstlineno, linetable = heads[code]
            cached = self.codes.get(code)
            if cached is None or cached[1] != firstlineno or cached[2] != linetable:
                cached = self._code(code, firstlineno, linetable)
            offset = instr - cached[3]
            out.append((cached[0], offset if 0 <= offset < MAX_LINETABLE * 8 else -1))
        return out

    def _code(self, code: int, firstlineno: int, table: int) -> tuple[int, int, int, int]:
        o = self.off
        qualname = self._str(self._ptr(code + o.code_qualname))
        filename = self._str(self._ptr(code + o.code_filename))
        size = int(_PTR.unpack(self.memory.read(table + o.bytes_size, 8))[0])
        linetable = self.memory.read(table + o.bytes_sval, size) if 0 < size <= MAX_LINETABLE else b""
        ident = self._next_id[0]
        self._next_id[0] += 1
        self.new_codes.append(Code(ident, qualname, filename, firstlineno, linetable))
        entry = (ident, firstlineno, table, code + o.code_adaptive)
        self.codes[code] = entry
        return entry

    def _str(self, address: int) -> str:
        """A compact str object's text (ASCII or 1/2/4-byte kinds); "?" when it is not one."""
        o = self.off
        if not address:
            return "?"
        length = int(_PTR.unpack(self.memory.read(address + o.str_length, 8))[0])
        state = self.memory.read(address + o.str_state, 1)[0]
        kind, compact, ascii_ = (state >> 2) & 7, state >> 5 & 1, state >> 6 & 1
        if not compact or kind not in (1, 2, 4) or length > MAX_STRING:
            return "?"
        data = address + (o.ascii_size if ascii_ else o.compact_size)
        raw = self.memory.read(data, length * kind) if length else b""
        codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        return raw.decode(codec, "replace")
