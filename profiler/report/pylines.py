"""Python line numbers in a profile (``record --python-lines``; docs/python.md).

Each sample is paired with its thread's read nearest in time (:func:`pyreads.nearest_reads`,
within :data:`MAX_GAP_NS`). A read comes a little before or after the sample (the reader runs
in the recorder's drain loop): the line it saw is another draw from the same distribution, so
lines are right in their *shares*, not sample by sample (docs/python.md measures it).

* The sample's Python frames — frames of kind ``python`` (qualname and file, as the resolver
  makes CPython's ``py::QUALNAME:FILENAME`` entries; a ``py::`` symbol is read too: see
  :func:`python_key`) — agree with the read when they are, innermost first, the read's
  innermost frames (qualname and filename each). Then every such frame gets the
  read's line as its source line (``FILE:LINE``), which ``--sort srcline``, script's
  ``srcline`` field and the exports' line fields show. A sample whose Python frames
  disagree keeps them without a line and is counted.
* A sample with no Python frame but an interpreter frame (``_PyEval_EvalFrameDefault``) —
  3.11, which has no perf trampolines; a 3.12+ process recorded with ``-p`` that was not
  started with perf support — gets the read's frames inserted above its innermost such frame, lines included: an
  approximate Python stack, which the header says.
"""

from __future__ import annotations

import weakref
from dataclasses import field

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.format.pylinetable import NO_LINE
from profiler.report.capture import Capture, metadata_of
from profiler.names import PYTHON_PREFIX
from profiler.report.profile import Profile, StackTable
from profiler.report.resolver import FrameInfo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from profiler.report.pyreads import PyReads

I64 = npt.NDArray[np.int64]
PREFIX = PYTHON_PREFIX
EVAL = "_PyEval_EvalFrameDefault"
PYTHON_KIND = "python"
KIND = "python_lines"  # the metadata kind of the reads (record --python-lines)
MAX_GAP_NS = 100_000_000


@dataclass
class LineStats:
    """What the header says: samples with lines, disagreeing, and with inserted frames."""

    with_reads: int = 0
    agreed: int = 0
    disagreed: int = 0
    inserted: int = 0
    warnings: list[str] = field(default_factory=list)

    def header_lines(self) -> list[str]:
        lines = [f"# Python lines: {self.agreed} samples with lines, {self.disagreed} whose Python frames "
                 f"disagree with the read (kept without lines), of {self.with_reads} samples with a read"]
        if self.inserted:
            lines.append(f"# Python stacks of {self.inserted} samples come from the reader alone (approximate: "
                         "read a little after each sample)")
        return lines


def python_frame(symbol: str | None) -> tuple[str, str] | None:
    """(qualname, filename) of a ``py::QUALNAME:FILENAME`` symbol, else None."""
    if symbol is None or not symbol.startswith(PREFIX):
        return None
    qualname, sep, filename = symbol[len(PREFIX):].partition(":")
    return (qualname, filename) if sep else None


def python_key(frame: FrameInfo) -> tuple[str, str] | None:
    """(qualname, filename) of a Python frame: a ``py::`` JIT frame, or a frame of kind
    ``python`` (its symbol the qualname, its DSO the file), as the report names them once
    perf-map entries become Python frames."""
    if frame.kind == PYTHON_KIND:
        return (frame.symbol or "", frame.dso_path)
    return python_frame(frame.symbol)


def reader_frame(qualname: str, filename: str) -> FrameInfo:
    """A frame for a Python function only the reader saw, named as the report names the
    perf-map's (:func:`profiler.report.resolver.python_frame`)."""
    return FrameInfo(qualname, filename, filename, PYTHON_KIND)


class _Builder:
    """The new stack table: one stack per distinct (old stack, frame and line choice)."""

    def __init__(self, profile: Profile, reads: PyReads, stats: LineStats) -> None:
        self.p, self.reads, self.stats = profile, reads, stats
        self.t = profile.stack_table
        self.keys: dict[tuple[int, tuple[tuple[int, int, int], ...]], int] = {}
        self.entries: list[tuple[int, int, int]] = []  # (source entry or -1, frame id, srcline id)
        self.starts = [0]
        self.leaf: list[int] = []
        self._py: dict[int, list[tuple[int, tuple[str, str]]]] = {}
        self._evals: dict[int, int] = {}

    def _python_entries(self, k: int) -> list[tuple[int, tuple[str, str]]]:
        found = self._py.get(k)
        if found is None:
            found = []
            for e in range(int(self.t.start[k]), int(self.t.start[k + 1])):
                key = python_key(self.p.frames[int(self.t.frames[e])])
                if key is not None:
                    found.append((e, key))
            self._py[k] = found
        return found

    def _read_frames(self, r: int) -> list[tuple[str, str, int]]:
        out = []
        for code, offset in self.reads.frames(r):
            c = self.reads.codes[code]
            out.append((c.qualname, c.filename, c.line(offset)))
        return out

    def _line_id(self, filename: str, line: int) -> int:
        if line == NO_LINE or line <= 0:
            return -1
        text = f"{filename}:{line}"
        if self.p.resolver is not None:
            return self.p.resolver.srcline_id(text)
        self.p.srclines.append(text)
        return len(self.p.srclines) - 1

    def choose(self, k: int, r: int, count: int) -> int:
        """The new stack of samples of old stack ``k`` paired with read ``r`` (or -1)."""
        changes: tuple[tuple[int, int, int], ...] = ()  # (entry, srcline or -1, inserted frame or -1)
        if r >= 0:
            self.stats.with_reads += count
            changes = self._changes(k, r, count)
        key = (k, changes)
        found = self.keys.get(key)
        if found is None:
            found = self.keys[key] = self._emit(k, changes)
        return found

    def _changes(self, k: int, r: int, count: int) -> tuple[tuple[int, int, int], ...]:
        unwound = self._python_entries(k)
        read = self._read_frames(r)
        if unwound:
            if [key for _, key in unwound] != [(q, f) for q, f, _ in read[: len(unwound)]]:
                self.stats.disagreed += count
                return ()
            self.stats.agreed += count
            return tuple((e, self._line_id(read[i][1], read[i][2]), -1) for i, (e, _) in enumerate(unwound))
        if not read:
            return ()
        at = self._eval_entry(k)
        if at < 0:
            return ()
        self.stats.inserted += count
        self.stats.agreed += count
        frames = self.p.frames
        return tuple((at, self._line_id(f, line), frames.intern(reader_frame(q, f))) for q, f, line in read)

    def _eval_entry(self, k: int) -> int:
        """The innermost ``_PyEval_EvalFrameDefault`` entry of stack ``k`` (-1: none)."""
        found = self._evals.get(k)
        if found is None:
            found = -1
            for e in range(int(self.t.start[k]), int(self.t.start[k + 1])):
                if self.p.frames[int(self.t.frames[e])].symbol == EVAL:
                    found = e
                    break
            self._evals[k] = found
        return found

    def _emit(self, k: int, changes: tuple[tuple[int, int, int], ...]) -> int:
        lines = {e: line for e, line, frame in changes if frame < 0}
        inserted = [(line, frame) for _, line, frame in changes if frame >= 0]
        at = changes[0][0] if inserted else -1
        t = self.t
        for e in range(int(t.start[k]), int(t.start[k + 1])):
            if e == at:
                self.entries.extend((-1, frame, line) for line, frame in inserted)
            base = int(t.srclines[e]) if t.srclines is not None else -1
            self.entries.append((e, int(t.frames[e]), lines.get(e, base)))
        self.starts.append(len(self.entries))
        self.leaf.append(int(t.leaf[k]) if t.leaf is not None else -1)
        return len(self.starts) - 2

    def table(self) -> StackTable:
        src = np.asarray([e for e, _, _ in self.entries], dtype=np.int64)
        real = src >= 0
        pick = np.where(real, src, 0)

        def column(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
            out = values[pick] if len(values) else np.zeros(len(src), np.uint64)
            return np.where(real, out, np.uint64(0)).astype(np.uint64)

        t = self.t
        return StackTable(np.asarray(self.starts, dtype=np.int64),
                          np.asarray([f for _, f, _ in self.entries], dtype=np.int64),
                          column(t.offsets), column(t.shown), column(t.addrs),
                          np.asarray([s for _, _, s in self.entries], dtype=np.int64),
                          None if t.leaf is None else np.asarray(self.leaf, dtype=np.int64))


def attach_lines(profile: Profile, reads: PyReads) -> LineStats:
    """Give ``profile``'s Python frames their lines (in place); what was done."""
    stats = LineStats(warnings=list(reads.warnings))
    if profile.weight is not None or not len(profile.stack):
        return stats  # tallied rows have no time per sample: the pipeline decodes whole for lines
    from profiler.report.pyreads import nearest_reads

    s = profile.samples
    near = nearest_reads(reads, s.tid.astype(np.int64), s.time.astype(np.int64), MAX_GAP_NS)
    builder = _Builder(profile, reads, stats)
    pairs, inverse, counts = np.unique(np.stack([profile.stack.astype(np.int64), near]), axis=1,
                                       return_inverse=True, return_counts=True)
    new_of_pair = np.asarray([builder.choose(int(k), int(r), int(c))
                              for k, r, c in zip(pairs[0], pairs[1], counts)], dtype=np.int64)
    table = builder.table()
    profile.stack = new_of_pair[inverse.reshape(-1)]
    profile.stack_table = table
    profile.stack_start, profile.stack_frames = table.start, table.frames
    return stats


_loaded: weakref.WeakKeyDictionary[Capture, PyReads | None] = weakref.WeakKeyDictionary()


def capture_reads(capture: Capture) -> PyReads | None:
    """The capture's Python reads (None: it has none), read once per capture."""
    if capture not in _loaded:
        payloads = metadata_of(capture.reader, (KIND,))[KIND]
        if payloads:  # pyreads loads only for a capture that has reads (start-up)
            from profiler.report.pyreads import load_reads

            _loaded[capture] = load_reads(payloads)
        else:
            _loaded[capture] = None
    return _loaded[capture]


def with_python_lines(profile: Profile, capture: Capture) -> Profile:
    """``profile`` with its Python frames' lines when the capture has reads (the hook of
    :func:`profiler.report.assemble.assemble`); header lines and warnings said on the profile."""
    reads = capture_reads(capture)
    if reads is None:
        return profile
    stats = attach_lines(profile, reads)
    profile.warnings.extend(stats.warnings)
    profile.python_first_lines = {(c.qualname, c.filename): c.firstlineno for c in reads.codes.values()
                                  if c.firstlineno > 0}
    if len(reads):
        profile.header_notes.extend(stats.header_lines())
    return profile
