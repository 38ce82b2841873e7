"""Open the events, map one ring buffer per CPU, and copy raw records into the capture.

Layout (DESIGN.md, measured): ``inherit`` together with ``mmap`` needs one event per CPU
(pid = the target, cpu = each CPU), and PERF_EVENT_IOC_SET_OUTPUT only joins events on the
same CPU, so each CPU has one ring buffer: the first event opened on that CPU owns the mmap
and every other event on the CPU (other event kinds, other threads) is redirected into it.

The loop poll()s every event fd plus a signal wakeup pipe. The kernel wakes us when a
buffer's fill crosses ``wakeup_watermark`` (set with ``watermark = 1``); a pass then copies
``[data_tail, data_head)`` of every buffer and stores data_tail, then writes one RAW frame per
buffer and a ROUND marker with a single ``writev``. The only look at the bytes is a walk over
record headers that counts samples and LOST records and picks MMAP2 records' file names for the
build-id table.
"""

from __future__ import annotations

import functools
import mmap
import os
import select
import struct
import sys
from collections.abc import Callable, Iterator

from profiler.errors import EventError, PermissionDeniedError, ProfilerError, RecordError
from profiler.format import abi as R
from profiler.format.attr import perf_event_attr
from profiler.format.container.writer import CaptureWriter
from profiler.record import perf_event
from profiler.record.kallsyms import SampleSpan
from profiler.record.mapped import MappedFiles
from profiler.record.perfmaps import is_jit_memory
from profiler.record.ringbuf import RingBuffer
from profiler.value import Value

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

    from profiler.record.pylines import PythonLines

_HDR = struct.Struct("=IHH")
_U64 = struct.Struct("=Q")
_MMAP2_FILENAME = 8 + 64  # header + pid/tid/addr/len/pgoff/union(24)/prot/flags
_MMAP2_BUILD_ID = 8 + 32  # build_id_size u8, 3 reserved bytes, build_id[20]; or the inode form:
_MMAP2_INODE = struct.Struct("=IIQQ")  # maj, min, ino, ino_generation
_MMAP2_WHERE = struct.Struct("=I4xQQ")  # pid, (tid), addr, len: after the header
_SAMPLE = R.PERF_RECORD_SAMPLE
_MIN_RUN = 8  # a run of same-size samples shorter than this is walked record by record
_TYPE_SIZE_BYTES = (0, 1, 2, 3, 6, 7)  # the header bytes of type and size (4 and 5 are misc)


def _sample_run(buf: bytes | memoryview, pos: int, size: int, end: int) -> int:
    """How many SAMPLE records of ``size`` bytes follow one another from ``pos`` (at least 1).

    Checked a header byte column at a time (``bytes[start:stop:size]``, and ``lstrip`` counts
    how many leading records have the byte): C loops of microseconds, and no numpy (the
    recorder does not import it)."""
    n = (end - pos) // size
    want = _HDR.pack(_SAMPLE, 0, size)
    stop = pos + n * size
    run = n
    for off in _TYPE_SIZE_BYTES:
        column = buf[pos + off : stop : size]
        column = column if isinstance(column, bytes) else bytes(column)
        run = min(run, n - len(column.lstrip(want[off : off + 1])))
    return max(run, 1)


_MISC_LOW = 4 if sys.byteorder == "little" else 5  # the header byte holding the CPU mode
_KERNEL_MODE = bytes(int(b & R.PERF_RECORD_MISC_CPUMODE_MASK == R.PERF_RECORD_MISC_KERNEL) for b in range(256))


def _kernel_mode(buf: bytes | memoryview, pos: int, size: int, n: int) -> Iterator[int]:
    """Indices of the kernel-mode samples among ``n`` records of ``size`` bytes from ``pos``."""
    column = buf[pos + _MISC_LOW : pos + n * size : size]
    flags = (column if isinstance(column, bytes) else bytes(column)).translate(_KERNEL_MODE)
    i = flags.find(1)
    while i >= 0:
        yield i
        i = flags.find(1, i + 1)


_SIDEBAND = frozenset({R.PERF_RECORD_MMAP, R.PERF_RECORD_MMAP2, R.PERF_RECORD_COMM, R.PERF_RECORD_FORK,
                       R.PERF_RECORD_EXIT, R.PERF_RECORD_NAMESPACES, R.PERF_RECORD_CGROUP})


_KEEP_MMAP2 = 1 << R.PERF_RECORD_MMAP2
_KEEP_SIDEBAND = sum(1 << t for t in _SIDEBAND)


@functools.cache
def _walk_records() -> Callable[..., tuple[int, dict[int, int], int, list[tuple[int, int, int, int]], bytes]] | None:
    """The compiled record walk, or None (not built, or PROFILER_NO_NATIVE=1)."""
    from profiler.native import kernels

    module = kernels()
    return None if module is None else getattr(module, "walk_records", None)


class StreamStats(Value):
    """What the header walk saw: per record type counts, lost samples per CPU, mapped files.

    ``kernel_build_ids`` says whether our events asked for the build-id form of MMAP2
    (``--buildid-mmap``); otherwise the PERF_RECORD_MISC_MMAP_BUILD_ID flag may be another
    tool's (the kernel shares the record header between events) and is ignored."""

    _fields = ("counts", "lost_per_cpu", "mapped", "kernel_build_ids", "raw_bytes", "wakeups", "kernel_floor",
               "span", "kernel_addresses")
    __slots__ = (*_fields, "_kernel_words", "keep_sideband", "sideband")

    def __init__(
        self,
        counts: dict[int, int] | None = None,
        lost_per_cpu: dict[int, int] | None = None,
        mapped: MappedFiles | None = None,
        kernel_build_ids: bool = False,
        raw_bytes: int = 0,
        wakeups: int = 0,
        kernel_floor: int = 0,
        span: SampleSpan | None = None,
        kernel_addresses: set[int] | None = None,
    ) -> None:
        self.counts: dict[int, int] = {} if counts is None else counts
        self.lost_per_cpu: dict[int, int] = {} if lost_per_cpu is None else lost_per_cpu
        self.mapped = MappedFiles() if mapped is None else mapped
        self.kernel_build_ids = kernel_build_ids
        self.raw_bytes = raw_bytes
        self.wakeups = wakeups
        # the ip and callchain words of kernel-mode samples (profiler/record/kallsyms.py), collected
        # when ``kernel_floor`` is set; kernel_code_addresses() are those from kernel_floor up to the
        # callchain context markers
        self.kernel_floor = kernel_floor
        self.span = span
        self.kernel_addresses: set[int] = set() if kernel_addresses is None else kernel_addresses
        self._kernel_words: list[bytes | memoryview] = []
        # --switch-output: copies of the side-band records, carried into the next file (record/rotate.py)
        self.keep_sideband = False
        self.sideband: list[tuple[int, bytes]] = []

    def fresh(self) -> StreamStats:
        """Empty statistics for the next file of a --switch-output recording (the settings
        kept: which build-ids to trust, what counts as a kernel address)."""
        out = StreamStats(kernel_build_ids=self.kernel_build_ids, kernel_floor=self.kernel_floor, span=self.span)
        out.keep_sideband = self.keep_sideband
        return out

    @property
    def samples(self) -> int:
        return self.counts.get(R.PERF_RECORD_SAMPLE, 0)

    @property
    def lost(self) -> int:
        return sum(self.lost_per_cpu.values())

    def scan(self, cpu: int, buf: bytes | memoryview) -> int:
        """Walk the record headers of whole kernel records in ``buf``: in C when the compiled
        kernels are there (``walk_records``: a busy ``--off-cpu`` recording has a sample and two
        switch records per context switch, 5 us each in Python), else :meth:`scan_python`.
        Returns the number of records when every one of them is a sample, else 0 (the
        capture's INDEX frames)."""
        walk = _walk_records()
        if walk is None:
            return self.scan_python(cpu, buf)
        span = self.span
        keep = _KEEP_SIDEBAND if self.keep_sideband else _KEEP_MMAP2
        walked, counts, lost, kept, words = walk(buf, self.kernel_floor or 0, span.ip if span else -1,
                                                 span.callchain if span else -1, span is None, keep)
        for rtype, n in counts.items():
            self.counts[rtype] = self.counts.get(rtype, 0) + n
        if lost:
            self.lost_per_cpu[cpu] = self.lost_per_cpu.get(cpu, 0) + lost
        side: list[bytes] = []
        for rtype, misc, pos, size in kept:
            if rtype == R.PERF_RECORD_MMAP2 and size >= _MMAP2_FILENAME:
                self._mmap2(buf, pos, size, misc)
            if self.keep_sideband:
                side.append(bytes(buf[pos:pos + size]))
        if side:
            self.sideband.append((cpu, b"".join(side)))
        self.raw_bytes += len(buf)
        if words:
            self.kernel_addresses.update(memoryview(words).cast("Q"))
        only = walked == len(buf) and len(counts) == 1
        return int(counts.get(_SAMPLE, 0)) if only else 0

    def scan_python(self, cpu: int, buf: bytes | memoryview) -> int:
        """:meth:`scan` in Python: the reference the C walk is tested against.

        Runs of SAMPLE records of one size (every sample without a callchain, and most of a
        busy buffer) are counted with a few byte-column comparisons over their headers instead of a
        Python step per record: at 100 kHz a pass holds dozens to thousands of them."""
        counts = self.counts
        total_before, samples_before = sum(counts.values()), counts.get(_SAMPLE, 0)
        unpack = _HDR.unpack_from
        pos, end = 0, len(buf)
        side: list[bytes] | None = [] if self.keep_sideband else None
        runs = True  # off for the rest of the buffer once a run turns out short
        while pos + 8 <= end:
            rtype, misc, size = unpack(buf, pos)
            if size < 8 or pos + size > end:
                break
            if rtype == _SAMPLE:
                if runs and pos + _MIN_RUN * size <= end and unpack(buf, pos + size)[::2] == (_SAMPLE, size):
                    run = _sample_run(buf, pos, size, end)
                    counts[_SAMPLE] = counts.get(_SAMPLE, 0) + run
                    if self.kernel_floor:
                        for i in _kernel_mode(buf, pos, size, run):
                            self._kernel(buf, pos + i * size, size)
                    pos += run * size
                    runs = run >= _MIN_RUN
                    continue
                if misc & R.PERF_RECORD_MISC_CPUMODE_MASK == R.PERF_RECORD_MISC_KERNEL and self.kernel_floor:
                    self._kernel(buf, pos, size)
            elif rtype == R.PERF_RECORD_LOST and size >= 24:  # { header; u64 id, lost; }
                lost = _U64.unpack_from(buf, pos + 16)[0]
                self.lost_per_cpu[cpu] = self.lost_per_cpu.get(cpu, 0) + lost
            elif rtype == R.PERF_RECORD_LOST_SAMPLES and size >= 16:  # { header; u64 lost; }
                lost = _U64.unpack_from(buf, pos + 8)[0]
                self.lost_per_cpu[cpu] = self.lost_per_cpu.get(cpu, 0) + lost
            elif rtype == R.PERF_RECORD_MMAP2 and size >= _MMAP2_FILENAME:
                self._mmap2(buf, pos, size, misc)
            if side is not None and rtype in _SIDEBAND:
                side.append(bytes(buf[pos:pos + size]))
            counts[rtype] = counts.get(rtype, 0) + 1
            pos += size
        if side:
            self.sideband.append((cpu, b"".join(side)))
        self.raw_bytes += end
        if self._kernel_words:  # one C-speed update per buffer, not one per sample
            self.kernel_addresses.update(memoryview(b"".join(self._kernel_words)).cast("Q"))
            self._kernel_words.clear()
        samples = counts.get(_SAMPLE, 0) - samples_before
        return samples if pos == end and samples == sum(counts.values()) - total_before else 0

    def _kernel(self, buf: bytes | memoryview, pos: int, size: int) -> None:
        """The ip and callchain words of a kernel-mode sample (the only records that hold
        kernel code addresses: a user-mode sample's callchain has no kernel part). They are
        kept unfiltered (code addresses and context markers: a bounded set, and no Python
        step per word); :meth:`kernel_code_addresses` filters them once, at the end."""
        span = self.span
        if span is None:  # every word: times and counters too, so filter here
            words = memoryview(buf)[pos + 8 : pos + size - size % 8].cast("Q")
            floor = self.kernel_floor
            self.kernel_addresses.update(w for w in words if floor <= w < R.PERF_CONTEXT_MAX)
            return
        chunks = self._kernel_words
        ip, chain = span.ip, span.callchain
        if 0 <= ip <= size - 8:
            chunks.append(buf[pos + ip : pos + ip + 8])
        if 0 <= chain <= size - 8:
            start = pos + chain + 8
            chunks.append(buf[start : min(start + 8 * _U64.unpack_from(buf, start - 8)[0], pos + size)])

    def kernel_code_addresses(self) -> set[int]:
        """The kernel addresses seen (:meth:`_kernel`), without user addresses and markers."""
        floor = self.kernel_floor
        return {a for a in self.kernel_addresses if floor <= a < R.PERF_CONTEXT_MAX}

    def _mmap2(self, buf: bytes | memoryview, pos: int, size: int, misc: int) -> None:
        if misc & R.PERF_RECORD_MISC_MMAP_DATA:
            return
        pid, addr, length = _MMAP2_WHERE.unpack_from(buf, pos + 8)
        raw = bytes(buf[pos + _MMAP2_FILENAME : pos + size])
        name = raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        if is_jit_memory(name):
            self.mapped.perf_maps.seen_process(pid)  # its perf map, in another namespace? (record/perfmaps.py)
        if not name.startswith("/"):
            return
        if self.kernel_build_ids and misc & R.PERF_RECORD_MISC_MMAP_BUILD_ID:
            head = bytes(buf[pos + _MMAP2_BUILD_ID : pos + _MMAP2_BUILD_ID + 24])
            if 0 < head[0] <= 20 and head[1:4] == b"\0\0\0":
                self.mapped.seen_with_build_id(name, head[4 : 4 + head[0]])
                return
        maj, mnr, ino, gen = _MMAP2_INODE.unpack_from(buf, pos + _MMAP2_BUILD_ID)
        self.mapped.seen(name, (maj, mnr, ino, gen), pid, addr, addr + length)

class OpenedEvent(Value):
    """One event spec as opened: its final attr and the kernel ids of all its fds."""

    __slots__ = _fields = ("name", "attr", "ids")

    def __init__(self, name: str, attr: perf_event_attr, ids: list[int] | None = None) -> None:
        self.name = name
        self.attr = attr
        self.ids: list[int] = [] if ids is None else ids


class Session:
    """Every perf event fd of a recording, the per-CPU ring buffers, and the poll loop."""

    def __init__(self, data_pages: int, page_size: int) -> None:
        self.data_pages = data_pages
        self.page_size = page_size
        self.fds: list[int] = []
        self.rings: dict[int, tuple[int, mmap.mmap, RingBuffer]] = {}  # cpu -> (fd, map, ring)
        self.stats = StreamStats()
        self.notices: list[str] = []
        self._poller = select.poll()
        self._live: set[int] = set()
        # RAW_ZSTD frames (the default) or RAW ones (--no-compress, small buffers); --call-graph
        # dwarf's records are compacted first (always compressed)
        self.compress = False
        # --call-graph dwarf: the records compacted, or split into lean records and stack
        # fields (profiler/format/splitstacks.py)
        self.compact: Callable[[bytes], bytes | tuple[bytes, bytes]] | None = None
        self.overwrite = False  # --overwrite: backward buffers, read only for snapshots (record/flight.py)
        self.side: dict[int, tuple[int, mmap.mmap, RingBuffer]] = {}  # --overwrite: cpu -> side-band ring
        self.cgroup_fd: int | None = None  # -G: system-wide events count only this group (record/cgroups.py)
        self.pylines: PythonLines | None = None  # --python-lines: reads between the waits (record/pylines.py)

    # opening -------------------------------------------------------------------------------

    def open(self, event: OpenedEvent, pid: int, cpu: int, group_fd: int = -1, side: bool = False) -> int:
        """Open ``event`` for (pid, cpu) with perf's fallbacks, attach it to the CPU's ring;
        ``group_fd`` is the fd of its group's leader on the same (pid, cpu), or -1. ``side``:
        --overwrite's side-band event, in a forward ring of its own per CPU."""
        fd = self._open_with_fallbacks(event, pid, cpu, group_fd)
        self.fds.append(fd)
        rings = self.side if side else self.rings
        try:
            event.ids.append(perf_event.event_id(fd))
            if cpu in rings:
                perf_event.set_output(fd, rings[cpu][0])
            else:
                self._map(fd, cpu, side)
        except ProfilerError:
            raise
        # --overwrite: no wakeup per backward buffer (the flight recorder reads them only for a
        # snapshot); a hang-up (the task exited) still shows
        quiet = self.overwrite and not side
        self._poller.register(fd, 0 if quiet else select.POLLIN | select.POLLERR | select.POLLHUP)
        self._live.add(fd)
        return fd

    def _open_with_fallbacks(self, event: OpenedEvent, pid: int, cpu: int, group_fd: int = -1) -> int:
        attr = event.attr
        if pid == -1 and self.cgroup_fd is not None:
            return perf_event.perf_event_open(attr, self.cgroup_fd, cpu, group_fd, event_name=event.name,
                                              flags=perf_event.PERF_FLAG_FD_CLOEXEC | perf_event.PERF_FLAG_PID_CGROUP)
        try:
            return perf_event.perf_event_open(attr, pid, cpu, group_fd, event_name=event.name)
        except EventError:
            if not attr.build_id:
                raise
            # MMAP2 with build_id needs Linux 5.12; older kernels reject the bit with EINVAL.
            attr.build_id = 0
            self.notices.append("notice: this kernel cannot put build-ids in MMAP2 records; "
                                "reading them from the files instead.")
            return self._open_with_fallbacks(event, pid, cpu, group_fd)
        except PermissionDeniedError:
            if attr.exclude_kernel or pid == -1 or (perf_event.read_paranoid() or 0) < 2:
                raise
            # perf_event_paranoid 2 allows user-space measurements only: fall back like perf.
            attr.exclude_kernel = 1
            self.notices.append("notice: kernel.perf_event_paranoid allows user space only; "
                                "kernel samples are excluded.")
            return perf_event.perf_event_open(attr, pid, cpu, group_fd, event_name=event.name)

    def _map(self, fd: int, cpu: int, side: bool = False) -> None:
        size = (1 + self.data_pages) * self.page_size
        try:
            # read-only: the kernel overwrites a --overwrite (write_backward) buffer without a reader
            prot = mmap.PROT_READ if self.overwrite and not side else mmap.PROT_READ | mmap.PROT_WRITE
            buf = mmap.mmap(fd, size, mmap.MAP_SHARED, prot)
        except OSError as exc:
            raise RecordError(
                f"cannot map a {size // 1024} KiB ring buffer for CPU {cpu} ({exc.strerror}): "
                "use a smaller -m, or raise kernel.perf_event_mlock_kb."
            ) from None
        (self.side if side else self.rings)[cpu] = (fd, buf, RingBuffer(buf, self.page_size))

    # control -------------------------------------------------------------------------------

    def enable(self) -> None:
        for fd in self.fds:
            perf_event.enable(fd)

    def disable(self) -> None:
        for fd in self.fds:
            try:
                perf_event.disable(fd)
            except RecordError:
                pass

    # the loop ------------------------------------------------------------------------------

    def register_wakeup(self, fd: int) -> None:
        self._poller.register(fd, select.POLLIN)

    def wait(self, timeout_ms: int) -> list[int]:
        """poll() every fd; forget fds that hung up (their task exited). Returns ready fds."""
        ready = []
        for fd, mask in self._poller.poll(timeout_ms):
            if mask & (select.POLLHUP | select.POLLERR) and fd in self._live:
                self._poller.unregister(fd)
                self._live.discard(fd)
            ready.append(fd)
        self.stats.wakeups += 1
        return ready

    @property
    def all_hung_up(self) -> bool:
        return bool(self.fds) and not self._live

    def wait_and_drain(self, writer: CaptureWriter, timeout_ms: int) -> list[int]:
        """One step of the drain loop: :meth:`wait`, then :meth:`drain`; with --python-lines
        the same waits and drains, the Python reader running between them. Returns ready fds."""
        if self.pylines is not None:
            return self.pylines.wait_and_drain(self, writer, timeout_ms)
        ready = self.wait(timeout_ms)
        self.drain(writer)
        return ready

    def start_python_lines(self, opts: Any, child: Any, stderr: Any) -> None:
        """--python-lines: the reader of the command (``child``, when it is the target) and the
        ``-p`` processes (its modules imported only then)."""
        if getattr(opts, "python_lines", False):
            from profiler.record.pylines import start_python_lines

            self.pylines = start_python_lines(opts, child, stderr)

    def flush_python_lines(self, writer: CaptureWriter) -> None:
        """The end of a capture file: the reads not written yet."""
        if self.pylines is not None:
            self.pylines.flush(writer)

    def drain(self, writer: CaptureWriter) -> int:
        """One pass over every ring buffer: a RAW frame per buffer with data and a ROUND
        marker, written with one ``writev``.

        Every buffer is copied out and handed back to the kernel first (a few KiB to a few MiB:
        a memcpy each), and only then are the copies walked and written: the kernel gets its
        space back before the slow part, so a small buffer at a high rate loses less."""
        taken = [(cpu, ring.take()) for cpu, (_, _, ring) in self.rings.items()]
        scan, compact = self.stats.scan, self.compact
        raws: list[tuple[int, bytes | tuple[bytes, bytes]]] = []
        samples: list[int] = []  # per raw: its records when all are samples (INDEX frames)
        copied = 0
        for cpu, data in taken:
            if data:
                samples.append(scan(cpu, data))
                raws.append((cpu, data if compact is None else compact(data)))
                copied += len(data)
        if raws:
            writer.write_pass(raws, compressed=self.compress, samples=samples)
        return copied

    def take_side(self) -> list[tuple[int, bytes]]:
        """--overwrite: the side-band rings' new records (maps, comms, tasks), per CPU."""
        return [(cpu, data) for cpu, (_, _, ring) in self.side.items() if (data := ring.take())]

    def snapshot(self, read: Callable[[object], bytes]) -> list[tuple[int, bytes | tuple[bytes, bytes]]]:
        """--overwrite: each CPU's buffer paused, its window read by ``read(buffer)``, resumed."""
        out = []
        for cpu, (fd, buf, _) in self.rings.items():
            perf_event.pause_output(fd, True)
            try:
                data = read(buf)
            finally:
                perf_event.pause_output(fd, False)
            if data:
                self.stats.scan(cpu, data)
                out.append((cpu, data if self.compact is None else self.compact(data)))
        return out

    def close(self) -> None:
        for _, buf, ring in (*self.rings.values(), *self.side.values()):
            ring.release()
            try:
                buf.close()
            except BufferError:
                pass  # a view is still held by an error being reported; GC unmaps it
        self.rings.clear()
        self.side.clear()
        if self.cgroup_fd is not None:
            self.fds.append(self.cgroup_fd)
            self.cgroup_fd = None
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds.clear()
        self._live.clear()
