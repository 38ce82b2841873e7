"""One call from a capture file to resolved, filtered stacks: :func:`load_profile`.

Steps (each a few numpy calls over all samples, never a Python loop per sample):

1. decode the capture columnar (``profiler.format.decode``);
2. replay the non-sample records: every sample gets its process's map generation and its
   thread's comm (``replay``);
3. keep the samples the filters select (event, comm, pid, tid, cpu, time);
4. count identical raw stacks — (pid, map generation, callchain): the decoder has already
   given each distinct callchain one id, so this is an exact group-by of small integers; only
   one sample per distinct stack is looked at after this;
5. split the distinct stacks' callchains at their ``PERF_CONTEXT_*`` markers (the marker
   before an entry says whether it is a kernel or user address), take the unique addresses
   and resolve them (``resolve``), per map generation and per DSO in one batch each;
6. keep the samples whose leaf frame matches ``--dso``/``--symbol``.

The result, :class:`Profile`, is what every report renderer and exporter consumes: frames
are ids into one :class:`FrameTable`; stacks are CSR arrays of frame ids, leaf first,
exactly as perf's callchains are ordered.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from profiler.arrays import dense_ids, pair_ids, ranges
from profiler.errors import FormatError, ReportError, UsageError
from profiler.format.decode.chains import CONTEXT_KERNEL, cpumode_context, split_callchains
from profiler.format.decode.columns import CaptureData, SampleColumns
from profiler.format.decode.decoder import check_period_total, load_capture, period_total
from profiler.format.container.reader import CaptureReader
from profiler.format.events import EventTable
from profiler.format.tracepoint import TraceFormat
from profiler.report.groupread import member_samples, reads_group
from profiler.report.options import Filters, LoadOptions, time_bounds, time_mask  # noqa: F401 (re-exported)
from profiler.format import perf_data_opener  # noqa: F401  registers: perf.data opens as a capture
from profiler.report.model import INLINED_SUFFIX, Frame, Location, Mapping, SourceLine, StackSample
from profiler.report.replay import ReplayResult, replay
from profiler.report.fold import Folded, check_cpu_filter
from profiler.report.cache import cache_dir
from profiler.report.symbols.chain import ChainSource, SymbolSources
from profiler.report.symbols.debuginfod import DebuginfodClient
from profiler.report.symbols.resolver import UNKNOWN, FrameInfo, FrameTable, Resolved, SymbolResolver
from profiler.report.tracepoints import filter_mask, is_tracepoint, parse_trace_filter, raw_payloads, trace_format
from profiler.report.symbols.debugfile import DEFAULT_DEBUG_DIRS
from profiler.report.unwind.arch import columns_for
from profiler.report.unwind.userdata import has_user_stacks

if TYPE_CHECKING:
    from profiler.report.unwind.driver import UnwindStats
from profiler.report.symbols.kallsyms import KERNEL_DSO

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
Progress = Callable[[str], None]



@dataclass
class StackTable:
    """The distinct stacks, CSR (``start``), leaf first; per entry the frame id, the offset
    into its symbol, the address perf script shows, and the raw address."""

    start: I64
    frames: I64
    offsets: U64
    shown: U64
    addrs: U64
    srclines: I64 | None = None  # per entry: id in Profile.srclines, -1 without a line
    leaf: I64 | None = None  # per stack: the leaf's function (not an inlined frame), when they differ

    @classmethod
    def empty(cls) -> StackTable:
        z = np.zeros(0, dtype=np.uint64)
        return cls(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), z, z, z)


@dataclass
class Profile:
    """A capture's samples of one event, resolved into stacks of frames.

    Per sample (time order): ``samples`` (columns), ``comm`` (index into ``comm_names``),
    ``stack`` (index into the stack table). The stack table is CSR: stack ``k`` is
    ``stack_frames[stack_start[k]:stack_start[k + 1]]``, frame ids leaf first.
    """

    path: str
    header: dict[str, Any]
    event: str
    event_names: list[str]
    samples: SampleColumns
    comm: I64
    comm_names: list[str]
    stack: I64
    stack_start: I64
    stack_frames: I64
    frames: FrameTable
    has_callchains: bool
    stack_table: StackTable
    demangle: bool = True
    lost_samples: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    recorded_samples: int = 0  # of this event, before filters
    start_ns: int = 0  # capture start on the sample clock
    trailer: dict[str, Any] = field(default_factory=dict)
    clean_end: bool = True
    srclines: list[str] = field(default_factory=list)  # "file.c:12" texts the stack table refers to
    resolver: SymbolResolver | None = None  # what resolved the frames (its DSOs, symbols, lines)
    base_samples: int = 0  # of this event after --time/--cpu, before the entry filters
    base_period: int = 0
    trace_format: TraceFormat | None = None  # a tracepoint event's stored format
    raw: npt.NDArray[Any] | None = None  # per sample: PERF_SAMPLE_RAW bytes (LoadOptions.payloads)
    byte_order: str = "little"
    unwind: UnwindStats | None = None  # set when the event's stacks were unwound from DWARF CFI
    build_ids: dict[str, str] = field(default_factory=dict)  # DSO path -> recorded build-id
    # per row of ``samples``, how many samples it stands for: set when the capture was folded
    # into distinct rows (``profiler.report.fold``; rows in the time order of their last
    # samples), None when every row is one sample
    weight: I64 | None = None
    _function_lines: dict[tuple[str, int], int | None] = field(default_factory=dict, repr=False)

    @property
    def total_samples(self) -> int:
        return int(self.weight.sum()) if self.weight is not None else len(self.samples)

    def sample_weights(self) -> I64:
        """How many samples each row of ``samples`` stands for."""
        return self.weight if self.weight is not None else np.ones(len(self.samples), dtype=np.int64)

    @property
    def total_period(self) -> int:
        return int(self.samples.period.sum(dtype=np.uint64)) if len(self.samples) else 0

    @property
    def num_stacks(self) -> int:
        return len(self.stack_start) - 1

    def stack_frame_ids(self, k: int) -> I64:
        return self.stack_frames[self.stack_start[k]:self.stack_start[k + 1]]

    def frame(self, frame_id: int) -> FrameInfo:
        return self.frames[frame_id]

    def leaf_frames(self) -> I64:
        """The leaf function's frame id of every stack (the symbol the sampled address is in,
        never an inlined frame: self time goes to real functions, as in perf)."""
        if self.stack_table.leaf is not None:
            return self.stack_table.leaf
        return self.stack_frames[self.stack_start[:-1]]

    def leaf_srclines(self) -> I64:
        """The source line id (in :attr:`srclines`) of every stack's sampled address, -1 without."""
        lines = self.stack_table.srclines
        if lines is None or not self.num_stacks:
            return np.full(self.num_stacks, -1, np.int64)
        return lines[self.stack_start[:-1]]

    def stack_samples(self, locations: bool = False) -> list[StackSample]:
        """Distinct (thread, stack) pairs with their sample counts and periods, stacks root
        first: the input of the folded, flame-graph and speedscope renderers. Inlined functions
        are frames with their ``inline_depth``. With ``locations`` each stack also carries its
        addresses as :class:`Location` s (for exporters that keep addresses, mappings and
        source lines, like pprof)."""
        s = self.samples
        if not len(s):
            return []
        order = np.lexsort((s.tid, self.stack))
        st, tid = self.stack[order], s.tid[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = (st[1:] != st[:-1]) | (tid[1:] != tid[:-1])
        starts = np.flatnonzero(first)
        counts = (np.add.reduceat(self.sample_weights()[order], starts) if len(starts)
                  else np.zeros(0, np.int64))
        periods = np.add.reduceat(s.period[order], starts) if len(starts) else np.zeros(0, np.uint64)
        built: dict[int, tuple[tuple[Frame, ...], tuple[Location, ...]]] = {}
        out = []
        for j, pos in enumerate(starts.tolist()):
            i, k = int(order[pos]), int(st[pos])
            if k not in built:
                built[k] = self._stack_model(k, locations)
            frames, where = built[k]
            out.append(StackSample(
                comm=self.comm_names[int(self.comm[i])], pid=int(s.pid[i]), tid=int(s.tid[i]),
                frames=frames, samples=int(counts[j]), period=int(periods[j]), locations=where,
            ))
        return out

    def last_comms(self) -> tuple[tuple[int, str], ...]:
        """(tid, the thread's name at its last sample) for every sampled thread: after an
        exec, the new command's name."""
        tids = self.samples.tid
        if not len(tids):
            return ()
        uniq, first_from_end = np.unique(tids[::-1], return_index=True)
        last = len(tids) - 1 - first_from_end
        return tuple((int(t), self.comm_names[int(self.comm[i])]) for t, i in zip(uniq.tolist(), last.tolist()))

    def model_frame(self, frame_id: int, inline_depth: int = 0) -> Frame:
        """The model's view of a frame."""
        f = self.frames[frame_id]
        return Frame(f.name(self.demangle), f.dso, self._kind(f), inline_depth)

    @staticmethod
    def _kind(f: FrameInfo) -> str:
        return f.kind if f.resolved or f.kind == "kernel" else "unknown"

    def address_groups(self, k: int) -> list[list[int]]:
        """Stack ``k``'s entries (indices into the stack table) grouped by address, root first;
        each group is the function's entry, then the entries of what was inlined into it,
        outermost first (the table keeps them leaf first: inlined..., function)."""
        table = self.stack_table
        groups: list[list[int]] = []
        current: list[int] = []
        for e in range(int(table.start[k]), int(table.start[k + 1])):
            current.append(e)
            if not self.frames[int(table.frames[e])].inlined:
                groups.append(current[::-1])
                current = []
        if current:
            groups.append(current[::-1])
        return groups[::-1]

    def _stack_model(self, k: int, locations: bool) -> tuple[tuple[Frame, ...], tuple[Location, ...]]:
        fids = self.stack_table.frames
        groups = self.address_groups(k)
        frames = tuple(self.model_frame(int(fids[e]), depth) for g in groups for depth, e in enumerate(g))
        return frames, tuple(self.location(g) for g in groups) if locations else ()

    def location(self, group: list[int]) -> Location:
        """The :class:`Location` of one address group (see :meth:`address_groups`)."""
        table = self.stack_table
        head = self.frames[int(table.frames[group[0]])]
        lines = []
        for e in reversed(group):  # innermost first
            f = self.frames[int(table.frames[e])]
            name = f.name(self.demangle)
            lines.append(self._source_line(name.removesuffix(INLINED_SUFFIX) if f.inlined else name, e))
        return Location(address=int(table.addrs[group[0]]), rel_address=int(table.shown[group[0]]),
                        mapping=Mapping(head.dso_path, self.build_ids.get(head.dso_path)),
                        dso=head.dso, kind=self._kind(head), lines=tuple(lines))

    def _source_line(self, function: str, entry: int) -> SourceLine:
        ids = self.stack_table.srclines
        line_id = int(ids[entry]) if ids is not None else -1
        if line_id < 0:
            return SourceLine(function)
        file, _, number = self.srclines[line_id].rpartition(":")
        if not file or not number.isdigit():
            return SourceLine(function, self.srclines[line_id])
        return SourceLine(function, file, int(number), self.function_line(entry))

    def function_line(self, entry: int) -> int | None:
        """The line a stack entry's function starts at: DWARF's line of the symbol's first
        instruction (None for inlined functions, code without lines, kernel and JIT code)."""
        t = self.stack_table
        f = self.frames[int(t.frames[entry])]
        if f.inlined or f.symbol is None or f.kind != "user" or self.resolver is None:
            return None
        start = int(t.shown[entry]) - int(t.offsets[entry])
        key = (f.dso_path, start)
        if key not in self._function_lines:
            dso_id = self.resolver.dso_id_of(f.dso_path)
            table = self.resolver.line_table(dso_id) if dso_id is not None else None
            chain = table.lookup(start) if table is not None else ()
            self._function_lines[key] = chain[-1].line if chain and chain[-1].line > 0 else None
        return self._function_lines[key]


def open_capture(path: str, callchains: bool = True) -> tuple[CaptureReader, CaptureData]:
    """Open and decode a capture (errors are the format's one-sentence errors);
    ``callchains=False`` skips decoding them (flat profiles)."""
    reader = CaptureReader.open(path)
    return reader, _decode(path, reader, callchains)


class OpenedCapture:
    """A capture opened for reports: decoded whole (:attr:`data`) or folded into distinct
    rows (:meth:`folded`) on first use, each at most once."""

    def __init__(self, path: str, callchains: bool = True) -> None:
        self.path = path
        self.reader = CaptureReader.open(path)
        self.callchains = callchains
        self.events = EventTable.from_header(self.reader.header)
        self._data: CaptureData | None = None
        self._folded: dict[tuple[bool, bool], Folded | None] = {}

    @property
    def names(self) -> list[str]:
        return [ev.name for ev in self.events.events]

    @property
    def data(self) -> CaptureData:
        if self._data is None:
            self._data = _decode(self.path, self.reader, self.callchains)
        return self._data

    def pair(self) -> tuple[CaptureReader, CaptureData]:
        return self.reader, self.data

    def folded(self, options: LoadOptions, keep_cpu: bool) -> Folded | None:
        from profiler.report.fold import fold_capture

        key = (options.callchains and self.callchains, keep_cpu)
        if key not in self._folded:
            try:
                self._folded[key] = fold_capture(self.reader, options.filters, key[0], keep_cpu)
            except (ValueError, IndexError) as exc:
                raise FormatError(f"{self.path} is damaged beyond reading ({exc}).") from None
        return self._folded[key]


def _decode(path: str, reader: CaptureReader, callchains: bool) -> CaptureData:
    try:
        return load_capture(reader, callchains)
    except (ValueError, IndexError) as exc:
        raise FormatError(f"{path} is damaged beyond reading ({exc}).") from None


def load_report_profile(options: LoadOptions, capture: OpenedCapture, progress: Progress | None = None,
                        event: str | None = None, keep_cpu: bool = True) -> Profile:
    """:func:`load_profile` in memory bounded by the distinct stacks (the capture folded
    chunk by chunk, see :mod:`profiler.report.fold`) whenever the event and options allow it:
    not a ':S' group member (its periods come from the leader's counts), not unwound from
    DWARF, no tracepoint payloads. ``keep_cpu=False`` when no output shows the cpu.
    ``PROFILER_FOLD=0`` in the environment decodes the whole capture instead (the same report,
    in memory that grows with the samples: for comparison)."""
    ev_index = select_event(capture.names, event or options.filters.event)
    ev = capture.events.events[ev_index]
    dwarf = options.callchains and has_user_stacks(ev.layout) and columns_for(
        str(capture.reader.header.get("arch", ""))) is not None
    whole = os.environ.get("PROFILER_FOLD") == "0"  # decode the whole capture (to compare)
    if not (whole or reads_group(ev) or dwarf or options.payloads or options.filters.trace):
        (progress or (lambda _m: None))("decoding")
        folded = capture.folded(options, keep_cpu)
        if folded is not None:
            return folded_profile(options, capture.reader, folded, ev_index, progress)
    return load_profile(options, progress, event=event, opened=capture.pair())


def folded_profile(options: LoadOptions, reader: CaptureReader, folded: Folded, ev_index: int,
                   progress: Progress | None = None) -> Profile:
    """The :class:`Profile` of event ``ev_index`` from a folded capture: its rows (in the time
    order of their last samples) with their sample counts as ``weight``."""
    say = progress or (lambda _msg: None)
    names = [ev.name for ev in EventTable.from_header(reader.header).events]
    warnings = list(reader.warnings) + list(folded.warnings)
    rows, state = folded.rows, folded.state
    idx = np.flatnonzero(rows.event == ev_index)
    idx = idx[np.lexsort((rows.last_seq[idx], rows.last_time[idx]))]
    base_samples = int(rows.count[idx].sum())
    base_period = int(rows.period[idx].sum(dtype=np.uint64)) if len(idx) else 0
    f = options.filters
    keep = np.ones(len(idx), dtype=bool)
    if f.pids:
        keep &= np.isin(rows.pid[idx], np.asarray(f.pids, dtype=np.int64))
    if f.tids:
        keep &= np.isin(rows.tid[idx], np.asarray(f.tids, dtype=np.int64))
    if f.comms:
        wanted = [i for i, name in enumerate(state.comm_names) if name in f.comms]
        keep &= np.isin(rows.comm[idx], np.asarray(wanted, dtype=np.int64))
    idx = idx[keep]
    s, gen, comm = folded.samples(idx), rows.gen[idx], rows.comm[idx]
    tfmt, raw = _trace_payloads(reader, ev_index, names[ev_index], s, options)

    say("resolving")
    has_chains = "callchain" in folded.has and options.callchains
    stack, reps = dedupe_stacks(s, gen, has_chains)
    empty = np.zeros(0, dtype=np.int64)
    resolver = _resolver(reader, ReplayResult(state, empty, empty, state.comm_names), options)
    table = resolve_stacks(s, gen, reps, has_chains, resolver)
    warnings.extend(resolver.warnings)
    start = reader.header.get("start_perf_clock_ns")
    profile = Profile(
        path=options.input, header=reader.header, event=names[ev_index], event_names=names,
        samples=s, comm=comm, comm_names=state.comm_names, stack=stack, stack_start=table.start,
        stack_frames=table.frames, frames=resolver.frames, stack_table=table, has_callchains=has_chains,
        demangle=options.demangle, lost_samples=state.lost + state.lost_samples,
        counts=folded.counts, warnings=warnings, recorded_samples=int(folded.recorded[ev_index]),
        start_ns=start if isinstance(start, int) and start > 0 else max(folded.first_time, 0),
        trailer=reader.trailer, clean_end=reader.clean_end, srclines=resolver.srclines, resolver=resolver,
        base_samples=base_samples, base_period=base_period, trace_format=tfmt, raw=raw,
        byte_order=_byte_order(reader), build_ids=_build_ids(reader.build_ids(), resolver),
        weight=rows.count[idx],
    )
    if f.dsos or f.symbols:
        profile = filter_by_leaf(profile, f)
    return profile


def load_profile(options: LoadOptions, progress: Progress | None = None,
                 event: str | None = None, opened: tuple[CaptureReader, CaptureData] | None = None,
                 ) -> Profile:
    """Open, decode, replay, filter and resolve a capture into a :class:`Profile`.

    ``event`` (or ``options.filters.event``) picks one event of a multi-event capture; the
    default is the first. Raises ReportError when a named event does not exist.
    """
    say = progress or (lambda _msg: None)
    say("decoding")
    reader, data = opened or open_capture(options.input, options.callchains)
    check_period_total(period_total(data.samples.period))  # the sums below are 64-bit
    warnings = list(reader.warnings) + list(data.warnings)
    names = [ev.name for ev in data.events.events]
    ev_index = select_event(names, event or options.filters.event)
    check_cpu_filter(reader, data.events, options.filters)

    say("replaying")
    build_ids = reader.build_ids()
    rep = replay(data.others, data.others_before, data.samples.pid, data.samples.tid, build_ids)
    of_event, s = _event_samples(data, ev_index, warnings)
    recorded = int(np.count_nonzero(of_event))
    # perf's split: --time and --cpu drop samples; the other filters select entries, and
    # "--percentage absolute" keeps the total of the samples before them (base_*)
    kept = of_event & _sample_mask(s, options.filters, _start_ns(reader.header, s))
    base_samples = int(np.count_nonzero(kept))
    base_period = int(s.period[kept].sum(dtype=np.uint64)) if base_samples else 0
    mask = kept & _entry_mask(s, rep, options.filters)
    if not mask.all():
        s = s.take(mask)
    gen, comm = rep.sample_gen[mask], rep.sample_comm[mask]
    tfmt, raw = _trace_payloads(reader, ev_index, names[ev_index], s, options)
    if tfmt is not None and raw is not None and options.filters.trace:
        keep = filter_mask(tfmt, parse_trace_filter(options.filters.trace), raw, _byte_order(reader))
        s, gen, comm, raw = s.take(keep), gen[keep], comm[keep], raw[keep]

    unwound: UnwindStats | None = None
    if options.callchains:
        unwound = unwind_dwarf(reader, data, ev_index, s, gen, rep, options)
        if unwound is not None:
            say("unwinding")
            warnings.extend(unwound.warnings)

    say("resolving")
    has_chains = "callchain" in s.has and options.callchains
    stack, reps = dedupe_stacks(s, gen, has_chains)
    resolver = _resolver(reader, rep, options)
    table = resolve_stacks(s, gen, reps, has_chains, resolver)
    warnings.extend(resolver.warnings)
    if unwound is not None:
        from profiler.report.unwind.driver import ROOTS, outer_is_root

        unwound.count_roots(outer_is_root(stack, table.start, table.frames, resolver.frames, ROOTS))

    profile = Profile(
        path=options.input, header=reader.header, event=names[ev_index], event_names=names,
        samples=s, comm=comm, comm_names=rep.comm_names, stack=stack, stack_start=table.start,
        stack_frames=table.frames, frames=resolver.frames, stack_table=table, has_callchains=has_chains,
        demangle=options.demangle, lost_samples=rep.state.lost + rep.state.lost_samples,
        counts=data.counts, warnings=warnings, recorded_samples=recorded,
        start_ns=_start_ns(reader.header, data.samples), trailer=reader.trailer,
        clean_end=reader.clean_end, srclines=resolver.srclines, resolver=resolver,
        base_samples=base_samples, base_period=base_period, trace_format=tfmt, raw=raw, byte_order=_byte_order(reader), unwind=unwound,
        build_ids=_build_ids(build_ids, resolver),
    )
    f = options.filters
    if f.dsos or f.symbols:
        profile = filter_by_leaf(profile, f)
    return profile


def _byte_order(reader: CaptureReader) -> str:
    return "big" if reader.header.get("byte_order") == "big" else "little"


def _trace_payloads(reader: CaptureReader, index: int, name: str, s: SampleColumns,
                    options: LoadOptions) -> tuple[TraceFormat | None, npt.NDArray[Any] | None]:
    """A tracepoint event's stored format and, when asked for (or a --trace-filter needs
    them), the payloads of the selected samples."""
    wanted = options.payloads or bool(options.filters.trace)
    if not is_tracepoint(reader.header, index):
        if options.filters.trace:
            raise UsageError(f"--trace-filter selects tracepoint samples by field: '{name}' is not a tracepoint.")
        return None, None
    tfmt = trace_format(reader, name)
    if tfmt is None and options.filters.trace:
        raise UsageError(f"--trace-filter: the capture does not hold the format of {name} "
                         "(recorded by an older profiler).")
    if not wanted:
        return tfmt, None
    if s.raw is None:  # a decoder without the RAW column: the exact one, by record number
        return tfmt, raw_payloads(reader, s.seq)
    view = reader.raw_view()
    out = np.empty(len(s), dtype=object)
    out[:] = [bytes(view[o:o + n]) for o, n in zip(s.raw.offset.tolist(), s.raw.size.tolist())]
    return tfmt, out


def unwind_dwarf(reader: CaptureReader, data: CaptureData, ev_index: int, s: SampleColumns,
                 gen: I64, rep: ReplayResult, options: LoadOptions) -> UnwindStats | None:
    """For an event recorded with ``--call-graph dwarf``: unwind every sample's user stack
    and put the unwound frames into its callchain (in place). None for other events."""
    layout = data.events.events[ev_index].layout
    cols = columns_for(str(reader.header.get("arch", "")))
    if not has_user_stacks(layout) or cols is None or not len(s):
        return None
    # the unwinder's modules are imported only for a capture that needs them
    from profiler.report.unwind.driver import chains_with_user_frames, unwind_event_samples
    from profiler.report.unwind.sources import META_KIND as UNWIND_META
    from profiler.report.unwind.sources import TableSources

    vdso = [m.get("image") for m in reader.metadata("vdso")]
    image = vdso[-1] if vdso and isinstance(vdso[-1], (bytes, bytearray)) else None
    sources = TableSources(cols, packed=reader.metadata(UNWIND_META), symfs=options.symfs,
                           debug_dirs=options.debug_dirs or DEFAULT_DEBUG_DIRS,
                           vdso_image=None if image is None else bytes(image))
    result, stats = unwind_event_samples(reader, layout, s, gen, rep.snapshots, rep.dsos, sources, cols)
    s.chain_id, s.chains = chains_with_user_frames(s, result)
    s.has = s.has | {"callchain"}
    return stats


def _build_ids(recorded: dict[str, str], resolver: SymbolResolver) -> dict[str, str]:
    """Path -> build-id of every recorded DSO, the kernel's included."""
    out = dict(recorded)
    kernel = resolver.chain.kernel_build_id() if resolver.chain is not None else None
    if kernel:
        out[KERNEL_DSO] = kernel
    return out


def _event_samples(data: CaptureData, ev_index: int, warnings: list[str]) -> tuple[npt.NDArray[np.bool_], SampleColumns]:
    """The samples of one event; for a member of a ':S' group, the leader's samples with the
    member's count growth as their period (see :mod:`profiler.report.groupread`)."""
    event = data.events.events[ev_index]
    if not reads_group(event):
        return data.samples.event == ev_index, data.samples
    mask, samples, missing = member_samples(data, event)
    if missing:
        warnings.append(f"{missing} samples of the group's leader carried no count of '{event.name}'.")
    return mask, samples


def select_event(names: list[str], wanted: str | None) -> int:
    """Index of the event called ``wanted`` (``cpu-clock`` also matches ``cpu-clock:u``)."""
    if wanted is None:
        return 0
    for i, name in enumerate(names):
        if name == wanted:
            return i
    for i, name in enumerate(names):
        if name.split(":", 1)[0] == wanted.split(":", 1)[0]:
            return i
    raise ReportError(f"the capture has no event {wanted!r}: it has {', '.join(names)}.")


def _resolver(reader: CaptureReader, rep: ReplayResult, options: LoadOptions) -> SymbolResolver:
    """A resolver on the offline symbol-source chain (see :mod:`profiler.report.symbols.chain`):
    packed symbols, ``--symfs``, debug directories, the local file only when its build-id
    matches; ``--kallsyms``, packed kernel symbols, the capture's kallsyms snapshot; the
    vdso image of the capture; JIT maps packed or in ``perf-PID.map``."""
    chain = SymbolSources(reader, symfs=options.symfs, debug_dirs=options.debug_dirs,
                          kallsyms_path=options.kallsyms, perf_map_dir=options.perf_map_dir,
                          debuginfod=DebuginfodClient.from_options(options.debuginfod, options.offline))
    kernel, _, note = chain.kernel()
    return SymbolResolver(
        dsos=rep.dsos, snapshots=rep.snapshots, sources=[ChainSource(chain)], chain=chain,
        kernel=kernel, kernel_note=note, perf_map_dir=options.perf_map_dir,
        lines=options.srclines or options.inline, inline=options.inline, line_cache_dir=cache_dir(),
    )


def _start_ns(header: dict[str, Any], s: SampleColumns) -> int:
    start = header.get("start_perf_clock_ns")
    if isinstance(start, int) and start > 0:
        return start
    return int(s.time.min()) if len(s) else 0


def _sample_mask(s: SampleColumns, f: Filters, start_ns: int) -> npt.NDArray[np.bool_]:
    mask = np.ones(len(s), dtype=bool)
    if f.cpus:
        mask &= np.isin(s.cpu, np.asarray(f.cpus, dtype=np.int64))
    if f.time:
        mask &= time_mask(s.time, f.time, start_ns)
    return mask


def _entry_mask(s: SampleColumns, rep: ReplayResult, f: Filters) -> npt.NDArray[np.bool_]:
    mask = np.ones(len(s), dtype=bool)
    if f.pids:
        mask &= np.isin(s.pid, np.asarray(f.pids, dtype=np.int64))
    if f.tids:
        mask &= np.isin(s.tid, np.asarray(f.tids, dtype=np.int64))
    if f.comms:
        wanted = [i for i, name in enumerate(rep.comm_names) if name in f.comms]
        mask &= np.isin(rep.sample_comm, np.asarray(wanted, dtype=np.int64))
    return mask


# --- stacks ---------------------------------------------------------------------------------


def raw_stacks(s: SampleColumns, use_chains: bool) -> tuple[I64, U64]:
    """Each sample's raw stack as CSR (start offsets, words), markers included.

    A sample without a callchain (or with an empty one) gets ``[context marker, ip]``: the
    marker for its cpumode, so it is read exactly like a one-entry kernel callchain. Used on
    the distinct stacks only (one representative sample each).
    """
    n = len(s)
    ctx = cpumode_context(s.cpumode)
    if use_chains:
        lengths = s.chain_len.astype(np.int64)
        empty = lengths == 0
        lengths = np.where(empty, 2, lengths)
        start = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=start[1:])
        words = np.empty(int(start[-1]), dtype=np.uint64)
        full = np.flatnonzero(~empty)
        chain_at = s.chains.start[s.chain_id[full]]
        words[ranges(start[full], lengths[full])] = s.chains.words[ranges(chain_at, lengths[full])]
        e = np.flatnonzero(empty)
        words[start[e]] = ctx[e]
        words[start[e] + 1] = s.ip[e]
        return start, words
    start = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
    words = np.empty(2 * n, dtype=np.uint64)
    words[0::2] = ctx
    words[1::2] = s.ip
    return start, words


def _ip_ids(ip: U64, kernel: npt.NDArray[np.bool_]) -> I64:
    """Dense ids of the distinct (cpumode is kernel, ip) pairs."""
    ip_id = dense_ids(ip.view(np.int64))
    if np.array_equal(ip >= np.uint64(1 << 63), kernel):
        return ip_id  # the address's top bit already says kernel or user (x86_64, aarch64)
    return pair_ids(ip_id, kernel.astype(np.int64))


def dedupe_stacks(s: SampleColumns, gen: I64, use_chains: bool) -> tuple[I64, I64]:
    """(stack id per sample, one representative sample index per stack).

    A raw stack is (pid, map generation, callchain): the decoder already gave every distinct
    callchain one ``chain_id``, so this is an exact group-by over three small integers. Samples
    whose chain is empty (or when chains are not used) are keyed by (cpumode, ip) instead.
    """
    n = len(s)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # (cpumode, ip) pairs of chainless samples get ids after the chains' ids
    if not use_chains or not s.chain_id.any():
        what = int(len(s.chains)) + _ip_ids(s.ip, cpumode_context(s.cpumode) == CONTEXT_KERNEL)
    else:
        what = s.chain_id.astype(np.int64)
        empty = np.flatnonzero(what == 0)
        if len(empty):
            kernel = cpumode_context(s.cpumode[empty]) == CONTEXT_KERNEL
            what[empty] = int(len(s.chains)) + _ip_ids(s.ip[empty], kernel)
    owner = pair_ids(dense_ids(s.pid.astype(np.int64)), dense_ids(gen.astype(np.int64)))
    stack = pair_ids(owner, dense_ids(what))
    reps = np.empty(int(stack.max()) + 1, dtype=np.int64)
    reps[stack] = np.arange(n, dtype=np.int64)  # any sample of a group represents it
    return stack, reps


def resolve_stacks(s: SampleColumns, gen: I64, reps: I64, use_chains: bool,
                   resolver: SymbolResolver) -> StackTable:
    """Frame ids of each distinct stack (CSR, leaf first), markers dropped."""
    if len(reps) == 0:
        return StackTable.empty()
    sub = s.take(reps)
    start, words = raw_stacks(sub, use_chains)
    u = len(reps)
    entries = split_callchains(start, words, sub.cpumode)
    addr, owner, kernel, foreign = entries.addr, entries.owner, entries.kernel, ~entries.host
    pid = np.where(kernel | foreign, -1, sub.pid[owner])
    g = np.where(kernel | foreign, -1, gen[reps][owner])

    order = np.lexsort((foreign, kernel, addr, g, pid))
    first = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        o = order
        first[1:] = ((pid[o[1:]] != pid[o[:-1]]) | (g[o[1:]] != g[o[:-1]]) | (addr[o[1:]] != addr[o[:-1]])
                     | (kernel[o[1:]] != kernel[o[:-1]]) | (foreign[o[1:]] != foreign[o[:-1]]))
    uniq = order[first]
    which = np.empty(len(order), dtype=np.int64)
    which[order] = np.cumsum(first) - 1
    # an address never sampled as a leaf is a return address: lines of the call before it
    is_leaf = np.ones(len(addr), dtype=bool)
    if len(addr) > 1:
        is_leaf[1:] = owner[1:] != owner[:-1]  # entries are in stack order, leaf first
    seen_as_leaf = np.bincount(which[is_leaf], minlength=len(uniq)) > 0
    res = _resolve_entries(resolver, pid[uniq], g[uniq], addr[uniq], kernel[uniq], foreign[uniq], ~seen_as_leaf)
    counts = np.bincount(owner, minlength=u)
    stack_start = np.zeros(u + 1, dtype=np.int64)
    np.cumsum(counts, out=stack_start[1:])
    table = StackTable(stack_start, res.frame[which], res.offset[which], res.shown[which], addr,
                       res.srcline[which])
    return expand_inlined(table, which, res) if res.inlined else table


def expand_inlined(table: StackTable, which: I64, res: Resolved) -> StackTable:
    """Each address with inlined functions becomes several entries, innermost first, the
    function itself last: ``[inlined..., function]`` in place of ``[function]``."""
    u = len(res.frame)
    extra = np.zeros(u, np.int64)
    for i, chain in res.inlined.items():
        extra[i] = len(chain)
    # per unique address, its entries: inlined frames then the function (CSR)
    ustart = np.zeros(u + 1, np.int64)
    np.cumsum(extra + 1, out=ustart[1:])
    uframe = np.empty(int(ustart[-1]), np.int64)
    uline = np.empty(int(ustart[-1]), np.int64)
    uframe[ustart[1:] - 1] = res.frame
    uline[ustart[1:] - 1] = res.srcline
    for i, chain in res.inlined.items():
        a = int(ustart[i])
        uframe[a:a + len(chain)] = [f for f, _ in chain]
        uline[a:a + len(chain)] = [line for _, line in chain]
    per_entry = extra[which] + 1
    idx = ranges(ustart[which], per_entry)
    lens = np.diff(table.start)
    owner = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    start = np.zeros(len(table.start), np.int64)
    np.cumsum(np.bincount(owner, weights=per_entry, minlength=len(lens)).astype(np.int64), out=start[1:])
    rep = np.repeat(np.arange(len(which), dtype=np.int64), per_entry)
    leaf = table.frames[table.start[:-1]] if len(table.frames) else np.zeros(0, np.int64)
    return StackTable(start, uframe[idx], table.offsets[rep], table.shown[rep], table.addrs[rep],
                      uline[idx], leaf)


def _resolve_entries(resolver: SymbolResolver, pid: I64, gen: I64, addr: U64,
                     kernel: npt.NDArray[np.bool_], foreign: npt.NDArray[np.bool_],
                     returns: npt.NDArray[np.bool_]) -> Resolved:
    """Host addresses through the resolver; a guest's or the hypervisor's (``foreign``) as
    ``[unknown]`` frames with their address: no host map or symbol table names them.
    ``returns``: addresses only ever seen as return addresses (see SymbolResolver.resolve)."""
    if not foreign.any():
        return resolver.resolve(pid, gen, addr, kernel, returns)
    out = Resolved(np.full(len(addr), -1, dtype=np.int64), np.zeros(len(addr), dtype=np.uint64), addr.copy())
    host = np.flatnonzero(~foreign)
    if len(host):
        out.put(host, resolver.resolve(pid[host], gen[host], addr[host], kernel[host], returns[host]))
    for i in np.flatnonzero(foreign).tolist():
        out.frame[i] = resolver.frames.intern(FrameInfo(None, UNKNOWN, UNKNOWN, "unknown", int(addr[i])))
    return out


def filter_by_leaf(profile: Profile, f: Filters) -> Profile:
    """Keep the samples whose leaf frame is in one of ``f.dsos`` / named one of ``f.symbols``."""
    ok_frame = np.zeros(len(profile.frames), dtype=bool)
    for i, fr in enumerate(profile.frames.frames):
        dso_ok = not f.dsos or fr.dso in f.dsos or fr.dso_path in f.dsos
        sym_ok = not f.symbols or (fr.symbol is not None and (
            fr.symbol in f.symbols or fr.name(True) in f.symbols))
        ok_frame[i] = dso_ok and sym_ok
    leaf_ok = ok_frame[profile.leaf_frames()] if profile.num_stacks else np.zeros(0, dtype=bool)
    mask = leaf_ok[profile.stack] if len(profile.stack) else np.zeros(0, dtype=bool)
    if mask.all():
        return profile
    profile.samples = profile.samples.take(mask)
    if profile.raw is not None:
        profile.raw = profile.raw[mask]
    profile.comm = profile.comm[mask]
    profile.stack = profile.stack[mask]
    if profile.weight is not None:
        profile.weight = profile.weight[mask]
    return profile


def progress_printer(enabled: bool) -> Progress | None:
    """A progress callback writing phases to stderr, only when stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        return None

    def say(phase: str) -> None:
        sys.stderr.write(f"\rprofiler: {phase}...\x1b[K")
        sys.stderr.flush()

    return say
