"""What the report pipeline (:mod:`profiler.report.pipeline`) gives every command: one event's
samples, resolved into stacks of frames — :class:`Profile` — and its view in the frame model
(:mod:`profiler.report.model`) that stack renderers and exporters take: :func:`stack_profile`.

Per sample (or per tally row standing for ``weight`` samples), in time order: the sample
columns, the thread's comm, and the index of its stack in the :class:`StackTable`. Frames are
ids into one :class:`~profiler.report.resolver.FrameTable`; stacks are CSR arrays of frame ids,
leaf first, exactly as perf's callchains are ordered.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.format.decode.columns import SampleColumns
from profiler.format.typed_header import CaptureHeader
from profiler.report.model import (
    INLINED_SUFFIX,
    Frame,
    Location,
    Mapping,
    ProfileMeta,
    SourceLine,
    StackSet,
    StackSample,
    Timeline,
)
from profiler.report.resolver import FrameInfo, FrameTable, SymbolResolver

if TYPE_CHECKING:
    from profiler.format.tracepoint import TraceFormat
    from profiler.report.unwind_stats import UnwindStats

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


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
    header: CaptureHeader
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
    header_notes: list[str] = field(default_factory=list)  # more report header lines (Python lines)
    # (qualname, file) -> the line a Python function starts at (its code object's, --python-lines)
    python_first_lines: dict[tuple[str, str], int] = field(default_factory=dict)
    build_ids: dict[str, str] = field(default_factory=dict)  # DSO path -> recorded build-id
    # per row of ``samples``, how many samples it stands for: set when the capture was folded
    # into distinct rows (``profiler.report.tally``; rows in the time order of their last
    # samples), None when every row is one sample
    weight: I64 | None = None
    cgroup_names: dict[int, str] = field(default_factory=dict)  # cgroup id -> path (--all-cgroups)
    # per sample its thread's cgroup namespace, an index into ``cgroup_ns_keys`` ((dev, inode);
    # 0 is (0, 0): none known); None when the capture had no NAMESPACES record (--namespaces)
    cgroup_ns: I64 | None = None
    cgroup_ns_keys: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])
    _function_lines: dict[tuple[str, int], int | None] = field(default_factory=dict, repr=False)
    # the rows' (stack, thread) groups, with the arrays they were made from (see _thread_stacks)
    _groups: tuple[I64, Any, I64, npt.NDArray[np.bool_]] | None = field(default=None, repr=False)

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
        order, first = self._thread_stacks()
        st = self.stack[order]
        starts = np.flatnonzero(first)
        counts = (np.add.reduceat(self.sample_weights()[order], starts) if len(starts)
                  else np.zeros(0, np.int64))
        periods = np.add.reduceat(s.period[order], starts) if len(starts) else np.zeros(0, np.uint64)
        built: dict[int, tuple[tuple[Frame, ...], tuple[Location, ...]]] = {}
        cgroups = cgroup_column(self) if "cgroup" in s.extra else None  # --all-cgroups captures
        out = []
        for j, pos in enumerate(starts.tolist()):
            i, k = int(order[pos]), int(st[pos])
            if k not in built:
                built[k] = self._stack_model(k, locations)
            frames, where = built[k]
            out.append(StackSample(
                comm=self.comm_names[int(self.comm[i])], pid=int(s.pid[i]), tid=int(s.tid[i]),
                frames=frames, samples=int(counts[j]), period=int(periods[j]), locations=where,
                cgroup=None if cgroups is None else cgroup_name(self, int(cgroups[i])),
            ))
        return out

    def _thread_stacks(self) -> tuple[I64, npt.NDArray[np.bool_]]:
        """The rows ordered by (stack, thread), time order kept within each, and where each
        distinct (stack, thread) pair starts: the groups :meth:`stack_samples` lists."""
        cached = self._groups
        if cached is not None and cached[0] is self.stack and cached[1] is self.samples.tid:
            return cached[2], cached[3]  # stack_samples and timeline ask for the same rows' groups
        order = np.lexsort((self.samples.tid, self.stack))  # stable
        st, tid = self.stack[order], self.samples.tid[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = (st[1:] != st[:-1]) | (tid[1:] != tid[:-1])
        self._groups = (self.stack, self.samples.tid, order, first)
        return order, first

    def timeline(self) -> Timeline | None:
        """Every sample in time order with the index of its entry in :meth:`stack_samples`;
        None when rows are tally rows (they stand for many samples at many times)."""
        if self.weight is not None:
            return None
        order, first = self._thread_stacks()
        which = np.empty(len(order), dtype=np.int64)
        which[order] = np.cumsum(first) - 1
        return Timeline(which, self.samples.time, self.samples.period)

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
            system = f.symbol if f.symbol is not None else f.label(self.demangle)
            line = self._source_line(name.removesuffix(INLINED_SUFFIX) if f.inlined else name, e, system)
            if f.kind == "python" and line.file is None:  # a Python function: its file, even without a line
                line = SourceLine(line.function, f.dso_path, system_name=line.system_name)
            lines.append(line)
        return Location(address=int(table.addrs[group[0]]), rel_address=int(table.shown[group[0]]),
                        mapping=Mapping(head.dso_path, self.build_ids.get(head.dso_path)),
                        dso=head.dso, kind=head.kind, lines=tuple(lines),
                        offset=int(table.offsets[group[0]]) if head.resolved else 0)

    def _source_line(self, function: str, entry: int, system_name: str) -> SourceLine:
        ids = self.stack_table.srclines
        line_id = int(ids[entry]) if ids is not None else -1
        if line_id < 0:
            return SourceLine(function, system_name=system_name)
        file, _, number = self.srclines[line_id].rpartition(":")
        if not file or not number.isdigit():
            return SourceLine(function, self.srclines[line_id], system_name=system_name)
        return SourceLine(function, file, int(number), self.function_line(entry), system_name)

    def function_line(self, entry: int) -> int | None:
        """The line a stack entry's function starts at: DWARF's line of the symbol's first
        instruction (None for inlined functions, code without lines, kernel and JIT code); a
        Python function's from its code object when the capture has ``--python-lines`` reads."""
        t = self.stack_table
        f = self.frames[int(t.frames[entry])]
        if f.kind == "python" and f.symbol is not None:
            return self.python_first_lines.get((f.symbol, f.dso_path))
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


def profile_meta(profile: Profile, header: CaptureHeader) -> ProfileMeta:
    """What the capture was (its command or target, the event and its sampling), for titles
    and exports."""
    what = header.describe_target()
    attr = header.event_attr(profile.event)
    times = profile.samples.time
    return ProfileMeta(
        title=f"{what} — {profile.event}", command=what, event=profile.event,
        total_samples=profile.total_samples, total_period=profile.total_period,
        has_callchains=profile.has_callchains, thread_names=profile.last_comms(),
        sample_period=int(attr.get("sample_period", 0) or 0), freq=bool(attr.get("freq")),
        first_time_ns=int(times.min()) if len(times) else 0, last_time_ns=int(times.max()) if len(times) else 0,
        start_time_ns=header.start_time_ns or 0,
    )


def stack_profile(profile: Profile, locations: bool = False, timeline: bool = False) -> StackSet:
    """The profile in the frame model: its distinct stacks and what the capture was; with
    ``timeline`` every sample in time order too (a profile with a row per sample)."""
    return StackSet(profile_meta(profile, profile.header), profile.stack_samples(locations),
                        profile.timeline() if timeline else None)


def cgroup_column(profile: Profile) -> I64:
    """Each sample's cgroup id (PERF_SAMPLE_CGROUP), 0 when it was not recorded."""
    found = profile.samples.extra.get("cgroup")
    return np.zeros(len(profile.samples), np.int64) if found is None else np.asarray(found).astype(np.int64)


def cgroup_ns_column(profile: Profile) -> I64:
    """Each sample's cgroup namespace (an index into ``cgroup_ns_keys``), 0 where none is known."""
    found = profile.cgroup_ns
    return np.zeros(len(profile.samples), np.int64) if found is None else found


def cgroup_id_text(profile: Profile, index: int) -> str:
    """perf's ``cgroup_id`` value: the cgroup namespace's device and inode, ``dev/0xinode``
    (``0/0x0`` for a thread of no NAMESPACES record)."""
    dev, ino = profile.cgroup_ns_keys[index]
    return f"{dev}/{ino:#x}"


def cgroup_name(profile: Profile, cgroup_id: int) -> str:
    """perf's words: the path of a known id, ``unknown`` for an id no CGROUP record named,
    ``N/A`` for a sample without a cgroup (recorded without --all-cgroups)."""
    if not cgroup_id:
        return "N/A"
    return profile.cgroup_names.get(cgroup_id, "unknown")
