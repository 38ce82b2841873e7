"""Group-by over integer columns with numpy: dense ids of distinct values and of pairs."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


_TABLE_LIMIT = 1 << 24  # key ranges up to this are grouped with a lookup table, not a sort


def dense_ids(key: I64) -> I64:
    """Dense ids (0..k-1, in key order) of the distinct values of an integer key.

    A small key range is grouped in O(n) with a presence table; a large one by sorting."""
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
