"""A capture's distinct stacks for the stack renderers (flame graph, folded, speedscope, ...):
the library side of ``profiler flamegraph`` and ``profiler export``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profiler.errors import ReportError
from profiler.report.load import OpenedCapture, Profile, load_report_profile
from profiler.report.model import ProfileMeta, StackProfile
from profiler.report.options import LoadOptions


def profile_meta(profile: Profile, header: dict[str, Any]) -> ProfileMeta:
    """What the capture was (its command or target, and the event), for titles and exports."""
    target = header.get("target") or {}
    command = target.get("command") or []
    if command:
        what = " ".join(str(c) for c in command)
    elif target.get("system_wide"):
        what = "system-wide"
    elif target.get("pids") or target.get("tids"):
        ids = target.get("pids") or target.get("tids") or []
        what = "pid " + ",".join(str(p) for p in ids)
    else:
        what = " ".join(str(c) for c in header.get("cmdline") or []) or "capture"
    return ProfileMeta(
        title=f"{what} — {profile.event}", command=what, event=profile.event,
        total_samples=profile.total_samples, total_period=profile.total_period,
        has_callchains=profile.has_callchains, thread_names=profile.last_comms(),
    )


def load_stacks(options: LoadOptions, warn: Callable[[str], None], locations: bool = False) -> StackProfile:
    """The stacks of the capture's event under ``options``; the reporter's warnings go to
    ``warn`` (also before a ReportError: no samples, or none left after the filters).
    ``locations``: give each stack its addresses and mappings too (see :mod:`.model`)."""
    opened = OpenedCapture(options.input)
    profile = load_report_profile(options, opened, event=options.filters.event, keep_cpu=False)
    for message in profile.warnings:
        warn(message)
    if profile.recorded_samples == 0:
        raise ReportError(f"{options.input} has no samples of event '{profile.event}': nothing to draw.")
    if profile.total_samples == 0:
        raise ReportError(f"no samples match the filters; the capture has {profile.recorded_samples} "
                          f"samples of '{profile.event}'.")
    if not profile.has_callchains:
        warn("the capture has no call chains (record with -g): the flame graph is one level deep.")
    return StackProfile(profile_meta(profile, opened.reader.header), profile.stack_samples(locations))
