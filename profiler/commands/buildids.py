"""``profiler buildids``: the capture's DSOs, their build-ids and where symbols come from."""

from __future__ import annotations

import json
import sys

import click

from profiler.commands._common import input_option, warn
from profiler.format.bulk import load_capture
from profiler.format.container import CaptureReader
from profiler.report.offline.capture_dsos import build_id_rows, render_build_ids, rows_to_json, scan_capture
from profiler.report.symbols.debuginfod import DebuginfodClient
from profiler.report.symbols.chain import KIND_ELF, SymbolSources


@click.command("buildids")
@input_option
@click.option("--symfs", default=None, metavar="DIR", help="Look the recorded files up under this root.")
@click.option("--debug-dir", "debug_dirs", multiple=True, metavar="DIR",
              help="Debug directory searched by build-id (repeatable; default /usr/lib/debug).")
@click.option("--kallsyms", "kallsyms_path", default=None, metavar="FILE", help="Kernel symbols from this file.")
@click.option("--debuginfod", metavar="URLS",
              help="debuginfod servers (space-separated); default $DEBUGINFOD_URLS, '' for none.")
@click.option("--offline", is_flag=True, help="Never use the network: only the debuginfod cache.")
@click.option("--hit", "only_hit", is_flag=True, help="Only DSOs that a sample hit.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def command(input_path: str, symfs: str | None, debug_dirs: tuple[str, ...], kallsyms_path: str | None,
            debuginfod: str | None, offline: bool, only_hit: bool, as_json: bool) -> None:
    """Every DSO of the capture with its build-id, the samples that hit it (ip or
    callchain), and where its symbols will come from on this machine: packed, symfs,
    debug-dir, debuginfod, local (build-id matches), mismatch or missing. Like a report,
    it fetches from debuginfod servers the debug files of DSOs with samples; the others
    show debuginfod only when their file is already in the cache."""
    with CaptureReader.open(input_path) as reader:
        client = DebuginfodClient.from_options(debuginfod, offline)
        sources = SymbolSources(reader, symfs=symfs, debug_dirs=debug_dirs or None, kallsyms_path=kallsyms_path,
                                debuginfod=client)
        found = scan_capture(reader, load_capture(reader), lambda: sources.kernel()[0])
        sources.prefetch((u.path, u.build_id) for u in found.hit() if u.kind == KIND_ELF)
        if client is not None:
            client.offline = True
        rows = build_id_rows(found, sources)
        if only_hit:
            rows = [r for r in rows if r.samples]
        out = sys.stdout
        if as_json:
            json.dump(rows_to_json(rows), out, indent=1)
            out.write("\n")
        else:
            render_build_ids(rows, out)
        for message in sources.warnings:
            warn(message)
