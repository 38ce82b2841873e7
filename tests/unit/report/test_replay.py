"""Replay of hand-built record lists: fork copies maps, threads share them, exec resets
them, and a sample resolves against the maps of its own time."""

from __future__ import annotations

import numpy as np
from tests.support.report_capture import comm, fork, mmap2

from profiler.format import records as R
from profiler.format.decode.columns import OtherRecord
from profiler.report.replay import ReplayResult, replay

A, B = "/bin/a", "/lib/b.so"


def run(events: list[R.Record | tuple[int, int]]) -> tuple[ReplayResult, list[tuple[int, int]]]:
    """``events`` mixes records and samples given as (pid, tid); returns the replay and the
    samples in order."""
    others: list[OtherRecord] = []
    before: list[int] = []
    samples: list[tuple[int, int]] = []
    for t, ev in enumerate(events):
        if isinstance(ev, tuple):
            samples.append(ev)
        else:
            others.append(OtherRecord(t, t, 0, ev))
            before.append(len(samples))
    pid = np.array([p for p, _ in samples], dtype=np.int64)
    tid = np.array([t for _, t in samples], dtype=np.int64)
    return replay(others, np.array(before, dtype=np.int64), pid, tid), samples


def dso_at(res: ReplayResult, sample: int, addr: int) -> str | None:
    m = res.snapshots[int(res.sample_gen[sample])].find(addr)
    return None if m is None else res.dsos[m.dso].path


def test_fork_copies_the_parents_maps_and_later_changes_stay_apart() -> None:
    res, _ = run([
        comm(10, 10, "parent", 0), mmap2(10, 0x1000, 0x1000, 0, A, 0),
        fork(11, 10, 11, 10, 0),
        mmap2(10, 0x8000, 0x1000, 0, B, 0),   # parent only
        mmap2(11, 0x9000, 0x1000, 0, B, 0),   # child only
        (11, 11), (10, 10),
    ])
    assert dso_at(res, 0, 0x1100) == A          # inherited
    assert dso_at(res, 0, 0x8100) is None       # the parent's later map
    assert dso_at(res, 0, 0x9100) == B
    assert dso_at(res, 1, 0x8100) == B
    assert dso_at(res, 1, 0x9100) is None
    assert res.comm_names[res.sample_comm[0]] == "parent"


def test_threads_share_their_process_maps_and_take_the_parent_threads_name() -> None:
    res, _ = run([
        comm(10, 10, "main", 0), mmap2(10, 0x1000, 0x1000, 0, A, 0),
        fork(10, 10, 12, 10, 0),                # a thread
        mmap2(10, 0x8000, 0x1000, 0, B, 0),     # mapped after the thread started
        comm(10, 12, "worker", 0),
        (10, 12), (10, 10),
    ])
    assert dso_at(res, 0, 0x8100) == B
    assert dso_at(res, 0, 0x1100) == A
    assert [res.comm_names[c] for c in res.sample_comm] == ["worker", "main"]


def test_exec_resets_the_maps_and_renames() -> None:
    res, _ = run([
        comm(10, 10, "sh", 0), mmap2(10, 0x1000, 0x1000, 0, A, 0),
        (10, 10),
        comm(10, 10, "ls", 0, exec=True),
        (10, 10),
        mmap2(10, 0x2000, 0x1000, 0, B, 0),
        (10, 10),
    ])
    assert dso_at(res, 0, 0x1100) == A
    assert dso_at(res, 1, 0x1100) is None
    assert dso_at(res, 2, 0x2100) == B and dso_at(res, 2, 0x1100) is None
    assert [res.comm_names[c] for c in res.sample_comm] == ["sh", "ls", "ls"]


def test_samples_before_and_after_a_remap_resolve_differently() -> None:
    res, _ = run([
        mmap2(10, 0x1000, 0x2000, 0, A, 0),
        (10, 10),
        mmap2(10, 0x1000, 0x1000, 0, B, 0),     # replaces the first half
        (10, 10),
    ])
    assert dso_at(res, 0, 0x1100) == A
    assert dso_at(res, 1, 0x1100) == B
    assert dso_at(res, 1, 0x2100) == A          # the untouched half


def test_unknown_threads_get_perfs_placeholder_and_kernel_maps_are_global() -> None:
    kmap = R.Mmap(-1, 0, 0xFFFFFFFF81000000, 0x1000000, 0xFFFFFFFF81000000, "[kernel.kallsyms]_text")
    res, _ = run([kmap, (77, 78)])
    assert res.comm_names[res.sample_comm[0]] == ":78"
    assert res.state.kernel_maps == [(0xFFFFFFFF81000000, 0xFFFFFFFF82000000, "[kernel.kallsyms]_text")]
    assert len(res.snapshots[int(res.sample_gen[0])]) == 0


def test_data_mappings_are_ignored_and_lost_records_counted() -> None:
    data_map = mmap2(10, 0x5000, 0x1000, 0, "/data", 0)
    data_map.misc |= R.PERF_RECORD_MISC_MMAP_DATA
    res, _ = run([data_map, R.Lost(1, 5), R.LostSamples(3), (10, 10)])
    assert dso_at(res, 0, 0x5100) is None
    assert res.state.lost == 5 and res.state.lost_samples == 3
