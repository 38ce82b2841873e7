"""Sample records into columns: every fixed sample field is gathered for all samples of a
chunk at once with numpy fancy indexing into the memory-mapped file (no copy of the raw bytes
is ever made), the variable-size ones are walked in ``records.SAMPLE_FIELDS`` order, and a
sample whose fields would run past its record is dropped (counted)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.arrays import ranges
from profiler.format import records as R
from profiler.format.container.layout import NO_CPU
from profiler.format.decode.chains import ChainStore
from profiler.format.decode.columns import (
    BranchColumns,
    BytesColumns,
    ReadColumns,
    RegsColumns,
    SampleColumns,
    StackColumns,
)
from profiler.format.decode.views import RecordViews
from profiler.format.events import Event, EventTable

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]


def _sample_fields(layout: R.SampleLayout) -> dict[str, int]:
    """Word index (from the record start) of each fixed sample field, and ``_end``."""
    st = layout.sample_type
    pos = 1
    where: dict[str, int] = {}
    for bit, name in (
        (R.PERF_SAMPLE_IDENTIFIER, "identifier"), (R.PERF_SAMPLE_IP, "ip"),
        (R.PERF_SAMPLE_TID, "tid"), (R.PERF_SAMPLE_TIME, "time"), (R.PERF_SAMPLE_ADDR, "addr"),
        (R.PERF_SAMPLE_ID, "id"), (R.PERF_SAMPLE_STREAM_ID, "stream_id"),
        (R.PERF_SAMPLE_CPU, "cpu"), (R.PERF_SAMPLE_PERIOD, "period"),
    ):
        if st & bit:
            where[name] = pos
            pos += 1
    where["_end"] = pos
    return where


def sample_word(layout: R.SampleLayout, name: str) -> int | None:
    """Word index (from the record's header) of a fixed sample field that precedes every
    variable-size one (``identifier``, ``ip``, ``tid``, ``time``, ...); None when absent."""
    return _sample_fields(layout).get(name)


def event_id_word(events: EventTable) -> int | None:
    """Word of a SAMPLE record (from its header) holding the id that names its event: the
    IDENTIFIER, or with one layout shared by every event, its PERF_SAMPLE_ID (perf record
    writes several events that way); None when one event decodes everything."""
    if len(events.events) < 2:
        return None
    if events.identifier:
        return 1
    layout = events.default.layout
    if events.uniform and layout.sample_type & R.PERF_SAMPLE_ID and any(ev.ids for ev in events.events):
        return _sample_fields(layout)["id"]
    return None


_DTYPES: dict[str, Any] = {
    "event": np.int16, "ip": np.uint64, "pid": np.int32, "tid": np.int32, "time": np.uint64,
    "cpu": np.int32, "period": np.uint64, "misc": np.uint16, "seq": np.int64, "chain_id": np.int32,
    "offset": np.int64,
}
_CORE_WORDS = ("ip", "tid", "time", "cpu", "period")  # one-word fields with their own column
_MAX_GROUP = 0x10000  # more group members than any record can hold


def _fits(value: U64, room: I64) -> npt.NDArray[np.bool_]:
    """``value <= room`` without overflow (a negative room fits nothing)."""
    out: npt.NDArray[np.bool_] = (room >= 0) & (value <= np.maximum(room, 0).astype(np.uint64))
    return out


REGS_ROWS = 1 << 16  # samples whose registers are gathered at once (a block's positions: 9 MB)


class _Walk:
    """Where every field of a group of samples (one event, so one layout) starts.

    The fields are visited in :data:`records.SAMPLE_FIELDS` order; ``at[name]`` is the word
    index (in the whole file) of each field's first word, ``count[name]`` its element count
    (callchain entries, group members, RAW/AUX/stack bytes, registers). A sample whose fields
    would run past its record is not ``ok`` (and its positions are not used)."""

    def __init__(self, views: RecordViews, layout: R.SampleLayout, base: I64, end: I64) -> None:
        self.w64 = views.w64
        self.w32 = views.w32
        self.end = end
        self.ok = end > base
        self.at: dict[str, I64] = {}
        self.count: dict[str, I64] = {}
        cur = base + 1  # the word after perf_event_header
        for f in layout.sample_fields:
            self.at[f.name] = cur
            if f.kind in R.FIXED_KINDS:
                cur = cur + 1
            else:
                cur = self._variable(f, layout.shape(f), cur)
            self.ok &= cur <= end

    def peek(self, pos: I64) -> U64:
        """The u64 at word ``pos`` where the sample is still ok and ``pos`` inside its record;
        elsewhere 0 (and the sample is no longer ok)."""
        self.ok &= pos < self.end
        out: U64 = np.where(self.ok, self.w64[np.where(self.ok, pos, 0)], 0).astype(np.uint64)
        return out

    def _bounded(self, value: U64, room: I64) -> I64:
        """``value`` as int64 where it fits in ``room``; 0 (and not ok) where it does not."""
        fits = _fits(value, room)
        self.ok &= fits
        return np.where(self.ok, value, 0).astype(np.int64)

    def _variable(self, f: R.SampleField, shape: int, cur: I64) -> I64:
        room = self.end - cur - 1  # words after the field's first word
        if f.kind == R.KIND_READ:
            times = R.popcount(shape & (R.PERF_FORMAT_TOTAL_TIME_ENABLED | R.PERF_FORMAT_TOTAL_TIME_RUNNING))
            per = 1 + bool(shape & R.PERF_FORMAT_ID) + bool(shape & R.PERF_FORMAT_LOST)
            if not shape & R.PERF_FORMAT_GROUP:
                self.count[f.name] = np.ones(len(cur), dtype=np.int64)
                out: I64 = cur + times + per
                return out
            nr = self._bounded(self.peek(cur), np.minimum(room // per, _MAX_GROUP))
            self.count[f.name] = nr
            return cur + 1 + times + nr * per
        if f.kind == R.KIND_CALLCHAIN:
            nr = self._bounded(self.peek(cur), room)
            self.count[f.name] = nr
            return cur + 1 + nr
        if f.kind == R.KIND_RAW:
            self.ok &= cur < self.end
            size = np.where(self.ok, self.w32[np.where(self.ok, cur, 0) * 2], 0).astype(np.uint64)
            nbytes = self._bounded(size, room * 8 + 4)
            self.count[f.name] = nbytes
            return cur + (nbytes + 4 + 7) // 8
        if f.kind == R.KIND_BRANCH:
            hw = int(bool(shape & R.PERF_SAMPLE_BRANCH_HW_INDEX))
            nr = self._bounded(self.peek(cur), (room - hw) // 3)
            self.count[f.name] = nr
            return cur + 1 + hw + 3 * nr
        if f.kind == R.KIND_REGS:
            nregs = np.where(self.peek(cur) != 0, R.popcount(shape), 0).astype(np.int64)
            self.count[f.name] = nregs
            return cur + 1 + nregs
        # KIND_STACK and KIND_AUX: u64 size, the bytes; STACK adds dyn_size when size != 0
        nbytes = self._bounded(self.peek(cur), room * 8)
        self.count[f.name] = nbytes
        tail = (nbytes != 0).astype(np.int64) if f.kind == R.KIND_STACK else 0
        return cur + 1 + (nbytes + 7) // 8 + tail

    def word(self, name: str, keep: I64) -> U64:
        out: U64 = self.w64[self.at[name][keep]].astype(np.uint64, copy=False)
        return out

    def half(self, name: str, keep: I64, second: bool) -> I32:
        out: I32 = self.w32[self.at[name][keep] * 2 + int(second)].astype(np.uint32, copy=False).view(np.int32)
        return out


class SampleBuilder:
    """Fills sample columns chunk by chunk.

    The columns are allocated once, at their final size (the number of sample records is
    counted first), so no chunk's pieces are kept and concatenated: peak memory stays the
    columns plus one chunk's temporaries (READ's counters, whose number is only known while
    decoding, are the exception)."""

    def __init__(self, events: EventTable, n: int, callchains: bool = True, lean: bool = False,
                 cpu_limit: int = 0) -> None:
        """``lean``: only the core columns and the callchains (no ``extra`` words, no READ,
        RAW, registers or stack copies). ``cpu_limit``: see :func:`cpu_limit`."""
        self.events = events
        self.cpu_limit = min(cpu_limit, NO_CPU)
        self.callchains = callchains
        self.cols: dict[str, npt.NDArray[Any]] = {k: np.empty(n, dtype=t) for k, t in _DTYPES.items()}
        self.size = n  # samples the columns have room for
        self.filled = 0
        self.store = ChainStore()
        self.damaged = 0
        self.has: set[str] = set()
        present = 0
        for ev in events.events:
            present |= ev.layout.sample_type
        fields = [f for f in R.SAMPLE_FIELDS if present & f.bit and not (lean and f.kind != R.KIND_CALLCHAIN
                                                                        and f.name not in _CORE_WORDS)]
        self.extra = {f.name: np.zeros(n, dtype=np.uint64) for f in fields
                      if f.kind == R.KIND_U64 and f.name not in _CORE_WORDS}
        self.parts = {f.name: self._allocate(f, n, events) for f in fields if f.kind not in R.FIXED_KINDS
                      and f.kind != R.KIND_CALLCHAIN}
        self.read_parts: list[tuple[U64, U64, U64]] = []

    @staticmethod
    def _allocate(f: R.SampleField, n: int, events: EventTable) -> Any:
        def i64() -> I64:
            return np.zeros(n, dtype=np.int64)

        def u64() -> U64:
            return np.zeros(n, dtype=np.uint64)

        if f.kind == R.KIND_READ:
            return ReadColumns(u64(), u64(), np.zeros(n + 1, dtype=np.int64), u64(), u64(), u64())
        if f.kind == R.KIND_BRANCH:
            return BranchColumns(i64(), i64(), u64())
        if f.kind == R.KIND_REGS:
            mask = 0
            for ev in events.events:
                if ev.layout.sample_type & f.bit:
                    mask |= ev.layout.shape(f)
            registers = tuple(b for b in range(64) if mask >> b & 1)
            return RegsColumns(u64(), np.zeros((n, len(registers)), dtype=np.uint64), registers)
        if f.kind == R.KIND_STACK:
            return StackColumns(i64(), i64(), u64())
        return BytesColumns(i64(), i64())  # RAW, AUX

    def add(self, views: RecordViews, offs: I64, sizes: I64, seq: I64, cpus: I64) -> None:
        """Samples at file offsets ``offs``; ``cpus``: the ``cpu`` of each one's frame."""
        events = self.events
        at = event_id_word(events)
        if at is None:
            self._add_event(views, events.default, offs, sizes, seq, cpus)
            return
        # a record too short to hold the id (damaged: it fails its walk) is read as event 0's
        inside = sizes > 8 * at
        ident = views.w64[np.where(inside, (offs >> 3) + at, 0)] if len(offs) else np.zeros(0, dtype=np.uint64)
        event_of = np.zeros(len(offs), dtype=np.int64)
        for ev in events.events[1:]:
            if ev.ids:
                event_of[np.isin(ident, np.asarray(ev.ids, dtype=np.uint64)) & inside] = ev.index
        for ev in events.events:
            idx = np.flatnonzero(event_of == ev.index)
            if len(idx):
                self._add_event(views, ev, offs[idx], sizes[idx], seq[idx], cpus[idx])

    def _add_event(self, views: RecordViews, ev: Event, offs: I64, sizes: I64, seq: I64, cpus: I64) -> None:
        layout = ev.layout
        base = offs >> 3
        walk = _Walk(views, layout, base, base + (sizes >> 3))
        self.has.update(f.name for f in layout.sample_fields)
        if not self.callchains:
            self.has.discard("callchain")
        n = len(offs)
        damaged = int(n - np.count_nonzero(walk.ok))
        self.damaged += damaged
        keep = np.flatnonzero(walk.ok) if damaged else np.arange(n)
        nk = len(keep)
        at = slice(self.filled, self.filled + nk)
        self.filled += nk
        c = self.cols
        c["event"][at] = ev.index
        for name, default in (("ip", 0), ("time", 0), ("period", 1)):
            c[name][at] = walk.word(name, keep) if name in walk.at else default
        for name, col, second in (("tid", "pid", False), ("tid", "tid", True)):
            c[col][at] = walk.half(name, keep, second) if name in walk.at else 0
        if "cpu" in walk.at:
            c["cpu"][at] = walk.half("cpu", keep, False)
        else:  # format 3.0: the ring buffer's CPU, from the frame; -1 when it names none
            frame_cpu = cpus[keep]
            known = frame_cpu < self.cpu_limit
            c["cpu"][at] = np.where(known, frame_cpu, -1)
            if known.any():
                self.has.add("cpu")
        c["misc"][at] = views.w16[(offs[keep] >> 1) + 2]
        c["seq"][at] = seq[keep]
        c["offset"][at] = offs[keep]
        for name, column in self.extra.items():
            column[at] = walk.word(name, keep) if name in walk.at else 0
        if self.callchains and "callchain" in walk.at:
            first = walk.at["callchain"][keep] + 1
            c["chain_id"][at] = self.store.add(views.w64, first, walk.count["callchain"][keep])
        else:
            c["chain_id"][at] = 0
        for f in layout.sample_fields:
            if f.name in self.parts:
                self._fill_part(f, layout.shape(f), walk, keep, at)

    def _fill_part(self, f: R.SampleField, shape: int, walk: _Walk, keep: I64, at: slice) -> None:
        part = self.parts[f.name]
        first, count = walk.at[f.name][keep], walk.count[f.name][keep]
        if f.kind == R.KIND_READ:
            self._fill_read(part, shape, walk, first, count, at)
        elif f.kind == R.KIND_BRANCH:
            hw = int(bool(shape & R.PERF_SAMPLE_BRANCH_HW_INDEX))
            part.nr[at] = count
            part.offset[at] = (first + 1 + hw) * 8
            part.hw_idx[at] = walk.w64[first + 1] if hw else 0
        elif f.kind == R.KIND_REGS:
            abi = walk.w64[first].astype(np.uint64)
            part.abi[at] = abi
            has_regs = abi != 0
            numbers = [b for b in range(64) if shape >> b & 1]
            # every register of a sample in one gather: they follow abi, in bit order (a
            # sample without them reads words clipped to the capture, then zeroed)
            pos = np.arange(len(numbers), dtype=np.int64)
            cols = [part.registers.index(number) for number in numbers]
            in_place = cols == list(range(len(part.registers))) and part.regs.dtype == walk.w64.dtype
            if in_place:  # 0.1 s less for 300 K samples of 17 registers than a gather, then a copy
                values = part.regs[at]
                for lo in range(0, len(first), REGS_ROWS):  # the word positions a block at a time
                    rows = slice(lo, lo + REGS_ROWS)
                    np.take(walk.w64, (first[rows] + 1)[:, None] + pos, out=values[rows], mode="clip")
            else:
                values = walk.w64.take((first + 1)[:, None] + pos, mode="clip").astype(np.uint64)
            if not has_regs.all():
                values[~has_regs] = 0
            if not in_place:
                part.regs[at, :] = 0
                part.regs[at.start:at.stop, cols] = values
        elif f.kind == R.KIND_RAW:
            part.offset[at] = first * 8 + 4
            part.size[at] = count
        else:  # STACK, AUX
            part.offset[at] = (first + 1) * 8
            part.size[at] = count
            if f.kind == R.KIND_STACK:
                dyn_at = first + 1 + (count + 7) // 8
                dyn = walk.w64[np.where(count != 0, dyn_at, first)].astype(np.uint64)
                part.dyn_size[at] = np.where(count != 0, dyn, 0)

    def _fill_read(self, part: ReadColumns, shape: int, walk: _Walk, first: I64, count: I64, at: slice) -> None:
        """Group: ``nr, [time_enabled], [time_running], {value, [id], [lost]}[nr]``; otherwise
        ``value, [time_enabled], [time_running], [id], [lost]`` (struct read_format)."""
        w64 = walk.w64
        has_id, has_lost = int(bool(shape & R.PERF_FORMAT_ID)), int(bool(shape & R.PERF_FORMAT_LOST))
        pos = first + 1  # after nr (group) or after value
        for bit, column in ((R.PERF_FORMAT_TOTAL_TIME_ENABLED, part.time_enabled),
                            (R.PERF_FORMAT_TOTAL_TIME_RUNNING, part.time_running)):
            if shape & bit:
                column[at] = w64[pos]
                pos = pos + 1
        if shape & R.PERF_FORMAT_GROUP:
            per = 1 + has_id + has_lost
            value_at = np.repeat(pos, count) + ranges(np.zeros(len(count), dtype=np.int64), count) * per
            id_at = value_at + 1
        else:
            value_at, id_at = first, pos
        lost_at = id_at + has_id
        zeros = np.zeros(len(value_at), dtype=np.uint64)
        self.read_parts.append((
            w64[value_at].astype(np.uint64),
            w64[id_at].astype(np.uint64) if has_id else zeros,
            w64[lost_at].astype(np.uint64) if has_lost else zeros,
        ))
        part.start[at.start + 1:at.stop + 1] = count

    def finish(self) -> SampleColumns:
        n = self.filled
        cols = {name: column[:n] for name, column in self.cols.items()}
        parts = {name: self._trim(part, n) for name, part in self.parts.items()}
        samples = SampleColumns(
            event=cols["event"], ip=cols["ip"], pid=cols["pid"], tid=cols["tid"], time=cols["time"],
            cpu=cols["cpu"], period=cols["period"], misc=cols["misc"], seq=cols["seq"],
            chain_id=cols["chain_id"], offset=cols["offset"], chains=self.store.table(), has=frozenset(self.has),
            extra={k: v[:n] for k, v in self.extra.items()})
        for name, part in parts.items():
            setattr(samples, name, part)
        if len(samples) > 1 and not (np.diff(samples.seq) > 0).all():
            samples.permute(np.argsort(samples.seq, kind="stable"))  # several events: file order
        return samples

    def _trim(self, part: Any, n: int) -> Any:
        if isinstance(part, ReadColumns):
            start = np.cumsum(part.start[:n + 1])
            vals = [np.concatenate([p[k] for p in self.read_parts]) if self.read_parts
                    else np.zeros(0, dtype=np.uint64) for k in range(3)]
            return ReadColumns(part.time_enabled[:n], part.time_running[:n], start, *vals)
        if n == self.size:  # every sample kept (none damaged): the columns as they are, not a copy
            return part
        return part.take(np.arange(n))
