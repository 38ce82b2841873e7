"""The steps every mode of the report pipeline shares, after the capture's samples were read:
the entry filters, the symbol resolver, and the one constructor of a
:class:`~profiler.report.profile.Profile`.

The pipeline (:mod:`profiler.report.pipeline`) reads one event's samples three ways — decoded
whole, tallied into distinct rows, or window by window (:mod:`profiler.report.windows`) —
and each way ends in :class:`Selected` rows handed to :func:`assemble`: stacks counted once,
resolved (:mod:`profiler.report.stacks`), the ``--dso``/``--symbol`` filter applied. "Nothing
to show" is decided once, by :func:`require_samples`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.errors import ReportError
from profiler.format.decode.columns import SampleColumns
from profiler.report.capture import Capture
from profiler.report.options import Filters, LoadOptions, time_mask
from profiler.report.profile import Profile
from profiler.report.pylines import with_python_lines
from profiler.report.replay import ReplayState
from profiler.report.resolver import SymbolResolver
from profiler.report.stacks import dedupe_stacks, filter_by_leaf, resolve_stacks
from profiler.names import KERNEL_DSO

if TYPE_CHECKING:
    from profiler.format.tracepoint import TraceFormat
    from profiler.report.unwind_stats import UnwindStats
    from profiler.symbols.sources import SymbolSources

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.integer[Any]]


class NoSamples(ReportError):
    """The capture has no samples of the event, or none are left after the filters."""


@dataclass
class Selected:
    """One event's sample rows after the filters: a row is one sample, or (``weight``) a tally
    row standing for that many; per row its process's map generation and its thread's comm
    (an index into the replay's comm names), and a tracepoint's payload when asked for."""

    samples: SampleColumns
    gen: I64
    comm: I64
    weight: I64 | None = None
    raw: npt.NDArray[Any] | None = None
    cgroup_ns: I64 | None = None  # per row its thread's cgroup namespace (replay.cgroup_ns_keys index)

    def take(self, keep: Mask) -> Selected:
        if keep.all():
            return self
        return Selected(self.samples.take(keep), self.gen[keep], self.comm[keep],
                        None if self.weight is None else self.weight[keep],
                        None if self.raw is None else self.raw[keep],
                        None if self.cgroup_ns is None else self.cgroup_ns[keep])


@dataclass
class Counts:
    """What the profile says about the capture beyond its rows: samples recorded of the
    event, those left after ``--time``/``--cpu`` (perf's base for ``--percentage absolute``),
    records by type, warnings."""

    recorded: int = 0
    base_samples: int = 0
    base_period: int = 0
    records: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    start_ns: int = 0


def sample_mask(cpu: Ints, time: npt.NDArray[np.uint64], f: Filters, start_ns: int) -> Mask:
    """``--cpu`` and ``--time``: the filters that drop samples (perf's split)."""
    mask = np.ones(len(cpu), dtype=bool)
    if f.cpus:
        mask &= np.isin(cpu, np.asarray(f.cpus, dtype=np.int64))
    if f.time:
        mask &= time_mask(time, f.time, start_ns)
    return mask


def entry_mask(pid: Ints, tid: Ints, comm: Ints, comm_names: Sequence[str], f: Filters) -> Mask:
    """``--pid``, ``--tid``, ``--comm``: the filters that select entries (perf's split)."""
    mask = np.ones(len(pid), dtype=bool)
    if f.pids:
        mask &= np.isin(pid, np.asarray(f.pids, dtype=np.int64))
    if f.tids:
        mask &= np.isin(tid, np.asarray(f.tids, dtype=np.int64))
    if f.comms:
        wanted = [i for i, name in enumerate(comm_names) if name in f.comms]
        mask &= np.isin(comm, np.asarray(wanted, dtype=np.int64))
    return mask


def symbol_chain(capture: Capture, options: LoadOptions) -> SymbolSources:
    """The capture's offline symbol-source chain for these options, made once per capture: the
    DWARF unwinder asks it for JIT code before the resolver names frames with it, and each
    process's perf map and jitdump are then read and parsed once."""
    from profiler.symbols.debuginfod import DebuginfodClient
    from profiler.symbols.sources import SymbolSources

    key = "symbol_chain " + repr((options.symfs, options.debug_dirs, options.kallsyms, options.perf_map_dir,
                                  options.debuginfod, options.offline))
    chain: SymbolSources | None = capture.memo.get(key)
    if chain is None:
        chain = capture.memo[key] = SymbolSources(
            capture.symbol_metadata(), symfs=options.symfs, debug_dirs=options.debug_dirs,
            kallsyms_path=options.kallsyms, perf_map_dir=options.perf_map_dir,
            debuginfod=DebuginfodClient.from_options(options.debuginfod, options.offline))
    return chain


def make_resolver(capture: Capture, state: ReplayState, options: LoadOptions) -> SymbolResolver:
    """A resolver on the offline symbol-source chain (see :mod:`profiler.symbols.sources`):
    packed symbols, ``--symfs``, debug directories, the local file only when its build-id
    matches; ``--kallsyms``, packed kernel symbols, the capture's kallsyms snapshot; the
    vdso image of the capture; JIT maps packed or in ``perf-PID.map``."""
    from profiler.cache import cache_dir
    from profiler.symbols.sources import ChainSource

    chain = symbol_chain(capture, options)
    kernel, _, note = chain.kernel()
    return SymbolResolver(
        dsos=state.dsos, snapshots=state.snapshots, sources=[ChainSource(chain)], chain=chain, parents=state.parent,
        kernel=kernel, kernel_note=note, perf_map_dir=options.perf_map_dir,
        lines=options.srclines or options.inline, inline=options.inline, line_cache_dir=cache_dir(),
    )


def assemble(options: LoadOptions, capture: Capture, event: int, rows: Selected, state: ReplayState,
             resolver: SymbolResolver, counts: Counts, trace_format: TraceFormat | None = None,
             unwind: UnwindStats | None = None, root_frames: I64 | None = None) -> Profile:
    """The one way a :class:`Profile` is made: the rows' stacks counted once and resolved,
    then ``--dso``/``--symbol`` applied to their leaf frames. ``root_frames``: per row, the
    thread-state frame put at its stack's root (its code in ``offcpu.STATE_LABELS``: the
    ``offcpu`` and ``wall`` pseudo-events, :mod:`profiler.report.offcpu`)."""
    s = rows.samples
    has_chains = "callchain" in s.has and options.callchains
    stack, reps = dedupe_stacks(s, rows.gen, has_chains)
    table = resolve_stacks(s, rows.gen, reps, has_chains, resolver)
    if options.python_frames != "all":
        from profiler.report.pyframes import hide_interpreter_glue

        table = hide_interpreter_glue(table, resolver.frames)
    if unwind is not None:
        from profiler.report.unwind_stats import ROOTS, outer_is_root

        unwind.count_roots(outer_is_root(stack, table.start, table.frames, resolver.frames, ROOTS))
    profile = Profile(
        path=options.input, header=capture.info, event=capture.event_names[event], event_names=capture.event_names,
        samples=s, comm=rows.comm, comm_names=state.comm_names, cgroup_names=state.cgroups, stack=stack,
        cgroup_ns=rows.cgroup_ns, cgroup_ns_keys=state.cgroup_ns_keys,
        stack_start=table.start,
        stack_frames=table.frames, frames=resolver.frames, stack_table=table, has_callchains=has_chains,
        demangle=options.demangle, lost_samples=state.lost + state.lost_samples, counts=counts.records,
        warnings=counts.warnings + resolver.warnings, recorded_samples=counts.recorded, start_ns=counts.start_ns,
        trailer=capture.reader.trailer, clean_end=capture.reader.clean_end, srclines=resolver.srclines,
        resolver=resolver, base_samples=counts.base_samples, base_period=counts.base_period,
        trace_format=trace_format, raw=rows.raw, byte_order=capture.byte_order, unwind=unwind,
        build_ids=recorded_build_ids(capture, resolver), weight=rows.weight,
    )
    if root_frames is not None:
        from profiler.report.offcpu import add_state_roots

        profile = add_state_roots(profile, root_frames)
    profile = with_python_lines(profile, capture)  # record --python-lines (report/pylines.py)
    f = options.filters
    return filter_by_leaf(profile, f) if f.dsos or f.symbols else profile


def recorded_build_ids(capture: Capture, resolver: SymbolResolver) -> dict[str, str]:
    """Path -> build-id of every recorded DSO, the kernel's included."""
    out = dict(capture.build_ids())
    kernel = resolver.chain.kernel_build_id() if resolver.chain is not None else None
    if kernel:
        out[KERNEL_DSO] = kernel
    return out


def describe_filters(f: Filters) -> str:
    parts = []
    for name, value in (("--comm", f.comms), ("--pid", f.pids), ("--tid", f.tids), ("--cpu", f.cpus),
                        ("--dso", f.dsos), ("--symbol", f.symbols)):
        if value:
            parts.append(f"{name} {','.join(str(v) for v in value)}")
    if f.time:
        parts.append(f"--time {f.time_text}")
    if f.trace:
        parts.append(f"--trace-filter {f.trace}")
    return " ".join(parts)


def require_samples(path: str, event: str, recorded: int, shown: int, filters: Filters, what: str) -> None:
    """The one "nothing to show" sentence of every command: the capture has no samples of the
    event, or the filters left none. ``what`` ends the sentence: "report", "draw", "export"."""
    if recorded == 0:
        raise NoSamples(f"{path} has no samples of event '{event}': nothing to {what} "
                        f"(was the workload too short?).")
    if shown == 0:
        said = describe_filters(filters)
        raise NoSamples(f"no samples match the filters{f' ({said})' if said else ''}; the capture has "
                        f"{recorded} samples of '{event}': nothing to {what}.")
