"""Build-ids of the files the recorded processes map, read from the files themselves.

The recorder does not ask the kernel for build-ids in MMAP2 records (``attr.build_id``) by
default: the kernel sets ``PERF_RECORD_MISC_MMAP_BUILD_ID`` on the MMAP2 header it shares
across every event of that mmap and never clears it, so another tool's events on the same
process get the flag over bytes that are really maj/min/ino (a concurrent ``perf record``
aborts on them, measured). perf does not set it either.

Instead each mapped file is read when the recorder first sees it — an MMAP2 record in a ring
buffer or a line of /proc/PID/maps — and again at the end for those that could not be read
then. MMAP2 keeps maj/min/ino/ino_generation, the identity of the mapped inode; the file at
the path is trusted only when ``stat`` shows that same inode, so a binary replaced since it
was mapped (a rebuild, a package upgrade) never lends its build-id to the recorded one. On a
stacking file system (overlayfs: ``stat`` shows the overlay's anonymous device, major 0,
while MMAP2 names the real file system) the identity cannot be compared and the file is
trusted as perf would.

Containers (docs/containers.md): a process in its own mount namespace maps files the recorder
cannot see at the same path, or sees another file there. Each file is therefore read through
the process's own view first — ``/proc/PID/map_files/START-END`` (the mapped file itself,
whatever its path), then ``/proc/PID/root/PATH`` — and the host path only after those, while
the process lives. A file read through the process's view that is not the file at the host path
(another inode, or none) is "namespace-only": it is kept open (one descriptor each, at most
:data:`MAX_KEPT`) so that its symbols can be packed into the capture at the end of recording
(``profiler/record/packing.py``) even after the container has stopped. A file without a
build-id gets a content identity instead (``profiler/format/fileident.py``): size, mtime and
a digest of its ELF headers and text, which is what a report checks a local file against.
"""

from __future__ import annotations

import os
import stat

from profiler.format.buildid import build_id_of_fd
from profiler.format.fileident import content_identity_of_fd
from profiler.format.abi import PERF_RECORD_MISC_MMAP_DATA, PERF_RECORD_MMAP2
from profiler.record.perfmaps import NamespacedPerfMaps, is_jit_memory
from profiler.value import Value

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

Identity = tuple[int, int, int, int]  # maj, min, ino, ino_generation (MMAP2's fields)

MATCH, UNVERIFIABLE, REPLACED, UNREADABLE = "match", "unverifiable", "replaced", "unreadable"
#: where a build-id or identity was read: the host path, or the process's own view of the file
FROM_HOST, FROM_MAP_FILES, FROM_ROOT = "file", "map_files", "root"
MAX_KEPT = 256  # namespace-only files kept open for packing at the end
MAX_RETRIES = 8  # reads of a file not read yet, through later processes that map it
PROC = "/proc"
MEMFD = "/memfd:"  # memfd_create's names: anonymous memory to a report (JIT maps), never packed


class MappedFile(Value):
    """One (path, inode) the recorded processes mapped, and what its file said."""

    __slots__ = _fields = ("path", "identity", "build_id", "state", "source", "content", "namespace")

    def __init__(self, path: str, identity: Identity, build_id: str | None = None, state: str = UNREADABLE,
                 source: str = FROM_HOST, content: dict[str, Any] | None = None, namespace: bool = False) -> None:
        self.path = path
        self.identity = identity
        self.build_id = build_id  # hex
        self.state = state  # MATCH / UNVERIFIABLE: build_id (or content) is the mapped file's
        self.source = source  # FROM_HOST / FROM_MAP_FILES / FROM_ROOT
        self.content = content  # size, mtime_ns, digest: a file without a build-id
        self.namespace = namespace  # read through the process's view; the host path is another file

    @property
    def known(self) -> bool:
        return self.state in (MATCH, UNVERIFIABLE)

    def entry(self) -> dict[str, Any]:
        """The ``buildids`` metadata entry (docs/format.md)."""
        maj, mnr, ino, gen = self.identity
        out: dict[str, Any] = {"path": self.path, "maj": maj, "min": mnr, "ino": ino, "ino_generation": gen}
        if self.known and self.build_id:
            out["build_id"] = self.build_id
            out["source"] = self.source
        elif self.known and self.content is not None:
            out["content"] = dict(self.content)
            out["source"] = self.source
        if self.namespace:
            out["namespace"] = True
        if self.state == REPLACED:
            out["replaced"] = True
        return out


def _same_inode(st: os.stat_result, identity: Identity) -> bool:
    maj, mnr, ino, _ = identity
    return (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) == (maj, mnr, ino)


def _state_of(st: os.stat_result, identity: Identity) -> str:
    if _same_inode(st, identity):
        return MATCH
    maj, mnr, _, _ = identity
    if identity == (0, 0, 0, 0) or (os.major(st.st_dev) == 0
                                    and (os.major(st.st_dev), os.minor(st.st_dev)) != (maj, mnr)):
        return UNVERIFIABLE  # no identity recorded, or a stacking file system
    return REPLACED


def identity_state(path: str, identity: Identity) -> str:
    """Is the file now at ``path`` the inode MMAP2 named?"""
    try:
        st = os.stat(path)
    except OSError:
        return UNREADABLE
    return _state_of(st, identity)


def _open(path: str) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _views(path: str, pid: int, start: int, end: int) -> list[tuple[str, str]]:
    """Where the mapped file may be opened, best first: the process's views, then the host path.
    A pid of 0 or less, or the recorder's own pid namespace root (pid 1 maps are views too),
    has no view of its own but the host's."""
    out: list[tuple[str, str]] = []
    if pid > 0:
        if end > start:
            out.append((FROM_MAP_FILES, f"{PROC}/{pid}/map_files/{start:x}-{end:x}"))
        out.append((FROM_ROOT, f"{PROC}/{pid}/root{path}"))
    out.append((FROM_HOST, path))
    return out


class MappedFiles:
    """Every mapped file of a recording, keyed by (path, identity); read on first sight."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, Identity], MappedFile] = {}
        self.from_kernel: dict[str, str] = {}  # path -> hex, from MMAP2's build-id form
        self.kept: dict[tuple[str, Identity], int] = {}  # namespace-only files, open for packing
        self.perf_maps = NamespacedPerfMaps()  # JIT maps of processes in other namespaces
        self._retries: dict[tuple[str, Identity], int] = {}  # reads retried for an unread file

    def seen(self, path: str, identity: Identity, pid: int = 0, start: int = 0, end: int = 0) -> None:
        """An MMAP2 (or /proc maps line) of ``path`` by process ``pid`` at [start, end): read
        the file if this inode is new."""
        key = (path, identity)
        known = self.files.get(key)
        if known is not None:
            if not known.known and pid > 0 and self._retries.get(key, 0) < MAX_RETRIES:
                # another process mapped it: its view may still be there (the first had exited)
                self._retries[key] = self._retries.get(key, 0) + 1
                self._read(known, pid, start, end)
            return
        if not path.startswith("/"):
            return
        found = MappedFile(path, identity)
        self._read(found, pid, start, end)
        self.files[key] = found

    def seen_records(self, records: Iterable[Any]) -> None:
        """The MMAP2 records synthesized from /proc (executable maps only)."""
        for rec in records:
            if rec.type == PERF_RECORD_MMAP2 and rec.pid not in (-1, 0xFFFFFFFF) and is_jit_memory(rec.filename):
                self.perf_maps.seen_process(rec.pid)
            if rec.type == PERF_RECORD_MMAP2 and not rec.misc & PERF_RECORD_MISC_MMAP_DATA:
                self.seen(rec.filename, (rec.maj, rec.min, rec.ino, rec.ino_generation), rec.pid, rec.addr,
                          rec.addr + rec.len)

    def seen_with_build_id(self, path: str, build_id: bytes) -> None:
        """A validated kernel build-id (``--buildid-mmap``): no need to read the file."""
        if path.startswith("/") and build_id:
            self.from_kernel.setdefault(path, build_id.hex())

    def _read(self, found: MappedFile, pid: int = 0, start: int = 0, end: int = 0) -> None:
        state = UNREADABLE
        for source, place in _views(found.path, pid, start, end):
            fd = _open(place)
            if fd is None:
                continue
            try:
                st = os.fstat(fd)
                state = _state_of(st, found.identity)
                if state == REPLACED and source != FROM_HOST:
                    continue  # remapped since, in the process's view: try the next view
                if state in (MATCH, UNVERIFIABLE):
                    found.source = source
                    found.build_id = build_id_of_fd(fd)
                    found.content = None if found.build_id else content_identity_of_fd(fd)
                    if source != FROM_HOST and not found.path.startswith(MEMFD) and not _host_is(found.path, st):
                        found.namespace = True
                        fd = self._keep(found, fd)
                break
            finally:
                if fd is not None:  # None: kept open for packing
                    os.close(fd)
        found.state = state

    def _keep(self, found: MappedFile, fd: int) -> int | None:
        """Keep ``fd`` open for packing (None: kept, do not close it); at most MAX_KEPT files."""
        if len(self.kept) >= MAX_KEPT:
            return fd
        self.kept[(found.path, found.identity)] = fd
        return None

    def finish(self) -> None:
        """At the end: try again the files that could not be read or were not the mapped one
        (a file put back, or made readable, since)."""
        for found in self.files.values():
            if not found.known:
                self._read(found)

    def close(self) -> None:
        self.perf_maps.close()
        for fd in self.kept.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.kept.clear()

    @property
    def replaced(self) -> list[str]:
        return sorted({f.path for f in self.files.values() if f.state == REPLACED})

    def entries(self) -> list[dict[str, Any]]:
        """The ``buildids`` metadata entries: the kernel's where it gave one, then one per
        (path, inode) read from the files (those without a build-id too: their identity tells
        a report whether the file it finds is the recorded one)."""
        out: list[dict[str, Any]] = [
            {"path": path, "build_id": bid, "source": "mmap2"} for path, bid in sorted(self.from_kernel.items())
        ]
        for (path, _), found in sorted(self.files.items()):
            if path in self.from_kernel:
                continue
            out.append(found.entry())
        return out


def _host_is(path: str, st: os.stat_result) -> bool:
    """Whether the recorder's own ``path`` is the file ``st`` describes."""
    try:
        host = os.stat(path)
    except OSError:
        return False
    return (host.st_dev, host.st_ino) == (st.st_dev, st.st_ino)

