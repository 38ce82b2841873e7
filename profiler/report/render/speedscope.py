"""speedscope export (https://www.speedscope.app/file-format-schema.json).

The file holds one frame table shared by all profiles and one ``"sampled"`` profile per
thread or per process. A sampled profile is a list of stacks (frame indices, root first) with
one weight each. Without a timeline each distinct stack appears once with its summed weight;
with a timeline (samples in time order) each sample appears once, in order, so speedscope's
"Time Order" view shows the run as it happened.

Units: period weights of ``cpu-clock``/``task-clock`` are nanoseconds; other periods (event
counts) and sample counts are ``"none"``, the schema's unit for plain numbers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal, TextIO

from profiler.dataclass import dataclass
from profiler.report.render import utf8
from profiler import __version__
from profiler.report.model import (
    Frame,
    ProfileMeta,
    StackSet,
    StackSample,
    Timeline,
    Weight,
    period_is_nanoseconds,
)

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"

ProfilePer = Literal["thread", "process"]
GroupKey = tuple[int, ...]


@dataclass(frozen=True)
class SpeedscopeOptions:
    """How the export is cut and weighted.

    weight: ``"period"`` (time for clock events) or ``"samples"``.
    per: one profile per ``"thread"`` (pid, tid) or per ``"process"`` (pid).
    name: the file's name shown by speedscope; ``None`` uses the capture's title.
    """

    weight: Weight = "period"
    per: ProfilePer = "thread"
    name: str | None = None
    thread_names: tuple[tuple[int, str], ...] = ()  # (tid, its name at its last sample: after exec)


def speedscope_unit(weight: Weight, event: str) -> str:
    """The schema's ValueUnit for ``weight`` of ``event``."""
    return "nanoseconds" if weight == "period" and period_is_nanoseconds(event) else "none"


def group_key(stack: StackSample, per: ProfilePer) -> GroupKey:
    """Which profile ``stack`` belongs to."""
    return (stack.pid, stack.tid) if per == "thread" else (stack.pid,)


def _frame_key(frame: Frame) -> tuple[str, str, str]:
    return (frame.name, frame.dso, frame.kind)


class _FrameTable:
    """speedscope's shared frames, indexed in order of first use."""

    def __init__(self) -> None:
        self.index: dict[tuple[str, str, str], int] = {}
        self.entries: list[dict[str, object]] = []

    def indices(self, frames: Sequence[Frame]) -> list[int]:
        out = []
        for frame in frames:
            key = _frame_key(frame)
            idx = self.index.get(key)
            if idx is None:
                idx = self.index[key] = len(self.entries)
                entry: dict[str, object] = {"name": frame.name}
                if frame.dso:
                    entry["file"] = frame.dso
                self.entries.append(entry)
            out.append(idx)
        return out

    def add_sources(self, stacks: Iterable[StackSample]) -> None:
        """Where DWARF gave a frame's source file, ``file`` is that file (instead of the
        DSO) and ``line`` the line its function starts at (not for inlined functions)."""
        done: set[int] = set()
        for stack in stacks:
            sources = stack.frame_sources()
            if sources is None:
                continue
            for frame, source in zip(stack.frames, sources):
                idx = self.index.get(_frame_key(frame))
                if idx is None or idx in done or source.file is None:
                    continue
                done.add(idx)
                self.entries[idx]["file"] = source.file
                if source.function_line is not None:
                    self.entries[idx]["line"] = source.function_line


def _group_name(key: GroupKey, stacks: Sequence[StackSample], weight: Weight,
                names: dict[int, str]) -> str:
    """``comm (pid P, tid T)`` or ``comm (pid P)``: a thread's name at its last sample (the
    command it exec'd, not the one it was forked as); a process is named after its main
    thread (tid == pid) when sampled, else after its heaviest command name."""
    if len(key) == 2:
        return f"{names.get(key[1], stacks[0].comm)} (pid {key[0]}, tid {key[1]})"
    if key[0] in names:
        comm = names[key[0]]
    else:
        by_comm: dict[str, int] = {}
        for s in stacks:
            by_comm[s.comm] = by_comm.get(s.comm, 0) + s.weight(weight)
        comm = min(by_comm, key=lambda c: (-by_comm[c], c))
    return f"{comm} (pid {key[0]})"


def _aggregated_samples(
    stacks: Sequence[StackSample], weight: Weight
) -> list[tuple[tuple[Frame, ...], int]]:
    """One (frames, weight) per distinct stack of a group, sorted by frame names."""
    merged: dict[tuple[Frame, ...], int] = {}
    for stack in stacks:
        w = stack.weight(weight)
        if w > 0:
            merged[stack.frames] = merged.get(stack.frames, 0) + w
    return sorted(merged.items(), key=lambda item: [_frame_key(f) for f in item[0]])


def _timeline_samples(
    stacks: Sequence[StackSample], timeline: Timeline, weight: Weight, per: ProfilePer
) -> dict[GroupKey, list[tuple[tuple[Frame, ...], int]]]:
    """Per group, one (frames, weight) per sample in time order."""
    out: dict[GroupKey, list[tuple[tuple[Frame, ...], int]]] = {}
    for index, period in zip(timeline.stack.tolist(), timeline.period.tolist()):
        stack = stacks[index]
        w = period if weight == "period" else 1
        if w > 0:
            out.setdefault(group_key(stack, per), []).append((stack.frames, w))
    return out


def build_speedscope(
    stacks: Sequence[StackSample],
    meta: ProfileMeta,
    options: SpeedscopeOptions = SpeedscopeOptions(),
    timeline: Timeline | None = None,
) -> dict[str, Any]:
    """The speedscope document as plain JSON-ready data.

    ``timeline``, when given, lists every sample in time order (see
    :class:`~profiler.report.model.Timeline`); otherwise each distinct stack is one weighted
    sample.
    """
    groups: dict[GroupKey, list[StackSample]] = {}
    for stack in stacks:
        groups.setdefault(group_key(stack, options.per), []).append(stack)
    if timeline is not None:
        ordered = _timeline_samples(stacks, timeline, options.weight, options.per)
    else:
        ordered = {key: _aggregated_samples(members, options.weight) for key, members in groups.items()}
    table = _FrameTable()
    unit = speedscope_unit(options.weight, meta.event)
    profiles: list[dict[str, object]] = []
    totals: list[int] = []
    for key in sorted(ordered):
        samples = ordered[key]
        if not samples:
            continue
        weights = [w for _, w in samples]
        totals.append(sum(weights))
        profiles.append(
            {
                "type": "sampled",
                "name": _group_name(key, groups[key], options.weight, dict(options.thread_names)),
                "unit": unit,
                "startValue": 0,
                "endValue": totals[-1],
                "samples": [table.indices(frames) for frames, _ in samples],
                "weights": weights,
            }
        )
    table.add_sources(stacks)
    heaviest = max(range(len(totals)), key=lambda i: (totals[i], -i), default=0)
    return {
        "$schema": SCHEMA_URL,
        "shared": {"frames": table.entries},
        "profiles": profiles,
        "name": options.name if options.name is not None else meta.title,
        "activeProfileIndex": heaviest,
        "exporter": f"profiler {__version__}",
    }


def render_speedscope(document: dict[str, Any], stream: TextIO) -> None:
    """Write a speedscope document to ``stream`` as compact JSON and a newline."""
    stream.write(utf8.json_text(json.dumps(document, separators=(",", ":"), ensure_ascii=True)))
    stream.write("\n")


def write(profile: StackSet, stream: TextIO, options: SpeedscopeOptions = SpeedscopeOptions()) -> None:
    """The renderer protocol: build the speedscope document and write it to ``stream``
    (sample by sample when the profile carries its timeline)."""
    render_speedscope(build_speedscope(profile.stacks, profile.meta, options, profile.timeline), stream)
