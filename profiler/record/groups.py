"""Event groups in a recording: which fd leads each event, and leader sampling.

``-e '{a,b}'`` opens ``b`` with ``a``'s fd as ``group_fd`` on the same (task, CPU), so the
kernel schedules them as a unit; both sample. ``-e '{a,b}:S'`` is leader sampling: only ``a``
samples, and each of its samples carries the counts of every member (PERF_SAMPLE_READ with
read_format PERF_FORMAT_GROUP | PERF_FORMAT_ID: ``{ nr; { value; id; } values[nr]; }``);
``b`` counts and never samples (``sample_period`` 0). The reporter turns the difference of a
member's count between two samples of the same leader fd into that member's period at the
leader's sample (see docs/format.md and :mod:`profiler.report.groupread`).
"""

from __future__ import annotations

from collections.abc import Iterable

from profiler.format import abi as R
from profiler.errors import UsageError
from profiler.format.attr import PERF_TYPE_TRACEPOINT, perf_event_attr
from profiler.record.events import EventSpec, parse_event_groups
from profiler.value import Frozen

GROUP_READ_FORMAT = R.PERF_FORMAT_GROUP | R.PERF_FORMAT_ID


class Member(Frozen):
    """One event of the flat -e list and its place in its group."""

    __slots__ = _fields = ("spec", "leader", "sampled", "group_read")

    def __init__(self, spec: EventSpec, leader: int, sampled: bool = True, group_read: bool = False) -> None:
        self.spec = spec
        self.leader = leader  # index (in the flat list) of the group's leader; its own index for a leader
        self.sampled = sampled  # False for the members of a ':S' group: they only count
        self.group_read = group_read  # its group is read into every leader sample (':S')


def members_of(texts: Iterable[str]) -> list[Member]:
    """The -e list flattened in order, every member knowing its leader."""
    out: list[Member] = []
    for group in parse_event_groups(texts):
        leader = len(out)
        for index, spec in enumerate(group.members):
            out.append(Member(spec, leader, sampled=index == 0 or not group.leader_sampling,
                              group_read=group.leader_sampling))
    return out


def configure(attr: perf_event_attr, member: Member) -> None:
    """Adjust a sampling attr for the member's group role (every member of a ':S' group gets
    the same sample_type and read_format, as the kernel reads the group through the leader)."""
    if member.group_read:
        attr.sample_type |= R.PERF_SAMPLE_READ
        attr.read_format = GROUP_READ_FORMAT
    if not member.sampled:
        attr.freq = 0
        attr.sample_period = 0


def member_filters(events: tuple[str, ...], filters: tuple[tuple[int, str], ...],
                   specs: list[Member]) -> list[str | None]:
    """Each event's ``--filter`` (None without one): ``filters`` holds (index of the -e
    argument, filter); a filter applies to every event of its -e argument, which must be
    tracepoints (perf's address filters are not supported)."""
    out: list[str | None] = [None] * len(specs)
    if not filters:
        return out
    wanted = dict(filters)
    start = 0
    for i, text in enumerate(events):
        count = len(members_of((text,)))
        expr = wanted.get(i)
        if expr is not None:
            for k in range(start, min(start + count, len(specs))):
                if specs[k].spec.type != PERF_TYPE_TRACEPOINT:
                    raise UsageError(f"--filter applies to tracepoint events, and {specs[k].spec.name} is not one "
                                     f"(address filters are not supported).")
                out[k] = expr
        start += count
    return out
