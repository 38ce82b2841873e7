"""Renderers over plain data: folded stacks, the HTML flame graph, speedscope JSON.

Every renderer takes the reporter's :class:`StackSample` list (and :class:`ProfileMeta`) and
a text stream; only the CLI opens files.
"""

from profiler.report.render.flamegraph import (
    DEFAULT_MIN_WIDTH,
    FlameGraphOptions,
    FlameTree,
    build_flame_tree,
    render_flamegraph,
    write_flamegraph,
)
from profiler.report.render.folded import FoldedOptions, fold_stacks, render_folded, write_folded
from profiler.report.render.model import Frame, ProfileMeta, StackSample, TimelineSample
from profiler.report.render.speedscope import (
    SpeedscopeOptions,
    build_speedscope,
    render_speedscope,
    write_speedscope,
)

__all__ = [
    "DEFAULT_MIN_WIDTH",
    "FlameGraphOptions",
    "FlameTree",
    "FoldedOptions",
    "Frame",
    "ProfileMeta",
    "SpeedscopeOptions",
    "StackSample",
    "TimelineSample",
    "build_flame_tree",
    "build_speedscope",
    "fold_stacks",
    "render_flamegraph",
    "render_folded",
    "render_speedscope",
    "write_flamegraph",
    "write_folded",
    "write_speedscope",
]
