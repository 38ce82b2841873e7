"""``profiler flamegraph``: one self-contained HTML file, opens anywhere, offline."""

from __future__ import annotations

from typing import Any, cast

import click

from profiler.commands._common import warn
from profiler.commands._output import open_output
from profiler.commands._profile_opts import load_options, profile_options
from profiler.errors import ReportError
from profiler.report.render.flamegraph import DEFAULT_MIN_WIDTH


def profile_meta(profile: Any, header: dict[str, Any]) -> Any:
    """The renderers' ProfileMeta for a loaded profile."""
    from profiler.report.model import ProfileMeta

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
        has_callchains=profile.has_callchains,
    )


def load_stacks(kwargs: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    """(profile, meta, stack samples) for the shared options, with warnings printed once."""
    from profiler.report.load import load_profile, open_capture

    options = load_options(kwargs)
    opened = open_capture(options.input)
    profile = load_profile(options, None, event=options.filters.event, opened=opened)
    for message in profile.warnings:
        warn(message)
    if profile.recorded_samples == 0:
        raise ReportError(f"{options.input} has no samples of event '{profile.event}': nothing to draw.")
    if profile.total_samples == 0:
        raise ReportError(f"no samples match the filters; the capture has {profile.recorded_samples} "
                          f"samples of '{profile.event}'.")
    if not profile.has_callchains:
        warn("the capture has no call chains (record with -g): the flame graph is one level deep.")
    return profile, profile_meta(profile, opened[0].header), profile.stack_samples()


@click.command("flamegraph")
@profile_options
@click.option("-o", "--output", default="flamegraph.html", show_default=True,
              help="HTML file to write ('-' for stdout).")
@click.option("--weight", type=click.Choice(["samples", "period"]), default="samples", show_default=True,
              help="Size frames by sample count or by period.")
@click.option("--min-width", type=float, default=DEFAULT_MIN_WIDTH, show_default=True,
              help="Leave out of the file frames narrower than this fraction of the total (their weight "
                   "stays in the parent; the page says how many). Default: keep the whole tree.")
@click.option("--group-by", type=click.Choice(["comm", "pid", "tid", "none"]), default="comm", show_default=True,
              help="What the first level of the graph is.")
@click.option("--title", help="Title of the page (default: the command and event).")
def command(output: str, weight: str, min_width: float, group_by: str, title: str | None,
            **kwargs: Any) -> None:
    """Write a self-contained interactive HTML flame graph (no network access needed)."""
    from profiler.report.render.flamegraph import FlameGraphOptions, GroupBy, write_flamegraph
    from profiler.report.model import Weight

    opts = FlameGraphOptions(weight=cast(Weight, weight), min_width=min_width,
                             group_by=cast(GroupBy, group_by), title=title)
    _, meta, stacks = load_stacks(kwargs)
    with open_output(output) as stream:
        write_flamegraph(stacks, meta, stream, opts)
    if output != "-":
        click.echo(f"wrote {output} ({meta.total_samples} samples of '{meta.event}')", err=True)
