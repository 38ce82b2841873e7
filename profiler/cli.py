"""The command line: a thin click group.

Each subcommand lives in its own module under ``profiler/commands/`` and is loaded lazily,
so ``profiler info`` does not import numpy-heavy report code. Every ``ProfilerError`` is
turned into one sentence on stderr and its exit code; tracebacks never reach the user. The
entry point is profiler/main.py, which runs the usual ``profiler record`` command lines
without click and passes every other one to :func:`main` here.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from profiler import __version__
from profiler.errors import ProfilerError
from profiler.exits import run_mapped

# name -> (module under profiler.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "record": ("record", "Run a command (or attach to processes) and record samples."),
    "stat": ("stat", "Run a command (or attach) and count events, like perf stat."),
    "report": ("report", "Print a flat or call-graph profile of a capture."),
    "script": ("script", "Print every sample in perf script's text layout."),
    "diff": ("diff", "Compare captures as perf diff does (two builds too); --fail-on for CI."),
    "flamegraph": ("flamegraph", "Write a self-contained interactive HTML flame graph."),
    "view": ("view", "Write one offline HTML file: timeline, flame graph, call trees and source together."),
    "export": ("export", "Export a capture: folded stacks, speedscope, pprof, Firefox Profiler, OTLP."),
    "annotate": ("annotate", "Disassemble a function with the share of samples per instruction and line."),
    "push": ("push", "Send a capture's profile to an OTLP receiver or a Pyroscope server."),
    "archive": ("archive", "Pack the symbols a capture needs into it, for other machines."),
    "import": ("import_", "Convert a perf.data file (perf record) into a capture."),
    "buildids": ("buildids", "List the capture's DSOs, build-ids and symbol sources."),
    "info": ("info", "Describe a capture: header, events, record counts, clean end."),
    "dump": ("dump", "Print every record of a capture, one line each (debugging)."),
    "list": ("list_events", "List the events this machine supports."),
}
# Commands that read no capture: they do without the perf.data opener (and what it imports).
READS_NO_CAPTURE = frozenset({"record", "stat", "list"})


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        if cmd_name not in READS_NO_CAPTURE:
            import profiler.format.perf_data_opener  # noqa: F401  every command that reads a capture reads perf.data
        try:
            module = importlib.import_module(f"profiler.commands.{entry[0]}")
        except ModuleNotFoundError as exc:
            if exc.name == f"profiler.commands.{entry[0]}":
                return _not_built(cmd_name, entry[1])
            raise
        command = module.command
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _not_built(name: str, help_text: str) -> click.Command:
    def run() -> None:
        raise ProfilerError(f"'profiler {name}' is not available in this build.")

    return click.Command(name, callback=run, help=help_text)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="profiler")
def cli() -> None:
    """A sampling profiler for Linux: record, report, flame graphs."""


def main(argv: list[str] | None = None) -> Any:
    """Run the click CLI, mapping project errors to one sentence and an exit code."""
    return run_mapped(lambda: _click_main(argv))


def _click_main(argv: list[str] | None) -> Any:
    try:
        return cli.main(args=argv, prog_name="profiler", standalone_mode=False)
    except click.exceptions.Abort:
        raise KeyboardInterrupt from None  # "profiler: interrupted.", as Ctrl-C
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
