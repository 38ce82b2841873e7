"""``profiler list``: the events this machine supports, by kind."""

from __future__ import annotations

import fnmatch
import sys
from typing import TextIO

import click

from profiler.record.events import ListedEvent, supported_events


def render_events(events: list[ListedEvent], stream: TextIO) -> None:
    width = max((len(e.name) for e in events), default=0)
    for e in events:
        stream.write(f"  {e.name:<{width}}  [{e.kind}]\n")
    stream.write("\n  rNNN                                   [Raw hardware event descriptor]\n")
    stream.write("  pmu/term=value,.../                    [PMU event from /sys/bus/event_source]\n")


@click.command("list")
@click.argument("pattern", required=False)
def command(pattern: str | None) -> None:
    """List the events this machine supports (optionally those matching PATTERN, a glob)."""
    events = supported_events()
    if pattern:
        glob = pattern if any(ch in pattern for ch in "*?[") else f"*{pattern}*"
        events = [e for e in events if fnmatch.fnmatch(e.name, glob) or fnmatch.fnmatch(e.kind, glob)]
    render_events(events, sys.stdout)
