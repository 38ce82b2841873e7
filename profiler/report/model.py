"""The frame model: plain data the stack renderers and exporters take.

The report pipeline (:mod:`profiler.report.pipeline`, :func:`profiler.report.profile.stack_profile`) builds these frozen
records from a capture; renderers never see the capture itself. Importing this module loads
no renderer.

* :class:`Frame` — one function on a stack, what a flame graph draws: name, DSO, kind, and
  ``inline_depth`` (0 for the function the code belongs to, 1 for a function inlined into it,
  ...). Frames compare by these fields only, so stacks group by function, not by address.
* :class:`Location` — one address of a stack, what pprof calls a location: the address, its
  :class:`Mapping` (the DSO's recorded path and build-id), and its :class:`SourceLine` s,
  innermost first. One address expands into several frames when functions were inlined
  there (:meth:`Location.frames`); without line information it has one line (the symbol).
* :class:`StackSample` — one distinct stack of one thread with its sample count and period:
  ``frames`` root first, leaf last (the order flame graphs draw; perf's callchains arrive leaf
  first, so the reporter reverses them), and, when asked for, the ``locations`` the frames
  came from (also root first).
* :class:`StackSet` — what a stack renderer takes: the stacks and :class:`ProfileMeta`.

The renderer protocol (docs/architecture.md): a stack renderer is a module of
``profiler/report/render/`` with a frozen options dataclass and
``write(profile: StackSet, stream, options) -> None``; it writes to the stream it is
given and opens no file.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

import numpy as np
import numpy.typing as npt
from profiler.dataclass import dataclass
from profiler.names import UNKNOWN

#: How a frame was resolved. ``"unknown"`` is an address no map or symbol covered.
FrameKind = Literal["user", "kernel", "jit", "unknown", "state", "python"]
FRAME_KINDS: tuple[str, ...] = ("user", "kernel", "jit", "unknown", "state", "python")
# "state": the root frame of the offcpu and wall pseudo-events, why the thread was where it was
# ([running], [runnable], [blocked], ...: docs/offcpu.md)

#: What a stack's weight is: the number of samples, or the sum of their periods.
Weight = Literal["samples", "period"]

INLINED_SUFFIX = " (inlined)"  # how perf (and every output here) shows an inlined function


def inlined_name(function: str) -> str:
    return function + INLINED_SUFFIX


@dataclass(frozen=True)
class Frame:
    """One function on a stack."""

    name: str  # function name (demangled unless asked otherwise), or "[unknown]"
    dso: str  # short DSO name: "libc.so.6", "[kernel.kallsyms]", "[vdso]", "[unknown]", "[jit]"
    kind: str  # one of FRAME_KINDS
    inline_depth: int = 0  # 0: the function the code belongs to; k: inlined k levels into it

    @property
    def is_unknown(self) -> bool:
        """True when no symbol resolved this frame."""
        return self.name in ("", UNKNOWN)

    @property
    def inlined(self) -> bool:
        return self.inline_depth > 0


@dataclass(frozen=True)
class Mapping:
    """The object an address lies in, as recorded: its path and GNU build-id (hex)."""

    path: str  # "/usr/lib/x86_64-linux-gnu/libc.so.6", "[kernel.kallsyms]", "[vdso]", "[unknown]"
    build_id: str | None = None


@dataclass(frozen=True)
class SourceLine:
    """A function and, when debug information gave them, its source file and line, and the
    line the function starts at (the line of its first instruction; None for inlined code)."""

    function: str
    file: str | None = None
    line: int | None = None
    function_line: int | None = None
    system_name: str | None = None  # the symbol as stored (mangled); perf's address text when unresolved

    @property
    def label(self) -> str:
        """The function as reports name it: its name, or the address of unresolved code."""
        return self.system_name if self.function == UNKNOWN and self.system_name else self.function


@dataclass(frozen=True)
class Location:
    """One address of a stack and what it resolves to.

    ``address`` is the sampled (runtime) address; ``rel_address`` the address in the
    object's own address space (ELF virtual address, or the file offset when the object could
    not be read; the address itself for kernel and unmapped code). ``kind`` is what the
    address lies in — ``user``, ``kernel``, ``jit``, or ``unknown`` for no mapping — even when
    no symbol names it (its lines then name ``[unknown]``). ``offset`` is the address's offset
    into its symbol (0 without one). ``lines`` is innermost first: ``lines[0]`` is the deepest
    inlined function, ``lines[-1]`` the function whose code this is; it always has at least
    one entry."""

    address: int
    rel_address: int
    mapping: Mapping
    dso: str  # short name, as on the frames
    kind: str
    lines: tuple[SourceLine, ...]
    offset: int = 0

    @property
    def resolved(self) -> bool:
        return self.lines[-1].function != UNKNOWN

    def frames(self) -> tuple[Frame, ...]:
        """The frames this address stands for, root first: the containing function, then the
        functions inlined into it, the innermost last. An inlined function's frame is named
        ``name (inlined)``, as perf shows it (``inline_depth`` says so too); an unresolved
        address is one frame of kind ``unknown``."""
        depth = len(self.lines) - 1
        kind = self.kind if self.resolved or self.kind == "kernel" else "unknown"
        return tuple(Frame(inlined_name(line.function) if depth - k else line.function, self.dso, kind, depth - k)
                     for k, line in reversed(list(enumerate(self.lines))))


@dataclass(frozen=True)
class StackSample:
    """One distinct stack of one thread, with the samples that hit it (already aggregated)."""

    comm: str
    pid: int
    tid: int
    frames: tuple[Frame, ...]  # outermost (root) first, leaf last
    samples: int
    period: int
    locations: tuple[Location, ...] = ()  # root first; filled when the caller asked for them
    cgroup: str | None = None  # the cgroup path of the thread's first sample of it (--all-cgroups)

    def weight(self, by: Weight) -> int:
        """This stack's weight under ``by``."""
        return self.samples if by == "samples" else self.period

    def frame_sources(self) -> tuple[SourceLine, ...] | None:
        """Each frame's :class:`SourceLine`, in the order of ``frames`` (None without
        ``locations``): a caller's is the line of its call, the leaf's the sampled line, an
        inlined function's the line inside it."""
        if not self.locations:
            return None
        out = tuple(line for loc in self.locations for line in reversed(loc.lines))
        return out if len(out) == len(self.frames) else None

    def frame_lines(self) -> tuple[str | None, ...] | None:
        """Each frame's ``file.c:12`` (None without a line), in the order of ``frames``."""
        sources = self.frame_sources()
        return None if sources is None else tuple(source_text(line) for line in sources)


def source_text(line: SourceLine) -> str | None:
    """``file.c:12`` (or the file alone) of a source line; None without one."""
    if line.file is None:
        return None
    return line.file if line.line is None else f"{line.file}:{line.line}"


@dataclass(frozen=True)
class ProfileMeta:
    """What the capture was: shown in titles and carried into exports."""

    title: str
    command: str
    event: str
    total_samples: int
    total_period: int
    has_callchains: bool
    thread_names: tuple[tuple[int, str], ...] = ()  # (tid, its name at its last sample: after exec)
    sample_period: int = 0  # the event's period, or its frequency (Hz) when ``freq``
    freq: bool = False
    first_time_ns: int = 0  # the first and last samples' times (the sample clock)
    last_time_ns: int = 0
    start_time_ns: int = 0  # when the recording started, ns since the Unix epoch (0: unknown)


#: Events whose sample period is a time in nanoseconds (perf's software clocks).
OFFCPU_EVENT = "offcpu"  # pseudo-event: off-CPU intervals, period in ns (docs/offcpu.md)
WALL_EVENT = "wall"  # pseudo-event: on-CPU samples and off-CPU intervals, period in ns
SWITCH_TRACEPOINT = "sched:sched_switch"  # the event whose samples the pseudo-events are made from
NANOSECOND_EVENTS: frozenset[str] = frozenset({"cpu-clock", "task-clock", OFFCPU_EVENT, WALL_EVENT})
# what a pprof sample type calls each nanosecond event's time (pprof's "cpu" for the clocks)
TIME_TYPES: dict[str, str] = {OFFCPU_EVENT: "off-cpu", WALL_EVENT: "wall"}


def time_type(event: str) -> str:
    """The name of a nanosecond event's time in exports: ``cpu``, ``off-cpu`` or ``wall``."""
    return TIME_TYPES.get(event.split(":", 1)[0].strip(), "cpu")


def pseudo_events(names: list[str]) -> list[str]:
    """The pseudo-events a capture with these events offers (:mod:`profiler.report.offcpu`
    makes their rows): ``offcpu`` with sched_switch samples, ``wall`` when it also has an
    on-CPU event counting nanoseconds (cpu-clock, task-clock)."""
    if SWITCH_TRACEPOINT not in names:
        return []
    clock = any(period_is_nanoseconds(name) for name in names)
    return [OFFCPU_EVENT, WALL_EVENT] if clock else [OFFCPU_EVENT]


def default_weight(event: str) -> Weight:
    """What a stack's weight is when not asked: samples, except for the pseudo-events whose
    rows are intervals of different lengths (their time is what counts)."""
    return "period" if event in TIME_TYPES else "samples"


def period_is_nanoseconds(event: str) -> bool:
    """True when ``event`` (maybe with ``:u``-style modifiers) counts time in nanoseconds."""
    return event.split(":", 1)[0].strip() in NANOSECOND_EVENTS


@dataclass(frozen=True)
class Timeline:
    """Every sample in time order, for the outputs that show time (the Firefox Profiler):
    per sample the index of its stack in :attr:`StackSet.stacks` (which also names its
    thread), its time on the sample clock (ns) and its period."""

    stack: npt.NDArray[np.int64]
    time_ns: npt.NDArray[np.uint64]
    period: npt.NDArray[np.uint64]

    def __len__(self) -> int:
        return len(self.stack)


@dataclass(frozen=True)
class StackSet:
    """The input of every stack renderer: what the capture was, and its distinct stacks;
    with :attr:`timeline` (when asked for, and the profile has a row per sample) every sample
    in time order."""

    meta: ProfileMeta
    stacks: list[StackSample] = field(default_factory=list)
    timeline: Timeline | None = None
