"""numpy helpers over integer columns, shared by format/, record/ and report/.

* :func:`distinct` and :func:`ranges`: sorted distinct values, concatenated aranges.
* :func:`dense_ids`, :func:`pair_ids`, :func:`row_ids`: dense ids (0..k-1) of the distinct
  values of one column, of pairs of columns and of rows of several columns.
* :func:`odd_multipliers`: the fixed odd 64-bit numbers that position-aware hashes of
  callchains and rows multiply by.

Importing this module imports numpy: the recorder, which must start fast, never does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

_TABLE_LIMIT = 1 << 24  # key ranges up to this are numbered with a lookup table, not a sort


def distinct(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """The sorted distinct values of a 1-d array: ``np.unique`` without its first-call import
    of ``numpy.ma`` (10-70 ms here), by sort and mask."""
    if len(values) < 2:
        return np.sort(values)
    v = np.sort(values)
    out: npt.NDArray[Any] = v[np.r_[True, v[1:] != v[:-1]]]
    return out


def ranges(starts: I64, lengths: I64) -> I64:
    """Concatenation of arange(s, s + n) for every (s, n): fully vectorised."""
    nonzero = lengths > 0
    s, n = starts[nonzero].astype(np.int64), lengths[nonzero].astype(np.int64)
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    steps = np.ones(total, dtype=np.int64)
    steps[0] = s[0]
    # at each range start, jump from the previous range's last element to this range's start
    steps[np.cumsum(n)[:-1]] = s[1:] - (s[:-1] + n[:-1] - 1)
    return np.cumsum(steps)


def odd_multipliers(seed: int, n: int) -> U64:
    """``n`` fixed pseudo-random odd 64-bit numbers (splitmix64 of ``seed``): ids built from
    hashes must not depend on the run, and numpy.random costs 10 MB and 30 ms to import."""
    z = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: U64 = (z ^ (z >> np.uint64(31))) | np.uint64(1)
    return out


def dense_ids(key: I64) -> I64:
    """Dense ids (0..k-1, in key order) of the distinct values of an integer key.

    A small key range is numbered in O(n) with a presence table; a large one by sorting."""
    n = len(key)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = int(key.min()), int(key.max())
    if hi - lo < min(_TABLE_LIMIT, 8 * n + 65536):  # a table costs 9 bytes per key value: never far above n
        rel = key - lo
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[rel] = True
        rank = np.cumsum(present, dtype=np.int64) - 1
        out: I64 = rank[rel]
        return out
    order = np.argsort(key, kind="stable")
    ks = key[order]
    new = np.ones(n, dtype=bool)
    new[1:] = ks[1:] != ks[:-1]
    ids = np.empty(n, dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids


def pair_ids(a: I64, b: I64) -> I64:
    """Dense ids of the distinct (a, b) pairs of two dense id arrays."""
    span = int(b.max()) + 1 if len(b) else 1
    if len(a) and int(a.max()) < (1 << 62) // span:
        return dense_ids(a * span + b)
    order = np.lexsort((b, a))
    new = np.ones(len(a), dtype=bool)
    new[1:] = (a[order][1:] != a[order][:-1]) | (b[order][1:] != b[order][:-1])
    ids = np.empty(len(a), dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids


def row_ids(columns: list[I64]) -> I64:
    """Ids of the distinct rows of several integer columns (equal rows, equal ids; dense when
    there is more than one column that varies).

    Each column becomes a digit of one mixed-radix integer key: its value minus its minimum
    where its range is small, else its dense id; constant columns are skipped. Only when the
    key would pass 2**62 is it made dense first."""
    n = len(columns[0]) if columns else 0
    key: I64 | None = None
    span = 1
    for col in columns:
        if n == 0:
            break
        lo, hi = int(col.min()), int(col.max())
        if lo == hi:
            continue
        if hi - lo < 8 * n + 65536:
            digit, radix = col.astype(np.int64) - lo, hi - lo + 1
        else:
            digit = dense_ids(col)
            radix = int(digit.max()) + 1
        if key is None:
            key, span = digit, radix
            continue
        if span * radix >= 1 << 62:
            key = dense_ids(key)
            span = int(key.max()) + 1
        key = key * radix + digit
        span *= radix
    if key is None:
        return np.zeros(n, dtype=np.int64)
    return dense_ids(key)
