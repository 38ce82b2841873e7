"""``profiler flamegraph``: one self-contained HTML file, opens anywhere, offline."""

from __future__ import annotations

from typing import Any, cast

import click

from profiler.commands._common import warn
from profiler.commands._output import open_output
from profiler.commands._profile_opts import load_options, profile_options
from profiler.report.render.flamegraph import DEFAULT_MIN_WIDTH


@click.command("flamegraph")
@profile_options
@click.option("-o", "--output", default="flamegraph.html", show_default=True,
              help="HTML file to write ('-' for stdout).")
@click.option("--weight", type=click.Choice(["samples", "period"]), default=None,
              help="Size frames by sample count or by period (default: samples; period, that is time, "
                   "for the offcpu and wall events).")
@click.option("--min-width", type=float, default=DEFAULT_MIN_WIDTH, show_default=True,
              help="Leave out of the file frames narrower than this fraction of the total (their weight "
                   "stays in the parent; the page says how many; with --diff, of the drawn side's total). "
                   "Default: keep the whole tree (up to a million frames).")
@click.option("--group-by", type=click.Choice(["comm", "pid", "tid", "none"]), default="comm", show_default=True,
              help="What the first level of the graph is.")
@click.option("--title", help="Title of the page (default: the command and event).")
@click.option("--diff", nargs=2, metavar="BASE NEW", default=None,
              help="A differential flame graph of two captures: NEW's shape, each frame coloured by its "
                   "change in share from BASE (red: more, blue: less); -i is not used.")
@click.option("--negate", is_flag=True, help="With --diff: draw BASE's shape instead (same colours).")
def command(output: str, weight: str | None, min_width: float, group_by: str, title: str | None,
            diff: tuple[str, str] | None, negate: bool, **kwargs: Any) -> None:
    """Write a self-contained interactive HTML flame graph (no network access needed)."""
    from profiler.errors import UsageError
    from profiler.report.model import Weight, default_weight

    if diff is not None:
        _diff(diff, output, weight or "samples", min_width, group_by, title, negate, kwargs)
        return
    if negate:
        raise UsageError("--negate needs --diff BASE NEW.")
    from profiler.report.render import flamegraph
    from profiler.report.pipeline import load_stacks

    profile = load_stacks(load_options(kwargs), warn, locations=True)  # source lines for the tooltips
    opts = flamegraph.FlameGraphOptions(weight=cast(Weight, weight or default_weight(profile.meta.event)),
                                        min_width=min_width, group_by=cast(flamegraph.GroupBy, group_by),
                                        title=title)
    with open_output(output) as stream:
        flamegraph.write(profile, stream, opts)
    if output != "-":
        click.echo(f"wrote {output} ({profile.meta.total_samples} samples of '{profile.meta.event}')", err=True)


def _diff(paths: tuple[str, str], output: str, weight: str, min_width: float, group_by: str, title: str | None,
          negate: bool, kwargs: dict[str, Any]) -> None:
    from profiler.report.model import Weight
    from profiler.report.pair import load_stack_pair
    from profiler.report.render import diffgraph
    from profiler.report.render.flamegraph import GroupBy

    base, new = paths
    pair = load_stack_pair(load_options(kwargs), base, new, warn, locations=True, what="draw")  # source lines
    opts = diffgraph.DiffGraphOptions(weight=cast(Weight, weight), negate=negate,
                                      group_by=cast(GroupBy, group_by), title=title, min_width=min_width)
    with open_output(output) as stream:
        tree = diffgraph.write(diffgraph.DiffInput(pair.base, pair.new, base, new), stream, opts)
    if output != "-":
        click.echo(f"wrote {output} (BASE {tree.base_total_samples} samples, NEW {tree.new_total_samples} samples "
                   f"of '{pair.event}')", err=True)
