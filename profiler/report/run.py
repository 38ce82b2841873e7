"""``profiler report``'s whole job after option parsing: the header, the stats, or the flat /
call-graph profile of each event, rendered as a table, JSON, CSV or folded stacks."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

from profiler.errors import ReportError
from profiler.report.options import Filters, ReportOptions

Warn = Callable[[str], None]


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


def run_report(opts: ReportOptions, out: TextIO, warn: Warn) -> None:
    """The whole report command after option parsing."""
    from profiler.report.load import OpenedCapture, progress_printer
    from profiler.report.render.stats import render_header, render_stats

    opened = OpenedCapture(opts.load.input, opts.load.callchains)
    if opts.header:
        render_header(out, opened.reader.header)
        return
    if opts.stats:
        render_stats(out, opened.reader, opened.data)
        return
    names = opened.names
    if opts.group:
        _report_group(opts, out, opened.pair(), names, progress_printer(opts.progress), warn)
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
    from profiler.report.callgraph import default_order, row_tree
    from profiler.report.load import load_report_profile
    from profiler.report.render.csvout import render_csv
    from profiler.report.render.jsonout import render_json
    from profiler.report.render.table import render_table

    profile = load_report_profile(opts.load, opened, progress, event=event, keep_cpu="cpu" in opts.sort)
    if progress is not None:
        sys.stderr.write("\r\x1b[K")
    if first:
        for w in profile.warnings:
            warn(w)
    if profile.recorded_samples == 0:
        raise ReportError(f"{opts.load.input} has no samples of event '{profile.event}': "
                          f"nothing to report (was the workload too short?).")
    if profile.total_samples == 0:
        raise ReportError(f"no samples match the filters ({describe_filters(opts.load.filters)}); "
                          f"the capture has {profile.recorded_samples} samples of '{profile.event}'.")
    if opts.format == "folded":
        from profiler.report.model import StackProfile
        from profiler.report.render import folded
        from profiler.report.stacks import profile_meta

        folded.write(StackProfile(profile_meta(profile, profile.header), profile.stack_samples()), out)
        return
    mode = opts.callgraph
    graph = profile.has_callchains and mode != "none"
    children = opts.children and profile.has_callchains
    order = mode if mode in ("caller", "callee") else default_order(children)
    flat = aggregate(profile, opts.sort, children, opts.percent_limit, keep_stacks=graph,
                     percentage=opts.percentage)

    def tree_of(row: int) -> Any:
        return row_tree(profile, flat, row, order, opts.callchain_threshold)

    def label(fid: int) -> str:
        fr = profile.frame(fid)
        return fr.name(profile.demangle) if fr.resolved else f"{fr.addr:#x}"

    def frame(fid: int) -> tuple[str, str]:
        fr = profile.frame(fid)
        return label(fid), fr.dso

    if opts.format == "json":
        render_json(out, flat, tree_of if graph else None, frame, profile.srclines)
    elif opts.format == "csv":
        render_csv(out, flat)
    else:
        render_table(out, flat, tree_of if graph else None, label)


def _report_group(opts: ReportOptions, out: TextIO, opened: Any, names: list[str], progress: Any,
                  warn: Warn) -> None:
    """``--group``: the flat profile of each event of the selected event's ':S' group."""
    from profiler.report.aggregate import aggregate
    from profiler.report.groupread import group_of
    from profiler.report.load import load_profile, select_event
    from profiler.report.render.group_table import render_group_table

    if opts.format != "table":
        raise ReportError("--group shows a group's events side by side in the table: leave out --format, "
                          "or choose one event with --event.")
    _, data = opened
    group = group_of(data, select_event(names, opts.load.filters.event))
    if len(group) == 1:
        warn(f"'{group[0].name}' is in no leader-sampled group ({{a,b}}:S): showing it alone.")
    flats = []
    for i, ev in enumerate(group):
        profile = load_profile(opts.load, progress, event=ev.name, opened=opened)
        if i == 0:
            for w in profile.warnings:
                warn(w)
            if profile.has_callchains and opts.callgraph != "none":
                warn("--group shows flat rows (the call graph is left out).")
        flats.append(aggregate(profile, opts.sort, opts.children and profile.has_callchains, opts.percent_limit,
                               keep_stacks=False, percentage=opts.percentage))
    if progress is not None:
        sys.stderr.write("\r\x1b[K")
    if flats[0].total_samples == 0:
        raise ReportError(f"no samples of '{group[0].name}' to report.")
    render_group_table(out, flats)
