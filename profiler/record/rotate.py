"""``record --switch-output``: a long recording cut into files that each report alone.

When to switch (perf's forms): ``signal`` (SIGUSR2), a size (``100M``: the current file reached
it) or a time (``30s``, ``5m``, ``1h``: since the file was started). Every file is named after the
output with the time it was started, ``OUTPUT.YYYYmmddHHMMSSff`` (perf's form), and is a whole
capture: the recorder finishes it (build-ids, kernel symbols, lost counts, statistics) and starts
the next with the host facts and the processes' state as they are at the switch (see
``Recorder._switch``). The ring buffers are drained into the old file first and everything after
goes to the new one, so no record is lost or written twice.

Disk: ``--switch-max-files N`` keeps the newest N files, ``--max-size SIZE`` the newest files
that fit in SIZE together (the current one always stays); older ones are deleted, oldest first.
"""

from __future__ import annotations

import os
import time

from profiler.errors import DiskFullError, UsageError
from profiler.value import Frozen

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from profiler.format.container.writer import CaptureWriter
    from profiler.record.flight import SideBand
    from profiler.record.session import StreamStats

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_size(text: str, what: str) -> int:
    """``100M``, ``1G``, ``512K``, ``4096`` (bytes)."""
    t = text.strip().lower()
    unit = t[-1] if t and t[-1] in _UNITS else ""
    number = t[:-1] if unit else t
    try:
        size = int(float(number) * _UNITS[unit])
    except ValueError:
        raise UsageError(f"{what} {text!r}: give a size such as 100M, 1G or 512K.") from None
    if size <= 0:
        raise UsageError(f"{what} {text!r}: the size must be above 0.")
    return size


class SwitchOutput(Frozen):
    """A parsed ``--switch-output``: its kind and its limit."""

    __slots__ = _fields = ("kind", "size", "seconds")

    def __init__(self, kind: str, size: int = 0, seconds: float = 0.0) -> None:
        self.kind = kind  # "signal", "size" or "time"
        self.size = size
        self.seconds = seconds

    @classmethod
    def parse(cls, text: str) -> SwitchOutput:
        """perf's forms: ``signal``; a time with a lower-case unit (``500ms``, ``30s``, ``5m``,
        ``1h``, ``1d``); a size with an upper-case one or none (``100M``, ``1G``, ``512K``, ``4096B``)."""
        t = text.strip()
        if t in ("", "signal"):
            return cls("signal")
        if t.endswith("ms") and t[:-2].replace(".", "", 1).isdigit():
            t = f"{float(t[:-2]) / 1000}s"
        if t[-1] in _SECONDS and t[:-1].replace(".", "", 1).isdigit():
            seconds = float(t[:-1]) * _SECONDS[t[-1]]
            if seconds < 0.1:
                raise UsageError(f"--switch-output {text!r}: switch at most every 0.1 s.")
            return cls("time", seconds=seconds)
        if t[-1] in "BKMG" or t[-1].isdigit():
            return cls("size", size=parse_size(t, "--switch-output"))
        raise UsageError(f"--switch-output {text!r}: give signal, a size (100M, 1G) or a time (30s, 5m, 1h).")


def rotated_name(output: str, when: float) -> str:
    """``OUTPUT.YYYYmmddHHMMSSff``: the file started at ``when`` (perf's rotated names)."""
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(when)) + f"{int(when * 100) % 100:02d}"
    return f"{output}.{stamp}"


class Rotation:
    """When to switch, and which finished files to keep."""

    def __init__(self, spec: SwitchOutput, output: str, max_files: int | None, max_size: int | None) -> None:
        self.spec = spec
        self.output = output
        self.max_files = max_files
        self.max_size = max_size
        self.started = time.monotonic()
        self.files: list[str] = []  # every file written, oldest first (deleted ones removed)
        self.deleted: list[str] = []

    def next_path(self) -> str:
        """The name of the next file (never one already written, even within 10 ms)."""
        when = time.time()
        path = rotated_name(self.output, when)
        n = 1
        while path in self.files or os.path.exists(path):
            path = f"{rotated_name(self.output, when)}-{n}"
            n += 1
        self.files.append(path)
        self.started = time.monotonic()
        return path

    def due(self, bytes_written: int, signalled: bool) -> bool:
        """Whether the current file is complete."""
        kind = self.spec.kind
        if kind == "signal":
            return signalled
        if kind == "size":
            return bytes_written >= self.spec.size
        return time.monotonic() - self.started >= self.spec.seconds

    def wait_ms(self) -> int | None:
        """How long the loop may sleep before a time switch is due (None: no time switch)."""
        if self.spec.kind != "time":
            return None
        return max(0, int((self.started + self.spec.seconds - time.monotonic()) * 1000) + 1)

    def prune(self) -> None:
        """Delete the oldest finished files beyond --switch-max-files and --max-size (the
        current file, the last of ``files``, always stays)."""
        keep = list(self.files)
        if self.max_files is not None:
            while len(keep) > max(1, self.max_files):
                self._delete(keep.pop(0))
        if self.max_size is not None:
            while len(keep) > 1 and sum(_size(p) for p in keep) > self.max_size:
                self._delete(keep.pop(0))
        self.files = keep

    def disk_full(self, error: DiskFullError) -> DiskFullError:
        """The disk filled up: the sentence also says that the files before this one are whole."""
        if len(self.files) < 2:
            return error
        return DiskFullError(f"{str(error).rstrip('.')}, and the {len(self.files) - 1} files before it are whole.")

    def describe(self) -> str:
        """The files kept, for the closing line."""
        if not self.files:
            return "no file"
        if len(self.files) == 1:
            return self.files[0]
        gone = f", {len(self.deleted)} older deleted" if self.deleted else ""
        return f"{len(self.files)} files {self.files[0]} ... {self.files[-1]}{gone}"

    def _delete(self, path: str) -> None:
        try:
            os.unlink(path)
        except OSError:
            return
        self.deleted.append(path)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def rotation_for(switch_output: str | None, overwrite: bool, output: str, max_files: int | None,
                 max_size: str | None) -> Rotation | None:
    """The files of --switch-output, or the snapshots of --overwrite (named and kept alike)."""
    if switch_output is None and not overwrite:
        return None
    spec = SwitchOutput.parse(switch_output) if switch_output is not None else SwitchOutput("signal")
    return Rotation(spec, output, max_files, parse_size(max_size, "--max-size") if max_size else None)


class Totals:
    """What the files already finished held: the recording's result counts them all."""

    def __init__(self) -> None:
        self.samples = 0
        self.lost = 0
        self.bytes_written = 0
        self.lost_per_cpu: dict[int, int] = {}

    def add(self, stats: StreamStats, bytes_written: int) -> None:
        self.samples += stats.samples
        self.lost += stats.lost
        self.bytes_written += bytes_written
        self.lost_per_cpu = summed(self.lost_per_cpu, stats.lost_per_cpu)


def summed(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    """Two per-CPU counts added."""
    out = dict(a)
    for cpu, n in b.items():
        out[cpu] = out.get(cpu, 0) + n
    return out


def process_tree(root: int, proc: str = "/proc") -> list[int]:
    """``root`` and every process descended from it now (by the parent pid in /proc/PID/stat)."""
    parent: dict[int, int] = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (comm) ": state, ppid, ...
        if len(fields) > 1 and fields[1].isdigit():
            parent[int(name)] = int(fields[1])
    tree = {root} if root in parent else set()
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sorted(tree)


def carry_sideband(kept: SideBand, old: StreamStats, new: StreamStats, writer: CaptureWriter, compress: bool) -> None:
    """Into a new rotated file, after the processes' state read from /proc: every side-band
    record (MMAP, MMAP2, COMM, FORK, EXIT) of the recording so far, the newest 16 MiB (``kept``
    takes the finished file's). A process whose /proc could not be read at the switch, or that
    changed just then, is still named from its own records."""
    chunks = kept.add(old.sideband)
    new.keep_sideband = False  # scanned for their mapped files, not kept a second time
    for cpu, data in chunks:
        new.scan(cpu, data)
    new.keep_sideband = True
    if chunks:
        writer.write_pass(chunks, compressed=compress)
