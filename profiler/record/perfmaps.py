"""JIT perf maps of processes in other namespaces: ``/proc/PID/root/tmp/perf-<NSpid>.map``.

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
            return  # the recorder's own view: the report finds /tmp/perf-PID.map itself
        try:
            fd = os.open(f"{PROC}/{pid}/root/tmp", os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        self.roots[pid] = (fd, nspid)

    def read(self, pid: int) -> str | None:
        """The text of the process's map through its root, or None."""
        fd, nspid = self.roots[pid]
        try:
            mapfd = os.open(f"perf-{nspid}.map", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                            dir_fd=fd)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(mapfd).st_mode):
                return None
            with os.fdopen(mapfd, "rb", closefd=False) as fh:
                return fh.read(MAX_MAP_BYTES).decode("utf-8", "surrogateescape")
        except OSError:
            return None
        finally:
            os.close(mapfd)

    def payloads(self) -> list[dict[str, Any]]:
        """One ``jit`` ``symbols`` entry per process whose map was found (the symbol code,
        and numpy with it, is loaded only when there is one)."""
        found = [(pid, text) for pid in sorted(self.roots) if (text := self.read(pid)) is not None]
        if not found:
            return []
        from profiler.symbols.perfmap import parse_perf_map, perf_map_path

        out = []
        for pid, text in found:
            table, _ = parse_perf_map(text)
            if not len(table):
                continue
            out.append({"kind": "jit", "path": str(perf_map_path(pid)), "build_id": None, "pid": pid,
                        "layout": None, "symtab": table.to_packed(), "count": len(table), "coverage": "all",
                        "source": "namespace", "namespace_pid": self.roots[pid][1]})
        return out

    def close(self) -> None:
        for fd, _ in self.roots.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.roots.clear()


def is_jit_memory(name: str) -> bool:
    """Anonymous executable memory, as ``profiler/report/maps.py`` tells it (``Dso.is_anon``)."""
    return name in ("//anon", "[anon]", "") or name.startswith(("[anon:", "/memfd:"))
