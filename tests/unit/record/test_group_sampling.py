"""Group sampling without privileges: the -e list's group roles and attrs, and how a member's
periods come from the counts read into its leader's samples."""

from __future__ import annotations

from profiler.format import records as R
from profiler.format.attr import new_attr
from profiler.format.events import Event
from profiler.record.groups import GROUP_READ_FORMAT, configure, members_of
from profiler.report.groupread import counter_keys, growth, is_counting_member


def test_members_know_their_leader_and_role() -> None:
    members = members_of(["{cpu-clock,page-faults,cs}:S,task-clock", "{cpu-clock,cs}"])
    assert [(m.spec.name, m.leader, m.sampled, m.group_read) for m in members] == [
        ("cpu-clock", 0, True, True), ("page-faults", 0, False, True), ("cs", 0, False, True),
        ("task-clock", 3, True, False),
        ("cpu-clock", 4, True, False), ("cs", 4, True, False),  # a plain group: both sample
    ]


def test_configure_leader_sampling_attrs() -> None:
    leader, member, lone = members_of(["{cpu-clock,page-faults}:S,cs"])
    attrs = []
    for m in (leader, member, lone):
        attr = new_attr(freq=1, sample_period=4000, sample_type=R.PERF_SAMPLE_IP)
        configure(attr, m)
        attrs.append(attr)
    assert attrs[0].sample_type & R.PERF_SAMPLE_READ and attrs[0].read_format == GROUP_READ_FORMAT
    assert attrs[0].freq == 1 and attrs[0].sample_period == 4000
    assert attrs[1].read_format == GROUP_READ_FORMAT and attrs[1].sample_period == 0 and attrs[1].freq == 0
    assert not attrs[2].sample_type & R.PERF_SAMPLE_READ and attrs[2].read_format == 0


def _event(index: int, **attr: int) -> Event:
    return Event(index, f"e{index}", attr, (index,), R.SampleLayout.from_attr(attr, "little"))


def test_counting_member_is_recognised_from_its_attr() -> None:
    read = R.PERF_SAMPLE_READ
    assert is_counting_member(_event(1, sample_type=read, read_format=GROUP_READ_FORMAT))
    assert not is_counting_member(_event(0, sample_type=read, read_format=GROUP_READ_FORMAT, freq=1,
                                         sample_period=4000))
    assert not is_counting_member(_event(2, sample_type=R.PERF_SAMPLE_IP))


def _growth(readings: list[tuple[int, int, int | None] | None], per_thread: bool) -> list[int]:
    """growth() over (counter id, tid, value) readings in time order (None: no group read)."""
    import numpy as np

    from profiler.format.decode.columns import ReadColumns

    n = len(readings)
    present = [r is not None and r[2] is not None for r in readings]
    ids = [r[0] if r is not None else 0 for r in readings]
    tids = [r[1] if r is not None else 0 for r in readings]
    values = [r[2] or 0 if r is not None else 0 for r in readings]
    counts = [1 if r is not None else 0 for r in readings]
    start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    kept = [i for i in range(n) if counts[i]]
    read = ReadColumns(np.zeros(n, np.uint64), np.zeros(n, np.uint64), start,
                       np.array([values[i] for i in kept], np.uint64), np.array([ids[i] for i in kept], np.uint64),
                       np.zeros(len(kept), np.uint64))
    s = type("S", (), {"read": read, "tid": np.array(tids, np.int32), "__len__": lambda self: n})()
    keys = counter_keys(s, per_thread)  # type: ignore[arg-type]
    time = np.arange(n, dtype=np.uint64)
    return growth(keys, time, np.array(values, np.uint64), np.array(present)).tolist()  # type: ignore[no-any-return]


def test_growth_per_counter_and_per_thread() -> None:
    # (counter id, tid, value): two counters (one per CPU) interleaved in time
    readings = [(10, 1, 5), (11, 1, 100), (10, 1, 9), None, (11, 1, 130), (10, 1, None), (10, 1, 9)]
    assert _growth(readings, per_thread=False) == [5, 100, 4, 0, 30, 0, 0]
    # inherited counters read each thread's own count: the same id, two threads
    inherited = [(10, 1, 5), (10, 2, 7), (10, 1, 8), (10, 2, 7)]
    assert _growth(inherited, per_thread=True) == [5, 7, 3, 0]
    assert _growth(inherited, per_thread=False) == [5, 2, 1, 0]  # what ignoring threads would give
