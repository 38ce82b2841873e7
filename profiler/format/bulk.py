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
warning); a sample whose fields would run past its record is dropped (counted in a warning).

What ``load_capture(reader).samples`` (a :class:`SampleColumns`) gives, one entry per sample,
sorted by time — every ``PERF_SAMPLE_*`` field, walked in the order of
``records.SAMPLE_FIELDS`` (the one table of the SAMPLE layout):

* ``ip``, ``pid``, ``tid``, ``time``, ``cpu``, ``period`` (1 without PERIOD), ``misc``, ``event``
  (index in the capture's ``EventTable``): numpy columns. ``cpu`` is the sample's CPU field, or
  without one, in format 3.0 (events opened per CPU), the ``cpu`` of the frame that holds it;
  -1 when neither names a CPU (older captures and perf.data files recorded without it, a
  frame of no CPU), and then ``has`` lacks ``cpu`` unless another sample has one
  (:func:`cpu_limit`).
* ``chain_id`` and ``chains``: CALLCHAIN, deduplicated (see above). :func:`split_callchains`
  turns chains into (owner, address, context) with the markers dropped — the one place that
  reads ``PERF_CONTEXT_*`` markers; a guest's and the hypervisor's addresses keep their own
  context and are never treated as this machine's user or kernel addresses.
* ``extra[name]`` (or ``column(name)``): the other one-word fields an event recorded —
  ``identifier``, ``addr``, ``id``, ``stream_id``, ``weight`` (WEIGHT or WEIGHT_STRUCT),
  ``data_src``, ``transaction``, ``phys_addr``, ``cgroup``, ``data_page_size``,
  ``code_page_size``; 0 for samples of events without it.
* ``regs_user`` / ``regs_intr`` (:class:`RegsColumns`): ``abi`` per sample and ``regs``, an
  (n, nregs) array whose columns are the registers named in ``registers`` (perf_regs.h
  numbers: the bits of ``attr.sample_regs_user``); ``register(n)`` gives one column.
* ``stack_user`` (:class:`StackColumns`): ``size``, ``dyn_size`` and ``offset`` — the stack
  bytes are not copied: they are ``reader.raw_view()[offset[i]:offset[i] + size[i]]`` (FILE
  offsets into the memory-mapped capture; keep the reader open while you use them). Together
  with ``regs_user`` this is what a DWARF unwinder needs.
* ``read`` (:class:`ReadColumns`): PERF_SAMPLE_READ for every ``read_format`` — per sample
  ``time_enabled``/``time_running``, and the counters as CSR (``start``; ``value``, ``id``,
  ``lost`` per counter: one without PERF_FORMAT_GROUP, one per group member with it).
* ``raw`` and ``aux`` (:class:`BytesColumns`): file offset and size of the payload (RAW: a
  tracepoint's record); ``branch_stack`` (:class:`BranchColumns`): ``nr``, ``hw_idx`` and the
  file offset of the (from, to, flags) entries.

A variable-size part is None when no event of the capture recorded it.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.arrays import odd_multipliers, ranges
from profiler.errors import FormatError
from profiler.format import records as R
from profiler.format.container import (
    FRAME_HEADER_SIZE,
    FRAME_RAW,
    FRAME_SYNTH,
    NO_CPU,
    VERSION_FRAME_CPU,
    CaptureReader,
    Frame,
)
from profiler.format.events import Event, EventTable

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]

CHUNK_BYTES = 8 << 20  # frames decoded (and their pages released) this many bytes at a time

# Callchain context markers (enum perf_callchain_context) as numpy scalars, for whole-array
# comparisons: every word >= CONTEXT_MAX is a marker, not an address.
CONTEXT_MAX = np.uint64(R.PERF_CONTEXT_MAX)
CONTEXT_KERNEL = np.uint64(R.PERF_CONTEXT_KERNEL)
CONTEXT_USER = np.uint64(R.PERF_CONTEXT_USER)
CONTEXT_HV = np.uint64(R.PERF_CONTEXT_HV)
CONTEXT_GUEST_KERNEL = np.uint64(R.PERF_CONTEXT_GUEST_KERNEL)
CONTEXT_GUEST_USER = np.uint64(R.PERF_CONTEXT_GUEST_USER)


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
class BytesColumns:
    """Variable-size bytes of every sample (PERF_SAMPLE_RAW, PERF_SAMPLE_AUX), never copied.

    ``offset[i]`` is the FILE offset of sample i's first byte in the capture (index
    ``CaptureReader.raw_view()`` with it), ``size[i]`` the number of bytes (0: none). RAW's size
    is the kernel's u32, which counts the padding it adds after a tracepoint's payload."""

    offset: I64
    size: I64

    def bytes_of(self, view: memoryview, i: int) -> memoryview:
        start = int(self.offset[i])
        return view[start:start + int(self.size[i])]

    def take(self, idx: I64) -> BytesColumns:
        return BytesColumns(self.offset[idx], self.size[idx])


@dataclass
class StackColumns(BytesColumns):
    """PERF_SAMPLE_STACK_USER: the copy of the user stack, as file offsets (see
    :class:`BytesColumns`); ``size`` is what the kernel copied (``attr.sample_stack_user``, 0 when
    it copied nothing) and ``dyn_size`` how much of it was in use (the bytes above the stack
    pointer; 0 with ``size`` 0). Byte 0 is the word at the user stack pointer (REGS_USER's sp)."""

    dyn_size: U64 = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))

    def take(self, idx: I64) -> StackColumns:
        return StackColumns(self.offset[idx], self.size[idx], self.dyn_size[idx])


@dataclass
class RegsColumns:
    """PERF_SAMPLE_REGS_USER (or REGS_INTR) of every sample.

    ``regs`` has shape (n, len(registers)): ``regs[i, k]`` is register ``registers[k]`` — its
    number in the architecture's ``perf_regs.h``, which is its bit in
    ``attr.sample_regs_user`` — of sample i. ``abi[i]`` is ``PERF_SAMPLE_REGS_ABI_*``; where it
    is 0 (NONE: no user registers, e.g. a kernel thread) or the sample's event did not ask for a
    register, that entry is 0."""

    abi: U64
    regs: U64
    registers: tuple[int, ...]

    def register(self, number: int) -> U64:
        """The column of register ``number`` (``KeyError`` if no event recorded it)."""
        if number not in self.registers:
            raise KeyError(f"register {number} was not recorded")
        out: U64 = self.regs[:, self.registers.index(number)]
        return out

    def take(self, idx: I64) -> RegsColumns:
        return RegsColumns(self.abi[idx], self.regs[idx], self.registers)


@dataclass
class ReadColumns:
    """PERF_SAMPLE_READ of every sample, any ``read_format``: the counters as CSR.

    Sample i's counters are entries ``start[i]:start[i + 1]`` of ``value``, ``id`` and ``lost``
    (one entry without PERF_FORMAT_GROUP, one per group member with it, in the group's order;
    ``id``/``lost`` are 0 unless PERF_FORMAT_ID/LOST). ``time_enabled``/``time_running`` are per
    sample (0 unless PERF_FORMAT_TOTAL_TIME_*). Samples of events without READ have none."""

    time_enabled: U64
    time_running: U64
    start: I64
    value: U64
    id: U64
    lost: U64

    def counters(self, i: int) -> slice:
        return slice(int(self.start[i]), int(self.start[i + 1]))

    def take(self, idx: I64) -> ReadColumns:
        counts = np.diff(self.start)[idx]
        start = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(counts, out=start[1:])
        members = ranges(self.start[:-1][idx], counts)
        return ReadColumns(self.time_enabled[idx], self.time_running[idx], start,
                           self.value[members], self.id[members], self.lost[members])


@dataclass
class BranchColumns:
    """PERF_SAMPLE_BRANCH_STACK: ``nr[i]`` entries of three u64 (``from``, ``to``, ``flags``)
    starting at FILE offset ``offset[i]``; ``hw_idx`` with PERF_SAMPLE_BRANCH_HW_INDEX, else 0."""

    nr: I64
    offset: I64
    hw_idx: U64

    def entries(self, w64: U64, i: int) -> U64:
        """Sample i's entries as an (nr, 3) array, given the capture's u64 view."""
        first = int(self.offset[i]) >> 3
        out: U64 = w64[first:first + 3 * int(self.nr[i])].reshape(-1, 3)
        return out

    def take(self, idx: I64) -> BranchColumns:
        return BranchColumns(self.nr[idx], self.offset[idx], self.hw_idx[idx])


@dataclass
class SampleColumns:
    """Every sample of a capture, one numpy array per field, sorted by (time, file order).

    A column whose PERF_SAMPLE_* bit is absent is all zeros (``has`` says which exist).
    ``chain(i)`` — ``chains.get(chain_id[i])`` — is sample i's callchain as the kernel wrote it,
    PERF_CONTEXT_* markers included. The other one-word fields (``addr``, ``id``,
    ``stream_id``, ``identifier``, ``weight``, ``data_src``, ...) are in ``extra`` when some
    event recorded them; the variable-size ones in their own column objects (None when no event
    recorded them). See the module docstring.
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
    extra: dict[str, U64] = field(default_factory=dict)
    read: ReadColumns | None = None
    raw: BytesColumns | None = None
    branch_stack: BranchColumns | None = None
    regs_user: RegsColumns | None = None
    stack_user: StackColumns | None = None
    regs_intr: RegsColumns | None = None
    aux: BytesColumns | None = None

    def __len__(self) -> int:
        return int(self.ip.shape[0])

    def column(self, name: str) -> U64:
        """A one-word field by its perf_event.h name (``"addr"``, ``"weight"``, ...); KeyError
        when no event of the capture recorded it."""
        if name in ("ip", "time", "period"):
            out: U64 = getattr(self, name)
            return out
        return self.extra[name]

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
            extra={name: column[idx] for name, column in self.extra.items()},
            **{name: part.take(idx) for name, part in self._parts().items()},
        )

    _COLUMNS = ("event", "ip", "pid", "tid", "time", "cpu", "period", "misc", "seq", "chain_id",
                "offset")
    _PARTS = ("read", "raw", "branch_stack", "regs_user", "stack_user", "regs_intr", "aux")

    def _parts(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._PARTS if getattr(self, name) is not None}

    def permute(self, order: I64) -> None:
        """Reorder every column in place (one column's temporary at a time)."""
        for column in [getattr(self, name) for name in self._COLUMNS] + list(self.extra.values()):
            column[:] = column[order]
        for name, part in self._parts().items():
            setattr(self, name, part.take(order))


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


# --- callchains: addresses and the context each runs in -------------------------------------

# The context of an address that no marker precedes, by the sample's cpumode (header.misc & 7).
_MODE_CONTEXT = np.full(8, CONTEXT_USER, dtype=np.uint64)
_MODE_CONTEXT[R.PERF_RECORD_MISC_KERNEL] = CONTEXT_KERNEL
_MODE_CONTEXT[R.PERF_RECORD_MISC_HYPERVISOR] = CONTEXT_HV
_MODE_CONTEXT[R.PERF_RECORD_MISC_GUEST_KERNEL] = CONTEXT_GUEST_KERNEL
_MODE_CONTEXT[R.PERF_RECORD_MISC_GUEST_USER] = CONTEXT_GUEST_USER


def cpumode_context(cpumode: npt.NDArray[np.uint16]) -> U64:
    """The ``PERF_CONTEXT_*`` a sample's own ip runs in, from its cpumode."""
    out: U64 = _MODE_CONTEXT[np.asarray(cpumode, dtype=np.int64) & R.PERF_RECORD_MISC_CPUMODE_MASK]
    return out


@dataclass
class CallchainEntries:
    """The addresses of some callchains, markers dropped, leaf first within each chain.

    ``owner[k]`` is the chain (its index in the CSR given to :func:`split_callchains`) address
    k belongs to; ``context[k]`` the ``PERF_CONTEXT_*`` marker it runs under. Only ``user``
    and ``kernel`` addresses belong to this machine's processes and kernel: a guest's
    (``PERF_CONTEXT_GUEST*``) or the hypervisor's cannot be named from the host's maps and
    symbols, so every reader keeps them out of the host's DSOs (the reporter shows them as
    ``[unknown]`` frames, ``buildids`` does not count them)."""

    owner: I64
    addr: U64
    context: U64

    @property
    def kernel(self) -> npt.NDArray[np.bool_]:
        out: npt.NDArray[np.bool_] = self.context == CONTEXT_KERNEL
        return out

    @property
    def host(self) -> npt.NDArray[np.bool_]:
        """Addresses of this machine's user space or kernel."""
        out: npt.NDArray[np.bool_] = (self.context == CONTEXT_KERNEL) | (self.context == CONTEXT_USER)
        return out


def split_callchains(start: I64, words: U64, cpumode: npt.NDArray[np.uint16]) -> CallchainEntries:
    """Split callchains (CSR: chain i is ``words[start[i]:start[i + 1]]``, as the kernel wrote
    them) at their ``PERF_CONTEXT_*`` markers.

    Each address takes the context of the last marker before it in its chain; addresses before
    any marker take the context of the chain's sample (``cpumode[i]``, see
    :func:`cpumode_context`). The one place callchains are split: the reporter and ``buildids``
    both use it."""
    n = len(start) - 1
    lengths = np.diff(start)
    owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
    is_marker = words >= CONTEXT_MAX
    idx = np.arange(len(words), dtype=np.int64)
    last = np.maximum.accumulate(np.where(is_marker, idx, -1)) if len(words) else idx
    valid = (last >= 0) & (last >= start[:-1][owner])
    context = np.where(valid, words[np.maximum(last, 0)], cpumode_context(cpumode)[owner]).astype(np.uint64)
    keep = ~is_marker
    return CallchainEntries(owner[keep], words[keep].astype(np.uint64), context[keep])


def _walk_record_offsets(sizes16: memoryview, end: int, limit: int = -1) -> tuple[list[int], int]:
    """Offsets of the records in a frame payload, walked one by one; and where the good part
    stops. ``sizes16`` is the payload as native u16: a record's size is u16 number 3 of its
    header. With ``limit`` >= 0, the walk gives up after that many records (it then stops
    short of ``end`` with no damage found)."""
    offsets: list[int] = []
    append = offsets.append
    pos = 0
    last = end - 8
    while pos <= last and limit != 0:
        size = sizes16[(pos >> 1) + 3]
        if size < 8 or size & 7 or pos + size > end:
            break
        append(pos)
        pos += size
        limit -= 1
    return offsets, pos


WALK_BYTES_PER_RECORD = 256  # frames whose records average at least this walk them one by one
PROBE_RECORDS = 8  # records walked to tell a frame of big records from one of small ones


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
        if end % 8 == 0 and self.native and end >= 64 * WALK_BYTES_PER_RECORD:
            # Big records (DWARF samples: kilobytes of stack each): following the sizes visits
            # a few records, where the candidate scan below reads every word of the frame. The
            # first few records tell which kind of frame this is, so a frame of small records
            # does not walk a share of its records for nothing.
            sizes16 = memoryview(frame.payload).cast("B").cast("H")
            _, probe = _walk_record_offsets(sizes16, end, PROBE_RECORDS)
            if probe == end or probe >= PROBE_RECORDS * WALK_BYTES_PER_RECORD:
                offs, stop = _walk_record_offsets(sizes16, end, end // WALK_BYTES_PER_RECORD)
                if stop == end:
                    return np.asarray(offs, dtype=np.int64) + start
        first, nwords = start >> 3, end >> 3
        sizes = self.w16[(first * 4 + 3):((first + nwords) * 4):4]  # a strided view, no copy
        cand = np.flatnonzero((sizes >= 8) & ((sizes & 7) == 0))
        if end % 8 == 0 and len(cand) and cand[0] == 0:
            nxt = cand + (sizes[cand] >> 3).astype(np.int64)
            if nxt[-1] == nwords and np.array_equal(nxt[:-1], cand[1:]):
                out: I64 = (cand << 3) + start
                return out
        whole = end - end % 8  # records are 8-byte aligned: a ragged tail is damage
        offs, stop = _walk_record_offsets(self._sizes16(frame.payload[:whole]), whole)
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


# Two tables of odd 64-bit multipliers, one per position in a chain: a chain's hash is
# sum(word[p] * K[p]) mod 2**64. Chains differing in one position never collide (K[p] is odd);
# two independent tables make any other collision a 2**-128 event.
_KA = odd_multipliers(0x5EED, _MAX_DEPTH + 1)
_KB = odd_multipliers(0xB0B5EED, _MAX_DEPTH + 1)


class _ChainStore:
    """Assigns one id to each distinct callchain (by a 128-bit hash) and keeps its words.

    The known chains' hashes are kept sorted (by the first hash), so a batch of chains is
    looked up with ``searchsorted`` and its new chains are stored with one gather: no Python
    work per chain, however many chunks add the same chains again."""

    def __init__(self) -> None:
        self.h1 = np.zeros(0, dtype=np.uint64)  # sorted
        self.h2 = np.zeros(0, dtype=np.uint64)  # the second hash of the same chain
        self.id_of = np.zeros(0, dtype=np.int64)
        self.word_parts: list[U64] = [np.zeros(0, dtype=np.uint64)]
        self.length_parts: list[I64] = [np.zeros(1, dtype=np.int64)]  # chain 0: empty
        self.count = 1

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
        r1, r2 = h1[reps], h2[reps]  # the batch's distinct chains, sorted by (r1, r2)
        cid = self._lookup(r1, r2)
        unknown = np.flatnonzero(cid < 0)
        if len(unknown):
            fresh = np.arange(self.count, self.count + len(unknown), dtype=np.int64)
            self.count += len(unknown)
            cid[unknown] = fresh
            rr = reps[unknown]
            self.length_parts.append(ln[rr].astype(np.int64))
            self.word_parts.append(w64[ranges(f[rr], ln[rr])].astype(np.uint64))
            at = np.searchsorted(self.h1, r1[unknown], side="left")
            self.h1 = np.insert(self.h1, at, r1[unknown])
            self.h2 = np.insert(self.h2, at, r2[unknown])
            self.id_of = np.insert(self.id_of, at, fresh)
        per_sample = np.empty(len(order), dtype=np.int32)
        per_sample[order] = cid[group]
        out[by_len] = per_sample
        return out

    def _lookup(self, r1: U64, r2: U64) -> I64:
        """The ids of known chains with hashes (r1, r2); -1 for new ones."""
        out = np.full(len(r1), -1, dtype=np.int64)
        if not len(self.h1):
            return out
        lo = np.searchsorted(self.h1, r1, side="left")
        hi = np.searchsorted(self.h1, r1, side="right")
        one = np.flatnonzero(hi - lo == 1)
        match = one[self.h2[lo[one]] == r2[one]]
        out[match] = self.id_of[lo[match]]
        for j in np.flatnonzero(hi - lo > 1).tolist():  # chains sharing a first hash: a 2**-64 event
            a, b = int(lo[j]), int(hi[j])
            same = np.flatnonzero(self.h2[a:b] == r2[j])
            if len(same):
                out[j] = self.id_of[a + int(same[0])]
        return out

    def table(self) -> ChainTable:
        lengths = np.concatenate(self.length_parts)
        start = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=start[1:])
        return ChainTable(start, np.concatenate(self.word_parts).astype(np.uint64))


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


def sample_word(layout: R.SampleLayout, name: str) -> int | None:
    """Word index (from the record's header) of a fixed sample field that precedes every
    variable-size one (``identifier``, ``ip``, ``tid``, ``time``, ...); None when absent."""
    return _sample_fields(layout).get(name)


def _id_word(events: EventTable) -> int | None:
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


class _Walk:
    """Where every field of a group of samples (one event, so one layout) starts.

    The fields are visited in :data:`records.SAMPLE_FIELDS` order; ``at[name]`` is the word
    index (in the whole file) of each field's first word, ``count[name]`` its element count
    (callchain entries, group members, RAW/AUX/stack bytes, registers). A sample whose fields
    would run past its record is not ``ok`` (and its positions are not used)."""

    def __init__(self, views: _Views, layout: R.SampleLayout, base: I64, end: I64) -> None:
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


class _SampleBuilder:
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
        self.filled = 0
        self.store = _ChainStore()
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

    def add(self, views: _Views, offs: I64, sizes: I64, seq: I64, cpus: I64) -> None:
        """Samples at file offsets ``offs``; ``cpus``: the ``cpu`` of each one's frame."""
        events = self.events
        at = _id_word(events)
        if at is None:
            self._add_group(views, events.default, offs, sizes, seq, cpus)
            return
        ident = views.w64[(offs >> 3) + at] if len(offs) else np.zeros(0, dtype=np.uint64)
        event_of = np.zeros(len(offs), dtype=np.int64)
        for ev in events.events[1:]:
            if ev.ids:
                event_of[np.isin(ident, np.asarray(ev.ids, dtype=np.uint64))] = ev.index
        for ev in events.events:
            idx = np.flatnonzero(event_of == ev.index)
            if len(idx):
                self._add_group(views, ev, offs[idx], sizes[idx], seq[idx], cpus[idx])

    def _add_group(self, views: _Views, ev: Event, offs: I64, sizes: I64, seq: I64, cpus: I64) -> None:
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
            # every register of a sample in one gather: they follow abi, in bit order
            pos = np.where(has_regs, first + 1, first)[:, None] + \
                np.where(has_regs[:, None], np.arange(len(numbers), dtype=np.int64), 0)
            values = np.where(has_regs[:, None], walk.w64[pos], 0).astype(np.uint64)
            cols = [part.registers.index(number) for number in numbers]
            if cols == list(range(len(part.registers))):
                part.regs[at] = values
            else:
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
        return part.take(np.arange(n))


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


def _chunks(frames: list[Frame], chunk_bytes: int = CHUNK_BYTES) -> Iterator[list[Frame]]:
    batch: list[Frame] = []
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
        is_sample = views.w32[offsets >> 2] == R.PERF_RECORD_SAMPLE
        n_samples += int(np.count_nonzero(is_sample))
        check_frame_cpus(reader, events, cpus[is_sample], warnings)
        chunks.append((chunk, offsets, cpus))
        _release(reader, chunk)
    # Pass 2: decode.
    builder = _SampleBuilder(events, n_samples, callchains, cpu_limit=cpu_limit(reader))
    others: list[OtherRecord] = []
    failed = 0
    next_seq = 0
    for chunk, offsets, cpus in chunks:
        types = views.w32[offsets >> 2].astype(np.int64)
        sizes = views.w16[(offsets >> 1) + 3].astype(np.int64)
        seq = np.arange(next_seq, next_seq + len(offsets), dtype=np.int64)
        next_seq += len(offsets)
        count_types(types, counts)
        is_sample = types == R.PERF_RECORD_SAMPLE
        builder.add(views, offsets[is_sample], sizes[is_sample], seq[is_sample], cpus[is_sample])
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


@dataclass
class RecordChunk:
    """Consecutive frames of a capture with their records' file offsets, types and sizes;
    ``seq0`` is the file-order number of the first record (see ``SampleColumns.seq``)."""

    frames: list[Frame]
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
        self.views = _Views(reader, self.events.bo)
        self.frames = [f for f in reader.iter_frames() if f.kind in (FRAME_RAW, FRAME_SYNTH) and len(f.payload)]
        self.chunk_bytes = chunk_bytes

    def plan(self) -> list[list[Frame]]:
        """The frames, grouped into chunks of about ``chunk_bytes``."""
        return list(_chunks(self.frames, self.chunk_bytes))

    def records(self, frames: list[Frame], seq0: int, warnings: list[str]) -> RecordChunk:
        parts = [self.views.record_offsets(frame, warnings) for frame in frames]
        offsets = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        cpus = np.repeat(np.asarray([f.cpu for f in frames], dtype=np.int64), [len(p) for p in parts])
        types = self.views.w32[offsets >> 2].astype(np.int64)
        sizes = self.views.w16[(offsets >> 1) + 3].astype(np.int64)
        check_frame_cpus(self.reader, self.events, cpus[types == R.PERF_RECORD_SAMPLE], warnings)
        return RecordChunk(frames, offsets, cpus, types, sizes, seq0)

    def samples(self, chunk: RecordChunk, callchains: bool = True, lean: bool = False) -> tuple[SampleColumns, int]:
        """The chunk's samples (file order) and how many were damaged (skipped); ``lean``: the
        core columns and callchains only (see ``_SampleBuilder``)."""
        is_sample = chunk.types == R.PERF_RECORD_SAMPLE
        builder = _SampleBuilder(self.events, int(np.count_nonzero(is_sample)), callchains, lean,
                                 cpu_limit(self.reader))
        builder.add(self.views, chunk.offsets[is_sample], chunk.sizes[is_sample], chunk.seq[is_sample],
                    chunk.cpus[is_sample])
        return builder.finish(), builder.damaged

    def others(self, chunk: RecordChunk, out: list[OtherRecord]) -> int:
        """Decode the chunk's non-sample records into ``out``; the number that were damaged."""
        idx = np.flatnonzero(chunk.types != R.PERF_RECORD_SAMPLE)
        return _decode_others(self.views, self.events, chunk.offsets, chunk.sizes, chunk.types, chunk.cpus,
                              chunk.seq, idx, out)

    def release(self, frames: list[Frame]) -> None:
        _release(self.reader, frames)


def cpu_limit(reader: CaptureReader) -> int:
    """Samples without a CPU field take their frame's ``cpu`` when it is below this: the
    machine's ``nr_cpus`` in format 3.0, 0 (never) in older captures and perf.data files."""
    if reader.version < VERSION_FRAME_CPU:
        return 0
    n = reader.header.get("nr_cpus")
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n < NO_CPU else NO_CPU


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
