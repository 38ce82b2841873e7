"""The columns a decoded capture is made of: what ``load_capture(reader).samples`` (a
:class:`SampleColumns`) gives, one entry per sample, sorted by time — every ``PERF_SAMPLE_*``
field, walked in the order of ``records.SAMPLE_FIELDS`` (the one table of the SAMPLE layout):

  (index in the capture's ``EventTable``): numpy columns. ``cpu`` is the sample's CPU field, or
  without one, in format 3.0 (events opened per CPU), the ``cpu`` of the frame that holds it;
  -1 when neither names a CPU (older captures and perf.data files recorded without it, a
  frame of no CPU), and then ``has`` lacks ``cpu`` unless another sample has one
  (:func:`~profiler.format.decode.decoder.cpu_limit`).
* ``chain_id`` and ``chains``: CALLCHAIN, deduplicated (:mod:`~profiler.format.decode.chains`).
  :func:`~profiler.format.decode.chains.split_callchains`
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

A variable-size part is None when no event of the capture recorded it. The non-sample records
of the capture are :class:`OtherRecord` objects, and :class:`CaptureData` holds it all.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import field
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.arrays import ranges
from profiler.dataclass import dataclass
from profiler.format import records as R
from profiler.format.decode.switches import SwitchColumns
from profiler.format.events import EventTable

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]


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
    # the context-switch records as columns (profiler.format.decode.switches), file order; None
    # when the events' trailers differ: then they are among ``others`` as objects
    switches: SwitchColumns | None = None
