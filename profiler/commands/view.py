"""``profiler view``: one offline HTML file with the timeline, flame graph, call trees and
source of a capture (docs/view.md)."""

from __future__ import annotations

from typing import Any

import click

from profiler.commands._common import warn
from profiler.commands._output import open_output
from profiler.commands._profile_opts import load_options, profile_options
from profiler.report.render.view import DEFAULT_ANNOTATE
from profiler.report.render.viewdata import DEFAULT_MAX_ROWS


@click.command("view")
@profile_options
@click.option("-o", "--output", default="view.html", show_default=True, help="HTML file to write ('-' for stdout).")
@click.option("--title", help="Title of the page (default: the command and events).")
@click.option("--no-source", is_flag=True, help="Leave the source files' text out of the file.")
@click.option("--max-rows", type=int, default=DEFAULT_MAX_ROWS, show_default=True,
              help="Per event, rows above which samples of the same thread, CPU and stack are merged into "
                   "time buckets (every sample stays counted; the page says the bucket width).")
@click.option("--annotate", "annotate_top", type=int, default=DEFAULT_ANNOTATE, show_default=True,
              help="Per event, how many of the hottest functions get their assembly in the file.")
def command(output: str, title: str | None, no_source: bool, max_rows: int, annotate_top: int,
            **kwargs: Any) -> None:
    """Write one self-contained HTML file to explore the capture: a timeline per thread to
    select a time range, with the flame graph, call trees (top-down, bottom-up, caller/callee)
    and source/assembly of that range. Every event of the capture (or the one --event names),
    offcpu and wall included. No network access needed."""
    from profiler.report.capture import Capture
    from profiler.report.pipeline import load_events
    from profiler.report.render.view import ViewOptions, build_view, render_view
    from profiler.report.render.viewmarkers import capture_markers

    options = load_options(kwargs)
    capture = Capture(options.input, options.callchains)
    profiles = load_events(options, warn, capture, what="view")
    markers = capture_markers(capture, min(p.start_ns for p in profiles))
    view = build_view(profiles, markers, capture.info.describe_target(),
                      ViewOptions(title=title, source=not no_source, max_rows=max_rows, annotate=annotate_top,
                                  symfs=options.symfs))
    with open_output(output) as stream:
        size = render_view(view, stream)
    if output != "-":
        events = ", ".join(f"{e['samples']} samples of '{e['name']}'" for e in view.doc["events"])
        click.echo(f"wrote {output} ({events}; {size / 1e6:.1f} MB of packed data)", err=True)
