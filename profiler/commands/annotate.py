"""``profiler annotate SYMBOL``: per-instruction and per-source-line shares of a function."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import click

from profiler.commands._common import warn
from profiler.commands._profile_opts import load_options, profile_options


@click.command("annotate")
@click.argument("function")
@profile_options
@click.option("--stdio", is_flag=True, help="Accepted for perf compatibility (text is the only output).")
def command(function: str, stdio: bool, **kwargs: Any) -> None:
    """Disassemble FUNCTION (as the report names it, or mangled) with the share of samples on
    each instruction and each source line, like perf annotate --stdio. Needs the recorded
    binary (same build-id) on this machine or under --symfs."""
    from profiler.report.annotate import annotate_function, render_annotation
    from profiler.report.pipeline import load_profile, require_samples

    opts = replace(load_options(kwargs), callchains=False, inline=False, srclines=False)
    profile = load_profile(opts)
    for w in profile.warnings:
        warn(w)
    require_samples(opts.input, profile.event, profile.recorded_samples, profile.total_samples, opts.filters,
                    "annotate")
    render_annotation(sys.stdout, annotate_function(profile, function, opts.symfs))
