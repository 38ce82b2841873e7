"""The offcpu and wall pseudo-events on captures built from a known timeline (docs/offcpu.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from profiler.errors import ReportError
from profiler.report.capture import Capture
from profiler.report.intervals import (
    BLOCKED,
    BLOCKED_IO,
    DEAD,
    RUNNABLE,
    classify,
    close_intervals,
    last_at_or_before,
    next_after,
)
from profiler.report.options import Filters, LoadOptions
from profiler.report.pipeline import load_profile
from profiler.report.profile import Profile
from tests.support.offcpu_factory import COMMS, MAIN, timeline, write_offcpu_capture

def rows(profile: Profile) -> dict[int, tuple[int, str]]:
    out = {}
    for i in range(len(profile.samples)):
        root = int(profile.stack_frame_ids(int(profile.stack[i]))[-1])
        out[int(profile.samples.tid[i])] = (int(profile.samples.period[i]), profile.frame(root).name())
    return out


@pytest.fixture()
def capture_path(tmp_path: Path) -> Path:
    path = tmp_path / "offcpu.prof"
    write_offcpu_capture(path, timeline()[0], COMMS)
    return path


def test_offcpu_rows_are_the_intervals_of_the_model(capture_path: Path) -> None:
    profile = load_profile(LoadOptions(input=str(capture_path)), event="offcpu")
    assert profile.event == "offcpu"
    assert rows(profile) == timeline()[1]
    assert profile.total_period == sum(ns for ns, _ in timeline()[1].values())


def test_offcpu_stacks_are_the_switch_out_stacks(capture_path: Path) -> None:
    profile = load_profile(LoadOptions(input=str(capture_path)), event="offcpu")
    for i in range(len(profile.samples)):
        k = int(profile.stack[i])
        entries = profile.stack_table.addrs[profile.stack_start[k]:profile.stack_start[k + 1]]
        chain = [int(a) for a in entries[:-1]]  # the state frame (address 0) is the root
        assert chain == [0x400100 + 0x100 * (int(profile.samples.tid[i]) - 100), MAIN]


def test_the_capture_offers_the_pseudo_events(capture_path: Path) -> None:
    capture = Capture(str(capture_path))
    assert capture.event_names == ["cpu-clock", "sched:sched_switch", "offcpu", "wall"]
    assert capture.is_pseudo(2) and not capture.is_pseudo(1)


def test_wall_adds_on_cpu_samples_under_running(capture_path: Path) -> None:
    profile = load_profile(LoadOptions(input=str(capture_path)), event="wall")
    by_state: dict[str, int] = {}
    for i in range(len(profile.samples)):
        root = int(profile.stack_frame_ids(int(profile.stack[i]))[-1])
        name = profile.frame(root).name()
        by_state[name] = by_state.get(name, 0) + int(profile.samples.period[i])
    assert by_state["[running]"] == 4 * 250_000
    assert by_state["[blocked]"] == 500_000 + 50_000 + 20_000
    assert by_state["[runnable]"] == 100_000
    assert list(profile.samples.time) == sorted(profile.samples.time)


def test_entry_and_time_filters_select_intervals(capture_path: Path) -> None:
    opts = LoadOptions(input=str(capture_path), filters=Filters(tids=(101, 102)))
    assert set(rows(load_profile(opts, event="offcpu"))) == {101, 102}
    opts = LoadOptions(input=str(capture_path), filters=Filters(comms=("disk",)))
    assert set(rows(load_profile(opts, event="offcpu"))) == {103}


def test_a_capture_without_sched_switch_has_no_offcpu_event(tmp_path: Path) -> None:
    from tests.support.capture_factory import write_small_capture

    path = tmp_path / "plain.prof"
    write_small_capture(path)
    with pytest.raises(ReportError, match="no event 'offcpu'"):
        load_profile(LoadOptions(input=str(path)), event="offcpu")


def test_classify_reads_prev_state_as_perf_prints_it() -> None:
    states = np.array([0, 0x100, 0x1, 0x2, 0x80, 0x4, 0x10, 0x20, 0x101], dtype=np.int64)
    assert classify(states).tolist() == [RUNNABLE, RUNNABLE, BLOCKED, BLOCKED_IO, BLOCKED, BLOCKED, DEAD, DEAD,
                                         RUNNABLE]


def test_close_intervals_takes_the_first_evidence_strictly_after() -> None:
    out_tid = np.array([1, 1, 2, 3])
    out_time = np.array([10, 50, 10, 10])
    run_tid = np.array([1, 1, 1, 2, 2])
    run_time = np.array([10, 40, 60, 5, 30])  # tid 1 at 10 is the switch-out's own moment: not an end
    end, still_open = close_intervals(out_tid, out_time, run_tid, run_time, np.array([3]), np.array([70]), 100)
    assert end.tolist() == [40, 60, 30, 70]
    assert still_open.tolist() == [False, False, False, False]
    end, still_open = close_intervals(np.array([4]), np.array([10]), run_tid, run_time, np.zeros(0), np.zeros(0), 100)
    assert end.tolist() == [100] and still_open.tolist() == [True]



@pytest.mark.parametrize("threads", [6, 90_000])  # ranks sorted as u16, and as int64 past 65 536
def test_both_ways_of_finding_the_next_evidence_agree(threads: int) -> None:
    rng = np.random.default_rng(24)
    n = max(3000, 3 * threads)
    e_tid, e_time = rng.integers(-1, threads, n), rng.integers(0, 5000, n)
    q_tid, q_time = rng.integers(-1, threads + 1, 1000), rng.integers(0, 5000, 1000)
    packed = next_after(q_tid, q_time, e_tid, e_time)
    assert np.array_equal(packed, next_after(q_tid, q_time, e_tid, e_time, packed=False))
    for t, when, got in zip(q_tid.tolist(), q_time.tolist(), packed.tolist()):
        later = e_time[(e_tid == t) & (e_time > when)]
        assert got == (int(later.min()) if len(later) else -1)


def test_last_at_or_before_finds_the_latest_evidence_of_the_thread() -> None:
    rng = np.random.default_rng(7)
    e_tid, e_time = rng.integers(0, 5, 2000), rng.integers(0, 3000, 2000)
    q_tid, q_time = rng.integers(0, 6, 500), rng.integers(0, 3000, 500)
    got = last_at_or_before(q_tid, q_time, e_tid, e_time)
    for t, when, i in zip(q_tid.tolist(), q_time.tolist(), got.tolist()):
        earlier = e_time[(e_tid == t) & (e_time <= when)]
        if not len(earlier):
            assert i == -1
        else:
            assert e_tid[i] == t and e_time[i] == earlier.max()
