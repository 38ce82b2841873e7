"""Options shared by every command that reads a capture into a profile (report, script,
flamegraph, export): input, the report filters, and where symbols come from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from profiler.report.options import LoadOptions

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS: list[Callable[[F], F]] = [
    click.option("-i", "--input", "input_", default=LoadOptions.input, show_default=True,
                 help="Capture file to read."),
    click.option("--comm", help="Only these commands (comma-separated)."),
    click.option("--pid", help="Only these process ids."),
    click.option("--tid", help="Only these thread ids."),
    click.option("--cpu", help="Only samples taken on these CPUs."),
    click.option("--dso", help="Only samples whose leaf is in these DSOs (name or path)."),
    click.option("--symbol", help="Only samples whose leaf is one of these symbols."),
    click.option("--time", "time_", metavar="START,END",
                 help="Only this time range, seconds from the capture's start."),
    click.option("--event", help="The event to use, for captures with several."),
    click.option("--no-demangle", is_flag=True, help="Show C++ and Rust names as stored."),
    click.option("--debug-dir", multiple=True,
                 help="Where to look for separate debug files (default /usr/lib/debug)."),
]


def profile_options(func: F) -> F:
    """Decorate a click command with the shared capture/filter options."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def load_options(kwargs: dict[str, Any]) -> LoadOptions:
    """Pop the shared options out of a command's keyword arguments into LoadOptions."""
    from profiler.commands.report import load_options_from_cli

    return load_options_from_cli(
        kwargs.pop("input_"), kwargs.pop("comm"), kwargs.pop("pid"), kwargs.pop("tid"),
        kwargs.pop("cpu"), kwargs.pop("dso"), kwargs.pop("symbol"), kwargs.pop("time_"),
        kwargs.pop("event"), kwargs.pop("no_demangle"), kwargs.pop("debug_dir"),
    )
