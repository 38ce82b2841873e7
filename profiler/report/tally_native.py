"""The compiled kernel of the tally (``profiler/native/compiled.c``, issue 28): one chunk's
records walked, its samples decoded, filtered by ``--cpu``/``--time``, placed among the
replayed records and counted into distinct rows in one C loop, instead of the numpy steps of
:func:`profiler.report.tally.tally_chunk_numpy` — which stays the reference (the two must give
identical rows: ``tests/unit/report/test_tally_native.py``) and the fallback when the
extension was not built, when ``PROFILER_NO_NATIVE=1``, or for a capture in the other byte
order.

:class:`NativeTally` turns what a chunk's tally needs (the event layouts, the replayed records'
(time, file position), the map and comm change logs, the filters) into flat arrays once;
:meth:`NativeTally.chunk` runs the kernel on one chunk's frames and gives plain arrays back.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
import numpy.typing as npt

from profiler.format import records as R
from profiler.errors import FormatError
from profiler.format.container.codec import raw_zstd_parts, split_sizes, zstd_declared_size, zstd_decompress_into
from profiler.format.container.inflate import damaged_note, raw_budget, skipped_note
from profiler.format.container.layout import (
    FRAME_HEADER_SIZE,
    FRAME_INDEX,
    FRAME_RAW,
    FRAME_RAW_ZSTD,
    FRAME_SYNTH,
    INDEX_ENTRY,
    NO_CPU,
)
from profiler.format.container.reader import CaptureReader
from profiler.format.container.scan import FileFrame
from profiler.format.decode.columns import OtherRecord
from profiler.format.decode.decoder import ChunkDecoder, check_frame_cpus, cpu_limit, decode_others
from profiler.format.decode.samples import event_id_word
from profiler.format.decode.views import RecordViews
from profiler.format.events import EventTable
from profiler.native import kernels

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

# kernels.c's field kinds (K_*) and the one-word fields a row is made of (C_*)
_KINDS = {R.KIND_U64: 0, R.KIND_U32_PAIR: 0, R.KIND_READ: 1, R.KIND_CALLCHAIN: 2, R.KIND_RAW: 3,
          R.KIND_BRANCH: 4, R.KIND_REGS: 5, R.KIND_STACK: 6, R.KIND_AUX: 7}
_CORE = {"ip": 1, "tid": 2, "time": 3, "cpu": 4, "period": 5}
ROW_COLUMNS = 13  # Rows' fields, in their order


def field_codes(events: EventTable) -> tuple[I64, I64]:
    """Every event's sample fields as (kind, argument, core field) triples, and where each
    event's start (CSR)."""
    codes: list[int] = []
    start = [0]
    for ev in events.events:
        layout = ev.layout
        for f in layout.sample_fields:
            shape = layout.shape(f)
            arg = 0
            if f.kind == R.KIND_READ:
                arg = shape
            elif f.kind == R.KIND_BRANCH:
                arg = int(bool(shape & R.PERF_SAMPLE_BRANCH_HW_INDEX))
            elif f.kind == R.KIND_REGS:
                arg = R.popcount(shape)
            codes += [_KINDS[f.kind], arg, _CORE.get(f.name, 0) if f.kind in R.FIXED_KINDS else 0]
        start.append(len(codes) // 3)
    return np.asarray(codes, dtype=np.int64), np.asarray(start, dtype=np.int64)


def sorted_log(log: list[tuple[int, int, int]]) -> I64:
    """A change log (entity, boundary, value) sorted by entity, boundary and log order (the
    later change wins, as ``replay.lookup_changes`` has it), as its three columns end to end."""
    if not log:
        return np.zeros(0, dtype=np.int64)
    changes = np.asarray(log, dtype=np.int64).reshape(-1, 3)
    order = np.lexsort((np.arange(len(changes)), changes[:, 1], changes[:, 0]))
    return np.ascontiguousarray(changes[order].T).reshape(-1)


@dataclass
class NativeChunk:
    """One chunk tallied by the kernel: the rows' columns (``Rows``' order, ``chain_id`` local
    to ``chain_start``/``chain_words``, chain 0 the empty one) and the chunk's facts."""

    columns: I64  # (ROW_COLUMNS, rows)
    chain_start: I64
    chain_words: U64
    recorded: I64
    has: frozenset[str]
    damaged: int
    first_time: int
    period_total: float


class NativeTally:
    """What every chunk's kernel call shares (see the module docstring)."""

    def __init__(self, module: ModuleType, decoder: ChunkDecoder, other_time: U64, other_seq: I64,
                 gen_log: list[tuple[int, int, int]], comm_log: list[tuple[int, int, int]],
                 cpus: tuple[int, ...], time_ranges: tuple[tuple[int, int], ...], callchains: bool,
                 keep_cpu: bool) -> None:
        self.module = module
        self.decoder = decoder
        events = decoder.events
        self.events = events
        self.fields, self.field_start = field_codes(events)
        word = event_id_word(events)
        self.id_word = -1 if word is None else word
        by_id: dict[int, int] = {}
        for ev in events.events[1:]:  # a later event's id wins, as SampleBuilder.add has it
            for i in ev.ids:
                by_id[int(i)] = ev.index
        ids = sorted(by_id)
        self.ids = np.asarray(ids, dtype=np.uint64)
        self.id_event = np.asarray([by_id[i] for i in ids], dtype=np.int64)
        self.cpus = np.asarray(cpus, dtype=np.int64)
        self.time_ranges = np.asarray([[np.uint64(lo), np.uint64(hi)] for lo, hi in time_ranges],
                                      dtype=np.uint64).reshape(-1)
        self.other_time = np.ascontiguousarray(other_time, dtype=np.uint64)
        self.other_seq = np.ascontiguousarray(other_seq, dtype=np.int64)
        self.gen_log = sorted_log(gen_log)
        self.comm_log = sorted_log(comm_log)
        self.callchains = callchains
        self.keep_cpu = keep_cpu
        self.cpu_limit = min(cpu_limit(decoder.reader), NO_CPU)

    @classmethod
    def usable(cls, decoder: ChunkDecoder) -> ModuleType | None:
        """The kernels module when it can tally this capture (built, not switched off, the
        capture in this machine's byte order); None otherwise."""
        module = kernels()
        if module is None or (decoder.events.bo == "<") != (sys.byteorder == "little"):
            return None
        return module

    def chunk(self, frames: list[FileFrame], seq0: int) -> NativeChunk | None:
        """The chunk of ``frames`` (its first record is number ``seq0`` in file order) tallied;
        None when the kernel declines (a frame it cannot place in the file): the numpy path
        then tallies it."""
        start = np.asarray([f.offset + FRAME_HEADER_SIZE for f in frames], dtype=np.int64)
        length = np.asarray([len(f.payload) for f in frames], dtype=np.int64)
        return self.tally(self.decoder.views.view, start, length, frames, seq0)

    def tally(self, view: memoryview, start: I64, length: I64, frames: list[FileFrame],
              seq0: int) -> NativeChunk | None:
        """The records of ``frames``, at ``start`` (``length`` bytes each) in ``view``, tallied."""
        cpu = np.asarray([f.cpu for f in frames], dtype=np.int64)
        out = self.module.tally_chunk(
            view, start, length, cpu, self.fields, self.field_start, self.ids, self.id_event,
            self.cpus, self.time_ranges, self.other_time, self.other_seq, self.gen_log, self.comm_log,
            seq0, self.id_word, self.events.default.index, int(self.callchains), self.cpu_limit, int(self.keep_cpu))
        if out is None:
            return None
        rows, chain_start, chain_words, recorded, present, damaged, any_sample, first, cpu_known, high, low = out
        columns = np.frombuffer(rows, dtype=np.int64).reshape(ROW_COLUMNS, -1)
        return NativeChunk(columns, np.frombuffer(chain_start, dtype=np.int64),
                           np.frombuffer(chain_words, dtype=np.uint64),
                           np.frombuffer(recorded, dtype=np.int64).copy(),
                           self._has(np.frombuffer(present, dtype=np.int64), bool(cpu_known)),
                           int(damaged), int(first) if any_sample else -1, float((high << 64) | low))

    def _has(self, present: I64, cpu_known: bool) -> frozenset[str]:
        """The fields the chunk's samples have (``SampleBuilder.has``)."""
        events = self.events.events
        chosen = [self.events.default] if self.id_word < 0 else [events[int(k)] for k in np.flatnonzero(present)]
        has = {f.name for ev in chosen for f in ev.layout.sample_fields}
        if not self.callchains:
            has.discard("callchain")
        if cpu_known:
            has.add("cpu")
        return frozenset(has)



@dataclass
class NativeScan:
    """The first pass over one chunk (``tally._scan_chunk``'s result, made by the kernel)."""

    records: int
    others: list[OtherRecord]
    counts: Counter[str]
    warnings: list[str]
    failed: int
    times: tuple[int, int]
    samples: I64  # per frame
    whole: bool  # every frame walked to its end


def scan_chunk(module: ModuleType, decoder: ChunkDecoder, frames: list[FileFrame],
               time_word: int | None) -> NativeScan | None:
    """The first pass over the chunk of ``frames``: its records walked in C, its non-sample
    records decoded (file positions counted from the chunk's first record); None when the
    kernel declines (the numpy path then scans it)."""
    start = np.asarray([f.offset + FRAME_HEADER_SIZE for f in frames], dtype=np.int64)
    length = np.asarray([len(f.payload) for f in frames], dtype=np.int64)
    return scan_view(module, decoder, decoder.views, start, length, frames, time_word)


def scan_view(module: ModuleType, decoder: ChunkDecoder, views: RecordViews, start: I64, length: I64,
              frames: list[FileFrame], time_word: int | None) -> NativeScan | None:
    """:func:`scan_chunk` over the records of ``frames`` at ``start`` in ``views``."""
    out = module.scan_chunk(views.view, start, length, -1 if time_word is None else time_word)
    if out is None:
        return None
    stops_b, samples_b, others_b, types_b, (any_time, tmin, tmax) = out
    stops = np.frombuffer(stops_b, dtype=np.int64)
    warnings = [f"a damaged record in frame {frame.seq}: skipped its last {int(length[k] - stops[k])} bytes."
                for k, frame in enumerate(frames) if stops[k] != length[k]]
    per_frame = np.frombuffer(samples_b, dtype=np.int64)
    cpus = np.asarray([f.cpu for f in frames], dtype=np.int64)
    check_frame_cpus(decoder.reader, decoder.events, np.repeat(cpus, per_frame), warnings)
    counts: Counter[str] = Counter()
    hist = np.frombuffer(types_b, dtype=np.int64)
    for t in np.flatnonzero(hist).tolist():
        counts[R.record_name(t) if t < 255 else "OTHER"] += int(hist[t])
    triples = np.frombuffer(others_b, dtype=np.int64).reshape(-1, 3)
    others: list[OtherRecord] = []
    failed = decode_others(views, decoder.events, triples[:, 0].copy(), cpus[triples[:, 2]],
                           triples[:, 1].copy(), others)
    return NativeScan(int(hist.sum()), others, counts, warnings, failed,
                      (int(tmin), int(tmax)) if any_time else (-1, -1), per_frame, bool((stops == length).all()))


class IndexMismatch(FormatError):
    """An INDEX frame's count that the frame's records do not bear out (the report is then
    made again without the index)."""


def check_skimmed(scan: NativeScan, chunk: StreamChunk) -> list[str]:
    """The second pass's check of a chunk the first pass skimmed: every record a sample, as
    many as the index says, no frame damaged. The scan's other warnings (frames that name no
    CPU) are returned: the first pass would have given them."""
    expected = np.asarray(chunk.samples, dtype=np.int64)
    if not scan.whole or scan.others or scan.records != int(expected.sum()) or \
            not np.array_equal(scan.samples, expected):
        raise IndexMismatch(f"the capture's index does not match the records of frame {chunk.frames[0].seq} "
                            f"or a frame after it in the same chunk.")
    return scan.warnings


@dataclass
class StreamChunk:
    """Consecutive stored frames (RAW_ZSTD inflated on the way) read as one chunk, with the
    inflated length of each. A skimmed chunk's frames were not inflated by the first pass:
    the capture's INDEX frames said how many records each holds (``samples``), all samples."""

    frames: list[FileFrame]
    lengths: list[int]
    samples: list[int] = field(default_factory=list)  # skimmed: each frame's records

    @property
    def skimmed(self) -> bool:
        return bool(self.samples)


def read_index(frames: list[FileFrame]) -> dict[int, int]:
    """The INDEX frames' entries: frame seq -> its records, all of them samples (entries that
    name no RAW_ZSTD frame, or none, are left out; a damaged INDEX frame is ignored: the
    frames it names are then read in full)."""
    compressed = {f.seq for f in frames if f.kind == FRAME_RAW_ZSTD}
    out: dict[int, int] = {}
    for frame in frames:
        if frame.kind != FRAME_INDEX or len(frame.payload) % INDEX_ENTRY.size:
            continue
        for seq, n in INDEX_ENTRY.iter_unpack(frame.payload):
            if n and seq in compressed:
                out[seq] = n
    return out


class FrameStream:
    """A capture's record frames inflated chunk by chunk into one reused buffer, never into a
    temporary file (issue 28): a report reads each compressed frame twice (the tally's two
    passes) at zstd's speed instead of writing the inflated capture and faulting it back in —
    and a flat report of a ``--call-graph dwarf`` capture never writes its stack copies.

    The first pass (:meth:`first_pass`) decides which frames fit the budget the reader's own
    inflation keeps (``inflate.raw_budget``; the same frames are skipped, with the same
    warning, given by :meth:`commit`) and groups the frames into chunks; the second
    (:meth:`view_of`) inflates a chunk again."""

    def __init__(self, reader: CaptureReader, frames: list[FileFrame], chunk_bytes: int, bo: str) -> None:
        self.reader = reader
        self.bo = bo
        self.frames = [f for f in frames if f.kind in (FRAME_RAW, FRAME_RAW_ZSTD, FRAME_SYNTH) and len(f.payload)]
        self.chunk_bytes = chunk_bytes
        self.index = read_index(frames)
        self._local = threading.local()  # each thread's buffer (tally._paired: two at a time)
        self.skipped: list[int] = []  # the first pass's: frames past the budget
        self.damaged: list[str] = []  # and the warnings of frames whose two parts do not fit
        self.inflated: list[tuple[int, int, int]] = []  # (seq, stored, inflated bytes) of the others
        # each RAW_ZSTD frame's parts: (inflated part, its size, the frame's, stack fields, their size)
        self._parts: dict[int, tuple[memoryview, int | None, int | None, memoryview | None, int]] = {}

    @classmethod
    def of(cls, reader: CaptureReader, chunk_bytes: int, bo: str) -> FrameStream | None:
        """A stream over ``reader``'s frames when some are RAW_ZSTD and still compressed."""
        stored = reader.stored_frames() if isinstance(reader, CaptureReader) else None
        if stored is None or not any(f.kind == FRAME_RAW_ZSTD for f in stored):
            return None
        return cls(reader, stored, chunk_bytes, bo)

    def first_pass(self, skim: bool = False) -> Iterator[tuple[StreamChunk, RecordViews | None, I64, I64]]:
        """Each chunk with its frames inflated: (chunk, views over the buffer, starts, lengths).
        Frames past the budget are left out (see :meth:`commit`). With ``skim``, frames the
        capture's index counts are not inflated: they make chunks of their own, given
        without views (the second pass checks them: :func:`check_skimmed`)."""
        left = raw_budget(self.reader.size)
        self.skipped, self.inflated, self.damaged = [], [], []
        chunk = StreamChunk([], [])
        size = 0
        for frame in self.frames:
            part, declared, charge = frame.payload, None, None
            if frame.kind == FRAME_RAW_ZSTD:
                try:
                    part, declared, charge = self._part(frame)
                except FormatError as exc:
                    self.damaged.append(damaged_note(frame.seq, exc))
                    continue
            records = self.index.get(frame.seq, 0) if skim else 0
            skimmed = bool(records) and declared is not None and charge is not None and \
                8 * records <= declared and charge <= left
            if chunk.frames and skimmed != chunk.skimmed:
                yield self._chunk(chunk)
                chunk, size = StreamChunk([], []), 0
            at = size + (-size) % 8
            if skimmed:
                assert declared is not None
                n = declared
                chunk.samples.append(records)
            elif frame.kind == FRAME_RAW_ZSTD:
                split = part is not frame.payload
                room = functools.partial(self._room_at, at)
                if split and (declared is None or charge is None or charge > left):
                    inflated = None
                else:
                    inflated = zstd_decompress_into(part, room, declared if split and declared is not None else left)
                if inflated is None:
                    self.skipped.append(frame.seq)
                    continue
                n = inflated
                charge = charge if split else n
            else:
                n = len(frame.payload)
                self._room(at + n)[at:at + n] = frame.payload
            if frame.kind == FRAME_RAW_ZSTD:
                assert charge is not None
                left -= charge
                self.inflated.append((frame.seq, len(frame.payload), charge))
            chunk.frames.append(frame)
            chunk.lengths.append(n)
            size = at + n
            if size >= self.chunk_bytes:
                yield self._chunk(chunk)
                chunk, size = StreamChunk([], []), 0
        if chunk.frames:
            yield self._chunk(chunk)

    def _part(self, frame: FileFrame) -> tuple[memoryview, int | None, int | None]:
        """What the stream inflates of a stored RAW_ZSTD frame — the whole, or with its samples'
        stack copies apart (FLAG_STACKS) its lean records only: the tally that unwinds them
        takes the stack fields apart, :meth:`fields_of` — that part's declared size, and what
        the frame inflates to in all (what counts against the budget, as the reader's own
        inflation counts it); sizes None when not declared. Read once per frame (both passes
        ask, and the workers of the second inherit what the first read)."""
        got = self._parts.get(frame.seq)
        if got is None:
            parts = raw_zstd_parts(frame.payload, frame.flags)
            if len(parts) == 2:
                lean, fields = split_sizes(parts)  # as the reader's own inflation checks them
                got = (parts[0], lean, lean + fields, parts[1], fields)
            else:
                declared = zstd_declared_size(parts[0])
                got = (parts[0], declared, declared, None, 0)
            self._parts[frame.seq] = got
        return got[:3]

    def fields_of(self, frame: FileFrame) -> tuple[memoryview, int] | None:
        """A stored FLAG_STACKS frame's stack fields (still compressed) and the size they
        declare; None for another frame."""
        if frame.kind != FRAME_RAW_ZSTD:
            return None
        self._part(frame)
        _, _, _, fields, size = self._parts[frame.seq]
        return None if fields is None else (fields, size)

    def _chunk(self, chunk: StreamChunk) -> tuple[StreamChunk, RecordViews | None, I64, I64]:
        if chunk.skimmed:
            empty = np.zeros(0, dtype=np.int64)
            return chunk, None, empty, empty
        return (chunk, *self._views(chunk.lengths))

    def commit(self) -> None:
        """Tell the reader what the first pass inflated and skipped (its ``inflated`` and one
        warning), as its own inflation would have: once the stream is used for the report."""
        done = self.reader.inflated.seqs
        for seq, stored, inflated in self.inflated:
            if seq not in done:  # a second tally of the same capture (other options) streams again
                self.reader.inflated.add(seq, stored, inflated)
        notes = [skipped_note(self.skipped, raw_budget(self.reader.size), self.reader.size)] if self.skipped else []
        for note in self.damaged + notes:
            if note not in self.reader.warnings:
                self.reader.warn(note)

    def view_of(self, chunk: StreamChunk) -> tuple[RecordViews, I64, I64]:
        """The chunk's frames inflated again (the second pass): its compressed frames by one
        compiled call (``inflate_parts``, libzstd) when there is one, else one by one."""
        module = kernels()
        if module is not None and hasattr(module, "inflate_parts"):
            views = self._inflated_at_once(module, chunk)
            if views is not None:
                return views
        size = 0
        for frame, length in zip(chunk.frames, chunk.lengths):
            at = size + (-size) % 8
            if frame.kind == FRAME_RAW_ZSTD:
                n = zstd_decompress_into(self._part(frame)[0], functools.partial(self._room_at, at), length)
                if n != length:  # the same bytes inflated the first time
                    raise FormatError(f"compressed raw frame number {frame.seq} changed while reading.")
            else:
                self._room(at + length)[at:at + length] = frame.payload
            size = at + length
        return self._views(chunk.lengths)

    def _inflated_at_once(self, module: ModuleType, chunk: StreamChunk) -> tuple[RecordViews, I64, I64] | None:
        """:meth:`view_of` with the chunk's compressed frames inflated by one compiled call;
        None without libzstd, or for a frame that declares no size (the writer's always do),
        which only the stream reader inflates: nothing is then changed."""
        size = 0
        parts: list[memoryview] = []
        table: list[tuple[int, int]] = []
        seqs: list[int] = []
        plain: list[tuple[int, memoryview]] = []
        for frame, length in zip(chunk.frames, chunk.lengths):
            at = size + (-size) % 8
            if frame.kind == FRAME_RAW_ZSTD:
                part, declared, _ = self._part(frame)
                if declared is None:
                    return None
                parts.append(part)
                table.append((at, length))
                seqs.append(frame.seq)
            else:
                plain.append((at, frame.payload))
            size = at + length
        room = self._room(size)
        status = module.inflate_parts(tuple(parts), np.asarray(table, dtype=np.int64).reshape(-1, 2), room)
        if status is None:
            return None
        for seq, bad in zip(seqs, status):
            if bad:  # the same bytes inflated the first time
                raise FormatError(f"compressed raw frame number {seq} changed while reading.")
        for at, payload in plain:
            room[at:at + len(payload)] = payload
        return self._views(chunk.lengths)

    @property
    def buffer(self) -> bytearray:
        """This thread's buffer, reused chunk after chunk."""
        buffer: bytearray | None = getattr(self._local, "buffer", None)
        if buffer is None:
            buffer = self._local.buffer = bytearray()
        return buffer

    @buffer.setter
    def buffer(self, value: bytearray) -> None:
        self._local.buffer = value

    def _room_at(self, at: int, n: int) -> memoryview:
        """``n`` bytes of the buffer from ``at``."""
        return self._room(at + n)[at:at + n]

    def _room(self, need: int) -> memoryview:
        """The buffer, grown to ``need`` bytes (its contents kept)."""
        if len(self.buffer) < need:
            grown = bytearray(max(need, 2 * len(self.buffer)))
            grown[:len(self.buffer)] = self.buffer
            self.buffer = grown
        return memoryview(self.buffer)

    def _views(self, lengths: list[int]) -> tuple[RecordViews, I64, I64]:
        """Views over the buffer's frames (each 8-aligned, ``lengths`` bytes) and their starts."""
        length = np.asarray(lengths, dtype=np.int64)
        start = np.zeros(len(length), dtype=np.int64)
        np.cumsum(((length + 7) & ~7)[:-1], out=start[1:])
        end = int(start[-1] + length[-1]) if len(length) else 0
        return RecordViews(None, self.bo, memoryview(self.buffer)[:end]), start, length
