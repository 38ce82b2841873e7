"""``--sort cgroup_id``: each sample's thread's cgroup namespace from NAMESPACES records,
replayed per thread in time order with FORK inheritance, in perf's words (``dev/0xinode``)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from tests.support.report_capture import comm, fork, kallsyms_text, kernel_sample, sid, write_capture

from profiler.format import abi
from profiler.format import records as R
from profiler.report.aggregate import aggregate
from profiler.report.callgraph import PerfReport
from profiler.report.options import LoadOptions
from profiler.report.pipeline import load_profile
from profiler.report.render.table import write

HOST, BOX = (4, 0xEFFFFFFB), (4, 0xF0000151)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))


def namespaces(pid: int, tid: int, cgroup: tuple[int, int], time: int, count: int = abi.NR_NAMESPACES) -> R.Namespaces:
    links = tuple((4, 0xEFFFFFF0 + i) for i in range(count))
    if count > abi.CGROUP_NS_INDEX:
        links = links[:abi.CGROUP_NS_INDEX] + (cgroup,) + links[abi.CGROUP_NS_INDEX + 1:]
    return R.Namespaces(pid, tid, links, sample_id=sid(pid, tid, time))


def samples(pid: int, tid: int, start: int, n: int) -> list[R.Record]:
    return [kernel_sample(("k_leaf_a", "k_root"), start + i, pid=pid, tid=tid) for i in range(n)]


def capture(tmp_path: Path) -> Path:
    recs: list[R.Record] = [
        comm(100, 100, "sh", 1), namespaces(100, 100, HOST, 1),
        *samples(100, 100, 10, 3),
        namespaces(100, 100, BOX, 20),            # unshare -C: the thread itself moves
        *samples(100, 100, 30, 5),
        fork(200, 100, 200, 100, 40),             # no NAMESPACES of its own: its parent's
        *samples(200, 200, 50, 2),
        comm(300, 300, "old", 1), namespaces(300, 300, HOST, 1, count=3),  # too short for a cgroup entry
        *samples(300, 300, 60, 1),
        comm(400, 400, "bare", 1), *samples(400, 400, 70, 1),              # never named
    ]
    return write_capture(tmp_path / "ns.prof", recs, kallsyms=kallsyms_text())


def test_rows_split_by_the_cgroup_namespace_of_the_sample_s_time(tmp_path: Path) -> None:
    profile = load_profile(LoadOptions(input=str(capture(tmp_path)), cgroup_ns=True))
    flat = aggregate(profile, ("cgroup_id", "pid"), children=False)
    got = {(r.cgroup_id, r.pid): r.self_samples for r in flat.rows}
    assert got == {("4/0xeffffffb", 100): 3, ("4/0xf0000151", 100): 5, ("4/0xf0000151", 200): 2,
                   ("0/0x0", 300): 1, ("0/0x0", 400): 1}


def test_the_column_is_perf_s(tmp_path: Path) -> None:
    profile = load_profile(LoadOptions(input=str(capture(tmp_path)), cgroup_ns=True))
    out = io.StringIO()
    write(PerfReport(aggregate(profile, ("cgroup_id",), children=False)), out)
    text = out.getvalue()
    assert "cgroup id (dev/inode)" in text
    assert "  4/0xf0000151  " in text.replace("\n", "  ")


def test_a_capture_without_namespaces_shows_perf_s_zero(tmp_path: Path) -> None:
    path = write_capture(tmp_path / "plain.prof", [comm(100, 100, "sh", 1), *samples(100, 100, 10, 2)],
                         kallsyms=kallsyms_text())
    flat = aggregate(load_profile(LoadOptions(input=str(path), cgroup_ns=True)), ("cgroup_id",), children=False)
    assert [(r.cgroup_id, r.self_samples) for r in flat.rows] == [("0/0x0", 2)]


def test_a_hostile_namespaces_record_is_skipped_with_a_warning(tmp_path: Path) -> None:
    import struct

    huge = R.UnknownRecord(abi.PERF_RECORD_NAMESPACES, struct.pack("<IIQ", 100, 100, 1 << 60))  # 2^60 entries
    recs: list[R.Record] = [comm(100, 100, "sh", 1), namespaces(100, 100, HOST, 2), huge, *samples(100, 100, 10, 2),
                            R.Namespaces(100, 100, (), sample_id=sid(100, 100, 20)),  # no entries at all
                            *samples(100, 100, 30, 1)]
    path = write_capture(tmp_path / "hostile.prof", recs, kallsyms=kallsyms_text())
    profile = load_profile(LoadOptions(input=str(path), cgroup_ns=True))
    assert any("damaged" in w for w in profile.warnings), profile.warnings
    flat = aggregate(profile, ("cgroup_id",), children=False)
    assert {r.cgroup_id: r.self_samples for r in flat.rows} == {"4/0xeffffffb": 2, "0/0x0": 1}
