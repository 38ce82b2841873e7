"""Callchains: the ``PERF_CONTEXT_*`` markers, the split of chains into (owner, address,
context), and the store that gives each distinct chain one id while decoding.

Callchains are deduplicated while decoding: each chain is hashed (two independent 64-bit
position-aware hashes), identical chains share one ``chain_id``, and only the distinct chains
are kept (``ChainTable``). A program has thousands of distinct stacks, not millions, so memory
is ~50 bytes a sample whatever the depth, and the reporter symbolizes each chain once.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt

from profiler.arrays import odd_multipliers, ranges
from profiler.dataclass import dataclass
from profiler.format import records as R
from profiler.format.decode.columns import ChainTable

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]

# Callchain context markers (enum perf_callchain_context) as numpy scalars, for whole-array
# comparisons: every word >= CONTEXT_MAX is a marker, not an address.
CONTEXT_MAX = np.uint64(R.PERF_CONTEXT_MAX)
CONTEXT_KERNEL = np.uint64(R.PERF_CONTEXT_KERNEL)
CONTEXT_USER = np.uint64(R.PERF_CONTEXT_USER)
CONTEXT_HV = np.uint64(R.PERF_CONTEXT_HV)
CONTEXT_GUEST_KERNEL = np.uint64(R.PERF_CONTEXT_GUEST_KERNEL)
CONTEXT_GUEST_USER = np.uint64(R.PERF_CONTEXT_GUEST_USER)


_MODE_CONTEXT = np.full(8, CONTEXT_USER, dtype=np.uint64)
_MODE_CONTEXT[R.PERF_RECORD_MISC_KERNEL] = CONTEXT_KERNEL
_MODE_CONTEXT[R.PERF_RECORD_MISC_HYPERVISOR] = CONTEXT_HV
_MODE_CONTEXT[R.PERF_RECORD_MISC_GUEST_KERNEL] = CONTEXT_GUEST_KERNEL
_MODE_CONTEXT[R.PERF_RECORD_MISC_GUEST_USER] = CONTEXT_GUEST_USER


def cpumode_context(cpumode: npt.NDArray[np.uint16]) -> U64:
    """The ``PERF_CONTEXT_*`` a sample's own ip runs in, from its cpumode."""
    out: U64 = _MODE_CONTEXT[np.asarray(cpumode, dtype=np.int64) & R.PERF_RECORD_MISC_CPUMODE_MASK]
    return out


@dataclass
class CallchainEntries:
    """The addresses of some callchains, markers dropped, leaf first within each chain.

    ``owner[k]`` is the chain (its index in the CSR given to :func:`split_callchains`) address
    k belongs to; ``context[k]`` the ``PERF_CONTEXT_*`` marker it runs under. Only ``user``
    and ``kernel`` addresses belong to this machine's processes and kernel: a guest's
    (``PERF_CONTEXT_GUEST*``) or the hypervisor's cannot be named from the host's maps and
    symbols, so every reader keeps them out of the host's DSOs (the reporter shows them as
    ``[unknown]`` frames, ``buildids`` does not count them)."""

    owner: I64
    addr: U64
    context: U64

    @property
    def kernel(self) -> npt.NDArray[np.bool_]:
        out: npt.NDArray[np.bool_] = self.context == CONTEXT_KERNEL
        return out

    @property
    def host(self) -> npt.NDArray[np.bool_]:
        """Addresses of this machine's user space or kernel."""
        out: npt.NDArray[np.bool_] = (self.context == CONTEXT_KERNEL) | (self.context == CONTEXT_USER)
        return out


def split_callchains(start: I64, words: U64, cpumode: npt.NDArray[np.uint16]) -> CallchainEntries:
    """Split callchains (CSR: chain i is ``words[start[i]:start[i + 1]]``, as the kernel wrote
    them) at their ``PERF_CONTEXT_*`` markers.

    Each address takes the context of the last marker before it in its chain; addresses before
    any marker take the context of the chain's sample (``cpumode[i]``, see
    :func:`cpumode_context`). The one place callchains are split: the reporter and ``buildids``
    both use it."""
    n = len(start) - 1
    lengths = np.diff(start)
    owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
    is_marker = words >= CONTEXT_MAX
    idx = np.arange(len(words), dtype=np.int64)
    last = np.maximum.accumulate(np.where(is_marker, idx, -1)) if len(words) else idx
    valid = (last >= 0) & (last >= start[:-1][owner])
    context = np.where(valid, words[np.maximum(last, 0)], cpumode_context(cpumode)[owner]).astype(np.uint64)
    keep = ~is_marker
    return CallchainEntries(owner[keep], words[keep].astype(np.uint64), context[keep])


# --- chain deduplication ------------------------------------------------------------------

_MAX_DEPTH = 0x10000  # more entries than any record can hold (size is a u16)


@cache
def _multipliers() -> tuple[U64, U64]:
    """Two tables of odd 64-bit multipliers, one per position in a chain: a chain's hash is
    sum(word[p] * K[p]) mod 2**64. Chains differing in one position never collide (K[p] is odd);
    two independent tables make any other collision a 2**-128 event. Made on first use, not
    at import (~2 ms that a report whose tally runs in the compiled kernel never needs)."""
    return odd_multipliers(0x5EED, _MAX_DEPTH + 1), odd_multipliers(0xB0B5EED, _MAX_DEPTH + 1)


class ChainStore:
    """Assigns one id to each distinct callchain (by a 128-bit hash) and keeps its words.

    The known chains' hashes are kept sorted (by the first hash), so a batch of chains is
    looked up with ``searchsorted`` and its new chains are stored with one gather: no Python
    work per chain, however many chunks add the same chains again."""

    def __init__(self) -> None:
        self.h1 = np.zeros(0, dtype=np.uint64)  # sorted
        self.h2 = np.zeros(0, dtype=np.uint64)  # the second hash of the same chain
        self.id_of = np.zeros(0, dtype=np.int64)
        self.word_parts: list[U64] = [np.zeros(0, dtype=np.uint64)]
        self.length_parts: list[I64] = [np.zeros(1, dtype=np.int64)]  # chain 0: empty
        self.count = 1

    def add(self, w64: U64, first: I64, lengths: I64) -> I32:
        """Chain ids for the chains at word ``first`` of ``lengths`` words.

        The hashes are accumulated one chain position at a time over the chains that long
        (sorted longest first, so they are a prefix): no per-word index array is built."""
        n = len(first)
        out = np.zeros(n, dtype=np.int32)
        nonempty = np.flatnonzero(lengths > 0)
        if not len(nonempty):
            return out
        by_len = nonempty[np.argsort(-lengths[nonempty], kind="stable")]
        f, ln = first[by_len], lengths[by_len]
        longer = np.searchsorted(-ln, -np.arange(int(ln[0])), side="left")  # count with ln > d
        ka, kb = _multipliers()
        h1 = ln.astype(np.uint64) * kb[0]
        h2 = ln.astype(np.uint64) * ka[0]
        for d, c in enumerate(longer.tolist()):
            w = w64[f[:c] + d].astype(np.uint64, copy=False)  # a fresh array (fancy index)
            t = w * kb[d + 1]
            w *= ka[d + 1]
            h1[:c] += w
            h2[:c] += t
        order = np.lexsort((h2, h1))
        a, b = h1[order], h2[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
        group = np.cumsum(new) - 1
        reps = order[new]
        r1, r2 = h1[reps], h2[reps]  # the batch's distinct chains, sorted by (r1, r2)
        cid = self._lookup(r1, r2)
        unknown = np.flatnonzero(cid < 0)
        if len(unknown):
            fresh = np.arange(self.count, self.count + len(unknown), dtype=np.int64)
            self.count += len(unknown)
            cid[unknown] = fresh
            rr = reps[unknown]
            self.length_parts.append(ln[rr].astype(np.int64))
            self.word_parts.append(w64[ranges(f[rr], ln[rr])].astype(np.uint64))
            at = np.searchsorted(self.h1, r1[unknown], side="left")
            self.h1 = np.insert(self.h1, at, r1[unknown])
            self.h2 = np.insert(self.h2, at, r2[unknown])
            self.id_of = np.insert(self.id_of, at, fresh)
        per_sample = np.empty(len(order), dtype=np.int32)
        per_sample[order] = cid[group]
        out[by_len] = per_sample
        return out

    def _lookup(self, r1: U64, r2: U64) -> I64:
        """The ids of known chains with hashes (r1, r2); -1 for new ones."""
        out = np.full(len(r1), -1, dtype=np.int64)
        if not len(self.h1):
            return out
        lo = np.searchsorted(self.h1, r1, side="left")
        hi = np.searchsorted(self.h1, r1, side="right")
        one = np.flatnonzero(hi - lo == 1)
        match = one[self.h2[lo[one]] == r2[one]]
        out[match] = self.id_of[lo[match]]
        for j in np.flatnonzero(hi - lo > 1).tolist():  # chains sharing a first hash: a 2**-64 event
            a, b = int(lo[j]), int(hi[j])
            same = np.flatnonzero(self.h2[a:b] == r2[j])
            if len(same):
                out[j] = self.id_of[a + int(same[0])]
        return out

    def table(self) -> ChainTable:
        lengths = np.concatenate(self.length_parts)
        start = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=start[1:])
        return ChainTable(start, np.concatenate(self.word_parts).astype(np.uint64))
