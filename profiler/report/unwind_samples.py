"""DWARF unwinding of a capture's samples: from sample columns to callchains.

For an event recorded with ``--call-graph dwarf`` (REGS_USER + STACK_USER), every sample's
user stack is unwound (:mod:`unwinder`, all samples one depth at a time) and its callchain is
replaced by the kernel part the kernel recorded (``exclude_callchain_user`` leaves only
kernel frames) followed by ``PERF_CONTEXT_USER`` and the unwound user frames, leaf first —
the callchain perf would show. Everything downstream (dedupe, symbolization, every report,
script, flame graph and export) then works on these chains unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.arrays import distinct, ranges
from profiler.format import records as R
from profiler.format.decode.columns import SampleColumns
from profiler.format.container.reader import CaptureReader
from profiler.report.maps import DsoTable, MapSnapshot
from profiler.unwind.arch import RA, SP, ArchColumns, columns_for
from profiler.symbols.debugfile import DEFAULT_DEBUG_DIRS
from profiler.unwind.sources import META_KIND, TableSources
from profiler.names import VDSO
from profiler.unwind.table import RuleTable
from profiler.unwind.unwinder import concat
from profiler.unwind.unwinder import (
    LOC_FRAME_POINTER,
    LOC_NO_CFI,
    LOC_NO_MAP,
    LOC_TABLE,
    MAX_DEPTH_DEFAULT,
    NO_REGS,
    CombinedTables,
    LookupArrays,
    StackCopies,
    UnwindResult,
    step_kernel,
    unwind,
    unwind_frames,
)
from profiler.unwind.jitcode import JitCode
from profiler.unwind.userdata import UserData, read_user_data
from profiler.errors import FormatError
from profiler.format.container.codec import zstd_decompress_into
from profiler.format.container.inflate import StackFrame
from profiler.format.splitstacks import field_spans, sample_offsets
from profiler.report.parallel import in_order, worker_count
from profiler.report.userchains import chains_with_user_frames
from profiler.report.unwind_stats import UnwindStats

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I8 = npt.NDArray[np.int8]

USER_LIMIT = np.uint64(1 << 48)
JIT_MAX_DEPTH = 1024  # frames unwound per sample of a process with JIT code that has rules (Python)
JitCodeFor = Callable[[int], JitCode]  # a process's JIT code with unwind rules of its own
U64_MAX = (1 << 64) - 1  # user addresses on x86_64 (47 bits) and aarch64 (48 bits)


class SnapshotCodeMap:
    """``CodeMap`` over the replayed process maps: (sample, pc) -> (table slot, DSO address).

    The maps of every map generation the samples use are concatenated under one key
    ``rank << 48 | start``, so a whole depth is located with one searchsorted."""

    def __init__(self, gen: I64, snapshots: list[MapSnapshot], dsos: DsoTable,
                 slot_of_dso: I64, kind_of_dso: I8, tables: list[RuleTable],
                 pid: I64 | None = None, jit: JitCodeFor | None = None) -> None:
        used, rank = np.unique(gen, return_inverse=True)
        self.rank = rank.astype(np.uint64)
        starts, ends, pgoffs, dso_ids, keys = [], [], [], [], []
        with_anon = np.zeros(len(used), dtype=bool)  # per generation: a map of anonymous executable memory
        for r, g in enumerate(used.tolist()[: 1 << 15]):
            s, e, p, d = snapshots[g].arrays()
            inside = d[(d >= 0) & (d < len(kind_of_dso))]
            with_anon[r] = bool((kind_of_dso[inside] == LOC_FRAME_POINTER).any())
            user = s < USER_LIMIT
            starts.append(s[user])
            ends.append(np.minimum(e[user], USER_LIMIT))
            pgoffs.append(p[user])
            dso_ids.append(d[user])
            keys.append((np.uint64(r) << np.uint64(48)) | s[user])
        self.key: U64 = concat(keys, np.uint64)
        self.end: U64 = concat(ends, np.uint64)
        self.start: U64 = concat(starts, np.uint64)
        self.pgoff: U64 = concat(pgoffs, np.uint64)
        self.dso: I64 = concat(dso_ids, np.int64)
        self.slot_of_dso = slot_of_dso
        self.kind_of_dso = kind_of_dso
        self.tables = list(tables)  # the DSOs' tables, then (below) the JIT code's: CombinedTables(self.tables)
        self._split_into_segments()
        self._index_jit_code(None if pid is None else np.where(with_anon[rank], pid, -1), jit)

    def _index_jit_code(self, pid: I64 | None, jit: JitCodeFor | None) -> None:
        """JIT code with rules of its own (CPython's trampolines, :mod:`profiler.unwind.jitcode`)
        per process, keyed ``pid rank << 48 | start``; their tables go after the DSOs'. ``pid``
        is -1 for samples of a process with no anonymous executable map (no JIT code to ask for)."""
        keys: list[U64] = []
        ends: list[U64] = []
        slots: list[I64] = []
        self.jit_rank: U64 = np.zeros(0, dtype=np.uint64)
        if pid is not None and jit is not None and len(pid):
            pids, rank = np.unique(pid, return_inverse=True)
            self.jit_rank = rank.astype(np.uint64)
            for r, p in enumerate(pids.tolist()):
                if p < 0:
                    continue
                code = jit(int(p))
                if not len(code):
                    continue
                inside = code.end <= USER_LIMIT
                keys.append((np.uint64(r) << np.uint64(48)) | code.start[inside])
                ends.append(code.end[inside])
                slots.append(code.slot[inside] + len(self.tables))
                self.tables.extend(code.tables)
        order = np.argsort(concat(keys, np.uint64), kind="stable")
        self.jit_key: U64 = concat(keys, np.uint64)[order]
        self.jit_end: U64 = concat(ends, np.uint64)[order]
        self.jit_slot: I64 = concat(slots, np.int64)[order]

    def _locate_jit(self, sample: I64, pc: U64, slot: I64, addr: U64, kind: I8) -> None:
        """Where ``kind`` says JIT memory or no map: the JIT code with rules of its own, in place."""
        at = np.flatnonzero((kind == LOC_FRAME_POINTER) | (kind == LOC_NO_MAP))
        if not len(at) or not len(self.jit_key):
            return
        rank = self.jit_rank.take(sample[at]) << np.uint64(48)
        p = pc[at]
        key = rank | np.where(p < USER_LIMIT, p, 0)
        j = np.searchsorted(self.jit_key, key, side="right").astype(np.int64) - 1
        sj = np.maximum(j, 0)
        start = self.jit_key.take(sj) & np.uint64((1 << 48) - 1)
        hit = (j >= 0) & ((self.jit_key.take(sj) ^ rank) < np.uint64(1 << 48)) & (p < self.jit_end.take(sj)) \
            & (p < USER_LIMIT)
        at = at[hit]
        slot[at] = self.jit_slot.take(sj[hit])
        addr[at] = p[hit] - start[hit]
        kind[at] = LOC_TABLE

    def _split_into_segments(self) -> None:
        """The parts of the maps with rule tables, cut at their DSO's PT_LOAD segments, keyed
        like the maps: each part's table slot and ``bias`` (DSO address = pc + bias). A pc in
        such a map but in no part is in no segment (no CFI). A segment's file range ends
        where the next one begins (the segment found for an offset is the last one starting
        at or before it)."""
        keys, ends, slots, biases = [], [], [], []
        dso = np.maximum(self.dso, 0)
        slot = self.slot_of_dso[dso] if len(dso) else np.zeros(0, dtype=np.int64)
        kind = self.kind_of_dso[dso] if len(dso) else np.zeros(0, dtype=np.int8)
        rank_bits = self.key & ~np.uint64((1 << 48) - 1)
        with np.errstate(over="ignore"):
            for sl, table in enumerate(self.tables):
                at = np.flatnonzero((kind == LOC_TABLE) & (slot == sl))
                if not len(at) or not len(table.seg_offset):
                    continue
                order = np.argsort(table.seg_offset, kind="stable")
                so, sv, fs = table.seg_offset[order], table.seg_vaddr[order], table.seg_filesz[order]
                seg_end = np.minimum(so + fs, np.append(so[1:], np.uint64(U64_MAX)))
                start, pgoff = self.start[at], self.pgoff[at]
                file_end = pgoff + (self.end[at] - start)
                for j in range(len(so)):
                    lo = np.maximum(pgoff, so[j])
                    hi = np.minimum(file_end, seg_end[j])
                    part = lo < hi
                    if not part.any():
                        continue
                    base = start[part] - pgoff[part]  # pc = offset + base
                    keys.append(rank_bits[at[part]] | (lo[part] + base))
                    ends.append(hi[part] + base)
                    slots.append(np.full(int(part.sum()), sl, dtype=np.int64))
                    biases.append(sv[j] - so[j] - base)
        self.part_key: U64 = concat(keys, np.uint64)
        order = np.argsort(self.part_key, kind="stable")
        self.part_key = self.part_key[order]
        self.part_end: U64 = concat(ends, np.uint64)[order]
        self.part_slot: I64 = concat(slots, np.int64)[order]
        self.part_bias: U64 = concat(biases, np.uint64)[order]

    def lookup_arrays(self, sample: I64) -> LookupArrays:
        """What :meth:`locate` searches, for the samples ``sample`` (the compiled unwinder)."""
        jit_rank = self.jit_rank.take(sample) if len(self.jit_key) else np.zeros(0, dtype=np.uint64)
        return LookupArrays(self.rank.take(sample), jit_rank, self.key, self.end, self.dso, self.kind_of_dso,
                            self.slot_of_dso, self.part_key, self.part_end, self.part_slot, self.part_bias,
                            self.jit_key, self.jit_end, self.jit_slot)

    def locate(self, sample: I64, pc: U64) -> tuple[I64, U64, I8]:
        m = len(sample)
        if not len(self.key) or not m:
            return np.full(m, -1, dtype=np.int64), np.zeros(m, dtype=np.uint64), np.full(m, LOC_NO_MAP, dtype=np.int8)
        user = pc < USER_LIMIT
        rank = self.rank.take(sample) << np.uint64(48)
        key = rank | np.where(user, pc, 0)
        i = np.searchsorted(self.key, key, side="right").astype(np.int64) - 1
        safe = np.maximum(i, 0)
        hit = user & (i >= 0) & ((self.key.take(safe) ^ rank) < np.uint64(1 << 48)) & (pc < self.end.take(safe))
        dso = np.maximum(self.dso.take(safe), 0)
        kind = np.where(hit, self.kind_of_dso.take(dso), LOC_NO_MAP).astype(np.int8)
        slot = np.where(hit, self.slot_of_dso.take(dso), -1)
        addr = np.zeros(m, dtype=np.uint64)
        table = kind == LOC_TABLE
        if len(self.part_key) and table.any():
            j = np.searchsorted(self.part_key, key, side="right").astype(np.int64) - 1
            sj = np.maximum(j, 0)
            inside = (table & (j >= 0) & ((self.part_key.take(sj) ^ rank) < np.uint64(1 << 48))
                      & (pc < self.part_end.take(sj)))
            with np.errstate(over="ignore"):
                addr = np.where(inside, pc + self.part_bias.take(sj), np.uint64(0))
            slot = np.where(inside, self.part_slot.take(sj), slot)
            kind[table & ~inside] = LOC_NO_CFI
        else:
            kind[table] = LOC_NO_CFI
        self._locate_jit(sample, pc, slot, addr, kind)
        return slot, addr, kind


def dso_tables(dsos: DsoTable, sources: TableSources, used: set[int],
               stats: UnwindStats) -> tuple[I64, I8, list[RuleTable]]:
    """Per DSO id: table slot, LOC_* kind; and the tables (only DSOs in ``used`` are loaded)."""
    slot = np.full(max(len(dsos), 1), -1, dtype=np.int64)
    kind = np.full(max(len(dsos), 1), LOC_NO_CFI, dtype=np.int8)
    tables: list[RuleTable] = []
    for d in sorted(used):
        dso = dsos[d]
        if dso.is_anon:
            kind[d] = LOC_FRAME_POINTER  # JIT code: perf maps name it, frame pointers walk it
            continue
        if not (dso.is_file or dso.path == VDSO):
            continue
        table = sources.table(dso.path, dso.build_id, dso.content)
        stats.tables[dso.path] = sources.origin.get((dso.path, dso.build_id.lower() if dso.build_id else None), "")
        if table is None or not len(table):
            continue
        slot[d] = len(tables)
        kind[d] = LOC_TABLE
        tables.append(table)
    return slot, kind, tables


def used_dsos(gen: I64, snapshots: list[MapSnapshot]) -> set[int]:
    used: set[int] = set()
    for g in distinct(gen).tolist():
        used.update(m.dso for m in snapshots[g].maps)
    return used


def initial_columns(cols: ArchColumns, regs: U64, mask: int) -> tuple[U64, npt.NDArray[np.bool_], U64]:
    """(column values, their validity, pc) from the sampled registers."""
    n = regs.shape[0]
    values = np.zeros((n, cols.count), dtype=np.uint64)
    valid = np.zeros((n, cols.count), dtype=bool)
    for c, dwarf in enumerate(cols.dwarf):
        if c == RA and not cols.ra_is_register:
            continue
        bit = cols.regs.dwarf.get(dwarf)
        pos = None if bit is None else cols.regs.index_of(bit, mask)
        if pos is not None:
            values[:, c] = regs[:, pos]
            valid[:, c] = True
    ip = cols.regs.index_of(cols.regs.ip, mask)
    pc = regs[:, ip] if ip is not None else np.zeros(n, dtype=np.uint64)
    return values, valid, pc


def unwind_event_samples(reader: CaptureReader, layout: R.SampleLayout, s: SampleColumns, gen: I64,
                         snapshots: list[MapSnapshot], dsos: DsoTable, sources: TableSources,
                         cols: ArchColumns, max_depth: int = MAX_DEPTH_DEFAULT,
                         jit: JitCodeFor | None = None, source_warnings: bool = True,
                         image: Image | None = None) -> tuple[UnwindResult, UnwindStats]:
    """Unwind the samples ``s`` (one event, its layout): frames per sample and statistics
    (``source_warnings``: with the warnings ``sources`` gave so far). The records and stack
    copies are in ``reader.raw_view()``, or in ``image`` (a chunk of frames inflated into a
    buffer of its own: the samples' offsets are then the buffer's)."""
    stats = UnwindStats(samples=len(s))
    if image is None:
        image = Image(reader.raw_view(), getattr(reader, "stack_frames", None) or [], reader.release)
    view = image.view
    size = len(view) - len(view) % 8
    w64 = np.frombuffer(view, dtype=np.uint64, count=size // 8)
    user = _from_columns(s, layout) or _read_user_data_by_span(image.release, w64, s, layout)
    values, valid, pc = initial_columns(cols, user.regs, layout.sample_regs_user)
    # format 4.0 read lean: the samples of its split frames hold no stack copy (each frame's
    # are inflated as its samples are unwound, below), so one with registers is one to unwind;
    # the samples of a frame written whole (the recorder could not split it) have theirs
    apart = image.frames
    fid = frame_of(apart, s.offset.astype(np.int64))
    lean = fid >= 0
    has = (user.abi != 0) & (user.ok | lean)
    valid &= has[:, None]
    buf = np.frombuffer(view, dtype=np.uint8, count=size)
    stacks = StackCopies(buf, user.stack_offset, np.where(has, user.stack_size, 0), values[:, SP].copy())
    slot_of, kind_of, tables = dso_tables(dsos, sources, used_dsos(gen, snapshots), stats)
    code = SnapshotCodeMap(gen, snapshots, dsos, slot_of, kind_of, tables, s.pid.astype(np.int64), jit)
    combined = combined_tables(code.tables, cols)
    if len(code.jit_key) and max_depth == MAX_DEPTH_DEFAULT:
        max_depth = JIT_MAX_DEPTH  # each Python call is ~4 native frames: 127 would end at ~30 calls
    parts: list[tuple[I64, UnwindResult]] = []
    if apart:
        parts = _unwind_apart(view, apart, s, np.where(has, fid, -1), values, valid, pc, cols, code, combined,
                              max_depth, stats)
    idx = np.flatnonzero(has & ~lean)
    idx = idx[np.argsort(user.stack_offset[idx], kind="stable")]  # file order: each page once
    for chunk in _spans(user.stack_offset[idx], CHUNK_SPAN):
        ci = idx[chunk]
        res = unwind(cols, values[ci], valid[ci], pc[ci], _sub_stacks(stacks, ci), _Subset(code, ci),
                     combined, max_depth)
        parts.append((ci, res))
        lo = int(user.stack_offset[ci[0]])
        image.release(lo, int(user.stack_offset[ci[-1]] + user.stack_size[ci[-1]]) - lo)
    full = _merge(parts, len(s))
    stats.reason = full.reason
    if source_warnings:
        stats.warnings.extend(sources.warnings)
    return full, stats


def combined_tables(tables: list[RuleTable], cols: ArchColumns) -> CombinedTables:
    """``CombinedTables(tables, cols)``, the last one kept: a tally's chunks unwind with the same
    tables one after another (0.008 s and 11 MB of fresh pages each, for a 302 K-sample capture's)."""
    key = tuple(id(t) for t in tables)
    if _COMBINED and _COMBINED[0][0] == key and _COMBINED[0][2] is cols:
        return _COMBINED[0][3]
    combined = CombinedTables(tables, cols)
    _COMBINED[:] = [(key, list(tables), cols, combined)]  # the tables kept: their ids stay theirs
    return combined


_COMBINED: list[tuple[tuple[int, ...], list[RuleTable], ArchColumns, CombinedTables]] = []


class Image:
    """Where a set of samples' records and stack copies are: ``view`` (the capture's raw view,
    or a buffer a chunk of frames was inflated into), its split frames' stack fields
    (``frames``, in the order of their records in ``view``) and how to give back the pages of
    a span of it that was read (``release(offset, length)``)."""

    __slots__ = ("view", "frames", "release")

    def __init__(self, view: memoryview, frames: list[StackFrame],
                 release: Callable[[int, int], None] | None = None) -> None:
        self.view, self.frames = view, frames
        self.release = release or _keep


def _keep(offset: int, length: int) -> None:
    """A buffer's pages are kept (the next chunk reuses them)."""


def frame_of(frames: list[StackFrame], offset: I64) -> I64:
    """For each record offset (in a capture read lean), the split frame (an index into
    ``frames``, which are in file order) whose lean records hold it, or -1."""
    starts = np.asarray([f.start for f in frames], dtype=np.int64)
    ends = starts + np.asarray([f.length for f in frames], dtype=np.int64)
    fid = np.searchsorted(starts, offset, side="right") - 1
    inside = (fid >= 0) & (offset < ends[np.maximum(fid, 0)]) if len(frames) else np.zeros(len(offset), dtype=bool)
    out: I64 = np.where(inside, fid, -1)
    return out


def _unwind_apart(view: memoryview, frames: list[StackFrame], s: SampleColumns, fid: I64, values: U64,
                  valid: Any, pc: U64, cols: ArchColumns, code: SnapshotCodeMap, combined: CombinedTables,
                  max_depth: int, stats: UnwindStats) -> list[tuple[I64, UnwindResult]]:
    """The samples of a capture read lean (format 4.0: ``CaptureReader.keep_stacks_apart``)
    unwound a batch of frames (about ``APART_SPAN`` bytes of stack fields) at a time, the k-th
    SAMPLE record of a frame's lean records given the k-th field's bytes (``fid``: each sample's
    frame, :func:`frame_of`; -1: not to unwind here). A batch is one compiled call
    (:func:`~profiler.unwind.unwinder.unwind_frames`: each frame inflated, matched and unwound
    in C); without it (no libzstd, no compiled kernels), and for a frame it found damaged, the
    fields are inflated end to end into one buffer reused batch after batch
    (:func:`_inflate_fields`), then unwound. A frame whose fields do not fit its samples leaves
    them without user frames, with one warning. Many batches are shared with a worker process
    when a second CPU is idle (:func:`_unwind_jobs`); threads gained nothing here (0.084-0.089 s
    against 0.078-0.084 s for a 76 K-sample capture's batches)."""
    offset = s.offset.astype(np.int64)
    chosen = np.flatnonzero(fid >= 0)
    chosen = chosen[np.lexsort((offset[chosen], fid[chosen]))]  # by frame, each frame's in file order
    cuts = np.flatnonzero(np.diff(fid[chosen])) + 1
    groups = np.split(chosen, cuts) if len(chosen) else []
    batches: list[list[I64]] = []
    held = APART_SPAN
    for sel in groups:
        if held >= APART_SPAN:
            batches.append([])
            held = 0
        batches[-1].append(sel)
        size = frames[int(fid[sel[0]])].size
        held += size + (-size) % 8
    room = _Batch()
    module = step_kernel()
    fused = module if module is not None and hasattr(module, "unwind_frames") else None

    def unwind_apart(batch: list[StackFrame], sels: list[I64]) -> tuple[tuple[I64, UnwindResult] | None, list[str]]:
        warnings: list[str] = []
        _inflate_fields(batch, sels, room, view, offset, warnings)
        if not room.samples:
            return None, warnings
        idx, data, size = room.take()
        stacks = StackCopies(np.frombuffer(room.buffer, dtype=np.uint8), data, size, values[idx, SP].copy())
        return (idx, unwind(cols, values[idx], valid[idx], pc[idx], stacks, _Subset(code, idx), combined,
                            max_depth)), warnings

    def unwind_batch(k: int) -> tuple[tuple[I64, UnwindResult] | None, list[str]]:
        batch = [frames[int(fid[sel[0]])] for sel in batches[k]]
        if fused is not None:
            sels = batches[k]
            idx = np.concatenate(sels)
            count = np.asarray([len(sel) for sel in sels], dtype=np.int64)
            table = np.column_stack([[f.start for f in batch], [f.length for f in batch], [f.size for f in batch],
                                     np.cumsum(count) - count, count]).astype(np.int64)
            got = unwind_frames(fused, view, offset[idx], table, tuple(f.fields for f in batch), cols, values[idx],
                                valid[idx], pc[idx], values[idx, SP], code.lookup_arrays(idx), combined, max_depth)
            if got is not None:
                return _redo_damaged(got, idx, batch, sels, unwind_apart)
        return unwind_apart(batch, batches[k])

    parts: list[tuple[I64, UnwindResult]] = []
    for part, warnings in in_order(unwind_batch, len(batches), _unwind_jobs(len(batches))):
        stats.warnings.extend(warnings)
        if part is not None:
            parts.append(part)
    return parts


def _redo_damaged(got: tuple[UnwindResult, Any], idx: I64, batch: list[StackFrame], sels: list[I64],
                  apart: Callable[[list[StackFrame], list[I64]], tuple[tuple[I64, UnwindResult] | None, list[str]]]
                  ) -> tuple[tuple[I64, UnwindResult] | None, list[str]]:
    """A batch unwound by the compiled ``unwind_frames`` (samples ``idx``), but for its frames
    whose stack fields it found damaged: those are done again the numpy way (``apart``), which
    says why in a warning (or unwinds them, should zstd's stream reader accept what libzstd
    refused). The damaged frames' samples have no frames in ``got``: the redone ones replace them."""
    res, status = got
    if not status.any():
        return (idx, res), []
    redo, warnings = apart([f for f, bad in zip(batch, status) if bad], [s for s, bad in zip(sels, status) if bad])
    if redo is None:
        return (idx, res), warnings
    order = np.argsort(idx, kind="stable")
    at = order[np.searchsorted(idx[order], redo[0])]
    return (idx, _merge([(np.arange(len(idx)), res), (at, redo[1])], len(idx))), warnings


def _inflate_fields(frames: list[StackFrame], sels: list[I64], room: _Batch, view: memoryview, offset: I64,
                    warnings: list[str]) -> None:
    """Split frames' stack fields inflated after those ``room`` holds, each frame's samples
    (``sels``) given their own: the k-th SAMPLE record of a frame gets its k-th field. A frame
    whose fields do not fit its samples gives them none, with a warning."""
    records: list[I64] = []
    data: list[I64] = []
    sizes: list[I64] = []
    taken: list[I64] = []
    for frame, sel in zip(frames, sels):
        at = room.held
        try:
            got = zstd_decompress_into(memoryview(frame.fields), room.at, frame.size)
            if got is None:
                raise FormatError("its parts inflate past the sizes they declare")
            span = field_spans(memoryview(room.buffer)[at:at + got])
            starts = sample_offsets(view[frame.start:frame.start + frame.length]) + frame.start
            if len(starts) != len(span):
                raise FormatError("its samples and their stack copies do not fit together")
        except FormatError as exc:
            warnings.append(f"the stack copies of compressed raw frame number {frame.seq} are damaged ({exc}): "
                            f"its {len(sel)} samples are shown without user frames.")
            continue
        room.add(got)
        records.append(starts)
        data.append(span[:, 0] + at)
        sizes.append(np.minimum(span[:, 2], span[:, 1]))
        taken.append(sel)
    if not taken:
        return
    # the frames do not overlap, and are in file order: one search for the whole batch
    starts, sel = np.concatenate(records), np.concatenate(taken)
    k = np.minimum(np.searchsorted(starts, offset[sel]), len(starts) - 1)
    size = np.concatenate(sizes)[k]
    keep = (starts[k] == offset[sel]) & (size > 0)
    room.samples.append((sel[keep], np.concatenate(data)[k[keep]], size[keep]))


def _unwind_jobs(batches: int) -> int:
    """Worker processes for ``batches`` batches of split frames: as many as ``PROFILER_JOBS``
    says, else two when a second CPU is idle and there are ``FORK_BATCHES`` batches or more
    (forked workers pay from about that many: 0.46-0.59 s against 0.64-0.68 s in one process
    for 300 K samples, 0.13-0.15 s against 0.17-0.18 s for 76 K), else one: this process."""
    if "PROFILER_JOBS" in os.environ or batches >= FORK_BATCHES:
        return worker_count(None, min(batches, 2))
    return 1


class _Batch:
    """Stack fields of some frames end to end in one buffer, and which samples' copies they are."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.held = 0
        self.samples: list[tuple[I64, I64, I64]] = []

    def at(self, n: int) -> memoryview:
        """Room for ``n`` more bytes after those held (the buffer grown when it must be)."""
        if len(self.buffer) < self.held + n:
            grown = bytearray(max(self.held + n, APART_SPAN + n))
            grown[:self.held] = self.buffer[:self.held]
            self.buffer = grown
        return memoryview(self.buffer)[self.held:self.held + n]

    def add(self, length: int) -> None:
        """``length`` more bytes held (the next ones start 8-aligned)."""
        self.held += length + (-length) % 8

    def take(self) -> tuple[I64, I64, I64]:
        """The samples held (index, data offset, copy size), the buffer emptied for the next batch."""
        out = tuple(np.concatenate([p[i] for p in self.samples]).astype(np.int64) for i in range(3))
        self.samples, self.held = [], 0
        return out[0], out[1], out[2]


def _from_columns(s: SampleColumns, layout: R.SampleLayout) -> UserData | None:
    """REGS_USER / STACK_USER from the columnar decoder's columns, when it gave them in the
    order of this event's ``sample_regs_user`` bits (None otherwise: read from the records)."""
    regs, stack = s.regs_user, s.stack_user
    bits = tuple(b for b in range(64) if layout.sample_regs_user >> b & 1)
    if regs is None or stack is None or tuple(regs.registers) != bits:
        return None
    size = stack.size.astype(np.int64, copy=False)
    dyn = np.minimum(stack.dyn_size.astype(np.int64, copy=False), size)
    return UserData(regs.abi.astype(np.uint64, copy=False), regs.regs.astype(np.uint64, copy=False),  # not copied:
                    stack.offset.astype(np.int64, copy=False), dyn, size > 0)  # 1.3 M samples, 190 MB


def _read_user_data_by_span(release: Callable[[int, int], None], w64: U64, s: SampleColumns,
                            layout: R.SampleLayout) -> UserData:
    """``read_user_data`` in file order, ``CHUNK_SPAN`` bytes of the capture at a time, each
    span's pages given back afterwards: resident memory stays one span, not the capture."""
    n = len(s)
    out = UserData(np.zeros(n, dtype=np.uint64),
                   np.zeros((n, bin(layout.sample_regs_user).count("1")), dtype=np.uint64),
                   np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool))
    order = np.argsort(s.offset, kind="stable")
    for span in _spans(s.offset[order], CHUNK_SPAN):
        idx = order[span]
        part = read_user_data(w64, s.take(idx), layout)
        out.abi[idx], out.regs[idx], out.ok[idx] = part.abi, part.regs, part.ok
        out.stack_offset[idx], out.stack_size[idx] = part.stack_offset, part.stack_size
        lo = int(s.offset[idx[0]])
        release(lo, int(part.stack_offset[-1] + part.stack_size[-1] + 16) - lo)
    return out


class _Subset:
    """A CodeMap over a subset of the samples (those with user registers)."""

    def __init__(self, code: SnapshotCodeMap, idx: I64) -> None:
        self.code, self.idx = code, idx

    def locate(self, sample: I64, pc: U64) -> tuple[I64, U64, I8]:
        return self.code.locate(self.idx[sample], pc)

    def lookup_arrays(self, sample: I64) -> LookupArrays:
        return self.code.lookup_arrays(self.idx[sample])


def _sub_stacks(st: StackCopies, idx: I64) -> StackCopies:
    return StackCopies(st.buf, st.offset[idx], st.size[idx], st.sp0[idx])


CHUNK_SPAN = 64 << 20  # samples are unwound this many bytes of the capture at a time
FORK_BATCHES = 32  # batches of split frames from which the unwinding is shared by two processes
APART_SPAN = 8 << 20  # and of a 4.0 capture's stack fields: a batch, one compiled call (unwind_frames: 300 K
# samples in two processes 0.29 s; 4 or 16 MiB 0.30 s), or inflated into one reused buffer without libzstd


def _spans(offsets: I64, span: int) -> list[slice]:
    """Slices of sorted ``offsets`` that each cover less than ``span`` bytes (at least one)."""
    if not len(offsets):
        return []
    block = (offsets - offsets[0]) // span
    cuts = np.flatnonzero(np.diff(block)) + 1
    bounds = [0, *cuts.tolist(), len(offsets)]
    return [slice(a, b) for a, b in zip(bounds, bounds[1:])]


def _merge(parts: list[tuple[I64, UnwindResult]], n: int) -> UnwindResult:
    """Back to all n samples in their order: those without user registers have no user frames."""
    counts = np.zeros(n, dtype=np.int64)
    reason = np.full(n, NO_REGS, dtype=np.uint8)
    for idx, res in parts:
        counts[idx] = np.diff(res.start)
        reason[idx] = res.reason
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    pcs = np.zeros(int(start[-1]), dtype=np.uint64)
    for idx, res in parts:
        pcs[ranges(start[idx], np.diff(res.start))] = res.pcs
    return UnwindResult(start, pcs, reason)


__all__ = ["Image", "UnwindStats", "chains_with_user_frames", "columns_for", "unwind_event_samples"]


def unwind_rows(reader: CaptureReader, layout: R.SampleLayout, s: SampleColumns, gen: I64, rep: Any,
                cols: ArchColumns, symfs: str | None, debug_dirs: tuple[str, ...] | None,
                jit: JitCodeFor | None = None) -> UnwindStats:
    """Unwind the user stack of every row of one ``--call-graph dwarf`` event and put the
    unwound frames into its callchain, in place (``rep`` is the capture's ReplayResult)."""
    sources = table_sources(reader, symfs, debug_dirs)
    assert sources is not None  # the caller found columns for the capture's architecture
    result, stats = unwind_event_samples(reader, layout, s, gen, rep.snapshots, rep.dsos, sources, cols, jit=jit)
    s.chain_id, s.chains = chains_with_user_frames(s, result)
    s.has = s.has | {"callchain"}
    return stats


def table_sources(reader: CaptureReader, symfs: str | None = None,
                  debug_dirs: tuple[str, ...] | None = None, use_packed: bool = True) -> TableSources | None:
    """The rule-table finder for this capture's architecture (None: not one we unwind)."""
    cols = columns_for(reader.info.arch)
    if cols is None:
        return None
    vdso = [m.get("image") for m in reader.metadata("vdso")]
    image = vdso[-1] if vdso and isinstance(vdso[-1], (bytes, bytearray)) else None
    return TableSources(cols, packed=reader.metadata(META_KIND) if use_packed else (), symfs=symfs,
                        debug_dirs=debug_dirs or DEFAULT_DEBUG_DIRS,
                        vdso_image=None if image is None else bytes(image))
