"""``record --python-lines``: the Python reader run from the drain loop, its records packed
as ``python_lines`` metadata (docs/format.md, docs/python.md).

In the drain loop (``profiler/record/recorder.py``'s ``_loop``, through :meth:`PythonLines.wait_and_drain`:
the loop's waits and drains are unchanged), every :data:`READ_INTERVAL_S`, every known CPython
process's threads are read (``pyreader.py``) within :data:`BUDGET_S` of
CPU per read pass (the processes after the budget wait for the next pass, in turn), so the
drain loop is never held up for long and loses no samples. Each thread read is one record:
(time on the sample clock, pid, tid, frames innermost first as (code id, byte offset)). The
records and the code objects first seen since the last flush are written as one metadata frame
every :data:`FLUSH_RECORDS` records and at the end.

The targets are the recorded command and the ``-p`` processes (not their children). A process whose interpreter is
not found within :data:`FIND_S` after recording starts (not CPython, or not yet started), or
whose version the reader has no offsets for, gets one notice and no reads.
"""

from __future__ import annotations

import time
from array import array

from profiler.record.pyfind import find_interpreter
from profiler.record.pyreader import Code, ProcessReader, UnknownPython

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from typing import Protocol

    from profiler.format.container.writer import CaptureWriter

    class Session(Protocol):
        """What the reader needs of ``profiler/record/session.py``'s Session (which imports this
        module: no import back)."""

        def wait(self, timeout_ms: int) -> list[int]: ...

        def drain(self, writer: CaptureWriter) -> int: ...

KIND = "python_lines"
VERSION = 1
READ_INTERVAL_S = 0.02
BUDGET_S = 0.002
FIND_S = 2.0
FLUSH_RECORDS = 20000


class PythonLines:
    """The reader of a recording's Python processes and the records not yet written."""

    def __init__(self, clockid: int, say: Callable[[str], None]) -> None:
        self.clockid = clockid
        self.say = say
        self.pending: dict[int, float] = {}  # pid -> when to give up finding its interpreter
        self.readers: list[ProcessReader] = []
        self.next_id = [0]
        self.turn = 0
        self.last = 0.0
        self.cpu_s = 0.0  # CPU spent reading (statistics)
        self.passes = 0
        self.threads_read = 0
        self._new_processes: list[dict[str, Any]] = []
        self._processes: list[dict[str, Any]] = []  # every process found, and every code read:
        self._codes: list[Code] = []  # a --switch-output file repeats them (its reads refer to them)
        self._repeat = False
        self._clear()

    def _clear(self) -> None:
        self.times = array("Q")
        self.pids = array("I")
        self.tids = array("I")
        self.starts = array("I", [0])
        self.codes = array("I")
        self.offsets = array("i")

    def add(self, pid: int) -> None:
        self.pending[pid] = time.monotonic() + FIND_S

    def _find(self, now: float, final: bool = False) -> None:
        for pid, deadline in list(self.pending.items()):
            interp = find_interpreter(pid)
            if interp is None:
                if final or now >= deadline:
                    del self.pending[pid]
                    self.say(f"notice: process {pid} is not a CPython the Python reader knows: "
                             "its samples keep native frames only, without Python lines.")
                continue
            del self.pending[pid]
            try:
                reader = ProcessReader(pid, interp, self.next_id)
            except UnknownPython as exc:
                self.say(f"notice: process {pid} runs {exc}, which the Python reader does not know: "
                         "its samples keep native frames only, without Python lines.")
                continue
            self.readers.append(reader)
            self._new_processes.append({"pid": pid, "path": interp.path,
                                        "version": f"{interp.version[0]}.{interp.version[1]}"})
            self._processes.append(self._new_processes[-1])

    def due_ms(self) -> int:
        """Milliseconds until the next read is due."""
        return max(1, int((self.last + READ_INTERVAL_S - time.monotonic()) * 1000) + 1)

    def wait_and_drain(self, session: Session, writer: CaptureWriter, timeout_ms: int) -> list[int]:
        """The drain loop's step with the reader: wait for ``timeout_ms`` or a ready fd, then
        drain, exactly as without the reader; reads happen while waiting, each when due. The
        ring buffers are not drained for a read (each drain writes a compressed frame: about
        0.25 ms of CPU). Returns the ready fds."""
        end = time.monotonic() + timeout_ms / 1000
        while True:
            left = max(0, int((end - time.monotonic()) * 1000) + 1)
            ready = session.wait(min(left, self.due_ms()))
            if ready or time.monotonic() >= end:
                session.drain(writer)
                self.read_if_due(writer)
                return ready
            self.read_if_due(writer)

    def read_if_due(self, writer: CaptureWriter) -> None:
        """A read pass when one is due, and a metadata frame when enough records wait."""
        now = time.monotonic()
        if now - self.last < READ_INTERVAL_S:
            return
        self.last = now
        cpu0 = time.thread_time()
        if self.pending:
            self._find(now)
        self._read_pass(cpu0)
        self.cpu_s += time.thread_time() - cpu0
        if len(self.times) >= FLUSH_RECORDS:
            self._write(writer)

    def _read_pass(self, cpu0: float) -> None:
        readers = self.readers
        if not readers:
            return
        self.passes += 1
        for i in range(len(readers)):
            reader = readers[(self.turn + i) % len(readers)]
            before = time.clock_gettime_ns(self.clockid)
            threads = reader.read()
            stamp = (before + time.clock_gettime_ns(self.clockid)) // 2
            self.threads_read += len(threads)
            for tid, frames in threads:
                self._add(stamp, reader.pid, tid, frames)
            if time.thread_time() - cpu0 > BUDGET_S:
                self.turn = (self.turn + i + 1) % len(readers)
                return

    def _add(self, stamp: int, pid: int, tid: int, frames: list[tuple[int, int]]) -> None:
        self.times.append(stamp)
        self.pids.append(pid)
        self.tids.append(tid)
        for code, offset in frames:
            self.codes.append(code)
            self.offsets.append(offset)
        self.starts.append(len(self.codes))

    def _take_codes(self) -> list[Code]:
        out: list[Code] = []
        for reader in self.readers:
            out.extend(reader.new_codes)
            reader.new_codes = []
        return out

    def flush(self, writer: CaptureWriter) -> None:
        """The end of a capture file: what was read since the last frame; the processes whose
        interpreter was not found yet are given up (one notice each)."""
        self._find(time.monotonic(), final=True)
        self._write(writer)
        self._repeat = True  # a next file (--switch-output) starts with every process and code

    def _write(self, writer: CaptureWriter) -> None:
        """One ``python_lines`` metadata frame with what was read since the last one."""
        codes = self._take_codes()
        self._codes.extend(codes)
        processes = self._new_processes
        if self._repeat:
            codes, processes, self._repeat = list(self._codes), list(self._processes), False
        if not len(self.times) and not codes and not processes:
            return
        writer.write_meta(KIND, payload(processes, codes, self))
        self._new_processes = []
        self._clear()

    def stats(self) -> dict[str, Any]:
        """The reader's work so far (kept in every frame; the last one has the whole recording's)."""
        return {"passes": self.passes, "threads_read": self.threads_read, "cpu_s": round(self.cpu_s, 6),
                "processes": len(self.readers)}


def payload(processes: list[dict[str, Any]], codes: list[Code], rec: PythonLines) -> dict[str, Any]:
    """The metadata's data (docs/format.md, ``python_lines``)."""
    return {
        "version": VERSION,
        "clockid": rec.clockid,
        "processes": processes,
        "codes": [[c.id, c.qualname, c.filename, c.firstlineno, c.linetable] for c in codes],
        "stats": rec.stats(),
        "reads": {"time": rec.times.tobytes(), "pid": rec.pids.tobytes(), "tid": rec.tids.tobytes(),
                  "start": rec.starts.tobytes(), "code": rec.codes.tobytes(), "offset": rec.offsets.tobytes()},
    }


def start_python_lines(opts: Any, child: Any, stderr: Any) -> PythonLines | None:
    """The reader of a recording (``opts.python_lines``): the command (``child``, when it is
    the target, else None) and the ``-p`` processes; None without ``--python-lines``."""
    if not getattr(opts, "python_lines", False):
        return None

    def say(text: str) -> None:
        if not opts.quiet:
            print(text, file=stderr)

    lines = PythonLines(opts.clockid, say)
    for pid in (*opts.pids, *(() if child is None else (child.pid,))):
        lines.add(pid)
    if not lines.pending:
        say("notice: --python-lines reads the recorded command and the -p processes: with -a or -t "
            "there are none to read.")
    return lines
