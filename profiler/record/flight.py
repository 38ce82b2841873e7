"""``record --overwrite``: the flight recorder. The kernel keeps the last ``-m`` pages of records
per CPU and the recorder only copies them out when asked for a snapshot.

The events are opened with ``write_backward`` and their ring buffers mapped read-only: the
kernel then never waits for a reader and writes each record *below* the previous one
(perf_event_open(2): "write_backward ... the ring buffer is written from the end to the
beginning"; perf's ``--overwrite``). ``data_head`` moves down, as a free-running counter taken
modulo the data size, and the bytes from ``data_head`` upwards are the records from the newest to
the oldest, each laid out forwards as usual. A snapshot pauses the buffer
(PERF_EVENT_IOC_PAUSE_OUTPUT), walks the records up from ``data_head`` until a record of size 0
(memory the kernel has not written yet) or one that would reach past a whole buffer (the oldest,
partly overwritten), copies them, resumes the buffer, and hands them over oldest first.

When (``--snapshot-on``, comma-separated; default ``signal,exit``): ``signal`` (SIGUSR2),
``exit`` (when the recording ends) and a number of seconds (every N seconds). Each snapshot is a
whole capture named ``OUTPUT.YYYYmmddHHMMSSff`` (as the files of ``--switch-output``): the host
facts, the target's processes as they are at the snapshot, then the window's records.

Between snapshots the recorder sleeps on its signal pipe: no wakeup per buffer, so its own CPU
while idle is near zero.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

from profiler.errors import UsageError
from profiler.format.attr import PERF_TYPE_SOFTWARE
from profiler.record.events import SOFTWARE_EVENTS, EventSpec
from profiler.value import Frozen

# The side-band (MMAP2, COMM, FORK, EXIT) goes to its own software "dummy" event in forward
# buffers, drained as it comes and kept in memory (``SideBand``): a backward buffer keeps only the
# last moments, and the map of a program that started before them would be gone from it.
SIDEBAND = EventSpec("dummy", PERF_TYPE_SOFTWARE, SOFTWARE_EVENTS["dummy"])

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from profiler.record.session import Session
    from profiler.record.stopper import Stopper
    from profiler.record.target import Child

DATA_HEAD_OFFSET = 1024
SIDEBAND_LIMIT = 16 << 20  # bytes of side-band records kept (the oldest dropped first)
_U64 = struct.Struct("=Q")
_SIZE = struct.Struct("=H")  # perf_event_header.size, at offset 6


class SnapshotOn(Frozen):
    """When to write a snapshot."""

    __slots__ = _fields = ("signal", "exit", "seconds")

    def __init__(self, signal: bool = True, exit: bool = True, seconds: float | None = None) -> None:
        self.signal = signal
        self.exit = exit
        self.seconds = seconds

    @classmethod
    def parse(cls, text: str | None) -> SnapshotOn:
        if text is None:
            return cls()
        parts = [p.strip().lower() for p in text.split(",") if p.strip()]
        seconds = None
        for p in parts:
            if p in ("signal", "exit"):
                continue
            try:
                seconds = float(p.removesuffix("s"))
            except ValueError:
                raise UsageError(f"--snapshot-on {text!r}: signal, exit or a number of seconds "
                                 "(comma-separated).") from None
            if seconds < 0.1:
                raise UsageError(f"--snapshot-on {text!r}: snapshots at most every 0.1 s.")
        if not parts:
            raise UsageError("--snapshot-on needs signal, exit or a number of seconds.")
        return cls("signal" in parts, "exit" in parts, seconds)


def backward_window(buf: object, page_size: int) -> bytes:
    """The records of a paused backward ring buffer (``buf``: control page, then the data
    area), oldest first, as one byte string of whole records."""
    view = memoryview(buf).cast("B")  # type: ignore[arg-type]
    try:
        data = view[page_size:]
        size = len(data)
        mask = size - 1
        head = _U64.unpack_from(view, DATA_HEAD_OFFSET)[0]
        records: list[bytes] = []
        walked = 0
        while walked + 8 <= size:
            start = (head + walked) & mask
            header = _wrapped(data, start, 8, size)
            rec_size = _SIZE.unpack_from(header, 6)[0]
            if rec_size < 8 or walked + rec_size > size:
                break  # never written, or the oldest record, partly overwritten
            records.append(_wrapped(data, start, rec_size, size))
            walked += rec_size
        records.reverse()
        return b"".join(records)
    finally:
        view.release()


def _wrapped(data: memoryview, start: int, length: int, size: int) -> bytes:
    end = start + length
    if end <= size:
        return data[start:end].tobytes()
    return data[start:].tobytes() + data[: end - size].tobytes()


class SideBand:
    """The side-band records drained so far, per CPU chunk, the newest ``SIDEBAND_LIMIT`` bytes."""

    def __init__(self) -> None:
        self.chunks: list[tuple[int, bytes]] = []
        self.size = 0

    def add(self, chunks: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """Keep ``chunks``; returns every chunk kept, oldest first."""
        self.chunks.extend(chunks)
        self.size += sum(len(d) for _, d in chunks)
        while self.size > SIDEBAND_LIMIT and len(self.chunks) > 1:
            self.size -= len(self.chunks.pop(0)[1])
        return list(self.chunks)


def fly(session: Session, stopper: Stopper, child: Child | None, duration: float | None, threads: bool,
        when: SnapshotOn, snapshot: Callable[[], None], drain_side: Callable[[], object]) -> None:
    """Sleep on the signal pipe and the side-band buffers until a snapshot is due (SIGUSR2, the
    period) or the recording ends (a stop signal, the command's exit, ``duration``, every target
    thread gone); a last snapshot then if ``when.exit``. Side-band records are drained as they
    wake us (rarely: maps and tasks, not samples)."""
    now = time.monotonic()
    deadline = None if duration is None else now + duration
    due = None if when.seconds is None else now + when.seconds
    while True:
        ends = [t for t in (deadline, due) if t is not None]
        timeout = -1 if not ends else max(0, int((min(ends) - time.monotonic()) * 1000) + 1)
        ready = session.wait(timeout)
        drain_side()
        woken = stopper.read_fd in ready or not ready
        if woken:
            stopper.clear()
        if stopper.switch_requested:
            stopper.switch_requested = False
            snapshot()
        if due is not None and time.monotonic() >= due:
            snapshot()
            due = time.monotonic() + (when.seconds or 0)
        if stopper.signal is not None or (deadline is not None and time.monotonic() >= deadline):
            break
        if woken and child is not None and child.poll():
            break
        if threads and session.all_hung_up:
            break
    if when.exit:
        snapshot()
