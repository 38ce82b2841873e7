"""``profiler script``: every sample in perf script's text layout (or JSON Lines)."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import click

from profiler.commands._common import warn
from profiler.commands._profile_opts import load_options, profile_options
from profiler.errors import ReportError


@click.command("script")
@profile_options
@click.option("--srcline", is_flag=True, help="After each frame, its source file:line (DWARF), as perf script -F +srcline.")
@click.option("-F", "--fields", metavar="FIELDS",
              help="perf script's field selection: comm,tid,pid,time,cpu,event,ip,sym,symoff,dso,period,trace "
                   "(or +FIELD / -FIELD to change the defaults).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per sample, tracepoint fields included.")
def command(srcline: bool, fields: str | None, as_json: bool, **kwargs: Any) -> None:
    """Print every sample in perf script's default text layout."""
    from profiler.report.load import load_profile, progress_printer
    from profiler.report.render.script import parse_fields, render_fields, render_json_lines, render_script

    opts = replace(load_options(kwargs), payloads=True)
    if srcline:
        opts = replace(opts, srclines=True)
    profile = load_profile(opts, progress_printer(False))
    for w in profile.warnings:
        warn(w)
    if profile.recorded_samples == 0:
        raise ReportError(f"{opts.input} has no samples of event '{profile.event}'.")
    if profile.total_samples == 0:
        raise ReportError("no samples match the filters.")
    if as_json:
        render_json_lines(sys.stdout, profile)
        return
    chosen = parse_fields(fields, profile.trace_format is not None, profile.has_callchains)
    if chosen is not None and "trace" in chosen and profile.trace_format is None and fields is not None:
        warn(f"'trace' is only valid for tracepoint events, not {profile.event}: ignoring it.")
    if chosen is None:
        render_script(sys.stdout, profile, srcline=srcline)
    else:
        render_fields(sys.stdout, profile, chosen)
