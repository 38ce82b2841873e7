"""The ``python_lines`` metadata of a capture (``record --python-lines``), read and checked.

Each metadata frame holds the code objects first seen since the previous one and a batch of
reads: per thread read, its time (sample clock), pid, tid, and its Python frames innermost
first as (code id, byte offset into the bytecode). See docs/format.md and docs/python.md.

A capture is untrusted: a frame whose arrays do not fit together (lengths, offsets that go
back or past the end, code ids no frame declared) is skipped whole with one warning; a code
object's fields of the wrong type make that code unknown (its frames get no line).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.format.pylinetable import NO_LINE, line_at, line_ranges

I64 = npt.NDArray[np.int64]
MAX_NAME = 4096
MAX_TABLE = 1 << 20


@dataclass
class PyCode:
    qualname: str
    filename: str
    firstlineno: int
    linetable: bytes
    _ranges: list[tuple[int, int, int]] | None = None

    def line(self, offset: int) -> int:
        """The line of the instruction at byte ``offset`` (:data:`NO_LINE` when unknown)."""
        if offset < 0:
            return NO_LINE
        if self._ranges is None:
            self._ranges = line_ranges(self.linetable, self.firstlineno)
        return line_at(self._ranges, offset)


@dataclass
class PyReads:
    """Every read of a capture, sorted by (tid, time); frames CSR (``start``)."""

    codes: dict[int, PyCode]
    time: I64
    pid: I64
    tid: I64
    start: I64
    code: I64
    offset: I64
    versions: dict[int, str] = field(default_factory=dict)  # pid -> "3.12"
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.time)

    def frames(self, i: int) -> list[tuple[int, int]]:
        a, b = int(self.start[i]), int(self.start[i + 1])
        return list(zip(self.code[a:b].tolist(), self.offset[a:b].tolist()))


class Damaged(ValueError):
    pass


def _array(reads: dict[str, Any], name: str, dtype: str) -> I64:
    raw = reads.get(name)
    if not isinstance(raw, bytes) or len(raw) % np.dtype(dtype).itemsize:
        raise Damaged(f"its '{name}' is not an array of {dtype}")
    return np.frombuffer(raw, dtype=dtype).astype(np.int64)


def _codes(items: Any, out: dict[int, PyCode]) -> None:
    if not isinstance(items, list):
        raise Damaged("its 'codes' is not a list")
    for item in items:
        if not (isinstance(item, list) and len(item) == 5):
            raise Damaged("a code entry is not [id, qualname, filename, firstlineno, linetable]")
        ident, qualname, filename, first, table = item
        if not (isinstance(ident, int) and 0 <= ident < 1 << 32 and isinstance(qualname, str)
                and isinstance(filename, str) and isinstance(first, int) and -(1 << 31) <= first < 1 << 31
                and isinstance(table, bytes) and len(table) <= MAX_TABLE):
            raise Damaged("a code entry has a field of the wrong type or size")
        out[ident] = PyCode(qualname[:MAX_NAME], filename[:MAX_NAME], first, table)


def _batch(data: Mapping[str, Any], codes: dict[int, PyCode]) -> tuple[I64, ...]:
    """(time, pid, tid, frame counts, code, offset) of one metadata frame's reads."""
    reads = data.get("reads")
    if not isinstance(reads, dict):
        raise Damaged("it has no 'reads' map")
    time, pid, tid = _array(reads, "time", "<u8"), _array(reads, "pid", "<u4"), _array(reads, "tid", "<u4")
    start, code, offset = _array(reads, "start", "<u4"), _array(reads, "code", "<u4"), _array(reads, "offset", "<i4")
    n = len(time)
    if not (len(pid) == len(tid) == n and len(start) == n + 1 and len(code) == len(offset)):
        raise Damaged("its arrays' lengths do not fit together")
    if start[0] != 0 or start[-1] != len(code) or np.any(np.diff(start) < 0):
        raise Damaged("its frame offsets go back or past the end")
    if len(code) and not np.all(np.isin(code, np.fromiter(codes, dtype=np.int64, count=len(codes)))):
        raise Damaged("a frame names a code object no metadata declared")
    if np.any(time < 0):
        raise Damaged("a read's time is out of range")
    return time, pid, tid, np.diff(start), code, offset


def load_reads(payloads: Sequence[Mapping[str, Any]]) -> PyReads | None:
    """The reads of every ``python_lines`` payload (in file order), or None without any."""
    if not payloads:
        return None
    codes: dict[int, PyCode] = {}
    batches: list[tuple[I64, ...]] = []
    versions: dict[int, str] = {}
    warnings: list[str] = []
    for data in payloads:
        try:
            if not isinstance(data, dict) or data.get("version") != 1:
                raise Damaged("it is not version 1")
            _codes(data.get("codes", []), codes)
            procs = data.get("processes", [])
            for proc in procs if isinstance(procs, list) else ():
                if isinstance(proc, dict) and isinstance(proc.get("pid"), int) and isinstance(proc.get("version"), str):
                    versions[proc["pid"]] = proc["version"][:16]
            batches.append(_batch(data, codes))
        except (Damaged, TypeError, ValueError, OverflowError) as exc:
            warnings.append(f"a damaged python_lines metadata frame was skipped ({exc}).")
    return _joined(codes, batches, versions, warnings)


def _joined(codes: dict[int, PyCode], batches: list[tuple[I64, ...]], versions: dict[int, str],
            warnings: list[str]) -> PyReads:
    if batches:
        time, pid, tid, counts, code, offset = (np.concatenate(cols) for cols in zip(*batches))
    else:
        time = pid = tid = counts = code = offset = np.zeros(0, np.int64)
    starts = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    order = np.lexsort((time, tid))
    # frames reordered with the reads: gather each read's span
    lens = counts[order]
    new_start = np.zeros(len(order) + 1, np.int64)
    np.cumsum(lens, out=new_start[1:])
    gather = np.repeat(starts[:-1][order] - new_start[:-1], lens) + np.arange(int(new_start[-1]))
    return PyReads(codes, time[order], pid[order], tid[order], new_start, code[gather], offset[gather],
                   versions, warnings)


def nearest_reads(reads: PyReads, tid: I64, time: I64, max_gap_ns: int) -> I64:
    """Per sample (``tid``, ``time``), the index of its thread's read nearest in time, within
    ``max_gap_ns``; -1 where there is none."""
    out = np.full(len(tid), -1, np.int64)
    if not len(reads) or not len(tid):
        return out
    bounds = np.searchsorted(reads.tid, np.unique(tid), side="left")
    ends = np.searchsorted(reads.tid, np.unique(tid), side="right")
    for t, a, b in zip(np.unique(tid).tolist(), bounds.tolist(), ends.tolist()):
        if a == b:
            continue
        rows = np.flatnonzero(tid == t)
        times = reads.time[a:b]
        at = np.searchsorted(times, time[rows])
        left = np.clip(at - 1, 0, len(times) - 1)
        right = np.clip(at, 0, len(times) - 1)
        pick = np.where(np.abs(times[left] - time[rows]) <= np.abs(times[right] - time[rows]), left, right)
        near = np.abs(times[pick] - time[rows]) <= max_gap_ns
        out[rows[near]] = a + pick[near]
    return out
