"""Records for what existed before recording began, synthesized from /proc.

The kernel reports a COMM, FORK or MMAP2 only when it happens; for processes that were
already running (``-p``, ``-a``) the recorder writes them itself, as perf does: per thread a
COMM from ``/proc/PID/task/TID/comm`` (and a FORK from the process's main thread for every
other thread), per process an MMAP2 for each executable mapping in ``/proc/PID/maps`` (data
mappings too with ``--data-mmaps``), with ``--namespaces`` per thread a NAMESPACES from the
``/proc/PID/task/TID/ns/`` links, plus the kernel's own map, an MMAP of
``[kernel.kallsyms]_text`` starting at ``_text`` from /proc/kallsyms, and one per module from
/proc/modules. Records are encoded with the first event's layout (``sample_id_all``
trailer included, time 0) so the reader decodes them like kernel records.

A synthesized record is a namespace of the attributes ``abi.encode_fields`` reads: ``type``,
``misc``, the body's fields by their names in ``abi.BODY_SPECS`` (the kernel's), and
``sample_id``. Not ``profiler.format.records``' classes, whose import would cost every
recording about 14 ms of CPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
import os
from types import SimpleNamespace

from profiler.format import abi as R
from profiler.value import Frozen

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

PROC = "/proc"
KERNEL_PID = 0xFFFFFFFF  # perf's pid -1 for kernel maps, as the u32 it is on disk
KERNEL_MAP_NAME = "[kernel.kallsyms]_text"
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
MAP_SHARED, MAP_PRIVATE = 1, 2


class MapEntry(Frozen):
    """One line of /proc/PID/maps."""

    __slots__ = _fields = ("start", "end", "perms", "pgoff", "maj", "min", "ino", "path")

    def __init__(self, start: int, end: int, perms: str, pgoff: int, maj: int, min: int, ino: int, path: str) -> None:
        self.start = start
        self.end = end
        self.perms = perms
        self.pgoff = pgoff
        self.maj = maj
        self.min = min
        self.ino = ino
        self.path = path

    @property
    def prot(self) -> int:
        return (
            (PROT_READ if "r" in self.perms else 0)
            | (PROT_WRITE if "w" in self.perms else 0)
            | (PROT_EXEC if "x" in self.perms else 0)
        )

    @property
    def flags(self) -> int:
        return MAP_SHARED if "s" in self.perms else MAP_PRIVATE

    @property
    def executable(self) -> bool:
        return "x" in self.perms


def parse_maps_line(line: str) -> MapEntry | None:
    """``start-end perms offset maj:min inode [path]`` (proc(5)); None for a malformed line."""
    parts = line.split(None, 5)
    if len(parts) < 5:
        return None
    try:
        start_s, _, end_s = parts[0].partition("-")
        maj_s, _, min_s = parts[3].partition(":")
        return MapEntry(
            start=int(start_s, 16),
            end=int(end_s, 16),
            perms=parts[1],
            pgoff=int(parts[2], 16),
            maj=int(maj_s, 16),
            min=int(min_s, 16),
            ino=int(parts[4]),
            path=parts[5].rstrip("\n") if len(parts) > 5 else "",
        )
    except ValueError:
        return None


def read_maps(pid: int, proc: str | os.PathLike[str] = PROC) -> list[MapEntry]:
    try:
        with open(os.path.join(proc, str(pid), "maps"), errors="replace") as stream:
            text = stream.read()
    except OSError:
        return []
    return [e for e in map(parse_maps_line, text.splitlines()) if e is not None]


def mapping_name(entry: MapEntry) -> str:
    """perf's names: the file, ``[vdso]``-style pseudo names, ``//anon`` for anonymous text."""
    return entry.path or "//anon"


def read_comm(pid: int, tid: int | None = None, proc: str | os.PathLike[str] = PROC) -> str | None:
    base = os.path.join(proc, str(pid)) if tid is None else os.path.join(proc, str(pid), "task", str(tid))
    try:
        with open(os.path.join(base, "comm"), errors="replace") as stream:
            return stream.read().rstrip("\n")
    except OSError:
        return None


def thread_ids(pid: int, proc: str | os.PathLike[str] = PROC) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(os.path.join(proc, str(pid), "task")) if t.isdigit())
    except OSError:
        return []


def all_pids(proc: str | os.PathLike[str] = PROC) -> list[int]:
    return sorted(int(p) for p in os.listdir(proc) if p.isdigit())


def _record(rtype: int, misc: int, sample_id: SimpleNamespace, **fields: Any) -> SimpleNamespace:
    return SimpleNamespace(type=rtype, misc=misc, sample_id=sample_id, **fields)


def _sid(pid: int, tid: int, ident: int) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, tid=tid, time=0, id=ident, cpu=0, res=0, identifier=ident)


def _comm(pid: int, tid: int, comm: str, misc: int, ident: int) -> SimpleNamespace:
    return _record(R.PERF_RECORD_COMM, misc, _sid(pid, tid, ident), pid=pid, tid=tid, comm=comm)


def namespace_links(pid: int, tid: int, proc: str | os.PathLike[str] = PROC) -> tuple[tuple[int, int], ...]:
    """(dev, inode) of each of the thread's namespaces, in perf_event.h's order, from
    ``/proc/PID/task/TID/ns/NAME`` (the kernel puts the same pair in a PERF_RECORD_NAMESPACES:
    the nsfs inode and its superblock's device, new_encode_dev'd); (0, 0) for a namespace the
    kernel does not show or that cannot be read, as perf leaves it."""
    base = os.path.join(proc, str(pid), "task", str(tid), "ns")
    links = []
    for name in R.NAMESPACE_NAMES:
        try:
            st = os.stat(os.path.join(base, name))
        except OSError:
            links.append((0, 0))
            continue
        links.append((encode_dev(st.st_dev), st.st_ino))
    return tuple(links)


def encode_dev(dev: int) -> int:
    """The kernel's new_encode_dev() of a device number (major and minor as stat gives them)."""
    major, minor = os.major(dev), os.minor(dev)
    return (minor & 0xFF) | (major << 8) | ((minor & ~0xFF) << 12)


def namespaces_record(pid: int, tid: int, ident: int, proc: str | os.PathLike[str] = PROC) -> SimpleNamespace:
    """A thread's PERF_RECORD_NAMESPACES, as perf synthesizes it for ``--namespaces``."""
    return _record(R.PERF_RECORD_NAMESPACES, 0, _sid(pid, tid, ident),  # misc 0, as the kernel's
                   pid=pid, tid=tid, namespaces=namespace_links(pid, tid, proc))


def process_records(
    pid: int, ident: int, *, data_mmaps: bool = False, namespaces: bool = False,
    proc: str | os.PathLike[str] = PROC,
) -> Iterator[SimpleNamespace]:
    """COMM (+ FORK per extra thread) and MMAP2 records for one running process; with
    ``namespaces`` a NAMESPACES record per thread after its COMM (``--namespaces``)."""
    comm = read_comm(pid, proc=proc)
    if comm is None:
        return  # it exited meanwhile
    yield _comm(pid, pid, comm, R.PERF_RECORD_MISC_USER, ident)
    if namespaces:
        yield namespaces_record(pid, pid, ident, proc)
    for tid in thread_ids(pid, proc):
        if tid == pid:
            continue
        yield _record(R.PERF_RECORD_FORK, R.PERF_RECORD_MISC_USER, _sid(pid, tid, ident),
                      pid=pid, ppid=pid, tid=tid, ptid=pid, time=0)
        yield _comm(pid, tid, read_comm(pid, tid, proc) or comm, R.PERF_RECORD_MISC_USER, ident)
        if namespaces:
            yield namespaces_record(pid, tid, ident, proc)
    for entry in read_maps(pid, proc):
        if not entry.executable and not (data_mmaps and entry.path):
            continue
        misc = R.PERF_RECORD_MISC_USER | (0 if entry.executable else R.PERF_RECORD_MISC_MMAP_DATA)
        yield _record(
            R.PERF_RECORD_MMAP2, misc, _sid(pid, pid, ident),
            pid=pid, tid=pid, addr=entry.start, len=entry.end - entry.start, pgoff=entry.pgoff,
            maj=entry.maj, min=entry.min, ino=entry.ino, ino_generation=0,
            prot=entry.prot, flags=entry.flags, filename=mapping_name(entry),
        )


def cgroup2_root(mounts: str = "/proc/self/mounts") -> str | None:
    """Where the cgroup2 hierarchy is mounted (``/sys/fs/cgroup``, or ``/sys/fs/cgroup/unified``
    on a hybrid hierarchy), None without one."""
    try:
        with open(mounts, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return fields[1].replace("\\040", " ")
    except OSError:
        return None
    return None


def cgroup_records(ident: int, root: str | None = None) -> Iterator[SimpleNamespace]:
    """PERF_RECORD_CGROUP for every cgroup that exists now, as perf synthesizes them: the id
    (a cgroup2 directory's inode number is its kernfs id, which PERF_SAMPLE_CGROUP carries)
    and the path from the hierarchy's root ("/" for the root)."""
    root = cgroup2_root() if root is None else root
    if root is None:
        return
    for here, dirs, _ in os.walk(root):
        dirs.sort()
        try:
            ino = os.stat(here).st_ino
        except OSError:
            continue  # removed meanwhile
        rel = "/" + os.path.relpath(here, root) if here != root else "/"
        yield _record(R.PERF_RECORD_CGROUP, 0, _sid(0, 0, ident), id=ino, path=rel)


def idle_records(ident: int) -> Iterator[SimpleNamespace]:
    """pid 0 is the idle task; system-wide samples land there (perf names it swapper)."""
    yield _comm(0, 0, "swapper", R.PERF_RECORD_MISC_KERNEL, ident)


def kernel_text_address(kallsyms_text: str) -> int | None:
    """``_text`` from a /proc/kallsyms text (None when missing or hidden as 0 by kptr_restrict);
    the recorder reads only the head of the file (profiler.record.kallsyms.read_head)."""
    for line in kallsyms_text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] in ("_text", "_stext"):
            address = int(parts[0], 16)
            return address or None
    return None


def parse_modules(modules_text: str) -> list[tuple[str, int, int]]:
    """(name, address, size) per line of /proc/modules (``name size refs deps state addr``)."""
    out = []
    for line in modules_text.splitlines():
        parts = line.split()
        if len(parts) >= 6:
            try:
                address = int(parts[5], 16)
                size = int(parts[1])
            except ValueError:
                continue
            if address:
                out.append((parts[0], address, size))
    return out


def kernel_records(text: int | None, modules_text: str, ident: int) -> Iterator[SimpleNamespace]:
    """The kernel map from ``text`` (``_text``; to the end of the address space, pgoff = start,
    as perf does) and modules."""
    sid = _sid(KERNEL_PID, 0, ident)

    def kernel_map(addr: int, length: int, pgoff: int, filename: str) -> SimpleNamespace:
        return _record(R.PERF_RECORD_MMAP, R.PERF_RECORD_MISC_KERNEL, sid,
                       pid=KERNEL_PID, tid=0, addr=addr, len=length, pgoff=pgoff, filename=filename)

    if text is not None:
        yield kernel_map(text, (1 << 64) - text, text, KERNEL_MAP_NAME)
    for name, address, size in parse_modules(modules_text):
        yield kernel_map(address, size, 0, f"[{name}]")


def encode_all(records: Iterable[SimpleNamespace], layout: R.SampleLayout) -> bytes:
    return b"".join(R.encode_fields(rec.type, rec.misc, rec, layout) for rec in records)



