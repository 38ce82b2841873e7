"""The report pipeline: one path from a capture file to the data every command renders.

    open (capture.Capture) → replay → rows (Selected) → resolve (stacks) → Profile (assemble)

Every command that names frames walks it: ``report``, ``script``, ``annotate``,
``flamegraph``, ``export``, and (for their DSO lists) ``buildids`` and ``archive`` share its
first steps. Each step is a few numpy calls over all samples, never a Python loop per sample:

1. **open**: :class:`~profiler.report.capture.Capture` reads the header and event table;
2. **replay** the non-sample records (MMAP2, COMM, FORK, EXIT, ...): every sample gets its
   process's map generation and its thread's comm (:mod:`profiler.report.replay`);
3. **rows**: the samples of one event that the filters keep (:func:`sample_mask` for
   ``--time``/``--cpu``, :func:`entry_mask` for ``--pid``/``--tid``/``--comm``,
   ``--trace-filter`` on tracepoint payloads), read one of three ways:

   * *tallied* (the default when possible): the capture is summed chunk by chunk into
     distinct rows with counts (:mod:`profiler.report.tally`), memory bounded by the distinct
     stacks;
   * *whole*: every sample decoded at once — for what a tally cannot carry: a ':S' group
     member's periods (from its leader's counts), tracepoint payloads, and captures whose
     records have no time (a DWARF capture's user stacks are unwound chunk by chunk in the
     tally: :mod:`profiler.report.tally_unwound`);
   * *windows* (:func:`stream_profiles`): time-ordered windows for ``script``, memory bounded
     by a window (:mod:`profiler.report.windows`);

4. **resolve**: identical raw stacks counted once, their addresses resolved to frames
   (:mod:`profiler.report.stacks`, :mod:`profiler.report.resolver`, :mod:`profiler.symbols`);
5. **Profile**: :func:`~profiler.report.assemble.assemble` is the one constructor; the
   ``--dso``/``--symbol`` filter applies to the leaf frames.

Stack renderers and exporters then take the frame model (:func:`load_stacks`,
:func:`profiler.report.profile.stack_profile`); perf's own layouts take the Profile's rows.
"Nothing to show" is one error, :class:`~profiler.report.assemble.NoSamples`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from profiler.format.abi import PERF_SAMPLE_CGROUP
from profiler.errors import ReportError
from profiler.format.decode.columns import CaptureData, SampleColumns
from profiler.format.decode.decoder import check_period_total, period_total
from profiler.report.assemble import (
    Counts,
    NoSamples,
    Selected,
    assemble,
    entry_mask,
    make_resolver,
    require_samples,
    symbol_chain,
    sample_mask,
)
from profiler.report.capture import Capture
from profiler.report.groupread import member_samples, reads_group
from profiler.report.model import StackSet
from profiler.report.options import LoadOptions, on_sample_clock
from profiler.report.profile import Profile, stack_profile
from profiler.report.pylines import capture_reads
from profiler.report.replay import ReplayResult, replay
from profiler.report.tally import Tally, check_cpu_filter
from profiler.report.tracepoints import event_payloads

if TYPE_CHECKING:
    from profiler.format.abi import SampleLayout
    from profiler.format.tracepoint import TraceFormat
    from profiler.report.tally_unwound import TallyUnwind
    from profiler.report.unwind_stats import UnwindStats
    from profiler.report.windows import Totals

Progress = Callable[[str], None]
Warn = Callable[[str], None]

__all__ = ["Capture", "NoSamples", "load_events", "load_profile", "load_stacks", "progress_printer",
           "require_samples", "stream_profiles"]


def load_profile(options: LoadOptions, capture: Capture | None = None, event: str | None = None, *,
                 keep_cpu: bool = True, whole: bool = False, progress: Progress | None = None) -> Profile:
    """One event's :class:`Profile` (``event``, else ``--event``, else the capture's first).

    Tallied into distinct rows whenever the event and options allow it (memory bounded by the
    distinct stacks), else decoded whole; ``whole=True`` (or ``PROFILER_TALLY=0`` in the
    environment, to compare) always decodes whole: a row per sample. ``keep_cpu=False`` when
    no output shows the cpu (rows of every CPU are then summed together)."""
    capture = capture or Capture(options.input, options.callchains)
    options = on_capture_clock(options, capture)
    index = capture.event_index(event or options.filters.event)
    if capture.is_pseudo(index):
        return _from_switches(options, capture, index, progress or _quiet)
    if not (whole or os.environ.get("PROFILER_TALLY") == "0" or needs_whole(options, capture, index, unwound=True)):
        (progress or _quiet)("decoding")
        unwinding = _tally_unwinding(options, capture)
        tally = capture.tally(options.filters, options.callchains, keep_cpu, unwinding)
        if tally is not None:  # the capture's tally, perhaps made for an earlier event: its own unwinding
            return _from_tally(options, capture, index, tally, progress or _quiet,
                               cast("TallyUnwind | None", tally.unwinding))
    return _from_whole(options, capture, index, progress or _quiet)


def on_capture_clock(options: LoadOptions, capture: Capture) -> LoadOptions:
    """``options`` with --time's dates put on the capture's sample clock."""
    ranges = options.filters.time
    if not ranges or all(r.unit != "wall" for r in ranges):
        return options
    info = capture.info
    timed = on_sample_clock(ranges, info.start_time_ns, info.start_perf_clock_ns)
    return replace(options, filters=replace(options.filters, time=timed))


def needs_whole(options: LoadOptions, capture: Capture, index: int, unwound: bool = False) -> bool:
    """Whether event ``index`` must be decoded whole (see the module docstring); ``unwound``:
    a tally that unwinds user stacks (:mod:`profiler.report.tally_unwound`) would do for DWARF."""
    if capture.is_pseudo(index) or capture_reads(capture) is not None:  # Python lines: by time (report/pylines.py)
        return True
    ev = capture.events.events[index]
    dwarf = options.callchains and not unwound and _unwinds(capture, ev.layout)
    cgroups = bool(ev.layout.sample_type & PERF_SAMPLE_CGROUP)  # the tally keeps no cgroup column
    return (reads_group(ev) or dwarf or cgroups or options.payloads or options.cgroup_ns
            or bool(options.filters.trace))


def _unwinds(capture: Capture, layout: SampleLayout) -> bool:
    """Whether an event's samples carry user stacks (``--call-graph dwarf``) that the unwinder
    knows the capture's architecture of. The unwinder's modules load only for such a capture."""
    from profiler.unwind.userdata import has_user_stacks

    if not has_user_stacks(layout):
        return False
    from profiler.unwind.arch import columns_for

    return columns_for(capture.arch) is not None


def load_events(options: LoadOptions, warn: Warn, capture: Capture | None = None,
                what: str = "export") -> list[Profile]:
    """A profile of every event that has samples (or of the one ``--event`` names), the capture
    decoded once; warnings said once each."""
    capture = capture or Capture(options.input, options.callchains)
    names = [options.filters.event] if options.filters.event else capture.event_names
    profiles: list[Profile] = []
    said: set[str] = set()
    for name in names:
        try:
            profile = load_profile(options, capture, name, whole=True)
        except ReportError as exc:
            # every event was asked for: a computed one (offcpu, wall) the capture cannot give
            # is left out, said once; the recorded events are still written
            if options.filters.event or not capture.is_pseudo(capture.event_index(name)):
                raise
            warn(f"{exc} The '{name}' event is left out.")
            continue
        for message in profile.warnings:
            if message not in said:
                said.add(message)
                warn(message)
        if profile.recorded_samples or options.filters.event:
            profiles.append(profile)  # not perf's tracking-only dummy event, nor one that never fired
    require_samples(options.input, names[0] if names else "", sum(p.recorded_samples for p in profiles),
                    sum(p.total_samples for p in profiles), options.filters, what)
    return profiles


def load_stacks(options: LoadOptions, warn: Warn, locations: bool = False, what: str = "draw") -> StackSet:
    """One event's stacks in the frame model (what stack renderers take); the pipeline's
    warnings go to ``warn``, also before a :class:`NoSamples`. ``locations``: each stack also
    carries its addresses, mappings and source lines (see :mod:`profiler.report.model`)."""
    profile = load_profile(options, keep_cpu=False)
    for message in profile.warnings:
        warn(message)
    require_samples(options.input, profile.event, profile.recorded_samples, profile.total_samples,
                    options.filters, what)
    if not profile.has_callchains:
        warn("the capture has no call chains (record with -g): the flame graph is one level deep.")
    return stack_profile(profile, locations)


def stream_profiles(options: LoadOptions, capture: Capture, events: list[int],
                    totals: Totals) -> Iterator[list[Profile]]:
    """Windows of ``events``' samples in time order, one :class:`Profile` per event in each
    (see :mod:`profiler.report.windows`); a capture that cannot be read window by window is one
    window of whole profiles. ``totals`` is filled as the windows go."""
    from profiler.report.windows import windows

    options = on_capture_clock(options, capture)
    streamed = None
    if os.environ.get("PROFILER_TALLY") != "0" and not any(needs_whole(options, capture, e) for e in events):
        streamed = windows(options, capture, events, totals)
    if streamed is not None:
        return streamed
    profiles = [load_profile(options, capture, capture.event_names[e], whole=True) for e in events]
    totals.warnings = list(profiles[0].warnings) if profiles else []
    for e, p in zip(events, profiles):
        totals.recorded[e] = p.recorded_samples
        totals.shown[e] = p.total_samples
    return iter([profiles])


# --- the two ways of reading rows -----------------------------------------------------------


def _tally_unwinding(options: LoadOptions, capture: Capture) -> TallyUnwind | None:
    """What a tally of the capture needs to unwind user stacks: None unless an event has them
    (``--call-graph dwarf``) and the report shows callchains."""
    if not options.callchains:
        return None
    events = tuple(i for i, ev in enumerate(capture.events.events) if _unwinds(capture, ev.layout))
    if not events:
        return None
    from profiler.report.tally_unwound import TallyUnwind
    from profiler.unwind.arch import columns_for

    cols = columns_for(capture.arch)
    assert cols is not None  # _unwinds checked it
    return TallyUnwind(events, cols, options.symfs, options.debug_dirs, symbol_chain(capture, options).jit_symbols)


def _from_tally(options: LoadOptions, capture: Capture, index: int, tally: Tally, say: Progress,
                unwinding: TallyUnwind | None = None) -> Profile:
    """Event ``index``'s profile from the capture's tally: its rows (in the time order of
    their last samples) with their sample counts as weights."""
    rows, state = tally.rows, tally.state
    idx = np.flatnonzero(rows.event == index)
    idx = idx[np.lexsort((rows.last_seq[idx], rows.last_time[idx]))]
    start = capture.info.start_perf_clock_ns
    counts = Counts(recorded=int(tally.recorded[index]), base_samples=int(rows.count[idx].sum()),
                    base_period=int(rows.period[idx].sum(dtype=np.uint64)) if len(idx) else 0,
                    records=tally.counts, warnings=list(capture.reader.warnings) + list(tally.warnings),
                    start_ns=start if start is not None else max(tally.first_time, 0))
    idx = idx[entry_mask(rows.pid[idx], rows.tid[idx], rows.comm[idx], state.comm_names, options.filters)]
    selected = Selected(tally.samples(idx), rows.gen[idx], rows.comm[idx], weight=rows.count[idx])
    tfmt, _ = event_payloads(capture, index, selected.samples, options)
    unwound = None
    if unwinding is not None and index in unwinding.events and len(idx):
        unwound = unwinding.stats(rows.misc[idx], rows.count[idx], rows.gen[idx], state, tally.unwind_warnings)
        counts.warnings.extend(unwound.warnings)
    say("resolving")
    return assemble(options, capture, index, selected, state, make_resolver(capture, state, options), counts, tfmt,
                    unwound)


def _from_whole(options: LoadOptions, capture: Capture, index: int, say: Progress) -> Profile:
    """Event ``index``'s profile from the whole decoded capture: a row per sample."""
    data, rep, counts = _decoded(options, capture, say, check_periods=True)
    of_event, s = _event_samples(data, index, counts.warnings)
    counts.recorded = int(np.count_nonzero(of_event))
    kept = of_event & sample_mask(s.cpu, s.time, options.filters, counts.start_ns)
    counts.base_samples = int(np.count_nonzero(kept))
    counts.base_period = int(s.period[kept].sum(dtype=np.uint64)) if counts.base_samples else 0
    mask = kept & entry_mask(s.pid, s.tid, rep.sample_comm, rep.comm_names, options.filters)
    selected = Selected(s.take(mask) if not mask.all() else s, rep.sample_gen[mask], rep.sample_comm[mask],
                        cgroup_ns=None if rep.sample_cgroup_ns is None else rep.sample_cgroup_ns[mask])
    tfmt, selected.raw = event_payloads(capture, index, selected.samples, options)
    if tfmt is not None and selected.raw is not None and options.filters.trace:
        from profiler.report.tracefilter import filter_mask, parse_trace_filter

        selected = selected.take(filter_mask(tfmt, parse_trace_filter(options.filters.trace), selected.raw,
                                             capture.byte_order))
    return _unwound_and_assembled(options, capture, index, index, selected, data, rep, counts, tfmt, say)


def _from_switches(options: LoadOptions, capture: Capture, index: int, say: Progress) -> Profile:
    """A pseudo-event's profile (``offcpu``, ``wall``: :mod:`profiler.report.offcpu`): rows
    computed from the switch-outs, a row per interval (and per on-CPU sample)."""
    from profiler.report.model import SWITCH_TRACEPOINT
    from profiler.report.offcpu import state_rows

    data, rep, counts = _decoded(options, capture, say)
    rows, period, states = state_rows(capture, data, capture.event_names[index])
    s = data.samples.take(rows)
    s.period = period.astype(np.uint64)
    check_period_total(period_total(s.period))  # damaged times could make intervals of centuries
    counts.recorded = len(rows)
    kept = sample_mask(s.cpu, s.time, options.filters, counts.start_ns)
    counts.base_samples = int(np.count_nonzero(kept))
    counts.base_period = int(s.period[kept].sum(dtype=np.uint64)) if counts.base_samples else 0
    gen, comm = rep.sample_gen[rows], rep.sample_comm[rows]
    mask = kept & entry_mask(s.pid, s.tid, comm, rep.comm_names, options.filters)
    selected = Selected(s.take(mask), gen[mask], comm[mask],
                        cgroup_ns=None if rep.sample_cgroup_ns is None else rep.sample_cgroup_ns[rows][mask])
    switch = capture.names.index(SWITCH_TRACEPOINT)
    tfmt, selected.raw = event_payloads(capture, switch, selected.samples, options)
    return _unwound_and_assembled(options, capture, index, switch, selected, data, rep, counts, tfmt, say,
                                  root_frames=states[mask])


def _decoded(options: LoadOptions, capture: Capture, say: Progress,
             check_periods: bool = False) -> tuple[CaptureData, ReplayResult, Counts]:
    """The whole decoded capture, its replay and the counts every profile of it starts from;
    ``check_periods``: its samples' periods must add up below 2^64 (the sums are 64-bit)."""
    say("decoding")
    data = capture.data
    if check_periods:
        check_period_total(period_total(data.samples.period))
    check_cpu_filter(capture.reader, data.events, options.filters)
    say("replaying")
    rep = replay(data.others, data.others_before, data.samples.pid, data.samples.tid, capture.build_ids())
    counts = Counts(records=data.counts, warnings=list(capture.reader.warnings) + list(data.warnings),
                    start_ns=_start_ns(capture, data.samples))
    return data, rep, counts


def _unwound_and_assembled(options: LoadOptions, capture: Capture, index: int, stacks_of: int, selected: Selected,
                           data: CaptureData, rep: ReplayResult, counts: Counts, tfmt: TraceFormat | None,
                           say: Progress, root_frames: npt.NDArray[np.int64] | None = None) -> Profile:
    """Event ``index``'s profile from its selected rows: their user stacks unwound when event
    ``stacks_of`` (whose samples the rows are) was recorded with ``--call-graph dwarf``, then
    resolved and assembled."""
    unwound = None
    if options.callchains:
        unwound = _unwind_dwarf(options, capture, data, stacks_of, selected, rep)
        if unwound is not None:
            say("unwinding")
            counts.warnings.extend(unwound.warnings)
    say("resolving")
    return assemble(options, capture, index, selected, rep.state, make_resolver(capture, rep.state, options),
                    counts, tfmt, unwound, root_frames=root_frames)


def _start_ns(capture: Capture, s: SampleColumns) -> int:
    start = capture.info.start_perf_clock_ns
    if start is not None:
        return start
    return int(s.time.min()) if len(s) else 0


def _event_samples(data: CaptureData, index: int, warnings: list[str]) -> tuple[npt.NDArray[np.bool_], SampleColumns]:
    """The samples of one event; for a member of a ':S' group, the leader's samples with the
    member's count growth as their period (see :mod:`profiler.report.groupread`)."""
    event = data.events.events[index]
    if not reads_group(event):
        return data.samples.event == index, data.samples
    mask, samples, missing = member_samples(data, event)
    if missing:
        warnings.append(f"{missing} samples of the group's leader carried no count of '{event.name}'.")
    return mask, samples


def _unwind_dwarf(options: LoadOptions, capture: Capture, data: CaptureData, index: int, rows: Selected,
                  rep: ReplayResult) -> UnwindStats | None:
    """For an event recorded with ``--call-graph dwarf``: unwind every row's user stack and
    put the unwound frames into its callchain (in place). None for other events."""
    layout = data.events.events[index].layout
    if not len(rows.samples) or not _unwinds(capture, layout):
        return None
    from profiler.unwind.arch import columns_for

    cols = columns_for(capture.arch)
    assert cols is not None  # _unwinds checked it
    from profiler.report.unwind_samples import unwind_rows  # imported only for a capture that needs it
    from profiler.unwind.jitcode import JitCodeOf

    jit = symbol_chain(capture, options).jit_symbols
    return unwind_rows(capture.reader, layout, rows.samples, rows.gen, rep, cols, options.symfs, options.debug_dirs,
                       JitCodeOf(jit, cols, rep.state.parent))


def progress_printer(enabled: bool) -> Progress | None:
    """A progress callback writing phases to stderr, only when stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        return None

    def say(phase: str) -> None:
        sys.stderr.write(f"\rprofiler: {phase}...\x1b[K")
        sys.stderr.flush()

    return say


def _quiet(_phase: str) -> None:
    pass


def end_progress(progress: Any) -> None:
    """Clear the progress line."""
    if progress is not None:
        sys.stderr.write("\r\x1b[K")
