"""Options shared by the commands that read a capture: where symbols come from (declared and
validated here once: report, script, flamegraph, export, buildids, archive), and the input and
report filters (report, script, flamegraph, export)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from profiler.report.options import (
    Filters,
    LoadOptions,
    SymbolOptions,
    parse_int_list,
    parse_str_list,
    parse_time,
)
from profiler.errors import UsageError
from profiler.report.model import WALL_EVENT

F = TypeVar("F", bound=Callable[..., Any])

_SYMBOL_OPTIONS: list[Callable[[F], F]] = [
    click.option("--symfs", metavar="DIR",
                 help="Look the recorded files up under this root first (used only when build-ids match)."),
    click.option("--debug-dir", multiple=True, metavar="DIR",
                 help="Where to look for separate debug files by build-id (repeatable; default /usr/lib/debug)."),
    click.option("--kallsyms", metavar="FILE",
                 help="Kernel symbols from this kallsyms file instead of the capture's snapshot."),
    click.option("--debuginfod", metavar="URLS",
                 help="debuginfod servers (space-separated) for missing debug files; "
                      "default $DEBUGINFOD_URLS, '' for none."),
    click.option("--offline", is_flag=True,
                 help="Never use the network: debug files only from the debuginfod cache."),
]
_SYMBOL_NAMES = ("symfs", "debug_dir", "kallsyms", "debuginfod", "offline")


def symbol_options(func: F) -> F:
    """Decorate a click command with ``--symfs --debug-dir --kallsyms --debuginfod --offline``."""
    for option in reversed(_SYMBOL_OPTIONS):
        func = option(func)
    return func


def parse_symbol_options(kwargs: dict[str, Any]) -> SymbolOptions:
    """Pop the symbol options out of a command's keyword arguments, validated."""
    symfs, debug_dir, kallsyms, debuginfod, offline = (kwargs.pop(name) for name in _SYMBOL_NAMES)
    return SymbolOptions(symfs=symfs, debug_dirs=tuple(debug_dir) if debug_dir else None, kallsyms=kallsyms,
                         debuginfod=debuginfod, offline=offline).validated()


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
                 help="Only these time ranges: START,END in seconds as script prints them (or from the "
                      "capture's start), several separated by spaces, or percentages 10%-20%, 10%/2."),
    click.option("--trace-filter", metavar="EXPR",
                 help="Tracepoint samples whose fields match, e.g. 'prev_comm == \"sh\" && next_pid != 0'."),
    click.option("--event", help="The event to use, for captures with several (default: the first); "
                                 "'offcpu' for a --off-cpu capture's waits (docs/offcpu.md)."),
    click.option("--wall", is_flag=True,
                 help="Elapsed time: on-CPU samples and off-CPU waits in one tree under [running], "
                      "[runnable], [blocked] (the 'wall' event of a --off-cpu capture, docs/offcpu.md)."),
    click.option("--no-demangle", is_flag=True, help="Show C++ and Rust names as stored."),
    click.option("--inline/--no-inline", default=True, show_default=True,
                 help="Show functions inlined by the compiler as their own frames (from DWARF)."),
    click.option("--python-frames", type=click.Choice(["python", "all"]), default="python", show_default=True,
                 help="python: Python functions without the interpreter's frames between them; all: "
                      "keep those frames (docs/python.md)."),
]

_NAMES = ("input_", "comm", "pid", "tid", "cpu", "dso", "symbol", "time_", "trace_filter", "event", "no_demangle",
          "inline", "wall", "python_frames")


def profile_options(func: F) -> F:
    """Decorate a click command with the shared capture/filter/symbol options."""
    func = symbol_options(func)
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def load_options(kwargs: dict[str, Any]) -> LoadOptions:
    """Pop the shared options out of a command's keyword arguments into LoadOptions."""
    symbols = parse_symbol_options(kwargs)
    return load_options_from_cli(**{name: kwargs.pop(name) for name in _NAMES}, symbols=symbols)


def load_options_from_cli(input_: str, comm: str | None = None, pid: str | None = None,
                          tid: str | None = None, cpu: str | None = None, dso: str | None = None,
                          symbol: str | None = None, time_: str | None = None,
                          trace_filter: str | None = None, event: str | None = None,
                          no_demangle: bool = False, inline: bool = True, wall: bool = False,
                          python_frames: str = "python",
                          symbols: SymbolOptions = SymbolOptions()) -> LoadOptions:
    """LoadOptions from the options' text; UsageError (one sentence, exit 2) for bad values."""
    if wall:
        if event not in (None, WALL_EVENT):
            raise UsageError(f"--wall is the '{WALL_EVENT}' event: leave out --event {event}.")
        event = WALL_EVENT
    filters = Filters(
        comms=parse_str_list(comm) if comm else (),
        pids=parse_int_list(pid, "--pid") if pid else (),
        tids=parse_int_list(tid, "--tid") if tid else (),
        cpus=parse_int_list(cpu, "--cpu") if cpu else (),
        dsos=parse_str_list(dso) if dso else (),
        symbols=parse_str_list(symbol) if symbol else (),
        time=parse_time(time_) if time_ else (),
        time_text=time_ or "",
        trace=trace_filter,
        event=event,
    )
    if trace_filter is not None:
        from profiler.report.tracefilter import parse_trace_filter  # only with the option (start-up)

        parse_trace_filter(trace_filter)  # a usage error now, not after decoding
    return LoadOptions.with_symbols(symbols, input=input_, filters=filters, demangle=not no_demangle, inline=inline,
                                    python_frames=python_frames)
