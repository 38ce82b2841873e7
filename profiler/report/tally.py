"""A capture tallied into distinct sample rows, chunk by chunk: reports whose memory is bounded by
the number of distinct stacks, not by the number of samples.

A flat or call-graph report, a flame graph or folded stacks need, of each sample, only what
makes it distinct — event, pid, tid, cpu, comm, map generation, cpumode and callchain (or ip
without one) — and its period. So the capture is read in two passes:

1. **Records** (:func:`tally_capture`, sequential): every chunk's record offsets, the counts by
   type, and the non-sample records (few: MMAP, COMM, FORK, ...). These are replayed once, in
   time order, into the map and comm change logs (``replay.replay_in_order``). With the
   compiled kernel, a compressed frame the capture's INDEX frames count (all its records
   samples) is counted, not inflated; pass 2 checks the count (``tally_native.check_skimmed``).
2. **Samples** (:func:`_tally_chunk`, one call per chunk of about ``CHUNK_BYTES``): decode the
   chunk's samples, drop those outside ``--cpu``/``--time``, place each one among the replayed
   records by (time, file order) to get its map generation and comm, and sum the samples of
   each distinct row (count, period; the time and file position of its last sample, for thread
   names). A chunk's chains are hashed into its own table; the parent merges the chunks' rows
   and chains (by the same 128-bit chain hash) as they arrive, tallying again whenever the rows
   kept have doubled.

Without the compiled kernel, pass 2 runs in worker processes (``fork``; ``PROFILER_JOBS``,
default: the idle CPUs this process may use and no other program keeps busy, at most 4:
``parallel.idle_cpus``) when the capture has several chunks, else in this process: the same
function, the same merge, so both give identical rows. Memory is one chunk's columns per worker
plus the distinct rows. With the kernel, a compressed capture's chunks are inflated and tallied
two at a time in two threads when a second CPU is idle (``parallel.two_at_a_time``: zstd and
the kernel release the GIL): 1M samples' flat report 0.28 -> 0.23 s on two idle CPUs.

A ``--call-graph dwarf`` capture is tallied with an :class:`Unwinding` (``tally_unwound.py``):
pass 2 then decodes each chunk's samples with their registers and unwinds their user stacks
before counting them, by numpy and the unwinder's kernels, in the worker processes.

What it cannot tally it refuses (``None``), and the caller decodes the whole capture instead:
records without a time (captures without ``sample_id_all``), which are placed by the samples
around them; ``--time`` in percent (of the whole capture's span) or without the capture's start.
"""

from __future__ import annotations

from collections import Counter
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from types import ModuleType
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from profiler.arrays import odd_multipliers, ranges, row_ids
from profiler.errors import ReportError
from profiler.format.decode.chains import ChainStore
from profiler.format.decode.columns import ChainTable, OtherRecord, SampleColumns
from profiler.format.decode.decoder import (
    ChunkDecoder,
    check_period_total,
    count_types,
    period_total,
    samples_have_cpu,
)
from profiler.format.decode.samples import sample_word
from profiler.format.decode.views import RecordViews
from profiler.errors import ProfilerError
from profiler.format import records as R
from profiler.format.container.reader import CaptureReader
from profiler.format.container.scan import FileFrame
from profiler.format.events import EventTable
from profiler.format.typed_header import CaptureHeader
from profiler.report.options import Filters, time_bounds
from profiler.report.parallel import idle_cpus, in_order, two_at_a_time, worker_count
from profiler.report.replay import ReplayState, name_unknown, place_samples, replay_in_order
from profiler.report.tally_native import (
    FrameStream,
    IndexMismatch,
    NativeChunk,
    NativeTally,
    StreamChunk,
    check_skimmed,
    scan_chunk,
    scan_view,
)

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

TALLY_CHUNK_BYTES = 2 << 20  # record bytes decoded at once by one process: their pages and columns
T = TypeVar("T")


class Unwinding(Protocol):
    """What a tally that unwinds user stacks (``--call-graph dwarf``) is given: made ready in
    the parent once the records are replayed, then asked for each chunk's result (in the worker
    that tallies it). ``report/tally_unwound.py`` has the one there is."""

    chunk_bytes: int

    def ready(self, reader: CaptureReader, state: ReplayState) -> None: ...

    def tally_chunk(self, plan: Plan, index: int) -> ChunkResult: ...


@dataclass
class Rows:
    """Distinct sample rows: the key columns, then ``count`` and ``period`` (sums) and the
    (time, file position) of the row's last sample."""

    event: I64
    pid: I64
    tid: I64
    cpu: I64
    comm: I64
    gen: I64
    misc: I64
    chain_id: I64
    ip: U64
    count: I64
    period: U64
    last_time: U64
    last_seq: I64

    KEYS = ("event", "pid", "tid", "cpu", "comm", "gen", "misc", "chain_id", "ip")

    def __len__(self) -> int:
        return int(self.count.shape[0])

    def take(self, idx: I64) -> Rows:
        return Rows(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    @classmethod
    def concat(cls, parts: list[Rows]) -> Rows:
        return cls(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)})

    def combine(self) -> Rows:
        """One row per distinct key, summed; the last sample's time and position kept.

        Rows are grouped by a 64-bit hash of their keys (one sort), and every row is then
        checked against the first of its group: a collision (never seen, but a crafted
        capture could make one) is tallied again by the exact keys."""
        n = len(self)
        if not n:
            return self
        h = np.zeros(n, dtype=np.uint64)
        for k, key in enumerate(self.KEYS):
            h += getattr(self, key).view(np.uint64) * _KEY_MULTIPLIERS[k]
        h ^= h >> np.uint64(29)
        order = np.argsort(h)
        hs = h[order]
        new = np.ones(n, dtype=bool)
        new[1:] = hs[1:] != hs[:-1]
        starts = np.flatnonzero(new)
        first = order[starts]
        group_first = first[np.cumsum(new) - 1]  # each sorted row's group's first row
        for key in self.KEYS:
            col = getattr(self, key)
            if not np.array_equal(col[order], col[group_first]):
                return self._combine_exact()
        return self._summed(order, starts, first)

    def _combine_exact(self) -> Rows:
        ids = row_ids([getattr(self, k).view(np.int64) if k == "ip" else getattr(self, k) for k in self.KEYS])
        order = np.argsort(ids, kind="stable")
        g = ids[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = g[1:] != g[:-1]
        starts = np.flatnonzero(new)
        return self._summed(order, starts, order[starts])

    def _summed(self, order: I64, starts: I64, first: I64) -> Rows:
        """Rows ``first`` (one of each group of ``order[starts[i]:starts[i + 1]]``) with the
        group's count and period sums, and its latest (time, file position)."""
        out = self.take(first)
        out.count = np.add.reduceat(self.count[order], starts)
        out.period = np.add.reduceat(self.period[order], starts)
        t = self.last_time[order]
        latest = np.maximum.reduceat(t, starts)
        group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(order))))
        seq = np.where(t == latest[group], self.last_seq[order], np.int64(-1))
        out.last_time = latest
        out.last_seq = np.maximum.reduceat(seq, starts)
        return out


# One fixed odd 64-bit multiplier per key column of Rows: the row hash.
_KEY_MULTIPLIERS = odd_multipliers(0xF01D, len(Rows.KEYS))


@dataclass
class Tally:
    """A capture's samples as distinct rows, with what a report needs besides them."""

    rows: Rows
    chains: ChainTable
    has: frozenset[str]
    state: ReplayState  # maps and comms (comm ids of ``rows.comm`` are its ``comm_names``)
    recorded: I64  # samples per event, before any filter
    counts: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    damaged_samples: int = 0
    first_time: int = -1  # the earliest sample time of the capture (-1: no samples)
    unwind_warnings: list[str] = field(default_factory=list)  # its chunks' unwinding's, each once
    unwinding: Unwinding | None = None  # what unwound its rows' user stacks (made ready for this tally)

    def samples(self, idx: I64) -> SampleColumns:
        """Rows ``idx`` as sample columns (``period`` is the row's sum; ``time`` and ``seq`` its
        last sample's), the input of the stack dedupe and resolution."""
        r = self.rows
        return SampleColumns(
            event=r.event[idx].astype(np.int16), ip=r.ip[idx], pid=r.pid[idx].astype(np.int32),
            tid=r.tid[idx].astype(np.int32), time=r.last_time[idx], cpu=r.cpu[idx].astype(np.int32),
            period=r.period[idx], misc=r.misc[idx].astype(np.uint16), seq=r.last_seq[idx],
            chain_id=r.chain_id[idx].astype(np.int32), chains=self.chains, has=self.has)


@dataclass
class Plan:
    """What every chunk's tally needs (inherited by the worker processes)."""

    decoder: ChunkDecoder
    chunks: list[tuple[list[FileFrame], int]]  # frames, file position of the first record
    state: ReplayState
    other_time: U64  # the replayed records' (time, file position), in replay order
    other_seq: I64
    cpus: tuple[int, ...]
    time_ranges: tuple[tuple[int, int], ...]
    callchains: bool
    keep_cpu: bool
    native: NativeTally | None = None  # the compiled kernel, when it can tally this capture
    stream: FrameStream | None = None  # with it, compressed frames inflated chunk by chunk
    stream_chunks: list[StreamChunk] = field(default_factory=list)
    # the second pass's, for skimmed chunks, by chunk (chunks may be tallied two at a time)
    late_warnings: dict[int, list[str]] = field(default_factory=dict)
    unwinding: Unwinding | None = None  # it unwinds user stacks: it tallies every chunk


@dataclass
class ChunkResult:
    """One chunk tallied: its rows, their chains and the chunk's facts."""

    rows: Rows
    chains: ChainTable  # the chains ``rows.chain_id`` refers to, numbered from 0 (empty)
    recorded: I64
    damaged: int
    has: frozenset[str]
    first_time: int
    period_total: float  # of the chunk's samples, summed without wrapping (decoder.check_period_total)
    warnings: list[str] = field(default_factory=list)  # its unwinding's (a tally that unwinds)
    late: list[str] = field(default_factory=list)  # a skimmed chunk's first-pass warnings, found by a worker


def tally_supported(header: CaptureHeader, filters: Filters) -> bool:
    """Whether the filters can be applied chunk by chunk (see the module docstring)."""
    if not filters.time:
        return True
    return header.start_perf_clock_ns is not None and all(r.unit != "%" for r in filters.time)


@dataclass
class Prepared:
    """The first pass over a capture: the plan of the second, and what it found."""

    plan: Plan
    jobs: int
    counts: Counter[str]
    warnings: list[str]
    failed: int  # damaged non-sample records
    chunk_times: list[tuple[int, int]]  # per chunk: its samples' earliest and latest time ((-1, -1): none)


def prepare(reader: CaptureReader, filters: Filters, callchains: bool = True, keep_cpu: bool = True,
            jobs: int | None = None, chunk_bytes: int | None = None, skim: bool = False,
            unwinding: Unwinding | None = None) -> Prepared | None:
    """Pass 1 (see the module docstring); None when the capture cannot be read chunk by chunk.
    With ``skim``, compressed frames the capture's index counts are not inflated by it
    (their chunks' times are then unknown: ``chunk_times`` (-1, -1)). With ``unwinding``, every
    chunk's samples are decoded whole and their user stacks unwound (not the compiled tally)."""
    if not tally_supported(reader.info, filters):
        return None
    if chunk_bytes is None:
        chunk_bytes = TALLY_CHUNK_BYTES if unwinding is None else unwinding.chunk_bytes
    decoder = ChunkDecoder(reader, chunk_bytes)
    check_cpu_filter(reader, decoder.events, filters)
    module = NativeTally.usable(decoder)
    asked = jobs
    stream = FrameStream.of(reader, decoder.chunk_bytes, decoder.events.bo) if module is not None else None
    time_word = sample_time_word(decoder)
    stream_chunks: list[StreamChunk] = []
    if stream is not None and module is not None:
        jobs = 1
        scans: Iterator[_Scan] = (_scan_stream(module, decoder, part, stream_chunks, time_word)
                                  for part in stream.first_pass(skim))
        frame_chunks: list[list[FileFrame]] = []
    else:
        frame_chunks = decoder.plan()
        jobs = 1 if module is not None else worker_count(jobs, len(frame_chunks))
        scans = in_order(lambda k: _scan_chunk(decoder, frame_chunks[k], time_word, module), len(frame_chunks), jobs)
    warnings: list[str] = []
    counts: Counter[str] = Counter()
    others: list[OtherRecord] = []
    failed = 0
    chunks: list[tuple[list[FileFrame], int]] = []
    chunk_times: list[tuple[int, int]] = []
    seq0 = 0
    for k, scan in enumerate(scans):
        frames = frame_chunks[k] if frame_chunks else []
        for o in scan.others:
            o.seq += seq0
        others.extend(scan.others)
        counts.update(scan.counts)
        warnings.extend(scan.warnings)
        failed += scan.failed
        chunks.append((frames, seq0))
        chunk_times.append(scan.times)
        seq0 += scan.records
    if any(o.time < 0 for o in others):
        return None
    if stream is not None:
        stream.commit()
    others.sort(key=lambda o: (o.time, o.seq))
    state = replay_in_order(others, reader.build_ids())
    start = reader.info.start_perf_clock_ns or 0
    plan = Plan(decoder, chunks, state,
                np.asarray([o.time for o in others], dtype=np.uint64),
                np.asarray([o.seq for o in others], dtype=np.int64),
                tuple(filters.cpus or ()),
                tuple(time_bounds(r, np.zeros(0, np.uint64), start) for r in filters.time or ()),
                callchains, keep_cpu)
    if unwinding is not None:
        unwinding.ready(reader, state)
        plan.unwinding = unwinding
        jobs = worker_count(asked, len(chunks))  # pass 2 in worker processes, stream or not
    if module is not None:
        plan.native = NativeTally(module, decoder, plan.other_time, plan.other_seq, state.gen_log, state.comm_log,
                                  plan.cpus, plan.time_ranges, callchains, keep_cpu)
        plan.stream, plan.stream_chunks = stream, stream_chunks
    return Prepared(plan, jobs, counts, warnings, failed, chunk_times)


def tally_capture(reader: CaptureReader, filters: Filters, callchains: bool = True, keep_cpu: bool = True,
                 jobs: int | None = None, chunk_bytes: int | None = None, skim: bool = True,
                 unwinding: Unwinding | None = None) -> Tally | None:
    """The capture tallied into distinct rows after ``--cpu``/``--time`` (the entry filters are
    the caller's: rows keep pid, tid and comm); None when it cannot be (the caller decodes the
    whole capture). ``keep_cpu=False`` tallies the samples of every CPU together. ``skim``:
    the first pass counts the frames the capture's index counts (see :func:`prepare`; the
    rows are the same, in another order when that changes the chunks). ``unwinding``: the
    user stacks of its events' samples are unwound into their callchains first."""
    try:
        prepared = prepare(reader, filters, callchains, keep_cpu, jobs, chunk_bytes, skim=skim, unwinding=unwinding)
        tally = None if prepared is None else _run(prepared.plan, prepared.jobs)
    except IndexMismatch as exc:
        prepared = prepare(reader, filters, callchains, keep_cpu, jobs, chunk_bytes, unwinding=unwinding)
        tally = None if prepared is None else _run(prepared.plan, prepared.jobs)
        if prepared is not None:
            prepared.warnings.insert(0, f"{exc} It was read without the index.")
    if prepared is None or tally is None:
        return None
    late = prepared.plan.late_warnings
    state, warnings = prepared.plan.state, prepared.warnings + [w for k in sorted(late) for w in late[k]]
    tally.counts = prepared.counts
    name_unknown(state, tally.rows.tid, tally.rows.comm)
    if tally.damaged_samples:
        warnings.append(f"{tally.damaged_samples} damaged samples (callchain longer than the record) "
                        f"were skipped.")
    if prepared.failed:
        warnings.append(f"{prepared.failed} damaged non-sample records were skipped.")
    tally.warnings = warnings
    return tally


def sample_time_word(decoder: ChunkDecoder) -> int | None:
    """The word of every SAMPLE record (from its header) that holds its time, when every
    event puts it at the same place; None otherwise (or without times)."""
    words = {sample_word(ev.layout, "time") for ev in decoder.events.events}
    return words.pop() if len(words) == 1 else None


@dataclass
class _Scan:
    """The first pass over one chunk: its record count and its non-sample records (file
    positions counted from the chunk's first record)."""

    records: int
    others: list[OtherRecord]
    counts: Counter[str]
    warnings: list[str]
    failed: int
    times: tuple[int, int]  # its samples' earliest and latest time; (-1, -1) without (or unknown)


def _scan_stream(module: ModuleType, decoder: ChunkDecoder, part: tuple[StreamChunk, RecordViews | None, I64, I64],
                 chunks: list[StreamChunk], time_word: int | None) -> _Scan:
    """The first pass over one chunk of a :class:`FrameStream` (kept in ``chunks`` for the second).
    A skimmed chunk is counted from the capture's index (its samples' times unknown)."""
    chunk, views, start, length = part
    chunks.append(chunk)
    if views is None:
        records = sum(chunk.samples)
        return _Scan(records, [], Counter({R.record_name(R.PERF_RECORD_SAMPLE): records}), [], 0, (-1, -1))
    scan = scan_view(module, decoder, views, start, length, chunk.frames, time_word)
    if scan is None:  # the kernel declines only frames outside its buffer or not 8-aligned
        raise ProfilerError("the compiled kernel refused a chunk of its own buffer.")
    return _Scan(scan.records, scan.others, scan.counts, scan.warnings, scan.failed, scan.times)


def _scan_chunk(decoder: ChunkDecoder, frames: list[FileFrame], time_word: int | None,
                module: ModuleType | None = None) -> _Scan:
    if module is not None:
        scan = scan_chunk(module, decoder, frames, time_word)
        decoder.release(frames)
        if scan is not None:
            return _Scan(scan.records, scan.others, scan.counts, scan.warnings, scan.failed, scan.times)
    warnings: list[str] = []
    chunk = decoder.records(frames, 0, warnings)
    counts: Counter[str] = Counter()
    count_types(chunk.types, counts)
    others: list[OtherRecord] = []
    failed = decoder.others(chunk, others)
    times = (-1, -1)
    if time_word is not None:
        big = (chunk.types == R.PERF_RECORD_SAMPLE) & (chunk.sizes > 8 * time_word)
        t = decoder.views.w64[(chunk.offsets[big] >> 3) + time_word]
        if len(t):
            times = (int(t.min()), int(t.max()))
    decoder.release(frames)
    return _Scan(len(chunk.offsets), others, counts, warnings, failed, times)


def _run(plan: Plan, jobs: int) -> Tally:
    merged = _Merge(plan, ChainStore())
    count = len(plan.chunks)
    task: Callable[[int], ChunkResult] = functools.partial(_tally_chunk, plan)
    threaded = plan.stream is not None and count > 1 and idle_cpus() > 1 and plan.unwinding is None
    for result in (two_at_a_time(task, count) if threaded else in_order(task, count, jobs)):
        merged.add(result)
    return merged.result()


class _Merge:
    """Chunk results merged in chunk order: chains renumbered into one table, rows tallied
    whenever they have doubled since the last tally."""

    def __init__(self, plan: Plan, store: ChainStore) -> None:
        self.plan = plan
        self.store = store
        self.parts: list[Rows] = []
        self.pending = 0
        self.tallied_size = 0
        self.recorded = np.zeros(len(plan.decoder.events.events), dtype=np.int64)
        self.damaged = 0
        self.has: set[str] = set()
        self.first_time = -1
        self.period_total = 0.0
        self.warnings: dict[str, None] = {}  # the chunks' unwinding warnings, each once, in order
        self.added = 0  # chunks merged

    def add(self, result: ChunkResult) -> None:
        rows = result.rows
        table = result.chains
        if len(table) > 0:
            lengths = table.lengths
            ids = self.store.add(table.words, table.start[:-1], lengths).astype(np.int64)
            rows.chain_id = ids[rows.chain_id]
        self.parts.append(rows)
        self.pending += len(rows)
        self.recorded += result.recorded
        self.damaged += result.damaged
        self.has |= result.has
        self.period_total += result.period_total
        self.warnings.update(dict.fromkeys(result.warnings))
        if result.late:
            self.plan.late_warnings[self.added] = result.late
        self.added += 1
        check_period_total(self.period_total)
        if result.first_time >= 0:
            self.first_time = result.first_time if self.first_time < 0 else min(self.first_time, result.first_time)
        if self.pending > max(self.tallied_size, 1 << 16):
            self._combine()

    def _combine(self) -> None:
        rows = Rows.concat(self.parts).combine() if self.parts else _empty_rows()
        self.parts = [rows]
        self.tallied_size = self.pending = len(rows)

    def result(self) -> Tally:
        self._combine()
        return Tally(self.parts[0], self.store.table(), frozenset(self.has), self.plan.state, self.recorded,
                     damaged_samples=self.damaged, first_time=self.first_time, unwind_warnings=list(self.warnings),
                     unwinding=self.plan.unwinding)


def _empty_rows() -> Rows:
    i, u = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    return Rows(i, i, i, i, i, i, i, i, u, i, u, u, i)


def _tally_chunk(plan: Plan, index: int) -> ChunkResult:
    """Decode, filter, place and tally the samples of chunk ``index``: with the compiled
    kernel when there is one (``tally_native.py``), else with numpy (unwinding user stacks
    first when the plan has an :class:`Unwinding`)."""
    if plan.unwinding is not None:
        return plan.unwinding.tally_chunk(plan, index)
    if plan.native is not None and plan.stream is not None:
        chunk, seq0 = plan.stream_chunks[index], plan.chunks[index][1]
        views, start, length = plan.stream.view_of(chunk)
        if chunk.skimmed:
            scan = scan_view(plan.native.module, plan.decoder, views, start, length, chunk.frames, None)
            if scan is None:
                raise ProfilerError("the compiled kernel refused a chunk of its own buffer.")
            plan.late_warnings[index] = check_skimmed(scan, chunk)
        done = plan.native.tally(views.view, start, length, chunk.frames, seq0)
        if done is None:
            raise ProfilerError("the compiled kernel refused a chunk of its own buffer.")
        return _native_result(done)
    if plan.native is not None:
        frames, seq0 = plan.chunks[index]
        done = plan.native.chunk(frames, seq0)
        plan.decoder.release(frames)
        if done is not None:
            return _native_result(done)
    return tally_chunk_numpy(plan, index)


def _native_result(c: NativeChunk) -> ChunkResult:
    cols = c.columns
    rows = Rows(event=cols[0], pid=cols[1], tid=cols[2], cpu=cols[3], comm=cols[4], gen=cols[5], misc=cols[6],
                chain_id=cols[7], ip=cols[8].view(np.uint64), count=cols[9], period=cols[10].view(np.uint64),
                last_time=cols[11].view(np.uint64), last_seq=cols[12])
    return ChunkResult(rows, ChainTable(c.chain_start, c.chain_words), c.recorded, c.damaged, c.has,
                        c.first_time, c.period_total)


def tally_chunk_numpy(plan: Plan, index: int) -> ChunkResult:
    """Decode, filter, place and tally the samples of chunk ``index`` with numpy: the reference
    the compiled kernel is tested against, and its fallback."""
    return tallied(plan, placed_samples(plan, index))


@dataclass
class Placed:
    """A chunk's samples decoded, those outside ``--cpu``/``--time`` dropped, each placed among
    the replayed records (its map generation and comm); and the chunk's facts."""

    s: SampleColumns
    gen: I64
    comm: I64
    damaged: int
    recorded: I64  # samples per event, before the filters
    first_time: int
    period_total: float


def placed_samples(plan: Plan, index: int, lean: bool = True,
                   inflated: tuple[list[FileFrame], RecordViews] | None = None) -> Placed:
    """Chunk ``index``'s samples (``lean``: without their registers, stack copies and the
    other wide fields, which a tally counts no row by); ``inflated``: the chunk's frames as
    inflated into a buffer of their own (``FrameStream.view_of``), views over their payloads
    there and over the buffer."""
    decoder = plan.decoder
    frames, seq0 = plan.chunks[index] if inflated is None else (inflated[0], plan.chunks[index][1])
    views = None if inflated is None else inflated[1]
    chunk = decoder.records(frames, seq0, [], views)  # its warnings were given by the first pass
    s, damaged = decoder.samples(chunk, plan.callchains, lean, views)
    if inflated is None:
        decoder.release(frames)
    del chunk
    recorded = np.bincount(s.event, minlength=len(decoder.events.events)).astype(np.int64)
    first_time = int(s.time.min()) if len(s) else -1
    total = period_total(s.period)  # of every sample, as load_profile checks it
    keep = kept_samples(plan, s)
    if not keep.all():
        s = s.take(keep)
    positions = sample_positions(plan.other_time, plan.other_seq, s.time, s.seq)
    gen, comm = place_samples(plan.state, s.pid, s.tid, positions)
    return Placed(s, gen, comm, damaged, recorded, first_time, total)


def tallied(plan: Plan, p: Placed, misc: I64 | None = None, warnings: list[str] | None = None) -> ChunkResult:
    """Placed samples summed into distinct rows, with the chains the rows use. ``misc``: the
    rows' ``misc`` key (by default the samples' cpumode bits; a tally that unwinds adds each
    sample's unwind stop reason above them: see ``tally_unwound``)."""
    s, gen, comm = p.s, p.gen, p.comm
    n = len(s)
    chainless = s.chain_id == 0
    rows = Rows(
        event=s.event.astype(np.int64), pid=s.pid.astype(np.int64), tid=s.tid.astype(np.int64),
        cpu=s.cpu.astype(np.int64) if plan.keep_cpu else np.zeros(n, dtype=np.int64),
        comm=comm, gen=gen, misc=s.misc.astype(np.int64) if misc is None else misc,
        chain_id=s.chain_id.astype(np.int64),
        ip=np.where(chainless, s.ip, np.uint64(0)).astype(np.uint64),
        count=np.ones(n, dtype=np.int64), period=s.period.astype(np.uint64),
        last_time=s.time.astype(np.uint64), last_seq=s.seq.astype(np.int64),
    ).combine()
    used, local = np.unique(rows.chain_id, return_inverse=True)
    rows.chain_id = local.astype(np.int64).reshape(-1)
    chains = s.chains
    lengths = chains.lengths[used]
    start = np.zeros(len(used) + 1, dtype=np.int64)
    np.cumsum(lengths, out=start[1:])
    table = ChainTable(start, chains.words[ranges(chains.start[used], lengths)])
    if not len(used) or used[0] != 0:  # keep id 0 the empty chain
        table = ChainTable(np.concatenate([[0], start]).astype(np.int64), table.words)
        rows.chain_id = rows.chain_id + 1
    return ChunkResult(rows, table, p.recorded, p.damaged, s.has, p.first_time, p.period_total,
                        warnings or [])


def check_cpu_filter(reader: CaptureReader, events: EventTable, filters: Filters) -> None:
    """``--cpu`` on samples that name no CPU is refused, as perf refuses ``-C`` ("File does
    not contain CPU events"), rather than selecting nothing."""
    if filters.cpus and not samples_have_cpu(reader, events):
        raise ReportError(f"{reader.path}: its samples carry no CPU (recorded without -a, -C or "
                          f"--sample-cpu), so --cpu cannot select them.")


def kept_samples(plan: Plan, s: SampleColumns) -> npt.NDArray[np.bool_]:
    """The samples ``--cpu`` and ``--time`` keep (they drop samples; the other filters select
    rows, see ``pipeline.load_profile``)."""
    keep = np.ones(len(s), dtype=bool)
    if plan.cpus:
        keep &= np.isin(s.cpu, np.asarray(plan.cpus, dtype=np.int64))
    if plan.time_ranges:
        in_range = np.zeros(len(s), dtype=bool)
        for lo, hi in plan.time_ranges:
            in_range |= (s.time >= np.uint64(lo)) & (s.time <= np.uint64(hi))
        keep &= in_range
    return keep


def sample_positions(other_time: U64, other_seq: I64, time: U64, seq: I64) -> I64:
    """For each sample, the number of replayed records before it in (time, file position)
    order; the records are sorted that way."""
    lo = np.searchsorted(other_time, time, side="left").astype(np.int64)
    hi = np.searchsorted(other_time, time, side="right").astype(np.int64)
    tie = np.flatnonzero(hi > lo)
    if len(tie):
        by_block = tie[np.argsort(lo[tie], kind="stable")]
        blocks = lo[by_block]
        cut = np.flatnonzero(np.diff(blocks)) + 1
        for part in np.split(by_block, cut):
            a, b = int(lo[part[0]]), int(hi[part[0]])
            lo[part] = a + np.searchsorted(other_seq[a:b], seq[part], side="left")
    return lo
