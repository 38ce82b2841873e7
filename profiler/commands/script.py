"""``profiler script``: every sample in perf script's text layout (or JSON Lines)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import click

from profiler.commands._common import warn
from profiler.commands._profile_opts import load_options, profile_options
from profiler.errors import UsageError
from profiler.report.render.script import SampleText, render_merged


@click.command("script")
@profile_options
@click.option("--srcline", is_flag=True,
              help="After each frame, its source file:line (DWARF), as perf script -F +srcline.")
@click.option("-F", "--fields", metavar="FIELDS",
              help="perf script's field selection: comm,tid,pid,time,cpu,event,ip,sym,symoff,dso,srcline,period,trace "
                   "(or +FIELD / -FIELD to change the defaults).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per sample, tracepoint fields included.")
@click.option("--show-namespace-events", "show_namespaces", is_flag=True,
              help="Also print the NAMESPACES records (record --namespaces) among the samples, as perf script.")
def command(srcline: bool, fields: str | None, as_json: bool, show_namespaces: bool, **kwargs: Any) -> None:
    """Print every sample in perf script's default text layout; with several events and no
    --event, every event's samples interleaved in time order, as perf script does."""
    from profiler.report.pipeline import Capture, require_samples, stream_profiles
    from profiler.report.sideband import Pending, namespace_events
    from profiler.report.windows import Totals

    if show_namespaces and as_json:
        raise UsageError("--show-namespace-events prints text: it does not go with --json.")
    opts = replace(load_options(kwargs), payloads=True)
    if srcline or (fields is not None and "srcline" in fields):
        opts = replace(opts, srclines=True)
    capture = Capture(opts.input)
    names = capture.names
    chosen = [opts.filters.event] if opts.filters.event is not None or as_json or len(names) == 1 else names
    events = [capture.event_index(name) for name in chosen]
    totals = Totals()
    said: set[str] = set()
    pending = Pending(namespace_events(capture.data.others) if show_namespaces else [])

    def tell(messages: list[str]) -> None:
        for message in messages:
            if message not in said:
                said.add(message)
                warn(message)

    for profiles in stream_profiles(opts, capture, events, totals):
        tell(totals.warnings)
        for profile in profiles:  # each holds the resolver's warnings new since the last
            tell(profile.warnings)
        shown = [p for p in profiles if p.total_samples]
        if not shown:
            continue
        if as_json:
            from profiler.report.render.script import render_json_lines

            render_json_lines(sys.stdout, shown[0])
        else:
            last = max((int(p.samples.time[-1]), int(p.samples.seq[-1])) for p in shown)
            _render(shown, fields, srcline, said, pending.upto(last))
    render_merged(sys.stdout, [pending.rest()])
    tell(totals.warnings)
    require_samples(opts.input, capture.event_names[events[0]], sum(totals.recorded.get(e, 0) for e in events),
                    sum(totals.shown.values()), opts.filters, "print")


def _render(profiles: list[Any], fields: str | None, srcline: bool, said: set[str] | None = None,
            side: Iterator[SampleText] | None = None) -> None:
    from profiler.report.render.script import field_texts, parse_fields, script_texts

    streams = [] if side is None else [side]
    for profile in profiles:
        chosen = parse_fields(fields, profile.trace_format is not None, profile.has_callchains)
        if chosen is not None and "trace" in chosen and profile.trace_format is None and fields is not None:
            message = f"'trace' is only valid for tracepoint events, not {profile.event}: ignoring it."
            if said is None or message not in said:
                warn(message)
                if said is not None:
                    said.add(message)
        if chosen is not None and srcline and "srcline" not in chosen:
            chosen = (*chosen, "srcline")
        streams.append(script_texts(profile, srcline=srcline) if chosen is None else field_texts(profile, chosen))
    render_merged(sys.stdout, streams)
