"""Columnar decoding of a whole capture: the reporter's hot path.

A per-record Python object costs about 2 µs; a capture of a million samples needs better:

* Record starts are found per frame with whole-array operations (:mod:`.views`).
* Every sample field is gathered for all samples of a chunk at once (:mod:`.samples`), and
  callchains are deduplicated while decoding (:mod:`.chains`).
* The file is processed in chunks of frames, and the pages of each chunk are given back to the
  kernel once it is decoded (``CaptureReader.release``), so resident memory does not grow with
  the file.

Only the non-sample records — few: MMAP, COMM, FORK, ... — are decoded one by one into
``records`` objects.

Damage is never trusted: a record whose size runs past its frame ends that frame's stream (with a
warning); a sample whose fields would run past its record is dropped (counted in a warning).
:mod:`.columns` says what every column of the result holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.errors import FormatError
from profiler.format import records as R
from profiler.format.container.layout import FRAME_HEADER_SIZE, FRAME_RAW, FRAME_SYNTH, NO_CPU, VERSION_FRAME_CPU
from profiler.format.container.reader import CaptureReader
from profiler.format.container.scan import FileFrame
from profiler.format.decode.columns import CaptureData, OtherRecord, SampleColumns
from profiler.format.decode.samples import SampleBuilder
from profiler.format.decode.switches import SWITCH_TYPES, SwitchColumns, columnar_layout, decode_switches
from profiler.format.decode.views import RecordViews
from profiler.format.events import EventTable

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

CHUNK_BYTES = 8 << 20  # frames decoded (and their pages released) this many bytes at a time


def period_total(period: U64) -> float:
    """The sum of ``period`` without the wrap-around of a 64-bit sum (to compare with 2^64)."""
    return float(period.sum(dtype=np.float64)) if len(period) else 0.0


def check_period_total(total: float) -> None:
    """Periods are summed in 64 bits (perf's u64): a report whose periods add up to 2^64 or
    more would show wrapped-around sums, so it is refused (real periods are nowhere near:
    2^64 ns is 584 years of cpu-clock). Decoding does not check: ``dump`` shows each record
    as it was recorded."""
    if total >= 2.0 ** 64:
        raise FormatError("the samples' periods add up to 2^64 or more: the capture's PERIOD fields are damaged.")


def _chunks(frames: list[FileFrame], chunk_bytes: int = CHUNK_BYTES) -> Iterator[list[FileFrame]]:
    batch: list[FileFrame] = []
    size = 0
    for frame in frames:
        batch.append(frame)
        size += len(frame.payload)
        if size >= chunk_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def load_capture(reader: CaptureReader, callchains: bool = True) -> CaptureData:
    """Decode every record of ``reader`` into ``CaptureData`` (samples columnar).

    ``callchains=False`` skips the callchains (every ``chain_id`` is 0, the empty chain): a
    flat profile of sampled ips needs none, and it halves the decoding time."""
    events = EventTable.from_header(reader.header)
    views = RecordViews(reader, events.bo)
    frames = [f for f in reader.iter_frames() if f.kind in (FRAME_RAW, FRAME_SYNTH) and len(f.payload)]
    warnings: list[str] = []
    counts: Counter[str] = Counter()
    # Pass 1: where the records are, and how many samples (to size the columns once).
    chunks = []
    n_samples = 0
    for chunk in _chunks(frames, CHUNK_BYTES):
        parts = [views.record_offsets(frame, warnings) for frame in chunk]
        offsets = np.concatenate(parts)
        cpus = np.repeat(np.asarray([f.cpu for f in chunk], dtype=np.int64), [len(p) for p in parts])
        types = views.w32[offsets >> 2].astype(np.int64)
        is_sample = types == R.PERF_RECORD_SAMPLE
        n_samples += int(np.count_nonzero(is_sample))
        check_frame_cpus(reader, events, cpus[is_sample], warnings)
        chunks.append((chunk, offsets, cpus, types))
        _release(reader, chunk)
    # Pass 2: decode.
    builder = SampleBuilder(events, n_samples, callchains, cpu_limit=cpu_limit(reader))
    others: list[OtherRecord] = []
    switch_layout = columnar_layout(events)
    switches: list[SwitchColumns] = []
    failed = 0
    next_seq = 0
    for chunk, offsets, cpus, types in chunks:
        sizes = views.w16[(offsets >> 1) + 3].astype(np.int64)
        seq = np.arange(next_seq, next_seq + len(offsets), dtype=np.int64)
        next_seq += len(offsets)
        count_types(types, counts)
        is_sample = types == R.PERF_RECORD_SAMPLE
        builder.add(views, offsets[is_sample], sizes[is_sample], seq[is_sample], cpus[is_sample])
        rest = ~is_sample
        if switch_layout is not None:
            is_switch = (types == SWITCH_TYPES[0]) | (types == SWITCH_TYPES[1])
            if is_switch.any():
                cols, damaged = decode_switches(views.w32, views.w64, switch_layout, events.bo == "<",
                                                offsets[is_switch], sizes[is_switch], types[is_switch],
                                                cpus[is_switch])
                switches.append(cols)
                failed += int(np.count_nonzero(damaged))
            rest &= ~is_switch
        failed += _decode_others(views, events, offsets, sizes, types, cpus, seq, np.flatnonzero(rest), others)
        _release(reader, chunk)
    del chunks
    samples = builder.finish()
    if builder.damaged:
        warnings.append(f"{builder.damaged} damaged samples (callchain longer than the record) "
                        f"were skipped.")
    if failed:
        warnings.append(f"{failed} damaged non-sample records were skipped.")
    others_sorted, others_before = _order(samples, others)
    return CaptureData(reader.header, events, samples, others_sorted, others_before, counts,
                       warnings, builder.damaged,
                       SwitchColumns.concat(switches) if switch_layout is not None else None)


@dataclass
class RecordChunk:
    """Consecutive frames of a capture with their records' file offsets, types and sizes;
    ``seq0`` is the file-order number of the first record (see ``SampleColumns.seq``)."""

    frames: list[FileFrame]
    offsets: I64
    cpus: I64
    types: I64
    sizes: I64
    seq0: int

    @property
    def seq(self) -> I64:
        return np.arange(self.seq0, self.seq0 + len(self.offsets), dtype=np.int64)


class ChunkDecoder:
    """The capture decoded one chunk at a time (the report's bounded-memory path): the records
    of each chunk (:meth:`chunks`), its samples as columns (:meth:`samples`) and its other
    records as objects (:meth:`others`). Chain ids are those of the chunk's own chain table."""

    def __init__(self, reader: CaptureReader, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.reader = reader
        self.events = EventTable.from_header(reader.header)
        self.chunk_bytes = chunk_bytes
        self._views: RecordViews | None = None
        self._frames: list[FileFrame] | None = None

    @property
    def views(self) -> RecordViews:
        """Views over the whole capture (made on first use: they inflate its RAW_ZSTD frames)."""
        if self._views is None:
            self._views = RecordViews(self.reader, self.events.bo)
        return self._views

    @property
    def frames(self) -> list[FileFrame]:
        """The capture's RAW and SYNTH frames (RAW_ZSTD ones inflated), on first use."""
        if self._frames is None:
            self._frames = [f for f in self.reader.iter_frames() if f.kind in (FRAME_RAW, FRAME_SYNTH)
                            and len(f.payload)]
        return self._frames

    def plan(self) -> list[list[FileFrame]]:
        """The frames, grouped into chunks of about ``chunk_bytes``."""
        return list(_chunks(self.frames, self.chunk_bytes))

    def records(self, frames: list[FileFrame], seq0: int, warnings: list[str],
                views: RecordViews | None = None) -> RecordChunk:
        """The records of ``frames`` (their offsets in ``views``, by default the whole capture's:
        frames inflated into a buffer of their own are given with views over it)."""
        views = views or self.views
        parts = [views.record_offsets(frame, warnings) for frame in frames]
        offsets = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        cpus = np.repeat(np.asarray([f.cpu for f in frames], dtype=np.int64), [len(p) for p in parts])
        types = views.w32[offsets >> 2].astype(np.int64)
        sizes = views.w16[(offsets >> 1) + 3].astype(np.int64)
        check_frame_cpus(self.reader, self.events, cpus[types == R.PERF_RECORD_SAMPLE], warnings)
        return RecordChunk(frames, offsets, cpus, types, sizes, seq0)

    def samples(self, chunk: RecordChunk, callchains: bool = True, lean: bool = False,
                views: RecordViews | None = None) -> tuple[SampleColumns, int]:
        """The chunk's samples (file order) and how many were damaged (skipped); ``lean``: the
        core columns and callchains only (see ``SampleBuilder``); ``views``: as for :meth:`records`."""
        is_sample = chunk.types == R.PERF_RECORD_SAMPLE
        builder = SampleBuilder(self.events, int(np.count_nonzero(is_sample)), callchains, lean,
                                 cpu_limit(self.reader))
        builder.add(views or self.views, chunk.offsets[is_sample], chunk.sizes[is_sample], chunk.seq[is_sample],
                    chunk.cpus[is_sample])
        return builder.finish(), builder.damaged

    def others(self, chunk: RecordChunk, out: list[OtherRecord]) -> int:
        """Decode the chunk's non-sample records into ``out``; the number that were damaged.
        Context-switch records are left out: the replay needs none, and a ``--off-cpu`` capture
        has two per switch (the whole decode gives them as columns, ``CaptureData.switches``)."""
        idx = np.flatnonzero((chunk.types != R.PERF_RECORD_SAMPLE) & ~np.isin(chunk.types, SWITCH_TYPES))
        return _decode_others(self.views, self.events, chunk.offsets, chunk.sizes, chunk.types, chunk.cpus,
                              chunk.seq, idx, out)

    def release(self, frames: list[FileFrame]) -> None:
        _release(self.reader, frames)


def cpu_limit(reader: CaptureReader) -> int:
    """Samples without a CPU field take their frame's ``cpu`` when it is below this: the
    machine's ``nr_cpus`` in format 3.0, 0 (never) in older captures and perf.data files."""
    if reader.version < VERSION_FRAME_CPU:
        return 0
    n = reader.info.nr_cpus
    return n if n is not None and n < NO_CPU else NO_CPU


def frame_cpus_needed(events: EventTable) -> bool:
    """Whether some event's samples take their CPU from their frame (no PERF_SAMPLE_CPU)."""
    return any(not ev.layout.sample_type & R.PERF_SAMPLE_CPU for ev in events.events)


def samples_have_cpu(reader: CaptureReader, events: EventTable) -> bool:
    """Whether the capture's samples name their CPU: every event has PERF_SAMPLE_CPU, or
    (format 3.0) their frames name it. perf.data files of a command recorded without ``-a``,
    ``-C`` or ``--sample-cpu`` (and captures imported from them) do not."""
    return reader.version >= VERSION_FRAME_CPU or not frame_cpus_needed(events)


def check_frame_cpus(reader: CaptureReader, events: EventTable, cpus: I64, warnings: list[str]) -> None:
    """Warn, once per chunk, when samples that take their CPU from their frame (format 3.0)
    are in frames that name no CPU of the machine: their CPU is then unknown (-1). Captures
    of older versions (and perf.data files) may hold samples without a CPU: not a warning."""
    if not len(cpus) or reader.version < VERSION_FRAME_CPU or not frame_cpus_needed(events):
        return
    limit = cpu_limit(reader)
    bad = cpus >= limit
    if bad.any():
        first = int(cpus[np.flatnonzero(bad)[0]])
        what = "no CPU" if first == NO_CPU else f"CPU {first} (the machine had {limit})"
        warnings.append(f"{int(np.count_nonzero(bad))} samples are in frames that name {what}: "
                        f"their CPU is unknown (shown as -1).")


def count_types(types: I64, counts: Counter[str]) -> None:
    """Add the records of each type to ``counts`` (by record name)."""
    for t, c in enumerate(np.bincount(np.minimum(types, 255)).tolist()):
        if c:
            counts[R.record_name(t) if t < 255 else "OTHER"] += int(c)


def _release(reader: CaptureReader, chunk: list[FileFrame]) -> None:
    first, last = chunk[0], chunk[-1]
    reader.release(first.offset, last.offset + FRAME_HEADER_SIZE + len(last.payload) - first.offset)


def decode_others(views: RecordViews, events: EventTable, offsets: I64, cpus: I64, seq: I64,
                  out: list[OtherRecord]) -> int:
    """Decode the non-sample records at file ``offsets`` (from frames of ``cpus``, numbered
    ``seq`` in file order) into ``out``; the number that were damaged."""
    sizes = views.w16[(offsets >> 1) + 3].astype(np.int64)
    types = views.w32[offsets >> 2].astype(np.int64)
    return _decode_others(views, events, offsets, sizes, types, cpus, seq, np.arange(len(offsets)), out)


def _decode_others(views: RecordViews, events: EventTable, offsets: I64, sizes: I64, types: I64,
                   cpus: I64, seq: I64, idx: I64, out: list[OtherRecord]) -> int:
    view = views.view
    failed = 0
    for i in idx.tolist():
        off, size, rtype = int(offsets[i]), int(sizes[i]), int(types[i])
        ev = events.event_for(view, off, rtype, size)
        try:
            rec = R.decode_record(view[:off + size], off, ev.layout)
        except FormatError:
            failed += 1
            continue
        t = R.record_time(rec)
        out.append(OtherRecord(-1 if t is None else t, int(seq[i]), int(cpus[i]), rec))
    return failed


def _order(samples: SampleColumns, others: list[OtherRecord]) -> tuple[list[OtherRecord], I64]:
    """Sort the samples (in place) by (time, file order) and place the other records among them.

    The samples arrive in file order; the others are few, so each is placed by binary search
    instead of sorting everything together. A record without a time (no sample_id_all) takes
    the latest time seen before it in file order, so it stays where the kernel put it relative
    to its neighbours.
    """
    n = len(samples)
    others = sorted(others, key=lambda o: o.seq)
    if any(o.time < 0 for o in others):
        running = np.maximum.accumulate(samples.time) if n else samples.time
        latest = 0
        for o in others:
            k = int(np.searchsorted(samples.seq, o.seq)) - 1  # last sample before it in the file
            if k >= 0:
                latest = max(latest, int(running[k]))
            if o.time < 0:
                o.time = latest
            latest = max(latest, o.time)
    # A stable sort by time of samples in file order breaks ties by file order.
    if n > 1 and not (samples.time[1:] >= samples.time[:-1]).all():
        samples.permute(np.argsort(samples.time, kind="stable"))
    times, seqs = samples.time, samples.seq
    before = np.empty(len(others), dtype=np.int64)
    for k, o in enumerate(others):
        lo = int(np.searchsorted(times, np.uint64(o.time), side="left"))
        hi = int(np.searchsorted(times, np.uint64(o.time), side="right"))
        before[k] = lo + int(np.count_nonzero(seqs[lo:hi] < o.seq))
    order = sorted(range(len(others)), key=lambda k: (others[k].time, others[k].seq))
    return [others[k] for k in order], before[np.asarray(order, dtype=np.int64)] if order else before
