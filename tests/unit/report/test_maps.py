"""Map snapshots: overlapping mmaps split or replace older maps; vectorised lookups."""

from __future__ import annotations

import numpy as np

from profiler.report.maps import EMPTY, Dso, Map


def spans(snap: object) -> list[tuple[int, int, int, int]]:
    return [(m.start, m.end, m.pgoff, m.dso) for m in snap.maps]  # type: ignore[attr-defined]


def test_overlap_in_the_middle_splits_the_old_map_and_moves_its_pgoff() -> None:
    snap = EMPTY.with_map(Map(0x1000, 0x5000, 0x0, 0)).with_map(Map(0x2000, 0x3000, 0x7000, 1))
    assert spans(snap) == [(0x1000, 0x2000, 0x0, 0), (0x2000, 0x3000, 0x7000, 1),
                           (0x3000, 0x5000, 0x2000, 0)]


def test_overlap_at_either_end_trims_and_full_cover_replaces() -> None:
    base = EMPTY.with_map(Map(0x1000, 0x3000, 0x0, 0))
    assert spans(base.with_map(Map(0x0, 0x2000, 0, 1))) == [(0x0, 0x2000, 0, 1), (0x2000, 0x3000, 0x1000, 0)]
    assert spans(base.with_map(Map(0x2000, 0x4000, 0, 1))) == [(0x1000, 0x2000, 0x0, 0), (0x2000, 0x4000, 0, 1)]
    assert spans(base.with_map(Map(0x0, 0x4000, 0, 2))) == [(0x0, 0x4000, 0, 2)]


def test_snapshots_are_immutable() -> None:
    first = EMPTY.with_map(Map(0x1000, 0x2000, 0, 0))
    first.with_map(Map(0x1000, 0x2000, 0, 1))
    assert spans(first) == [(0x1000, 0x2000, 0, 0)]
    assert len(EMPTY) == 0


def test_lookup_many_matches_scalar_find() -> None:
    snap = EMPTY.with_map(Map(0x1000, 0x2000, 0x100, 0)).with_map(Map(0x4000, 0x6000, 0x3000, 1))
    addrs = np.array([0xFFF, 0x1000, 0x1FFF, 0x2000, 0x4567, 0x6000], dtype=np.uint64)
    dso, off = snap.lookup_many(addrs)
    for a, d, o in zip(addrs.tolist(), dso.tolist(), off.tolist()):
        m = snap.find(a)
        assert d == (-1 if m is None else m.dso)
        if m is not None:
            assert o == m.file_offset(a)


def test_dso_names_like_perf() -> None:
    assert Dso("/usr/lib/x86_64-linux-gnu/libc.so.6").short_name == "libc.so.6"
    assert Dso("[vdso]").short_name == "[vdso]"
    assert Dso("//anon").is_anon and not Dso("/bin/true").is_anon
