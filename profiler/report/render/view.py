"""``profiler view``: one self-contained HTML file to explore a capture (docs/view.md).

Two steps, as everywhere in the reporter:

1. :func:`build_view` packs the pipeline's profiles (every event, offcpu and wall included)
   into tables (:mod:`profiler.report.render.viewdata`), with the capture's markers and, for
   the hottest functions, their disassembly and source text from :mod:`profiler.report.annotate`;
2. :func:`render_view` writes the page: the template, stylesheet and scripts from
   ``assets/`` inlined, the packed data gzip-compressed and base64-encoded in a
   ``<script type="application/octet-stream">``. The page inflates it with the browser's
   ``DecompressionStream`` and computes the timeline, flame graph, call trees, sandwich and
   source views from it on demand. Its Content-Security-Policy forbids every request.
"""

from __future__ import annotations

import base64
import gzip
import html
import os
import re
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

from profiler.dataclass import dataclass
from profiler.errors import ReportError
from profiler.report.model import default_weight
from profiler.report.profile import Profile
from profiler.report.render import utf8
from profiler.report.render.flamegraph import read_asset
from profiler.report.render.viewdata import (
    DEFAULT_MAX_ROWS,
    Marker,
    Tables,
    ViewData,
    add_event,
    finish_tables,
    pack,
)

#: The page's scripts, in the order they are inlined (flamecommon.js is shared with flamegraph).
SCRIPTS = ("flamecommon.js", "view-data.js", "view-trees.js", "view-timeline.js", "view-flame.js", "view-tree.js",
           "view-source.js", "view-main.js")

#: Functions (by self samples, per event) whose disassembly and source are put in the file.
DEFAULT_ANNOTATE = 20

#: Source files larger than this are left out (the page says so).
MAX_SOURCE_BYTES = 2 << 20


@dataclass(frozen=True)
class ViewOptions:
    """How the page is built.

    title: the page title (None: the capture's command and events).
    source: embed the source files of annotated functions when readable here (``--no-source``).
    max_rows: per event, rows above which samples are merged into time buckets (the file says
        the bucket width; every sample stays counted).
    annotate: functions per event whose assembly is embedded (the hottest by self samples).
    symfs: where the recorded binaries are looked up first (for the disassembly).
    """

    title: str | None = None
    source: bool = True
    max_rows: int = DEFAULT_MAX_ROWS
    annotate: int = DEFAULT_ANNOTATE
    symfs: str | None = None


def build_view(profiles: Sequence[Profile], markers: Sequence[Marker], command: str,
               options: ViewOptions = ViewOptions()) -> ViewData:
    """The packed data of the page for ``profiles`` (one per event)."""
    if options.max_rows < 1000:
        raise ReportError(f"--max-rows must be at least 1000, not {options.max_rows}.")
    t0 = min((p.start_ns for p in profiles), default=0)
    view = ViewData({"events": [], "command": command, "start_ns": t0,
                     "title": options.title or f"{command} — {', '.join(p.event for p in profiles)}"})
    tables = Tables()
    end = 0
    for p in profiles:
        add_event(view, tables, p, t0, default_weight(p.event), options.max_rows)
        if len(p.samples):
            end = max(end, int(p.samples.time.max()) - t0 + (int(p.samples.period.max()) if p.event in (
                "offcpu", "wall") else 0))
    view.doc["end_ns"] = end
    view.doc["markers"] = [[m.kind, m.time_ns, tables.thread(m.pid, m.tid, "") if m.tid >= 0 else -1,
                            tables.string(m.text)] for m in markers]
    view.doc["asm"], sources = _annotations(profiles, tables, options)
    view.doc["sources"] = sources if options.source else {}
    view.doc["source_omitted"] = not options.source
    finish_tables(view, tables)
    return view


def _annotations(profiles: Sequence[Profile], tables: Tables, options: ViewOptions
                 ) -> tuple[list[dict[str, Any]], dict[str, list[str] | None]]:
    """The disassembly (offsets, text, source line) of each event's hottest user functions,
    and the text of the source files they come from (None when unreadable or too large)."""
    from profiler.report.annotate import annotate_function

    out: list[dict[str, Any]] = []
    sources: dict[str, list[str] | None] = {}
    done: set[tuple[str, str]] = set()
    for p in profiles:
        if not len(p.stack) or p.resolver is None:
            continue
        leaf = p.leaf_frames()[p.stack]
        weights = np.bincount(leaf, weights=p.sample_weights().astype(np.float64), minlength=len(p.frames))
        ranked = [int(i) for i in np.argsort(-weights, kind="stable") if weights[i] > 0]
        taken = 0
        for fid in ranked:
            if taken >= options.annotate:
                break
            fr = p.frames[fid]
            if fr.kind != "user" or fr.symbol is None or fr.inlined or (fr.dso_path, fr.symbol) in done:
                continue
            done.add((fr.dso_path, fr.symbol))
            try:
                ann = annotate_function(p, fr.symbol, options.symfs)
            except (ReportError, OSError):
                continue
            taken += 1
            out.append({"name": tables.string(fr.name(p.demangle)), "dso": tables.string(fr.dso),
                        "start": ann.start, "size": ann.end - ann.start,
                        "ins": [[i.addr - ann.start, f"{i.mnemonic} {i.operands}".rstrip(),
                                 tables.string(i.chain[0].srcline) if i.chain and i.chain[0].srcline else -1]
                                for i in ann.instructions]})
            if options.source:
                for path in ann.sources:
                    if path not in sources:
                        sources[path] = _read_source(path)
    return out, sources


def _read_source(path: str) -> list[str] | None:
    try:
        if os.path.getsize(path) > MAX_SOURCE_BYTES:
            return None
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return None


def subtitle(view: ViewData) -> str:
    """One line under the title: the command and each event's samples."""
    parts = [f"command: {view.doc['command']}"] if view.doc["command"] else []
    parts += [f"{e['name']}: {e['samples']:,} samples" for e in view.doc["events"]]
    return " \u00b7 ".join(parts)


def render_view(view: ViewData, stream: TextIO) -> int:
    """Write the page to ``stream``; the size of the compressed data in bytes."""
    packed = gzip.compress(pack(view), compresslevel=6, mtime=0)
    scripts = "\n".join(read_asset(name) for name in SCRIPTS)
    values = {
        "TITLE": html.escape(utf8.text(view.doc["title"])),
        "SUBTITLE": html.escape(utf8.text(subtitle(view))),
        "CSS": read_asset("view.css"),
        "JS": scripts.replace("</script", "<\\/script"),
        "DATA": base64.b64encode(packed).decode("ascii"),
    }
    stream.write(re.sub(r"@@([A-Z]+)@@", lambda m: values[m.group(1)], read_asset("view.html")))
    return len(packed)
