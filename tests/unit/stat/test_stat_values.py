"""Counting-mode arithmetic without privileges: ``struct read_format`` as read(2) returns it,
multiplexing scale, sums, and perf's run-to-run statistics."""

from __future__ import annotations

import math
import statistics
import struct

import pytest

from profiler.format import records as R
from profiler.stat.counters import READ_FORMAT, OpenGroup, read_group
from profiler.stat.values import Reading, RunningStats, mean_stats, readings_from, total

ENA, RUN, ID = R.PERF_FORMAT_TOTAL_TIME_ENABLED, R.PERF_FORMAT_TOTAL_TIME_RUNNING, R.PERF_FORMAT_ID


def test_single_read_format_layout() -> None:
    # { u64 value; u64 time_enabled; u64 time_running; u64 id; } (perf_event_open(2), read_format)
    buf = struct.pack("=4Q", 1234, 1000, 500, 77)
    values = R.decode_read_format(buf, ENA | RUN | ID)
    assert (values.time_enabled, values.time_running) == (1000, 500)
    assert values.values == ((1234, 77, None),)
    assert R.read_format_size(ENA | RUN | ID) == len(buf)
    [(ident, reading)] = readings_from(values)
    assert ident == 77 and reading == Reading(1234, 1000, 500)


def test_group_read_format_layout() -> None:
    # { u64 nr; u64 time_enabled; u64 time_running; { u64 value; u64 id; } values[nr]; }
    fmt = ENA | RUN | ID | R.PERF_FORMAT_GROUP
    buf = struct.pack("=7Q", 2, 900, 300, 10, 5, 20, 6)
    values = R.decode_read_format(buf, fmt)
    assert values.values == ((10, 5, None), (20, 6, None))
    assert R.read_format_size(fmt, 2) == len(buf)
    assert [r for _, r in readings_from(values)] == [Reading(10, 900, 300), Reading(20, 900, 300)]


def test_lost_field_and_no_times() -> None:
    fmt = ID | R.PERF_FORMAT_LOST
    values = R.decode_read_format(struct.pack("=3Q", 5, 9, 2), fmt)
    assert values.values == ((5, 9, 2),) and values.time_enabled is None
    assert R.read_format_size(fmt) == 24


def test_short_read_is_a_decode_error() -> None:
    with pytest.raises(R.RecordDecodeError):
        R.decode_read_format(struct.pack("=2Q", 5, 9), ENA | RUN | ID)
    # a group whose nr claims more counters than the buffer holds is refused before looping
    with pytest.raises(R.RecordDecodeError):
        R.decode_read_format(struct.pack("=4Q", 1 << 40, 1, 1, 1), ENA | RUN | ID | R.PERF_FORMAT_GROUP)


def test_read_group_matches_members_by_kernel_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel lists a group's values in its own order; ids put them back in ours."""
    import profiler.stat.counters as counters

    fmt = READ_FORMAT | R.PERF_FORMAT_GROUP
    payload = struct.pack("=7Q", 2, 100, 100, 222, 12, 111, 11)
    monkeypatch.setattr(counters.os, "read", lambda fd, size: payload[:size])
    og = OpenGroup(group=0, target=0, fds=[3, 4], ids=[11, 12], read_format=fmt)
    assert read_group(og) == [Reading(111, 100, 100), Reading(222, 100, 100)]


@pytest.mark.parametrize(
    ("reading", "scaled", "pct"),
    [
        (Reading(100, 1000, 1000), 100.0, 100.0),
        (Reading(100, 1000, 250), 400.0, 25.0),  # multiplexed: value * enabled / running
        (Reading(0, 1000, 0), 0.0, 0.0),  # never ran: not counted
        (Reading(0, 0, 0), 0.0, 100.0),
    ],
)
def test_scaling(reading: Reading, scaled: float, pct: float) -> None:
    assert reading.scaled() == scaled
    assert reading.running_pct == pct
    assert reading.counted == (reading.running > 0)


def test_sum_then_scale_and_delta() -> None:
    a, b = Reading(100, 1000, 500), Reading(300, 1000, 1000)
    s = total([a, b])
    assert s == Reading(400, 2000, 1500)
    assert s.scaled() == pytest.approx(400 * 2000 / 1500)
    assert s - a == b


def test_running_stats_is_perf_stderr_of_the_mean() -> None:
    xs = [10.0, 12.0, 11.0, 15.0]
    st = mean_stats(xs)
    assert st.mean == pytest.approx(statistics.mean(xs))
    assert st.stderr == pytest.approx(statistics.stdev(xs) / math.sqrt(len(xs)))
    assert st.rel_pct == pytest.approx(100 * st.stderr / st.mean)
    assert RunningStats().stderr == 0.0 and mean_stats([5.0]).stderr == 0.0
    assert mean_stats([0.0, 0.0]).rel_pct == 0.0


def test_group_member_the_kernel_rejects_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """EINVAL for a member that opens alone: the group is the problem, and the sentence says so."""
    import errno

    import profiler.stat.counters as counters
    from profiler.errors import EventError
    from profiler.record.events import parse_event_groups
    from profiler.stat.counters import CounterSet, Target

    def fake_open(attr: object, pid: int, cpu: int, group_fd: int = -1, flags: int = 0, *, event_name: str = "") -> int:
        if group_fd >= 0 and event_name == "page-faults":
            error = EventError(f"the kernel rejected the event '{event_name}'.")
            error.errno = errno.EINVAL
            raise error
        return 1000 + group_fd if group_fd >= 0 else 999

    monkeypatch.setattr(counters.perf_event, "perf_event_open", fake_open)
    monkeypatch.setattr(counters.perf_event, "event_id", lambda fd: fd)
    monkeypatch.setattr(counters.os, "close", lambda fd: None)
    cs = CounterSet(parse_event_groups(["{task-clock,page-faults}"]), [Target(0, -1)])
    with pytest.raises(EventError, match=r"^the events of group '\{task-clock,page-faults\}' cannot be "
                                         r"scheduled together: the kernel rejected 'page-faults'"):
        cs.open()
