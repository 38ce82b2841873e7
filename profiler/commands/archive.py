"""``profiler archive``: pack the symbols a capture needs into it, for other machines."""

from __future__ import annotations

import sys
from typing import Any

import click

from profiler.commands._common import input_option
from profiler.commands._profile_opts import parse_symbol_options, symbol_options
from profiler.report.offline.archive import archive_capture, not_found_sentence, render_result
from profiler.symbols.debuginfod import DebuginfodClient


@click.command("archive")
@input_option
@click.option("-o", "--output", "output", default=None, metavar="OUT",
              help="Write an archived copy to OUT ('-' for standard output) instead of changing the capture.")
@click.option("--strip-paths", is_flag=True,
              help="With -o: a copy for sharing, directory parts of file paths and command lines removed.")
@click.option("--all-symbols", is_flag=True,
              help="Pack whole symbol tables, not only the symbols covering sampled addresses.")
@symbol_options
def command(input_path: str, output: str | None, strip_paths: bool, all_symbols: bool, **kwargs: Any) -> None:
    """Pack the symbols of every sampled DSO (symbol tables, load segments, build-id; not
    whole binaries) into the capture, so it can be reported on another machine. Re-running
    it only adds what is missing."""
    symbols = parse_symbol_options(kwargs)
    result = archive_capture(input_path, output=output, strip_paths=strip_paths, symfs=symbols.symfs,
                             debug_dirs=symbols.debug_dirs, kallsyms_path=symbols.kallsyms,
                             all_symbols=all_symbols,
                             debuginfod=DebuginfodClient.from_options(symbols.debuginfod, symbols.offline))
    render_result(result, sys.stderr if output == "-" else sys.stdout)  # not into a capture on stdout
    sentence = not_found_sentence(result)
    if sentence is not None:  # the copy is written, but another machine will miss these
        click.echo(f"profiler: {sentence}", err=True)
        sys.exit(1)
