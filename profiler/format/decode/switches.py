"""Context-switch records (PERF_RECORD_SWITCH, PERF_RECORD_SWITCH_CPU_WIDE) decoded into
columns: a ``--off-cpu`` capture holds two per context switch, far too many for one Python
object each (2 µs: 400k records took 10 s).

perf_event.h: SWITCH is ``{ header; sample_id }``; SWITCH_CPU_WIDE is ``{ header; u32
next_prev_pid; u32 next_prev_tid; sample_id }``; ``PERF_RECORD_MISC_SWITCH_OUT`` in the
header's misc says out (else in), ``PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`` that the task was
preempted while runnable. The ``sample_id`` trailer (``attr.sample_id_all``) carries the
thread (TID), the time (TIME) and the CPU (CPU) of the task switched out (out records) or in
(in records).

The columns are read with whole-array operations when every event of the capture has the same
trailer with TID and TIME (so a record's event does not matter); otherwise
:func:`columnar_layout` says None and the records are decoded one by one as other records.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.format import abi as R
from profiler.format.events import EventTable

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
SWITCH_TYPES = (R.PERF_RECORD_SWITCH, R.PERF_RECORD_SWITCH_CPU_WIDE)


@dataclass
class SwitchColumns:
    """Every context-switch record, file order: its time, the thread of its trailer (the one
    switched out for an out record, in for an in record), ``out``, ``preempt``, and for
    SWITCH_CPU_WIDE the other thread (``next_prev_tid``: switched in by an out record, out by an
    in record; -1 for SWITCH)."""

    time: I64
    pid: I64
    tid: I64
    cpu: I64
    out: Bools
    preempt: Bools
    next_prev_tid: I64

    def __len__(self) -> int:
        return int(self.time.shape[0])

    @classmethod
    def concat(cls, parts: list[SwitchColumns]) -> SwitchColumns:
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            return cls(z, z, z, z, np.zeros(0, dtype=bool), np.zeros(0, dtype=bool), z)
        return cls(*(np.concatenate([getattr(p, name) for p in parts]) for name in
                     ("time", "pid", "tid", "cpu", "out", "preempt", "next_prev_tid")))


@dataclass(frozen=True)
class TrailerLayout:
    """Where TID, TIME and CPU are in every record's ``sample_id`` trailer (words from its start)."""

    words: int
    tid_word: int
    time_word: int
    cpu_word: int | None


def columnar_layout(events: EventTable) -> TrailerLayout | None:
    """The trailer every event shares, or None when the events differ or it lacks TID or TIME."""
    fields = {ev.layout.sample_id_fields for ev in events.events}
    if len(fields) != 1:
        return None
    names = [f.name for f in next(iter(fields))]
    if "tid" not in names or "time" not in names:
        return None
    return TrailerLayout(len(names), names.index("tid"), names.index("time"),
                         names.index("cpu") if "cpu" in names else None)


def decode_switches(w32: npt.NDArray[np.unsignedinteger], w64: npt.NDArray[np.unsignedinteger],
                    layout: TrailerLayout, little: bool, offsets: I64, sizes: I64, types: I64,
                    frame_cpus: I64) -> tuple[SwitchColumns, Bools]:
    """The switch records at ``offsets`` as columns, and which of them were too short for their
    body and trailer (damaged: left out). ``w32``/``w64``: the capture as words (file offsets
    divided by 4 or 8); ``frame_cpus``: the CPU of each record's frame, used without a CPU field."""
    body = np.where(types == R.PERF_RECORD_SWITCH_CPU_WIDE, 8, 0)
    damaged = sizes < 8 + body + 8 * layout.words
    ok = ~damaged
    off, size, kind = offsets[ok], sizes[ok], types[ok]
    trailer = (off + size) // 8 - layout.words  # word index of the trailer's first word
    # struct sample_id { u32 pid, tid; ... }: two u32 in the capture's byte order
    pid = w32[(trailer + layout.tid_word) * 2].astype(np.int64)
    tid = w32[(trailer + layout.tid_word) * 2 + 1].astype(np.int64)
    time = w64[trailer + layout.time_word].astype(np.int64)
    if layout.cpu_word is not None:
        cpu = w32[(trailer + layout.cpu_word) * 2].astype(np.int64)
    else:
        cpu = frame_cpus[ok].astype(np.int64)
    misc = (w32[off // 4 + 1] & 0xFFFF) if little else (w32[off // 4 + 1] >> 16)
    wide = kind == R.PERF_RECORD_SWITCH_CPU_WIDE
    next_prev = np.where(wide, w32[off // 4 + 3].astype(np.int64), -1)
    cols = SwitchColumns(time, _signed32(pid), _signed32(tid), _signed32(cpu),
                         (misc & R.PERF_RECORD_MISC_SWITCH_OUT) != 0,
                         (misc & R.PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0, _signed32(next_prev))
    return cols, damaged


def _signed32(values: I64) -> I64:
    """A u32 field read back as the kernel's signed pid (-1 stays -1)."""
    out: I64 = np.where(values >= 1 << 31, values - (1 << 32), values)
    return out
