"""``profiler script``: every sample in perf script's text layout."""

from __future__ import annotations

import sys

import click

from profiler.commands.report import load_options_from_cli, warn
from profiler.errors import ReportError
from profiler.report.options import LoadOptions


@click.command("script")
@click.option("-i", "--input", "input_", default=LoadOptions.input, show_default=True, help="Capture file to read.")
@click.option("--comm", help="Only these commands (comma-separated).")
@click.option("--pid", help="Only these process ids.")
@click.option("--tid", help="Only these thread ids.")
@click.option("--cpu", help="Only samples taken on these CPUs.")
@click.option("--time", "time_", metavar="START,END", help="Only this time range, seconds from the capture's start.")
@click.option("--event", help="The event to show, for captures with several (default: the first).")
@click.option("--no-demangle", is_flag=True, help="Show C++ and Rust names as stored.")
@click.option("--debug-dir", multiple=True, help="Where to look for separate debug files.")
def command(input_: str, comm: str | None, pid: str | None, tid: str | None, cpu: str | None,
            time_: str | None, event: str | None, no_demangle: bool, debug_dir: tuple[str, ...]) -> None:
    """Print every sample in perf script's default text layout."""
    from profiler.report.load import load_profile, progress_printer
    from profiler.report.render.script import render_script

    opts = load_options_from_cli(input_, comm, pid, tid, cpu, None, None, time_, event, no_demangle,
                                 debug_dir)
    profile = load_profile(opts, progress_printer(False))
    for w in profile.warnings:
        warn(w)
    if profile.recorded_samples == 0:
        raise ReportError(f"{input_} has no samples of event '{profile.event}'.")
    if profile.total_samples == 0:
        raise ReportError("no samples match the filters.")
    render_script(sys.stdout, profile)
