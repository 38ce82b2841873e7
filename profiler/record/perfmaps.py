"""JIT maps and dumps of the recorded processes, packed into the capture at the end.

Every process seen mapping anonymous executable memory (below) has its ``/tmp/perf-<pid>.map``
and ``/tmp/jit-<pid>.dump`` (CPython's perf support, other JITs) read at the end of recording
and packed, so another machine names (and, for jitdumps, unwinds) its JIT code: at most
:data:`MAX_PROCESSES` processes. The files live on after their process; a process that wrote
neither costs two failed opens. The rest of this note is about processes in other namespaces:
``/proc/PID/root/tmp/perf-<NSpid>.map``.

A JIT writes ``/tmp/perf-<pid>.map`` with the pid it sees and the ``/tmp`` it sees. In a pid
namespace that pid is the namespace's (the last ``NSpid`` of ``/proc/PID/status``), and in a
mount namespace that ``/tmp`` is the process's own. A report looks for ``/tmp/perf-<host
pid>.map`` on its machine, which has neither.

So the recorder, on its first sight of a process mapping anonymous executable memory (an MMAP2
record of ``//anon``, ``[anon:...]`` or ``/memfd:...``: where JITs put code), checks whether the
process lives in another namespace (another pid as it sees itself, or another root than the
recorder's): if so it keeps a descriptor of the process's ``/tmp`` directory (``O_PATH``; at
most :data:`MAX_ROOTS`) and its namespace pid. At the end of recording the map is read through
that directory — after the process has exited too: the descriptor keeps a private ``/tmp``
file system mounted for it alone after its namespace is gone — and packed
into the capture as a ``jit`` ``symbols`` entry for the host pid (the layout ``profiler archive``
writes), ``source`` ``namespace``. Per new process that costs one read of
``/proc/PID/status`` and one ``stat``, for JIT processes only.

A hostile container may make ``tmp`` or the map a symbolic link pointing anywhere on the host,
and a link is resolved against the recorder's root, not the container's: neither is followed
(``O_NOFOLLOW`` on both), and only a regular file is read, at most :data:`MAX_MAP_BYTES`.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

MAX_ROOTS = 256
MAX_PROCESSES = 4096  # processes of the recorder's own view whose JIT files are packed
MAX_MAP_BYTES = 64 << 20
PROC = "/proc"


def namespace_pid(pid: int, proc: str = PROC) -> int | None:
    """The pid the process sees itself as (the last ``NSpid`` field), None when unreadable."""
    try:
        with open(f"{proc}/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class NamespacedPerfMaps:
    """The processes in other namespaces, and their JIT maps at the end."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.roots: dict[int, tuple[int, int]] = {}  # host pid -> (its /tmp's fd, namespace pid)
        self.host: list[int] = []  # processes of the recorder's own view, in the order seen
        self.tmp = "/tmp"
        try:
            own = os.stat("/")
            self._own_root: tuple[int, int] | None = (own.st_dev, own.st_ino)
        except OSError:
            self._own_root = None

    def seen_process(self, pid: int) -> None:
        """A process mapped anonymous executable memory (a JIT, perhaps)."""
        if pid in self.seen or pid <= 0:
            return
        self.seen.add(pid)
        if len(self.roots) >= MAX_ROOTS:
            return
        nspid = namespace_pid(pid, PROC)
        try:
            root = os.stat(f"{PROC}/{pid}/root")
        except OSError:
            return
        if nspid is None or (nspid == pid and (root.st_dev, root.st_ino) == self._own_root):
            if len(self.host) < MAX_PROCESSES:
                self.host.append(pid)  # the recorder's own view: its /tmp
            return
        try:
            fd = os.open(f"{PROC}/{pid}/root/tmp", os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        self.roots[pid] = (fd, nspid)

    def read(self, pid: int, name: str = "perf-{}.map") -> bytes | None:
        """A JIT file of the process (``name`` with its pid as it sees itself) through its
        root, or in the recorder's ``/tmp`` for a process of its own view; None if absent."""
        if pid in self.roots:
            fd, nspid = self.roots[pid]
            return _read_regular(name.format(nspid), fd)
        try:
            fd = os.open(self.tmp, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return _read_regular(name.format(pid), fd)
        finally:
            os.close(fd)

    def payloads(self, namespaced: bool = True) -> list[dict[str, Any]]:
        """One ``jit`` ``symbols`` entry per process whose map or dump was found (the symbol
        code, and numpy with it, is loaded only when there is one); ``namespaced``: those of
        processes in other namespaces too."""
        pids = sorted(set(self.host) | (set(self.roots) if namespaced else set()))
        files = [(pid, self.read(pid), self.read(pid, "jit-{}.dump")) for pid in pids]
        found = [f for f in files if f[1] is not None or f[2] is not None]
        if not found:
            return []
        from profiler.errors import FormatError
        from profiler.symbols.jitdump import parse_jitdump
        from profiler.symbols.jitsources import JitSymbols
        from profiler.symbols.perfmap import parse_perf_map, perf_map_path

        out = []
        for pid, text, dump_bytes in found:
            table = None if text is None else parse_perf_map(text.decode("utf-8", "surrogateescape"))[0]
            try:
                dump = None if dump_bytes is None else parse_jitdump(dump_bytes)
            except FormatError:
                dump = None
            syms = JitSymbols.of(table, dump, "")
            if syms.table is None or not len(syms.table):
                continue
            payload = {"kind": "jit", "path": str(perf_map_path(pid)), "build_id": None, "pid": pid,
                       "layout": None, "symtab": syms.table.to_packed(), "count": len(syms.table),
                       "coverage": "all", "source": "namespace" if pid in self.roots else "recording"}
            if pid in self.roots:
                payload["namespace_pid"] = self.roots[pid][1]
            if syms.blobs.start:
                payload["code"] = syms.blobs.to_packed()
            out.append(payload)
        return out

    def close(self) -> None:
        for fd, _ in self.roots.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.roots.clear()


def _read_regular(name: str, dir_fd: int) -> bytes | None:
    """A regular file in the directory ``dir_fd``, neither it nor a link followed; at most
    :data:`MAX_MAP_BYTES`."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(MAX_MAP_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def is_jit_memory(name: str) -> bool:
    """Anonymous executable memory, as ``profiler/report/maps.py`` tells it (``Dso.is_anon``)."""
    return name in ("//anon", "[anon]", "") or name.startswith(("[anon:", "/memfd:"))
