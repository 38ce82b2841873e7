"""``profiler report``'s whole job after option parsing: the header, the stats, or the flat /
call-graph profile of each event, rendered as a table, JSON, CSV or folded stacks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TextIO

from profiler.errors import ReportError
from profiler.report.options import ReportOptions

Warn = Callable[[str], None]


def run_report(opts: ReportOptions, out: TextIO, warn: Warn) -> None:
    """The whole report command after option parsing."""
    from profiler.report.pipeline import Capture, progress_printer
    from profiler.report.render.stats import render_header, render_stats

    opened = Capture(opts.load.input, opts.load.callchains)
    if opts.header:
        render_header(out, opened.reader.header)
        return
    if opts.stats:
        render_stats(out, opened.reader, opened.data)
        return
    if opts.thread_states:
        _thread_states(opts, out, opened, warn)
        return
    names = opened.sampled_names
    if opts.group:
        _report_group(opts, out, opened, progress_printer(opts.progress), warn)
        return
    if opts.load.filters.event is not None or len(names) == 1:
        events: list[str | None] = [opts.load.filters.event]
    elif opts.format == "table":
        events = list(names)
    else:
        warn(f"the capture has events {', '.join(names)}: showing {names[0]} (choose with --event).")
        events = [names[0]]
    progress = progress_printer(opts.progress)
    for i, ev in enumerate(events):
        _report_event(opts, out, opened, ev, progress, warn, first=i == 0)


def _report_event(opts: ReportOptions, out: TextIO, opened: Any, event: str | None,
                  progress: Any, warn: Warn, first: bool) -> None:
    from profiler.report.aggregate import aggregate
    from profiler.report.callgraph import default_order
    from profiler.report.pipeline import end_progress, load_profile, require_samples
    from profiler.report.callgraph import PerfReport, build_call_graph
    from profiler.tables import TABLE_FORMATS

    profile = load_profile(opts.load, opened, event, keep_cpu="cpu" in opts.sort, progress=progress)
    end_progress(progress)
    if first:
        for w in profile.warnings:
            warn(w)
    require_samples(opts.load.input, profile.event, profile.recorded_samples, profile.total_samples,
                    opts.load.filters, "report")
    if opts.format == "folded":
        from profiler.report.profile import stack_profile
        from profiler.report.render import folded

        folded.write(stack_profile(profile), out)
        return
    mode = opts.callgraph
    graph = profile.has_callchains and mode != "none"
    children = opts.children and profile.has_callchains
    order = mode if mode in ("caller", "callee") else default_order(children)
    flat = aggregate(profile, opts.sort, children, opts.percent_limit, keep_stacks=graph,
                     percentage=opts.percentage)

    with_graph = graph and opts.format in ("table", "json")
    report = PerfReport(flat, build_call_graph(profile, flat, order, opts.callchain_threshold) if with_graph else None)
    if opts.format in TABLE_FORMATS:
        from profiler.report.render import tabulated

        tabulated.write(report, out, opts.format)  # the rows; call graphs are the table's and JSON's
    elif opts.format == "json":
        from profiler.report.render import jsonout  # json, csv: only for their format (start-up)

        jsonout.write(report, out)
    elif opts.format == "csv":
        from profiler.report.render import csvout

        csvout.write(report, out)
    else:
        from profiler.report.render import table

        table.write(report, out)


def _thread_states(opts: ReportOptions, out: TextIO, opened: Any, warn: Warn) -> None:
    """``--thread-states``: per thread running, runnable and blocked (docs/offcpu.md)."""
    from profiler.report.model import OFFCPU_EVENT, SWITCH_TRACEPOINT
    from profiler.report.pipeline import load_profile
    from profiler.report.render import threadstates as render
    from profiler.report.offcpu import wake_event
    from profiler.report.threadstates import add_top_blocking, add_waker_stacks, thread_times

    if SWITCH_TRACEPOINT not in opened.names:
        raise ReportError(f"{opts.load.input} has no {SWITCH_TRACEPOINT} samples: record with "
                          "'profiler record --off-cpu' for thread states.")
    profile = load_profile(opts.load, opened, OFFCPU_EVENT)
    for w in profile.warnings:
        warn(w)
    states = thread_times(opened, opened.data)
    f = opts.load.filters
    if f.tids or f.pids or f.comms:
        shown = set(profile.samples.tid.tolist())
        states = {t: st for t, st in states.items() if t in shown}
    add_top_blocking(states, profile)
    wake = wake_event(opened)
    if wake is not None and any(st.wake_rows for st in states.values()):
        # every wake-up, whoever made it: --pid/--tid/--comm select the waiting threads
        who = replace(opts.load.filters, comms=(), pids=(), tids=(), dsos=(), symbols=(), time=(), event=None)
        add_waker_stacks(states, opened.data, load_profile(replace(opts.load, filters=who), opened, wake, whole=True))
    render.write(states.values(), out)


def _report_group(opts: ReportOptions, out: TextIO, opened: Any, progress: Any, warn: Warn) -> None:
    """``--group``: the flat profile of each event of the selected event's ':S' group."""
    from profiler.report.aggregate import aggregate
    from profiler.report.groupread import group_of
    from profiler.report.pipeline import end_progress, load_profile
    from profiler.report.render import group_table

    if opts.format != "table":
        raise ReportError("--group shows a group's events side by side in the table: leave out --format, "
                          "or choose one event with --event.")
    group = group_of(opened.data, opened.event_index(opts.load.filters.event))
    if len(group) == 1:
        warn(f"'{group[0].name}' is in no leader-sampled group ({{a,b}}:S): showing it alone.")
    flats = []
    for i, ev in enumerate(group):
        profile = load_profile(opts.load, opened, ev.name, whole=True, progress=progress)
        if i == 0:
            for w in profile.warnings:
                warn(w)
            if profile.has_callchains and opts.callgraph != "none":
                warn("--group shows flat rows (the call graph is left out).")
        flats.append(aggregate(profile, opts.sort, opts.children and profile.has_callchains, opts.percent_limit,
                               keep_stacks=False, percentage=opts.percentage))
    end_progress(progress)
    if flats[0].total_samples == 0:
        raise ReportError(f"no samples of '{group[0].name}' to report.")
    group_table.write(flats, out)
