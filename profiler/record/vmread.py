"""``process_vm_readv(2)``: read another process's memory without stopping it (the one
ctypes binding of the Python reader, ``profiler/record/pyreader.py``).

It needs the permission ``ptrace`` would need (``PTRACE_MODE_ATTACH_REALCREDS``: the same
user and Yama's ``ptrace_scope`` allowing it, or CAP_SYS_PTRACE). A read that fails or comes
back short is an :class:`OSError` (or ``None`` from :meth:`Memory.try_read`), never a partial
buffer taken for a whole one.
"""

from __future__ import annotations

import ctypes
import os


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)  # the process's own libc (ctypes.util would import re, shutil)
_readv = _libc.process_vm_readv
_readv.restype = ctypes.c_ssize_t
_readv.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.POINTER(_IoVec), ctypes.c_ulong,
                   ctypes.c_ulong]

MAX_READ = 1 << 20  # one read never asks for more (a damaged length in the target's memory)


SMALL = 8192  # reads up to this size go through one preallocated buffer
MAX_VECTORS = 32  # reads in one read_many call (the kernel takes up to IOV_MAX, 1024)


class Memory:
    """Reads of one process's memory. Small reads reuse one buffer and its iovecs: a read is
    then about 3 us of Python and one system call."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.reads = 0
        self._buf = ctypes.create_string_buffer(SMALL * MAX_VECTORS)
        self._base = ctypes.addressof(self._buf)
        self._local = (_IoVec * MAX_VECTORS)()
        self._remote = (_IoVec * MAX_VECTORS)()

    def read(self, address: int, size: int) -> bytes:
        """``size`` bytes at ``address``, or OSError (unmapped, no permission, process gone)."""
        if size > SMALL:
            return self._read_large(address, size)
        return self.read_many([(address, size)])[0]

    def read_many(self, spans: list[tuple[int, int]]) -> list[bytes]:
        """The bytes of each (address, size) span, at most :data:`MAX_VECTORS` of at most
        :data:`SMALL` bytes, in one system call; OSError unless every byte was read."""
        if not 0 < len(spans) <= MAX_VECTORS:
            raise OSError(f"cannot read {len(spans)} spans at once")
        local, remote, base = self._local, self._remote, self._base
        total = 0
        for i, (address, size) in enumerate(spans):
            if not 0 < size <= SMALL or not 0 < address < 1 << 64:
                raise OSError(f"cannot read {size} bytes at {address:#x}")
            local[i].iov_base, local[i].iov_len = base + i * SMALL, size
            remote[i].iov_base, remote[i].iov_len = address, size
            total += size
        self.reads += 1
        got = _readv(self.pid, local, len(spans), remote, len(spans), 0)
        if got != total:
            err = ctypes.get_errno() if got < 0 else 0
            raise OSError(err, os.strerror(err) if err else f"short read at {spans[0][0]:#x}")
        return [ctypes.string_at(base + i * SMALL, size) for i, (_, size) in enumerate(spans)]

    def _read_large(self, address: int, size: int) -> bytes:
        if size > MAX_READ or not 0 < address < 1 << 64:
            raise OSError(f"cannot read {size} bytes at {address:#x}")
        buf = ctypes.create_string_buffer(size)
        local = _IoVec(ctypes.cast(buf, ctypes.c_void_p), size)
        remote = _IoVec(address, size)
        self.reads += 1
        got = _readv(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got != size:
            err = ctypes.get_errno() if got < 0 else 0
            raise OSError(err, os.strerror(err) if err else f"short read at {address:#x}")
        return buf.raw

    def try_read(self, address: int, size: int) -> bytes | None:
        try:
            return self.read(address, size)
        except OSError:
            return None
