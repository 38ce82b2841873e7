"""``profiler buildids``: the capture's DSOs, their build-ids and where symbols come from."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from profiler.commands._common import input_option, warn
from profiler.commands._profile_opts import parse_symbol_options, symbol_options
from profiler.report.capture import Capture
from profiler.report.offline.capture_dsos import build_id_rows, render_build_ids, rows_to_json, scan_capture
from profiler.report.render import utf8
from profiler.report.unwind_capture import unwind_capture
from profiler.report.unwind_samples import table_sources
from profiler.symbols.debuginfod import DebuginfodClient
from profiler.symbols.sources import KIND_ELF, SymbolSources
from profiler.tables import TABLE_FORMATS, table_text


@click.command("buildids")
@input_option
@symbol_options
@click.option("--hit", "only_hit", is_flag=True, help="Only DSOs that a sample hit.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table (--format json).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", *TABLE_FORMATS]), default="table",
              show_default=True, help="table: perf buildid-list's layout with samples and source; json; "
                                      "markdown, github, simple: through tabulate.")
def command(input_path: str, only_hit: bool, as_json: bool, fmt: str, **kwargs: Any) -> None:
    """Every DSO of the capture with its build-id, the samples that hit it (ip or
    callchain), and where its symbols will come from on this machine: packed, symfs,
    debug-dir, debuginfod, local (build-id matches), mismatch or missing. Like a report,
    it fetches from debuginfod servers the debug files of DSOs with samples; the others
    show debuginfod only when their file is already in the cache."""
    symbols = parse_symbol_options(kwargs)
    with Capture(input_path) as capture:
        reader, data = capture.reader, capture.data
        client = DebuginfodClient.from_options(symbols.debuginfod, symbols.offline)
        sources = SymbolSources(capture.symbol_metadata(), symfs=symbols.symfs, debug_dirs=symbols.debug_dirs,
                                kallsyms_path=symbols.kallsyms, debuginfod=client)
        # a --call-graph dwarf capture: the DSOs its unwound stacks pass through count too
        unwind_capture(reader, data, table_sources(reader, None if symbols.symfs is None else str(symbols.symfs),
                                                   symbols.debug_dirs), sources.jit_symbols)
        found = scan_capture(reader, data, lambda: sources.kernel()[0])
        sources.prefetch((u.path, u.build_id) for u in found.hit() if u.kind == KIND_ELF)
        if client is not None:
            client.offline = True
        rows = build_id_rows(found, sources)
        if only_hit:
            rows = [r for r in rows if r.samples]
        out = sys.stdout
        if as_json or fmt == "json":
            out.write(utf8.json_text(json.dumps(rows_to_json(rows), indent=1)) + "\n")
        elif fmt in TABLE_FORMATS:
            out.write(table_text(["build-id", "samples", "source", "dso"],
                                 [[r.identity, str(r.samples), r.source, r.shown_path] for r in rows], fmt,
                                 [False, True, False, False]))
        else:
            render_build_ids(rows, out)
        for message in [*reader.warnings, *data.warnings, *sources.warnings]:
            warn(message)
