"""Leader sampling (``record -e '{a,b}:S'``): the members' counts, read into every sample of
the leader, become the members' own samples at the leader's sample points.

A sample of the leader carries ``{ nr; { value; id; } values[nr]; }`` (PERF_SAMPLE_READ with
PERF_FORMAT_GROUP | PERF_FORMAT_ID), the columnar decoder's ``read`` column. A member's period
at a sample is the growth of its value since the previous sample of the same counter; the
first sample of a counter gets its whole value, as in perf. A counter is one fd (the leader's
id, the first entry of the group read), and with ``inherit`` also one thread, because an
inherited counter reads its own task's counts (under its parent's id). So
``report --event page-faults`` shows where the page faults happened at the precision of the
leader's sampling.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from profiler.format import records as R
from profiler.format.decode.columns import CaptureData, SampleColumns
from profiler.format.events import Event

U64 = npt.NDArray[np.uint64]
Bools = npt.NDArray[np.bool_]


def is_counting_member(ev: Event) -> bool:
    """A member of a ':S' group: it reads into the leader's samples and never samples itself."""
    attr = ev.attr
    return bool(
        int(attr.get("sample_type", 0)) & R.PERF_SAMPLE_READ
        and int(attr.get("read_format", 0)) & R.PERF_FORMAT_GROUP
        and not int(attr.get("freq", 0))
        and not int(attr.get("sample_period", 0))
    )


def reads_group(ev: Event) -> bool:
    """Its samples carry the group's counts (the leader and members of a ':S' group)."""
    attr = ev.attr
    return bool(int(attr.get("sample_type", 0)) & R.PERF_SAMPLE_READ
                and int(attr.get("read_format", 0)) & R.PERF_FORMAT_GROUP)


def group_of(data: CaptureData, index: int) -> list[Event]:
    """The ':S' group of event ``index``: its leader then its counting members, in the
    header's order ([event] alone when it is in no such group)."""
    events = data.events.events
    ev = events[index]
    leader = leader_of(data, ev) if is_counting_member(ev) else ev
    if leader is None or not reads_group(leader):
        return [ev]
    out = [leader]
    for other in events[leader.index + 1:]:
        if not is_counting_member(other):
            break
        out.append(other)
    return out


def leader_of(data: CaptureData, member: Event) -> Event | None:
    """The sampling event whose group this member belongs to: the nearest sampling event
    before it in the header (a group's members follow their leader)."""
    for ev in reversed(data.events.events[: member.index]):
        if not is_counting_member(ev):
            return ev
    return None


def member_values(s: SampleColumns, ids: list[int]) -> tuple[U64, Bools]:
    """(value, present) per sample: the group-read value of the counter whose id is in
    ``ids``; present is False where the sample read no such counter."""
    n = len(s)
    value, present = np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=bool)
    rd = s.read
    if rd is None or not len(rd.value):
        return value, present
    owner = np.repeat(np.arange(n), np.diff(rd.start))
    hit = np.isin(rd.id, np.asarray(ids, dtype=np.uint64))
    value[owner[hit]] = rd.value[hit]
    present[owner[hit]] = True
    return value, present


def counter_keys(s: SampleColumns, per_thread: bool) -> U64:
    """Per sample, the counter that produced it: the leader's id (the group read's first
    entry), combined with the thread for inherited counters."""
    rd = s.read
    if rd is None or not len(rd.id):
        return np.zeros(len(s), dtype=np.uint64)
    counts = np.diff(rd.start)
    first = np.where(counts > 0, rd.start[:-1], 0)
    lead = np.where(counts > 0, rd.id[np.minimum(first, len(rd.id) - 1)], 0).astype(np.uint64)
    if not per_thread:
        return lead
    return lead * np.uint64(0x9E3779B97F4A7C15) ^ s.tid.astype(np.uint64)


def growth(keys: U64, time: U64, value: U64, present: Bools) -> U64:
    """Each reading's growth since the previous reading of the same counter, in time order;
    a counter's first reading gives its whole value; readings that are not present give 0
    and do not move the counter's last value; a value that went down gives 0."""
    out = np.zeros(len(keys), dtype=np.uint64)
    idx = np.flatnonzero(present)
    if not len(idx):
        return out
    order = idx[np.lexsort((time[idx], keys[idx]))]
    v = value[order].astype(np.int64)
    k = keys[order]
    prev = np.empty_like(v)
    prev[0] = 0
    prev[1:] = np.where(k[1:] == k[:-1], v[:-1], 0)
    out[order] = np.maximum(v - prev, 0).astype(np.uint64)
    return out


def member_samples(data: CaptureData, member: Event) -> tuple[Bools, SampleColumns, int]:
    """(mask of the leader's samples, samples whose period is the member's growth, samples of
    the leader that read no value of the member). The leader itself is a member too: its
    periods become the growth of its own count, as perf reports a ':S' group."""
    leader = leader_of(data, member) if is_counting_member(member) else member
    s = data.samples
    if leader is None:
        return np.zeros(len(s), dtype=bool), s, 0
    mask = s.event == leader.index
    value, present = member_values(s, list(member.ids))
    present &= mask
    keys = counter_keys(s, per_thread=bool(int(leader.attr.get("inherit", 0))))
    period = growth(keys, s.time, value, present)
    return mask, replace(s, period=period), int(np.count_nonzero(mask & ~present))
