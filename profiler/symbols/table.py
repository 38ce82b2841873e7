"""Sorted symbol tables with vectorised address lookup.

A :class:`SymbolTable` maps an address (an ELF virtual address, a kernel address, a JIT
address) to ``(symbol, offset)``. It is built once from *candidates* — parallel arrays of
start, size, name offset into one string blob, binding rank and a per-symbol limit — and
then queried with :meth:`SymbolTable.lookup_many` (numpy ``searchsorted``) or the scalar
:meth:`SymbolTable.lookup`. Names stay as bytes in the blob and are decoded only for the
symbols actually asked for.

Rules applied by :meth:`SymbolTable.build` (the same for every symbol source):

* **Aliases** (several symbols at one address) collapse to one entry, named as perf names
  it (``choose_best_symbol`` in perf's symbol.c), so per-symbol counts agree with perf
  report: a sized symbol over a zero-size one, then the lowest *rank* (for ELF:
  ``STB_GLOBAL`` 0, ``STB_LOCAL`` 1, ``STB_WEAK`` 2 — non-weak over weak, then global —
  anything else 3), then fewer leading underscores, then the longest name, then the first
  in table order. The entry's size is the largest size in the group.
* **Zero-size symbols nested in a sized symbol** (assembler labels inside a function)
  are dropped: the enclosing symbol is the better answer for those addresses.
* **Zero-size symbols** cover up to the next symbol's start, but never past their
  *limit* (for ELF: the end of the symbol's section), like perf's end fix-up.
* **Overlapping sized symbols**: an address past the end of the last symbol starting at
  or before it is given to the symbol reaching furthest among those starting at or
  before it (the latest of them on a tie), if that one covers it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.errors import FormatError

U64 = np.dtype("<u8")
U64_MAX = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
PACKED_VERSION = 1

RANK_GLOBAL = 0
RANK_LOCAL = 1
RANK_WEAK = 2
RANK_OTHER = 3

UIntArray = npt.NDArray[np.uint64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SymbolCandidates:
    """Unsorted input to :meth:`SymbolTable.build`: one row per candidate symbol.

    ``name_off[i]`` is the offset of a NUL-terminated name in ``strtab``; ``rank[i]``
    orders aliases (lower wins); ``limit[i]`` caps a zero-size symbol's coverage
    (``U64_MAX`` for "up to the next symbol").
    """

    starts: UIntArray
    sizes: UIntArray
    name_off: IntArray
    strtab: bytes
    rank: npt.NDArray[np.uint8]
    limit: UIntArray

    def __len__(self) -> int:
        return int(self.starts.shape[0])

    @classmethod
    def from_names(
        cls,
        starts: Sequence[int] | UIntArray,
        sizes: Sequence[int] | UIntArray,
        names: Sequence[str | bytes],
        limits: Sequence[int] | UIntArray | None = None,
        ranks: Sequence[int] | npt.NDArray[np.uint8] | None = None,
    ) -> SymbolCandidates:
        """Candidates from Python lists (kallsyms, perf maps, tests); rank 0 by default."""
        raw = [n.encode("utf-8", "surrogateescape") if isinstance(n, str) else n for n in names]
        strtab, offsets = _join_names(raw)
        count = len(raw)
        lim = np.full(count, U64_MAX, dtype=U64) if limits is None else _u64(limits)
        return cls(
            starts=_u64(starts),
            sizes=_u64(sizes),
            name_off=offsets,
            strtab=strtab,
            rank=np.zeros(count, dtype=np.uint8) if ranks is None else np.asarray(ranks, dtype=np.uint8),
            limit=lim,
        )

    @staticmethod
    def concat(parts: Sequence[SymbolCandidates]) -> SymbolCandidates:
        """One candidate set from several, each keeping its own names."""
        offsets: list[IntArray] = []
        blobs: list[bytes] = []
        base = 0
        for part in parts:
            offsets.append(part.name_off + base)
            blobs.append(part.strtab)
            base += len(part.strtab)
        return SymbolCandidates(
            starts=_cat_u64([p.starts for p in parts]),
            sizes=_cat_u64([p.sizes for p in parts]),
            name_off=np.concatenate(offsets) if offsets else np.zeros(0, np.int64),
            strtab=b"".join(blobs),
            rank=np.concatenate([p.rank for p in parts]) if parts else np.zeros(0, np.uint8),
            limit=_cat_u64([p.limit for p in parts]),
        )


class SymbolTable:
    """Non-overlapping-ish sorted symbols: ``starts[i] <= addr < ends[i]`` names ``addr``.

    Construct with :meth:`build` (from candidates), :meth:`from_symbols` (from Python
    lists), :meth:`from_packed` (from :meth:`to_packed` output) or :meth:`empty`.
    """

    __slots__ = ("_starts", "_ends", "_cover", "_name_off", "_strtab", "_names")

    def __init__(self, starts: UIntArray, ends: UIntArray, name_off: IntArray, strtab: bytes) -> None:
        """Wrap already-resolved arrays (sorted unique ``starts``); use the builders."""
        self._starts = starts
        self._ends = ends
        self._name_off = name_off
        self._strtab = strtab
        self._cover = _furthest_reaching(ends)
        self._names: dict[int, str] = {}
        for arr in (starts, ends, name_off):
            arr.setflags(write=False)

    # --- construction -------------------------------------------------------------

    @classmethod
    def empty(cls) -> SymbolTable:
        return cls(np.zeros(0, U64), np.zeros(0, U64), np.zeros(0, np.int64), b"")

    @classmethod
    def build(cls, cand: SymbolCandidates) -> SymbolTable:
        """Sort, collapse aliases, drop nested labels and fix zero-size ends."""
        if len(cand) == 0:
            return cls.empty()
        order = np.argsort(cand.starts, kind="stable")
        starts = cand.starts[order]
        winners, sizes, limits = _collapse_aliases(cand, order, starts)
        starts = cand.starts[winners]
        name_off = cand.name_off[winners]
        nested = _nested_labels(starts, sizes)
        if nested.any():
            live = ~nested
            starts, sizes, limits, name_off = starts[live], sizes[live], limits[live], name_off[live]
        ends = _resolve_ends(starts, sizes, limits)
        return cls(starts, ends, name_off.astype(np.int64, copy=False), cand.strtab)

    @classmethod
    def from_symbols(
        cls,
        starts: Sequence[int] | UIntArray,
        sizes: Sequence[int] | UIntArray,
        names: Sequence[str | bytes],
        limits: Sequence[int] | UIntArray | None = None,
        ranks: Sequence[int] | npt.NDArray[np.uint8] | None = None,
    ) -> SymbolTable:
        """Build from Python lists; zero sizes cover up to the next start (or limit)."""
        return cls.build(SymbolCandidates.from_names(starts, sizes, names, limits, ranks))

    # --- queries ------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self._starts.shape[0])

    def __repr__(self) -> str:
        return f"<SymbolTable {len(self)} symbols>"

    @property
    def starts(self) -> UIntArray:
        """Read-only sorted start addresses."""
        return self._starts

    @property
    def ends(self) -> UIntArray:
        """Read-only exclusive end addresses (after the zero-size fix-up)."""
        return self._ends

    def raw_name(self, idx: int) -> bytes:
        """The symbol's name as stored (mangled, undecoded)."""
        off = int(self._name_off[idx])
        end = self._strtab.find(b"\0", off)
        return self._strtab[off : len(self._strtab) if end < 0 else end]

    def name(self, idx: int) -> str:
        """The (mangled) name of symbol ``idx``, decoded once and cached."""
        idx = int(idx)
        cached = self._names.get(idx)
        if cached is None:
            cached = self.raw_name(idx).decode("utf-8", "backslashreplace")
            self._names[idx] = cached
        return cached

    def lookup_many(self, vaddrs: npt.ArrayLike) -> tuple[IntArray, UIntArray]:
        """Vectorised lookup: symbol indices (``-1`` for none) and offsets (0 for none)."""
        addrs = np.asarray(vaddrs)
        if addrs.dtype != U64:
            addrs = addrs.astype(np.uint64)
        if len(self) == 0:
            return np.full(addrs.shape, -1, np.int64), np.zeros(addrs.shape, U64)
        idx = np.searchsorted(self._starts, addrs, side="right").astype(np.int64) - 1
        safe = np.maximum(idx, 0)
        hit = (idx >= 0) & (addrs < self._ends[safe])
        outer = self._cover[safe]
        use_outer = (idx >= 0) & ~hit & (addrs < self._ends[outer])
        idx = np.where(hit, idx, np.where(use_outer, outer, -1))
        found = idx >= 0
        offsets = np.where(found, addrs - self._starts[np.maximum(idx, 0)], np.uint64(0))
        return idx, offsets.astype(U64, copy=False)

    def lookup_index(self, vaddr: int) -> tuple[int, int]:
        """Scalar lookup: ``(index, offset)``, index ``-1`` when nothing covers ``vaddr``."""
        idx, off = self.lookup_many(np.array([vaddr & 0xFFFF_FFFF_FFFF_FFFF], dtype=U64))
        return int(idx[0]), int(off[0])

    def lookup(self, vaddr: int) -> tuple[str, int] | None:
        """``(name, offset)`` of the symbol covering ``vaddr``, or ``None``."""
        idx, off = self.lookup_index(vaddr)
        return None if idx < 0 else (self.name(idx), off)

    def shifted(self, delta: int) -> SymbolTable:
        """The same symbols moved by ``delta`` (modulo 2**64)."""
        d = np.uint64(delta & 0xFFFF_FFFF_FFFF_FFFF)
        with np.errstate(over="ignore"):
            return SymbolTable(self._starts + d, self._ends + d, self._name_off.copy(), self._strtab)

    # --- serialisation ------------------------------------------------------------

    def to_packed(self, indices: Iterable[int] | None = None) -> dict[str, Any]:
        """Plain data for msgpack: ``starts``/``sizes`` as little-endian u64 bytes,
        ``names`` as one ``\\0``-joined blob. ``indices`` packs only those symbols
        (their coverage is kept exactly, as ``size = end - start``)."""
        sel = np.arange(len(self)) if indices is None else np.unique(np.fromiter(indices, np.int64))
        starts = self._starts[sel]
        sizes = self._ends[sel] - starts
        names = b"\0".join(self.raw_name(int(i)) for i in sel)
        return {
            "version": PACKED_VERSION,
            "count": int(sel.shape[0]),
            "starts": starts.astype(U64).tobytes(),
            "sizes": sizes.astype(U64).tobytes(),
            "names": names,
        }

    @classmethod
    def from_packed(cls, packed: Mapping[str, Any]) -> SymbolTable:
        """Inverse of :meth:`to_packed`; damaged data raises :class:`FormatError`."""
        try:
            count = int(packed["count"])
            if int(packed["version"]) != PACKED_VERSION:
                raise FormatError(f"packed symbol table version {packed['version']} is not supported")
            raw = [packed[k] for k in ("starts", "sizes", "names")]
            if not all(isinstance(v, (bytes, bytearray)) for v in raw):  # bytes(10**9) would allocate
                raise FormatError("packed symbol table is damaged (a column is not bytes)")
            starts = np.frombuffer(bytes(raw[0]), dtype=U64).copy()
            sizes = np.frombuffer(bytes(raw[1]), dtype=U64)
            blob = bytes(raw[2])
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise FormatError(f"packed symbol table is damaged ({exc})") from exc
        name_off = _split_offsets(blob, count)
        if starts.shape[0] != count or sizes.shape[0] != count or name_off is None:
            raise FormatError("packed symbol table is damaged (counts disagree)")
        if count and np.any(starts[1:] <= starts[:-1]):
            raise FormatError("packed symbol table is damaged (addresses not sorted)")
        with np.errstate(over="ignore"):
            ends = starts + sizes
        return cls(starts, ends, name_off, blob)


# --- build helpers --------------------------------------------------------------------


def _u64(values: Sequence[int] | UIntArray) -> UIntArray:
    if isinstance(values, np.ndarray):
        return values.astype(U64, copy=False)
    return np.array([v & 0xFFFF_FFFF_FFFF_FFFF for v in values], dtype=U64)


def _cat_u64(parts: list[UIntArray]) -> UIntArray:
    return np.concatenate(parts).astype(U64, copy=False) if parts else np.zeros(0, U64)


def _join_names(raw: Sequence[bytes]) -> tuple[bytes, IntArray]:
    lengths = np.fromiter((len(n) + 1 for n in raw), dtype=np.int64, count=len(raw))
    offsets = np.zeros(len(raw), np.int64)
    if len(raw) > 1:
        np.cumsum(lengths[:-1], out=offsets[1:])
    return b"".join(n + b"\0" for n in raw), offsets


def _split_offsets(blob: bytes, count: int) -> IntArray | None:
    """Start offsets of ``count`` names in a ``\\0``-joined blob, or None if it disagrees."""
    if count == 0:
        return np.zeros(0, np.int64) if not blob else None
    nul = np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == 0)
    if nul.shape[0] != count - 1:
        return None
    offsets = np.empty(count, np.int64)
    offsets[0] = 0
    offsets[1:] = nul + 1
    return offsets


def _collapse_aliases(
    cand: SymbolCandidates, order: IntArray, starts: UIntArray
) -> tuple[IntArray, UIntArray, UIntArray]:
    """Pick one symbol per start address; returns (indices into cand, sizes, limits).

    ``order`` sorts ``cand`` by start (stable: table order within an address); the groups of
    several aliases are resolved together by :func:`_best_aliases`.
    """
    first = np.empty(starts.shape[0], dtype=np.bool_)
    first[0] = True
    np.not_equal(starts[1:], starts[:-1], out=first[1:])
    group_start = np.flatnonzero(first)
    sizes = np.maximum.reduceat(cand.sizes[order], group_start)
    limits = np.maximum.reduceat(cand.limit[order], group_start)
    winners = order[group_start].copy()
    group_len = np.diff(np.append(group_start, first.shape[0]))
    several = np.flatnonzero(group_len > 1)
    if len(several):
        winners[several] = _best_aliases(cand, order, group_start[several], group_len[several])
    return winners, sizes, limits


def _best_aliases(cand: SymbolCandidates, order: IntArray, lo: IntArray, length: IntArray) -> IntArray:
    """perf's choice among the symbols at each address (the rows ``order[lo:lo + length]`` of
    each group): sized, lowest rank, fewest leading underscores, longest name, first in table
    order; for all groups at once (a Python ``min`` per group cost 6 ms a report with libc)."""
    member = np.arange(int(length.sum()), dtype=np.int64)
    group = np.repeat(np.arange(len(lo), dtype=np.int64), length)
    within = member - np.repeat(np.cumsum(length) - length, length)
    pos = order[np.repeat(lo, length) + within]
    text = np.frombuffer(cand.strtab, dtype=np.uint8)
    nul = np.flatnonzero(text == 0)
    off = cand.name_off[pos].astype(np.int64)
    after = np.searchsorted(nul, off)
    end = np.full(len(off), len(text), dtype=np.int64)
    if len(nul):  # a name without its NUL runs to the table's end
        end = np.where(after < len(nul), nul[np.minimum(after, len(nul) - 1)], end)
    name_len = np.maximum(end - off, 0)
    underscores = np.zeros(len(pos), dtype=np.int64)
    going = name_len > 0
    while going.any():
        at = np.flatnonzero(going)
        going[at] = text[off[at] + underscores[at]] == ord("_")
        underscores[at[going[at]]] += 1
        going &= underscores < name_len
    keys = (within, -name_len, underscores, cand.rank[pos].astype(np.int64), (cand.sizes[pos] == 0), group)
    chosen = np.lexsort(keys)
    firsts = chosen[np.r_[True, group[chosen][1:] != group[chosen][:-1]]]
    out: IntArray = pos[firsts]
    return out


def _nested_labels(starts: UIntArray, sizes: UIntArray) -> npt.NDArray[np.bool_]:
    """Zero-size symbols lying strictly inside an earlier sized symbol."""
    if starts.shape[0] < 2:
        return np.zeros(starts.shape[0], np.bool_)
    with np.errstate(over="ignore"):
        sized_end = np.where(sizes > 0, starts + sizes, np.uint64(0))
    reach = np.maximum.accumulate(sized_end)
    nested = np.zeros(starts.shape[0], np.bool_)
    nested[1:] = (sizes[1:] == 0) & (starts[1:] < reach[:-1])
    return nested


def _resolve_ends(starts: UIntArray, sizes: UIntArray, limits: UIntArray) -> UIntArray:
    next_start = np.empty_like(starts)
    next_start[:-1] = starts[1:]
    next_start[-1] = U64_MAX
    with np.errstate(over="ignore"):
        sized = starts + sizes
    open_end = np.minimum(next_start, limits)
    open_end = np.maximum(open_end, starts)
    return np.where(sizes > 0, sized, open_end).astype(U64, copy=False)


def _furthest_reaching(ends: UIntArray) -> IntArray:
    """For each i, the index j <= i whose end is the largest among 0..i."""
    if ends.shape[0] == 0:
        return np.zeros(0, np.int64)
    run = np.maximum.accumulate(ends)
    pos = np.where(ends == run, np.arange(ends.shape[0], dtype=np.int64), 0)
    return np.maximum.accumulate(pos)
