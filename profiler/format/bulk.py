"""Columnar decoding of a whole capture: the reporter's hot path.

A per-record Python object costs about 2 µs; a capture of a million samples needs better:

* Record starts are found per frame with whole-array operations (``_Views.record_offsets``),
  falling back to a tight sequential walk only when a frame holds something odd.
* Every fixed sample field is gathered for all samples of a chunk at once with numpy fancy
  indexing into the memory-mapped file (no copy of the raw bytes is ever made).
* Callchains are deduplicated while decoding: each chain is hashed (two independent 64-bit
  position-aware hashes), identical chains share one ``chain_id``, and only the distinct chains
  are kept (``ChainTable``). A program has thousands of distinct stacks, not millions, so memory
  is ~50 bytes a sample whatever the depth, and the reporter symbolizes each chain once.
* The file is processed in chunks of frames, and the pages of each chunk are given back to the
  kernel once it is decoded (``CaptureReader.release``), so resident memory does not grow with
  the file.

Only the non-sample records — few: MMAP, COMM, FORK, ... — are decoded one by one into
``records`` objects.

Damage is never trusted: a record whose size runs past its frame ends that frame's stream (with a
warning); a sample whose callchain would run past its record is dropped (counted in a warning).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.errors import FormatError
from profiler.format import records as R
from profiler.format.container import FRAME_HEADER_SIZE, FRAME_RAW, FRAME_SYNTH, CaptureReader, Frame
from profiler.format.events import Event, EventTable

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]

CHUNK_BYTES = 8 << 20

# Callchain context markers as numpy scalars, for whole-array comparisons, and the cpumodes
# whose samples are kernel addresses.
CONTEXT_MAX = np.uint64(R.PERF_CONTEXT_MAX)
CONTEXT_KERNEL = np.uint64(R.PERF_CONTEXT_KERNEL)
CONTEXT_USER = np.uint64(R.PERF_CONTEXT_USER)
KERNEL_MODES = (R.PERF_RECORD_MISC_KERNEL, R.PERF_RECORD_MISC_GUEST_KERNEL)  # frames decoded (and their pages released) this many bytes at a time


@dataclass
class ChainTable:
    """The distinct callchains of a capture, CSR: chain k is ``words[start[k]:start[k + 1]]``.

    Chain 0 is the empty chain (samples without PERF_SAMPLE_CALLCHAIN, or with ``nr`` 0)."""

    start: I64
    words: U64

    def __len__(self) -> int:
        return int(self.start.shape[0]) - 1

    def get(self, chain_id: int) -> U64:
        return self.words[self.start[chain_id]:self.start[chain_id + 1]]

    @property
    def lengths(self) -> I64:
        out: I64 = np.diff(self.start)
        return out


@dataclass
class SampleColumns:
    """Every sample of a capture, one numpy array per field, sorted by (time, file order).

    A column whose PERF_SAMPLE_* bit is absent is all zeros (``has`` says which exist).
    ``chain(i)`` — ``chains.get(chain_id[i])`` — is sample i's callchain as the kernel wrote it,
    PERF_CONTEXT_* markers included.
    """

    event: npt.NDArray[np.int16]
    ip: U64
    pid: I32
    tid: I32
    time: U64
    cpu: I32
    period: U64
    misc: npt.NDArray[np.uint16]
    seq: I64  # position of the record in file order (across all record frames)
    chain_id: I32
    chains: ChainTable
    has: frozenset[str] = frozenset()
    # file offset of each sample's record (in ``CaptureReader.raw_view()``): fields the
    # columns leave out (REGS_USER, STACK_USER) are read from there
    offset: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.ip.shape[0])

    @property
    def cpumode(self) -> npt.NDArray[np.uint16]:
        return self.misc & np.uint16(R.PERF_RECORD_MISC_CPUMODE_MASK)

    @property
    def chain_len(self) -> I64:
        out: I64 = self.chains.lengths[self.chain_id]
        return out

    def chain(self, i: int) -> U64:
        return self.chains.get(int(self.chain_id[i]))

    def flat_chains(self) -> tuple[I64, U64]:
        """Every sample's callchain gathered into one array: (CSR start offsets of n + 1,
        entries). Memory grows with samples x depth: prefer ``chain_id`` and ``chains``."""
        lengths = self.chain_len
        start = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(lengths, out=start[1:])
        words = self.chains.words[ranges(self.chains.start[self.chain_id], lengths)]
        return start, words.astype(np.uint64)

    def take(self, index: npt.NDArray[Any]) -> SampleColumns:
        """The samples selected by a boolean mask or index array."""
        idx = np.flatnonzero(index) if index.dtype == bool else np.asarray(index, dtype=np.int64)
        return SampleColumns(
            event=self.event[idx], ip=self.ip[idx], pid=self.pid[idx], tid=self.tid[idx],
            time=self.time[idx], cpu=self.cpu[idx], period=self.period[idx], misc=self.misc[idx],
            seq=self.seq[idx], chain_id=self.chain_id[idx], chains=self.chains, has=self.has,
            offset=self.offset[idx] if len(self.offset) else self.offset,
        )

    _COLUMNS = ("event", "ip", "pid", "tid", "time", "cpu", "period", "misc", "seq", "chain_id",
                "offset")

    def permute(self, order: I64) -> None:
        """Reorder every column in place (one column's temporary at a time)."""
        for name in self._COLUMNS:
            column = getattr(self, name)
            column[:] = column[order]


@dataclass
class OtherRecord:
    """A non-sample record with its place in time order."""

    time: int
    seq: int
    cpu: int  # the ring buffer it came from, NO_CPU for synthesized records
    record: R.Record


@dataclass
class CaptureData:
    """A capture decoded for reporting."""

    header: dict[str, Any]
    events: EventTable
    samples: SampleColumns
    others: list[OtherRecord]  # sorted by (time, seq)
    # others_before[k] = number of samples (in sorted order) that come before others[k]
    others_before: I64
    counts: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    damaged_samples: int = 0


def ranges(starts: I64, lengths: I64) -> I64:
    """Concatenation of arange(s, s + n) for every (s, n): fully vectorised."""
    nonzero = lengths > 0
    s, n = starts[nonzero].astype(np.int64), lengths[nonzero].astype(np.int64)
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    steps = np.ones(total, dtype=np.int64)
    steps[0] = s[0]
    # at each range start, jump from the previous range's last element to this range's start
    steps[np.cumsum(n)[:-1]] = s[1:] - (s[:-1] + n[:-1] - 1)
    return np.cumsum(steps)


def _walk_record_offsets(sizes16: memoryview, end: int) -> tuple[list[int], int]:
    """Offsets of the records in a frame payload, walked one by one; and where the good part
    stops. ``sizes16`` is the payload as native u16: a record's size is u16 number 3 of its
    header."""
    offsets: list[int] = []
    append = offsets.append
    pos = 0
    last = end - 8
    while pos <= last:
        size = sizes16[(pos >> 1) + 3]
        if size < 8 or size & 7 or pos + size > end:
            break
        append(pos)
        pos += size
    return offsets, pos


class _Views:
    """Typed views over the whole (memory-mapped) capture; record offsets are file offsets.

    Frames start 8-aligned and raw payloads are whole records, so every record (and every u64
    field in it) is 8-aligned in the file.
    """

    def __init__(self, reader: CaptureReader, bo: str) -> None:
        view = reader.raw_view()
        size = len(view) - len(view) % 8
        self.native = (bo == "<") == (sys.byteorder == "little")
        self.view = view
        self.w64 = np.frombuffer(view, dtype=bo + "u8", count=size // 8)
        self.w32 = np.frombuffer(view, dtype=bo + "u4", count=size // 4)
        self.w16 = np.frombuffer(view, dtype=bo + "u2", count=size // 2)

    def record_offsets(self, frame: Frame, warnings: list[str]) -> I64:
        """File offsets of the records of one frame.

        Fast path: every word whose header ``size`` field could be a record size is a candidate
        start; if following the sizes from the first candidate visits exactly the candidates and
        ends at the frame's end, they are the records (a proof by induction, checked with
        whole-array operations). Otherwise — a record body that looks like a header, or damage —
        the exact sequential walk decides.
        """
        start = frame.offset + FRAME_HEADER_SIZE
        end = len(frame.payload)
        first, nwords = start >> 3, end >> 3
        sizes = self.w16[(first * 4 + 3):((first + nwords) * 4):4]  # a strided view, no copy
        cand = np.flatnonzero((sizes >= 8) & ((sizes & 7) == 0))
        if end % 8 == 0 and len(cand) and cand[0] == 0:
            nxt = cand + (sizes[cand] >> 3).astype(np.int64)
            if nxt[-1] == nwords and np.array_equal(nxt[:-1], cand[1:]):
                out: I64 = (cand << 3) + start
                return out
        offs, stop = _walk_record_offsets(self._sizes16(frame.payload), end)
        if stop != end:
            warnings.append(f"a damaged record in frame {frame.seq}: skipped its last "
                            f"{end - stop} bytes.")
        return np.asarray(offs, dtype=np.int64) + start

    def _sizes16(self, payload: memoryview) -> memoryview:
        if self.native:
            return payload.cast("H")
        swapped: bytes = np.frombuffer(payload, dtype=np.uint16).byteswap().tobytes()
        return memoryview(swapped).cast("H")


# --- chain deduplication ------------------------------------------------------------------

_MAX_DEPTH = 0x10000  # more entries than any record can hold (size is a u16)
_rng = np.random.default_rng(0x5EED)  # fixed: chain ids must not depend on the run
# Two tables of odd 64-bit multipliers, one per position in a chain: a chain's hash is
# sum(word[p] * K[p]) mod 2**64. Chains differing in one position never collide (K[p] is odd);
# two independent tables make any other collision a 2**-128 event.
_KA = _rng.integers(0, 2**63, _MAX_DEPTH + 1, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
_KB = _rng.integers(0, 2**63, _MAX_DEPTH + 1, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


class _ChainStore:
    """Assigns one id to each distinct callchain (by a 128-bit hash) and keeps its words."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, int], int] = {}
        self.parts: list[U64] = [np.zeros(0, dtype=np.uint64)]  # chain 0: empty
        self.lengths: list[int] = [0]

    def add(self, w64: U64, first: I64, lengths: I64) -> I32:
        """Chain ids for the chains at word ``first`` of ``lengths`` words.

        The hashes are accumulated one chain position at a time over the chains that long
        (sorted longest first, so they are a prefix): no per-word index array is built."""
        n = len(first)
        out = np.zeros(n, dtype=np.int32)
        nonempty = np.flatnonzero(lengths > 0)
        if not len(nonempty):
            return out
        by_len = nonempty[np.argsort(-lengths[nonempty], kind="stable")]
        f, ln = first[by_len], lengths[by_len]
        longer = np.searchsorted(-ln, -np.arange(int(ln[0])), side="left")  # count with ln > d
        h1 = ln.astype(np.uint64) * _KB[0]
        h2 = ln.astype(np.uint64) * _KA[0]
        for d, c in enumerate(longer.tolist()):
            w = w64[f[:c] + d].astype(np.uint64, copy=False)  # a fresh array (fancy index)
            t = w * _KB[d + 1]
            w *= _KA[d + 1]
            h1[:c] += w
            h2[:c] += t
        order = np.lexsort((h2, h1))
        a, b = h1[order], h2[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
        group = np.cumsum(new) - 1
        reps = order[new]
        group_ids = np.empty(len(reps), dtype=np.int32)
        ids = self.ids
        for g, (k1, k2, rep) in enumerate(zip(h1[reps].tolist(), h2[reps].tolist(), reps.tolist())):
            key = (k1, k2)
            cid = ids.get(key)
            if cid is None:
                cid = len(self.lengths)
                ids[key] = cid
                start, length = int(f[rep]), int(ln[rep])
                self.parts.append(w64[start:start + length].astype(np.uint64))
                self.lengths.append(length)
            group_ids[g] = cid
        per_sample = np.empty(len(order), dtype=np.int32)
        per_sample[order] = group_ids[group]
        out[by_len] = per_sample
        return out

    def table(self) -> ChainTable:
        start = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(np.asarray(self.lengths, dtype=np.int64), out=start[1:])
        return ChainTable(start, np.concatenate(self.parts).astype(np.uint64))


# --- decoding -----------------------------------------------------------------------------


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


def _read_words(read_format: int) -> int:
    """Words of a non-group ``struct read_format``."""
    return 1 + R._popcount(read_format & (R.PERF_FORMAT_TOTAL_TIME_ENABLED
                                          | R.PERF_FORMAT_TOTAL_TIME_RUNNING
                                          | R.PERF_FORMAT_ID | R.PERF_FORMAT_LOST))


_DTYPES: dict[str, Any] = {
    "event": np.int16, "ip": np.uint64, "pid": np.int32, "tid": np.int32, "time": np.uint64,
    "cpu": np.int32, "period": np.uint64, "misc": np.uint16, "seq": np.int64, "chain_id": np.int32,
    "offset": np.int64,
}


class _SampleBuilder:
    """Fills sample columns chunk by chunk.

    The columns are allocated once, at their final size (the number of sample records is
    counted first), so no chunk's pieces are kept and concatenated: peak memory stays the
    columns plus one chunk's temporaries."""

    def __init__(self, events: EventTable, n: int, callchains: bool = True) -> None:
        self.events = events
        self.callchains = callchains
        self.cols: dict[str, npt.NDArray[Any]] = {k: np.empty(n, dtype=t) for k, t in _DTYPES.items()}
        self.filled = 0
        self.store = _ChainStore()
        self.damaged = 0
        self.has: set[str] = set()

    def add(self, views: _Views, offs: I64, sizes: I64, seq: I64) -> None:
        events = self.events
        if len(events.events) == 1 or not events.identifier:  # same layouts still differ by id
            self._add_group(views, events.default, offs, sizes, seq)
            return
        ident = views.w64[(offs >> 3) + 1] if len(offs) else np.zeros(0, dtype=np.uint64)
        event_of = np.zeros(len(offs), dtype=np.int64)
        for ev in events.events[1:]:
            if ev.ids:
                event_of[np.isin(ident, np.asarray(ev.ids, dtype=np.uint64))] = ev.index
        for ev in events.events:
            idx = np.flatnonzero(event_of == ev.index)
            if len(idx):
                self._add_group(views, ev, offs[idx], sizes[idx], seq[idx])

    def _add_group(self, views: _Views, ev: Event, offs: I64, sizes: I64, seq: I64) -> None:
        layout = ev.layout
        st = layout.sample_type
        where = _sample_fields(layout)
        base = offs >> 3
        end = base + (sizes >> 3)
        ok = end >= base + where["_end"]
        w64, w32 = views.w64, views.w32
        cur = base + where["_end"]
        if st & R.PERF_SAMPLE_READ:
            if layout.read_format & R.PERF_FORMAT_GROUP:
                nr = w64[np.minimum(np.where(ok, cur, 0), len(w64) - 1)].astype(np.int64)
                per = (1 + bool(layout.read_format & R.PERF_FORMAT_ID)
                       + bool(layout.read_format & R.PERF_FORMAT_LOST))
                nr = np.where((nr < 0) | (nr > 0x10000), 0x10000, nr)
                cur = cur + 1 + R._popcount(layout.read_format & 3) + nr * per
            else:
                cur = cur + _read_words(layout.read_format)
            ok &= cur <= end
        if st & R.PERF_SAMPLE_CALLCHAIN:
            inside = ok & (cur < end)
            nr = np.where(inside, w64[np.where(inside, cur, 0)].astype(np.uint64), 0)
            room = (end - cur - 1).clip(min=0).astype(np.uint64)
            ok &= inside & (nr <= room)
            lengths = np.where(ok, nr, 0).astype(np.int64)
            self.has.add("callchain")
        else:
            lengths = np.zeros(len(offs), dtype=np.int64)
        self.has.update(name for name in where if not name.startswith("_"))
        if not self.callchains:
            self.has.discard("callchain")

        n = len(offs)
        damaged = int(n - np.count_nonzero(ok))
        self.damaged += damaged
        keep = np.flatnonzero(ok) if damaged else np.arange(n)
        kbase = base[keep]
        nk = len(keep)

        def word(name: str, default: int = 0) -> U64:
            if name not in where:
                return np.full(nk, default, dtype=np.uint64)
            out: U64 = w64[kbase + where[name]].astype(np.uint64, copy=False)
            return out

        def half(name: str, second: bool) -> I32:
            if name not in where:
                return np.zeros(nk, dtype=np.int32)
            out: I32 = w32[(kbase + where[name]) * 2 + int(second)].astype(np.uint32, copy=False).view(np.int32)
            return out

        at = slice(self.filled, self.filled + nk)
        self.filled += nk
        c = self.cols
        c["event"][at] = ev.index
        c["ip"][at] = word("ip")
        c["pid"][at] = half("tid", False)
        c["tid"][at] = half("tid", True)
        c["time"][at] = word("time")
        c["cpu"][at] = half("cpu", False)
        c["period"][at] = word("period", 1)
        c["misc"][at] = views.w16[(offs[keep] >> 1) + 2]
        c["seq"][at] = seq[keep]
        c["offset"][at] = offs[keep]
        if self.callchains:
            c["chain_id"][at] = self.store.add(w64, (cur + 1)[keep].astype(np.int64), lengths[keep])
        else:
            c["chain_id"][at] = 0

    def finish(self) -> SampleColumns:
        cols = {name: column[:self.filled] for name, column in self.cols.items()}
        samples = SampleColumns(chains=self.store.table(), has=frozenset(self.has), **cols)
        if len(samples) > 1 and not (np.diff(samples.seq) > 0).all():
            samples.permute(np.argsort(samples.seq, kind="stable"))  # several events: file order
        return samples


def _chunks(frames: list[Frame]) -> Iterator[list[Frame]]:
    batch: list[Frame] = []
    size = 0
    for frame in frames:
        batch.append(frame)
        size += len(frame.payload)
        if size >= CHUNK_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def load_capture(reader: CaptureReader, callchains: bool = True) -> CaptureData:
    """Decode every record of ``reader`` into ``CaptureData`` (samples columnar).

    ``callchains=False`` skips the callchains (every ``chain_id`` is 0, the empty chain): a
    flat profile of sampled ips needs none, and it halves the decoding time."""
    header = reader.header
    events = EventTable.from_header(header)
    views = _Views(reader, events.bo)
    frames = [f for f in reader.iter_frames() if f.kind in (FRAME_RAW, FRAME_SYNTH) and len(f.payload)]
    warnings: list[str] = []
    counts: Counter[str] = Counter()
    # Pass 1: where the records are, and how many samples (to size the columns once).
    chunks = []
    n_samples = 0
    for chunk in _chunks(frames):
        parts = [views.record_offsets(frame, warnings) for frame in chunk]
        offsets = np.concatenate(parts)
        cpus = np.repeat(np.asarray([f.cpu for f in chunk], dtype=np.int64), [len(p) for p in parts])
        n_samples += int(np.count_nonzero(views.w32[offsets >> 2] == R.PERF_RECORD_SAMPLE))
        chunks.append((chunk, offsets, cpus))
        _release(reader, chunk)
    # Pass 2: decode.
    builder = _SampleBuilder(events, n_samples, callchains)
    others: list[OtherRecord] = []
    failed = 0
    next_seq = 0
    for chunk, offsets, cpus in chunks:
        types = views.w32[offsets >> 2].astype(np.int64)
        sizes = views.w16[(offsets >> 1) + 3].astype(np.int64)
        seq = np.arange(next_seq, next_seq + len(offsets), dtype=np.int64)
        next_seq += len(offsets)
        for t, c in enumerate(np.bincount(np.minimum(types, 255)).tolist()):
            if c:
                counts[R.record_name(t) if t < 255 else "OTHER"] += int(c)
        is_sample = types == R.PERF_RECORD_SAMPLE
        builder.add(views, offsets[is_sample], sizes[is_sample], seq[is_sample])
        failed += _decode_others(views, events, offsets, sizes, types, cpus, seq,
                                 np.flatnonzero(~is_sample), others)
        _release(reader, chunk)
    del chunks
    samples = builder.finish()
    if builder.damaged:
        warnings.append(f"{builder.damaged} damaged samples (callchain longer than the record) "
                        f"were skipped.")
    if failed:
        warnings.append(f"{failed} damaged non-sample records were skipped.")
    others_sorted, others_before = _order(samples, others)
    return CaptureData(header, events, samples, others_sorted, others_before, counts,
                       warnings, builder.damaged)


def _release(reader: CaptureReader, chunk: list[Frame]) -> None:
    first, last = chunk[0], chunk[-1]
    reader.release(first.offset, last.offset + FRAME_HEADER_SIZE + len(last.payload) - first.offset)


def _decode_others(views: _Views, events: EventTable, offsets: I64, sizes: I64, types: I64,
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
