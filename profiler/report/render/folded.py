"""Folded stacks: the interchange format of Brendan Gregg's FlameGraph scripts.

One line per distinct stack, frames joined by ``;`` from the outermost caller to the leaf,
then a space and the weight::

    shares;_start;__libc_start_main;main;spin 1234

The first frame is the thread's command name (optionally ``comm-PID`` or ``comm-PID/TID``).
Kernel frames end in ``_[k]`` and JIT frames in ``_[j]``, the annotations flamegraph.pl
colours by; Python functions (CPython's perf support, docs/python.md) end in ``_[p]``, which
flamegraph.pl leaves as part of the name. Building the lines (:func:`fold_stacks`) is separate from writing them
(:func:`render_folded`), so tests assert on data and the CLI picks the stream.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TextIO

from profiler.dataclass import dataclass
from profiler.report.model import Frame, StackSet, StackSample, Weight
from profiler.names import UNKNOWN

KIND_SUFFIX: dict[str, str] = {"kernel": "_[k]", "jit": "_[j]", "python": "_[p]"}


@dataclass(frozen=True)
class FoldedOptions:
    """How stacks are folded into lines.

    weight: ``"samples"`` counts samples; ``"period"`` sums their periods.
    include_pid: first frame is ``comm-PID``.
    include_tid: first frame is ``comm-PID/TID`` (implies the PID).
    include_comm: put the command name first at all (``False`` starts at the outermost frame).
    unknown_as_dso: write an unresolved frame as its bracketed DSO (``[libc.so.6]``)
        instead of ``[unknown]`` when the DSO is known.
    annotate_kind: append ``_[k]`` to kernel frames, ``_[j]`` to JIT frames and ``_[p]`` to
        Python functions.
    """

    weight: Weight = "samples"
    include_pid: bool = False
    include_tid: bool = False
    include_comm: bool = True
    unknown_as_dso: bool = False
    annotate_kind: bool = True


# ";" separates frames; control characters and Unicode line/paragraph separators could split
# the line for some reader (Python's str.splitlines breaks at \x1c-\x1e and \x85 too).
_FOLDED_UNSAFE = {c: " " for c in (*range(0x20), 0x7F, 0x85, 0x2028, 0x2029)} | {ord(";"): ":"}


def clean_name(name: str) -> str:
    """Make ``name`` safe inside one folded frame: ``;`` becomes ``:`` and control or
    line-separator characters become spaces."""
    return name.translate(_FOLDED_UNSAFE)


def frame_label(frame: Frame, options: FoldedOptions) -> str:
    """The folded text of one frame."""
    if frame.is_unknown:
        name = UNKNOWN
        if options.unknown_as_dso and frame.dso and frame.dso != UNKNOWN:
            name = frame.dso if frame.dso.startswith("[") else f"[{frame.dso}]"
    else:
        name = frame.name
    label = clean_name(name)
    if options.annotate_kind:
        label += KIND_SUFFIX.get(frame.kind, "")
    return label


def thread_label(stack: StackSample, options: FoldedOptions) -> str:
    """The first frame: the command name (spaces become ``_``, as stackcollapse-perf does),
    with the pid and tid when asked for."""
    comm = clean_name(stack.comm).replace(" ", "_") or UNKNOWN
    if options.include_tid:
        return f"{comm}-{stack.pid}/{stack.tid}"
    if options.include_pid:
        return f"{comm}-{stack.pid}"
    return comm


def fold_stack(stack: StackSample, options: FoldedOptions) -> str:
    """The folded frames of one stack (without the weight)."""
    parts = [thread_label(stack, options)] if options.include_comm else []
    parts.extend(frame_label(frame, options) for frame in stack.frames)
    return ";".join(parts)


def fold_stacks(
    stacks: Iterable[StackSample], options: FoldedOptions = FoldedOptions()
) -> list[tuple[str, int]]:
    """Fold ``stacks`` into ``(line, weight)`` pairs sorted by line.

    Stacks that fold to the same text (same comm, different tids; names that differ only in
    ``;`` versus ``:``) are merged by adding their weights. Lines of weight 0 are dropped,
    and so is a stack with no frames at all when the command name is left out.
    """
    merged: dict[str, int] = {}
    for stack in stacks:
        weight = stack.weight(options.weight)
        if weight <= 0:
            continue
        line = fold_stack(stack, options)
        if not line:
            continue
        merged[line] = merged.get(line, 0) + weight
    return sorted(merged.items())


def diff_folded(base: Iterable[StackSample], new: Iterable[StackSample],
                options: FoldedOptions = FoldedOptions()) -> list[tuple[str, int, int]]:
    """The two-column form flamegraph.pl's difffolded.pl writes: ``(line, base weight, new
    weight)`` for every line either side folds to (0 on the side without it), sorted by line."""
    before, after = dict(fold_stacks(base, options)), dict(fold_stacks(new, options))
    return [(line, before.get(line, 0), after.get(line, 0)) for line in sorted(before.keys() | after.keys())]


def render_diff_folded(lines: Iterable[tuple[str, int, int]], stream: TextIO) -> None:
    """Write ``(line, base, new)`` triples to ``stream``, one ``frames BASE NEW`` per line."""
    stream.writelines(f"{line} {base} {new}\n" for line, base, new in lines)


def render_folded(lines: Iterable[tuple[str, int]], stream: TextIO) -> None:
    """Write folded ``(line, weight)`` pairs to ``stream``, one ``frames WEIGHT`` per line."""
    stream.writelines(f"{line} {weight}\n" for line, weight in lines)


def write(profile: StackSet, stream: TextIO, options: FoldedOptions = FoldedOptions()) -> None:
    """The renderer protocol: fold the profile's stacks and write them to ``stream``."""
    render_folded(fold_stacks(profile.stacks, options), stream)
