"""``profiler report``: parse options into ReportOptions and run the report (profiler.report.run)."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import click

from profiler.commands._common import warn
from profiler.commands._profile_opts import load_options, profile_options
from profiler.report.model import OFFCPU_EVENT, WALL_EVENT
from profiler.report.options import CALLGRAPH_MODES, FORMATS, PERCENTAGES, ReportOptions, parse_sort
from profiler.report.run import run_report

PSEUDO_EVENTS = (OFFCPU_EVENT, WALL_EVENT)


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
@click.option("--group", "group", is_flag=True,
              help="Show the events of a leader-sampled group ({a,b}:S) side by side, a percentage each.")
@click.option("--percentage", type=click.Choice(PERCENTAGES), default=ReportOptions.percentage, show_default=True,
              help="Under --comm/--pid/--tid/--dso/--symbol/--trace-filter: percent of all samples (absolute, "
                   "as perf) or of those shown (relative). --time and --cpu drop samples in both.")
@click.option("--format", "format_", type=click.Choice(FORMATS), default="table", show_default=True,
              help="table, json or csv rows; folded: one line per distinct stack (comm;root;...;leaf "
                   "count), as 'profiler export -f folded' writes for flamegraph.pl and inferno.")
@click.option("--stats", is_flag=True, help="Record counts by type and lost samples, instead of the profile.")
@click.option("--header", is_flag=True, help="Print the capture's header instead of the profile.")
@click.option("--thread-states", is_flag=True,
              help="Per thread: time running, runnable (waiting for a CPU) and blocked, and the top "
                   "blocking stacks, from a --off-cpu capture; with sched:sched_waking recorded, who "
                   "woke each thread and from which stack (docs/offcpu.md).")
def command(sort: str, children: bool, call_graph: str | None, callchain_threshold: float,
            percent_limit: float, group: bool, percentage: str, format_: str, stats: bool, header: bool,
            thread_states: bool, **kwargs: Any) -> None:
    """Print a flat or call-graph profile of a capture."""
    load = load_options(kwargs)
    if not children and call_graph == "none" and format_ != "folded" and load.filters.event not in PSEUDO_EVENTS:
        # The flat self profile needs only each sample's ip: skip the call chains entirely. Not
        # for offcpu/wall: a switch-out's leaf is its chain's (user-space only: record --off-cpu),
        # while its ip is the scheduler's in every row.
        load = replace(load, callchains=False, inline=False)  # inlined frames change no flat row
    keys = parse_sort(sort)
    if "srcline" in keys:
        load = replace(load, srclines=True)
    if "cgroup_id" in keys:
        load = replace(load, cgroup_ns=True)
    opts = ReportOptions(load=load, sort=keys, children=children, callgraph=call_graph,
                         callchain_threshold=callchain_threshold, percent_limit=percent_limit, group=group,
                         percentage=percentage,
                         format=format_, stats=stats, header=header, thread_states=thread_states)
    run_report(opts, sys.stdout, warn)
