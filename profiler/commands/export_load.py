"""Loading every event of a capture once, for the exports that carry them all (pprof, firefox)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from profiler.commands._common import warn
from profiler.commands._profile_opts import load_options
from profiler.errors import ReportError

if TYPE_CHECKING:
    from profiler.report.load import Profile


@dataclass
class LoadedEvents:
    path: str
    header: dict[str, Any]
    profiles: list[Profile]
    attrs: list[dict[str, Any]]
    build_ids: dict[str, str] = field(default_factory=dict)
    kernel_build_id: str | None = None
    start_time_ns: int = 0


def load_events(kwargs: dict[str, Any]) -> LoadedEvents:
    """The capture decoded once, then one loaded profile per event with samples (only the
    one ``--event`` names, when given); warnings printed once."""
    from profiler.report.load import load_profile, open_capture

    options = load_options(kwargs)
    opened = open_capture(options.input)
    reader, data = opened
    events = [ev for ev in data.events.events]
    wanted = [options.filters.event] if options.filters.event else [ev.name for ev in events]
    profiles, attrs, said = [], [], set()
    for name in wanted:
        profile = load_profile(options, None, event=name, opened=opened)
        for message in profile.warnings:
            if message not in said:
                said.add(message)
                warn(message)
        if profile.recorded_samples == 0 and not options.filters.event:
            continue  # perf's tracking-only dummy event, an event that never fired
        profiles.append(profile)
        attrs.append(next(ev.attr for ev in events if ev.name == profile.event))
    if not profiles or all(p.recorded_samples == 0 for p in profiles):
        raise ReportError(f"{options.input} has no samples: nothing to export.")
    if sum(p.total_samples for p in profiles) == 0:
        raise ReportError("no samples match the filters: nothing to export.")
    kernel = [m.get("build_id") for m in reader.metadata("kernel") if m.get("build_id")]
    start = reader.header.get("start_time_ns")
    return LoadedEvents(path=options.input, header=reader.header, profiles=profiles, attrs=attrs,
                        build_ids=reader.build_ids(), kernel_build_id=str(kernel[-1]) if kernel else None,
                        start_time_ns=int(start) if isinstance(start, int) else 0)
