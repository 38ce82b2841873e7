"""``profiler archive``: pack the symbols a capture needs into it, for other machines."""

from __future__ import annotations

import sys

import click

from profiler.commands._common import input_option
from profiler.report.offline.archive import archive_capture, not_found_sentence, render_result
from profiler.report.symbols.debuginfod import DebuginfodClient


@click.command("archive")
@input_option
@click.option("-o", "--output", "output", default=None, metavar="OUT",
              help="Write an archived copy to OUT instead of changing the capture.")
@click.option("--strip-paths", is_flag=True,
              help="With -o: a copy for sharing, directory parts of file paths and command lines removed.")
@click.option("--all-symbols", is_flag=True,
              help="Pack whole symbol tables, not only the symbols covering sampled addresses.")
@click.option("--symfs", default=None, metavar="DIR", help="Look the recorded files up under this root first.")
@click.option("--debug-dir", "debug_dirs", multiple=True, metavar="DIR",
              help="Debug directory searched by build-id (repeatable; default /usr/lib/debug).")
@click.option("--kallsyms", "kallsyms_path", default=None, metavar="FILE",
              help="Kernel symbols from this kallsyms file instead of the capture's snapshot.")
@click.option("--debuginfod", metavar="URLS",
              help="debuginfod servers (space-separated) for missing debug files; default $DEBUGINFOD_URLS.")
@click.option("--offline", is_flag=True, help="Never use the network: only the debuginfod cache.")
def command(input_path: str, output: str | None, strip_paths: bool, all_symbols: bool, symfs: str | None,
            debug_dirs: tuple[str, ...], kallsyms_path: str | None, debuginfod: str | None, offline: bool) -> None:
    """Pack the symbols of every sampled DSO (symbol tables, load segments, build-id; not
    whole binaries) into the capture, so it can be reported on another machine. Re-running
    it only adds what is missing."""
    result = archive_capture(input_path, output=output, strip_paths=strip_paths, symfs=symfs,
                             debug_dirs=debug_dirs or None, kallsyms_path=kallsyms_path,
                             all_symbols=all_symbols,
                             debuginfod=DebuginfodClient.from_options(debuginfod, offline))
    render_result(result, sys.stdout)
    sentence = not_found_sentence(result)
    if sentence is not None:  # the copy is written, but another machine will miss these
        click.echo(f"profiler: {sentence}", err=True)
        sys.exit(1)
