"""SymbolTable: alias choice, zero-size fix-up, nested labels, vectorised lookup, packing."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.errors import FormatError
from profiler.symbols.table import (
    RANK_GLOBAL,
    RANK_LOCAL,
    RANK_WEAK,
    U64_MAX,
    SymbolCandidates,
    SymbolTable,
)


def candidates(rows: list[tuple[int, int, str, int]], limit: int = int(U64_MAX)) -> SymbolCandidates:
    """rows of (start, size, name, rank)."""
    base = SymbolCandidates.from_names([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                                       [limit] * len(rows))
    return SymbolCandidates(base.starts, base.sizes, base.name_off, base.strtab,
                            np.array([r[3] for r in rows], np.uint8), base.limit)


def test_sized_symbols_and_gaps() -> None:
    table = SymbolTable.from_symbols([0x1000, 0x1100], [0x10, 0x20], ["a", "b"])
    assert table.lookup(0x1000) == ("a", 0)
    assert table.lookup(0x100F) == ("a", 0xF)
    assert table.lookup(0x1010) is None
    assert table.lookup(0xFFF) is None
    assert table.lookup(0x111F) == ("b", 0x1F)
    assert table.lookup(0x1120) is None


def test_zero_size_covers_up_to_next_start_and_limit() -> None:
    table = SymbolTable.build(candidates([(0x100, 0, "z", 0), (0x180, 8, "n", 0)], limit=0x400))
    assert table.lookup(0x17F) == ("z", 0x7F)
    assert table.lookup(0x180) == ("n", 0)
    capped = SymbolTable.build(candidates([(0x100, 0, "z", 0), (0x180, 8, "n", 0)], limit=0x140))
    assert capped.lookup(0x13F) == ("z", 0x3F)
    assert capped.lookup(0x140) is None


def test_aliases_prefer_global_then_local_then_weak() -> None:
    """perf's choose_best_symbol: non-weak over weak, then global over local."""
    rows = [(0x10, 4, "local_name", RANK_LOCAL), (0x10, 4, "weak_nm", RANK_WEAK), (0x10, 4, "global_x", RANK_GLOBAL)]
    assert SymbolTable.build(candidates(rows)).lookup(0x10) == ("global_x", 0)
    assert SymbolTable.build(candidates(rows[:2])).lookup(0x10) == ("local_name", 0)


def test_aliases_of_equal_rank_prefer_fewer_underscores_then_longest_then_table_order() -> None:
    rows = [(0x10, 4, "__longest_of_all", 0), (0x10, 4, "bbb", 0), (0x10, 4, "ccccc", 0),
            (0x10, 4, "ddddd", 0), (0x20, 4, "x", 0)]
    for perm, want in (([0, 1, 2, 3, 4], "ccccc"), ([3, 1, 0, 2, 4], "ddddd"), ([4, 2, 1, 0, 3], "ccccc")):
        table = SymbolTable.build(candidates([rows[i] for i in perm]))
        assert table.lookup(0x10) == (want, 0)
        assert len(table) == 2


def test_alias_group_prefers_a_sized_symbol_and_keeps_the_largest_size() -> None:
    table = SymbolTable.build(candidates([(0x10, 0, "a", 0), (0x10, 8, "bb", 1), (0x40, 4, "c", 0)]))
    assert table.lookup(0x17) == ("bb", 7)
    assert table.lookup(0x18) is None


def test_zero_size_label_inside_sized_symbol_is_dropped() -> None:
    table = SymbolTable.from_symbols([0x100, 0x108, 0x200], [0x20, 0, 4], ["func", ".label", "next"])
    assert table.lookup(0x110) == ("func", 0x10)
    assert len(table) == 2


def test_overlapping_sized_symbols_fall_back_to_the_enclosing_one() -> None:
    table = SymbolTable.from_symbols([0x100, 0x140], [0x100, 0x10], ["outer", "inner"])
    assert table.lookup(0x145) == ("inner", 5)
    assert table.lookup(0x160) == ("outer", 0x60)
    assert table.lookup(0x200) is None


def test_lookup_many_matches_scalar_lookup() -> None:
    table = SymbolTable.from_symbols([0x1000, 0x1010, 0x2000], [0x10, 0, 0x8], ["a", "b", "c"])
    addrs = np.array([0, 0x1000, 0x100F, 0x1010, 0x1FFF, 0x2000, 0x2008, 2**64 - 1], dtype=np.uint64)
    idx, off = table.lookup_many(addrs)
    for a, i, o in zip(addrs.tolist(), idx.tolist(), off.tolist()):
        hit = table.lookup(a)
        assert (hit is None) == (i < 0)
        if hit is not None:
            assert hit == (table.name(i), o)


def test_kernel_addresses_and_signed_input() -> None:
    top = 0xFFFF_FFFF_8100_0000
    table = SymbolTable.from_symbols([top], [0x40], ["_text"])
    assert table.lookup(top + 3) == ("_text", 3)
    signed = np.array([top + 3], dtype=np.uint64).view(np.int64)
    idx, off = table.lookup_many(signed)
    assert idx.tolist() == [0] and off.tolist() == [3]


def test_empty_table() -> None:
    table = SymbolTable.empty()
    assert len(table) == 0 and table.lookup(5) is None
    idx, off = table.lookup_many(np.arange(3, dtype=np.uint64))
    assert idx.tolist() == [-1, -1, -1] and off.tolist() == [0, 0, 0]


def test_names_are_decoded_lazily_and_undecodable_bytes_survive() -> None:
    table = SymbolTable.from_symbols([1, 2], [1, 1], [b"ok", b"bad\xff"])
    assert table.name(1) == "bad\\xff"
    assert table.raw_name(1) == b"bad\xff"


def test_packed_round_trip_through_msgpack_keeps_coverage() -> None:
    table = SymbolTable.from_symbols([0x10, 0x20, 0x40], [4, 0, 8], ["a", "zero", "c"], [0x100] * 3)
    packed = msgpack.unpackb(msgpack.packb(table.to_packed()), raw=False)
    assert packed["names"] == b"a\0zero\0c"
    again = SymbolTable.from_packed(packed)
    assert again.starts.tolist() == table.starts.tolist()
    assert again.ends.tolist() == table.ends.tolist()
    assert [again.name(i) for i in range(3)] == ["a", "zero", "c"]
    subset = SymbolTable.from_packed(table.to_packed([1]))
    assert subset.lookup(0x3F) == ("zero", 0x1F) and subset.lookup(0x10) is None


@pytest.mark.parametrize(
    "damage",
    [
        {"count": 4},
        {"names": b"a\0b"},
        {"starts": b"\x01" * 7},
        {"version": 99},
        {"starts": np.array([0x20, 0x10, 0x40], "<u8").tobytes()},
    ],
)
def test_damaged_packed_table_raises_format_error(damage: dict[str, object]) -> None:
    packed = SymbolTable.from_symbols([0x10, 0x20, 0x40], [4, 4, 8], ["a", "b", "c"]).to_packed()
    packed.update(damage)
    with pytest.raises(FormatError):
        SymbolTable.from_packed(packed)


def test_shifted_moves_every_symbol() -> None:
    table = SymbolTable.from_symbols([0x10], [4], ["a"]).shifted(0x1000)
    assert table.lookup(0x1012) == ("a", 2) and table.lookup(0x12) is None


def reference_lookup(rows: list[tuple[int, int, str, int]], addr: int) -> tuple[str, int] | None:
    """A slow, obviously-correct model of the documented rules (limit: unbounded)."""
    groups: dict[int, list[tuple[int, int, str, int]]] = {}
    for row in rows:
        groups.setdefault(row[0], []).append(row)
    chosen = []
    for start in sorted(groups):
        members = groups[start]  # in table order: min() keeps the first of equal keys
        best = min(members, key=lambda r: (r[1] == 0, r[3], len(r[2]) - len(r[2].lstrip("_")), -len(r[2].encode())))
        chosen.append((start, max(r[1] for r in members), best[2]))
    kept: list[tuple[int, int, str]] = []
    for start, size, name in chosen:
        if size == 0 and any(s < start < s + z for s, z, _ in kept if z):
            continue
        kept.append((start, size, name))
    spans = []
    for i, (start, size, name) in enumerate(kept):
        end = start + size if size else (kept[i + 1][0] if i + 1 < len(kept) else 2**64 - 1)
        spans.append((start, max(end, start), name))
    last = [s for s in spans if s[0] <= addr]
    if not last:
        return None
    if addr < last[-1][1]:
        return last[-1][2], addr - last[-1][0]
    outer = max(reversed(last), key=lambda s: s[1])  # the latest of those reaching furthest
    return (outer[2], addr - outer[0]) if addr < outer[1] else None


row_strategy = st.tuples(
    st.integers(0, 400),
    st.sampled_from([0, 0, 1, 4, 16, 64]),
    st.text(alphabet="abcz_", min_size=1, max_size=5),
    st.integers(0, 3),
)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(row_strategy, min_size=1, max_size=25), probes=st.lists(st.integers(0, 520), max_size=30))
def test_lookup_agrees_with_reference_model(rows: list[tuple[int, int, str, int]], probes: list[int]) -> None:
    table = SymbolTable.build(candidates(rows))
    idx, off = table.lookup_many(np.array(probes, dtype=np.uint64))
    for addr, i, o in zip(probes, idx.tolist(), off.tolist()):
        expected = reference_lookup(rows, addr)
        got = None if i < 0 else (table.name(i), o)
        assert got == expected


def _best_alias_reference(cand: SymbolCandidates, rows: list[int]) -> int:
    """perf's choice among the symbols at one address, one group at a time (the rule
    table._best_aliases applies to all groups at once)."""
    strtab = cand.strtab

    def key(pos: int) -> tuple[bool, int, int, int]:
        off = int(cand.name_off[pos])
        end = strtab.find(b"\0", off)
        name = strtab[off:len(strtab) if end < 0 else end]
        return (int(cand.sizes[pos]) == 0, int(cand.rank[pos]), len(name) - len(name.lstrip(b"_")), -len(name))

    return min(rows, key=key)  # min keeps the first of equal keys: table order


@pytest.mark.parametrize("seed", range(6))
def test_aliases_are_chosen_as_one_group_at_a_time(seed: int) -> None:
    """Random symbols at a few addresses: sized or not, ranks, leading underscores, names of
    equal length, empty names, and a last name without its NUL."""
    import dataclasses
    import random

    from profiler.symbols import table as symbol_table

    rnd = random.Random(seed)
    for case in range(60):
        n = rnd.randint(1, 60)
        heads = ["", "_", "__", "a", "_a", "__ab", "abc", "_x_y", "___", "ab_"]
        names = [rnd.choice(heads) + rnd.choice(["", "q", "zz"]) for _ in range(n)]
        cand = SymbolCandidates.from_names([rnd.randrange(6) * 16 for _ in range(n)],
                                           [rnd.choice([0, 0, 8, 16]) for _ in range(n)], names,
                                           ranks=[rnd.randrange(3) for _ in range(n)])
        if case % 5 == 0 and len(cand.strtab) > 2:
            cand = dataclasses.replace(cand, strtab=cand.strtab[:-1])
        order = np.argsort(cand.starts, kind="stable")
        starts = cand.starts[order]
        winners, _, _ = symbol_table._collapse_aliases(cand, order, starts)
        lo = np.flatnonzero(np.r_[True, starts[1:] != starts[:-1]])
        length = np.diff(np.append(lo, len(starts)))
        assert winners.tolist() == [_best_alias_reference(cand, order[a:a + k].tolist()) for a, k in zip(lo, length)]
