"""``profiler script``: every sample in perf script's text layout."""

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
def command(srcline: bool, **kwargs: Any) -> None:
    """Print every sample in perf script's default text layout."""
    from profiler.report.load import load_profile, progress_printer
    from profiler.report.render.script import render_script

    opts = load_options(kwargs)
    if srcline:
        opts = replace(opts, srclines=True)
    profile = load_profile(opts, progress_printer(False))
    for w in profile.warnings:
        warn(w)
    if profile.recorded_samples == 0:
        raise ReportError(f"{opts.input} has no samples of event '{profile.event}'.")
    if profile.total_samples == 0:
        raise ReportError("no samples match the filters.")
    render_script(sys.stdout, profile, srcline=srcline)
