"""``profiler report``: parse options into ReportOptions, build the profile, render it."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any, TextIO

import click

from profiler.commands._common import warn
from profiler.commands._profile_opts import load_options, profile_options
from profiler.errors import ReportError
from profiler.report.options import CALLGRAPH_MODES, FORMATS, PERCENTAGES, Filters, ReportOptions, parse_sort


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


def run_report(opts: ReportOptions, out: TextIO) -> None:
    """The whole report command after option parsing."""
    from profiler.report.load import open_capture, progress_printer
    from profiler.report.render.stats import render_header, render_stats

    opened = open_capture(opts.load.input, opts.load.callchains)
    reader, data = opened
    if opts.header:
        render_header(out, reader.header)
        return
    if opts.stats:
        render_stats(out, reader, data)
        return
    names = [ev.name for ev in data.events.events]
    if opts.load.filters.event is not None or len(names) == 1:
        events: list[str | None] = [opts.load.filters.event]
    elif opts.format == "table":
        events = list(names)
    else:
        warn(f"the capture has events {', '.join(names)}: showing {names[0]} (choose with --event).")
        events = [names[0]]
    progress = progress_printer(opts.progress)
    for i, ev in enumerate(events):
        _report_event(opts, out, opened, ev, progress, first=i == 0)


def _report_event(opts: ReportOptions, out: TextIO, opened: Any, event: str | None,
                  progress: Any, first: bool) -> None:
    from profiler.report.aggregate import aggregate
    from profiler.report.callgraph import default_order, row_tree
    from profiler.report.load import load_profile
    from profiler.report.render.csvout import render_csv
    from profiler.report.render.jsonout import render_json
    from profiler.report.render.table import render_table

    profile = load_profile(opts.load, progress, event=event, opened=opened)
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
        from profiler.report.render.folded import FoldedOptions, write_folded

        write_folded(profile.stack_samples(), out, FoldedOptions())
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
        render_json(out, flat, tree_of if graph else None, frame)
    elif opts.format == "csv":
        render_csv(out, flat)
    else:
        render_table(out, flat, tree_of if graph else None, label)


@click.command("report")
@profile_options
@click.option("-s", "--sort", "sort", default=",".join(ReportOptions.sort), show_default=True,
              help="Sort keys: pid, tid, comm, dso, sym, cpu, srcline (file:line from DWARF).")
@click.option("--children/--no-children", default=True, show_default=True,
              help="Show the Children column (samples whose call chain contains the entry).")
@click.option("-g", "--call-graph", "call_graph", type=click.Choice(CALLGRAPH_MODES),
              help="Call graph order: caller, callee or none (default: caller with --children, "
                   "callee without).")
@click.option("--callchain-threshold", type=float, default=ReportOptions.callchain_threshold,
              show_default=True, help="Hide call graph branches below this percent of the total.")
@click.option("--percent-limit", type=float, default=0.0, help="Hide rows below this percent.")
@click.option("--percentage", type=click.Choice(PERCENTAGES), default=ReportOptions.percentage, show_default=True,
              help="Under --comm/--pid/--tid/--dso/--symbol/--trace-filter: percent of all samples (absolute, "
                   "as perf) or of those shown (relative). --time and --cpu drop samples in both.")
@click.option("--format", "format_", type=click.Choice(FORMATS), default="table", show_default=True,
              help="table, json or csv rows; folded: one line per distinct stack (comm;root;...;leaf "
                   "count), as 'profiler export -f folded' writes for flamegraph.pl and inferno.")
@click.option("--stats", is_flag=True, help="Record counts by type and lost samples, instead of the profile.")
@click.option("--header", is_flag=True, help="Print the capture's header instead of the profile.")
def command(sort: str, children: bool, call_graph: str | None, callchain_threshold: float,
            percent_limit: float, percentage: str, format_: str, stats: bool, header: bool, **kwargs: Any) -> None:
    """Print a flat or call-graph profile of a capture."""
    load = load_options(kwargs)
    if not children and call_graph == "none" and format_ != "folded":
        # The flat self profile needs only each sample's ip: skip the call chains entirely.
        load = replace(load, callchains=False, inline=False)  # inlined frames change no flat row
    keys = parse_sort(sort)
    if "srcline" in keys:
        load = replace(load, srclines=True)
    opts = ReportOptions(load=load, sort=keys, children=children, callgraph=call_graph,
                         callchain_threshold=callchain_threshold, percent_limit=percent_limit,
                         percentage=percentage,
                         format=format_, stats=stats, header=header)
    run_report(opts, sys.stdout)
