"""The resolve step of the report pipeline: identical raw stacks counted once, their
addresses resolved into frames — the :class:`~profiler.report.profile.StackTable`.

A raw stack is (pid, map generation, callchain); only one sample per distinct raw stack is
looked at after :func:`dedupe_stacks`. :func:`resolve_stacks` splits the distinct callchains at
their ``PERF_CONTEXT_*`` markers, takes the unique addresses and resolves them per map
generation and per DSO in one batch each; :func:`filter_by_leaf` applies ``--dso``/``--symbol``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from profiler.arrays import ranges
from profiler.format.decode.chains import CONTEXT_KERNEL, CallchainEntries, cpumode_context, split_callchains
from profiler.format.decode.columns import SampleColumns
from profiler.arrays import dense_ids, pair_ids
from profiler.report.options import Filters
from profiler.report.profile import Profile, StackTable
from profiler.report.resolver import FrameInfo, Resolved, SymbolResolver
from profiler.names import UNKNOWN

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


def raw_stacks(s: SampleColumns, use_chains: bool) -> tuple[I64, U64]:
    """Each sample's raw stack as CSR (start offsets, words), markers included.

    A sample without a callchain (or with an empty one) gets ``[context marker, ip]``: the
    marker for its cpumode, so it is read exactly like a one-entry kernel callchain. Used on
    the distinct stacks only (one representative sample each).
    """
    n = len(s)
    ctx = cpumode_context(s.cpumode)
    if use_chains:
        lengths = s.chain_len.astype(np.int64)
        empty = lengths == 0
        lengths = np.where(empty, 2, lengths)
        start = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=start[1:])
        words = np.empty(int(start[-1]), dtype=np.uint64)
        full = np.flatnonzero(~empty)
        chain_at = s.chains.start[s.chain_id[full]]
        words[ranges(start[full], lengths[full])] = s.chains.words[ranges(chain_at, lengths[full])]
        e = np.flatnonzero(empty)
        words[start[e]] = ctx[e]
        words[start[e] + 1] = s.ip[e]
        return start, words
    start = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
    words = np.empty(2 * n, dtype=np.uint64)
    words[0::2] = ctx
    words[1::2] = s.ip
    return start, words


def _ip_ids(ip: U64, kernel: npt.NDArray[np.bool_]) -> I64:
    """Dense ids of the distinct (cpumode is kernel, ip) pairs."""
    ip_id = dense_ids(ip.view(np.int64))
    if np.array_equal(ip >= np.uint64(1 << 63), kernel):
        return ip_id  # the address's top bit already says kernel or user (x86_64, aarch64)
    return pair_ids(ip_id, kernel.astype(np.int64))


def dedupe_stacks(s: SampleColumns, gen: I64, use_chains: bool) -> tuple[I64, I64]:
    """(stack id per sample, one representative sample index per stack).

    A raw stack is (pid, map generation, callchain): the decoder already gave every distinct
    callchain one ``chain_id``, so this is an exact group-by over three small integers. Samples
    whose chain is empty (or when chains are not used) are keyed by (cpumode, ip) instead.
    """
    n = len(s)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # (cpumode, ip) pairs of chainless samples get ids after the chains' ids
    if not use_chains or not s.chain_id.any():
        what = int(len(s.chains)) + _ip_ids(s.ip, cpumode_context(s.cpumode) == CONTEXT_KERNEL)
    else:
        what = s.chain_id.astype(np.int64)
        empty = np.flatnonzero(what == 0)
        if len(empty):
            kernel = cpumode_context(s.cpumode[empty]) == CONTEXT_KERNEL
            what[empty] = int(len(s.chains)) + _ip_ids(s.ip[empty], kernel)
    owner = pair_ids(dense_ids(s.pid.astype(np.int64)), dense_ids(gen.astype(np.int64)))
    stack = pair_ids(owner, dense_ids(what))
    reps = np.empty(int(stack.max()) + 1, dtype=np.int64)
    reps[stack] = np.arange(n, dtype=np.int64)  # any sample of a group represents it
    return stack, reps


def resolve_stacks(s: SampleColumns, gen: I64, reps: I64, use_chains: bool,
                   resolver: SymbolResolver) -> StackTable:
    """Frame ids of each distinct stack (CSR, leaf first), markers dropped."""
    if len(reps) == 0:
        return StackTable.empty()
    sub = s.take(reps)
    start, words = raw_stacks(sub, use_chains)
    u = len(reps)
    entries = with_every_stack(split_callchains(start, words, sub.cpumode), sub, u)
    addr, owner, kernel, foreign = entries.addr, entries.owner, entries.kernel, ~entries.host
    pid = np.where(kernel | foreign, -1, sub.pid[owner])
    g = np.where(kernel | foreign, -1, gen[reps][owner])

    order = np.lexsort((foreign, kernel, addr, g, pid))
    first = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        o = order
        first[1:] = ((pid[o[1:]] != pid[o[:-1]]) | (g[o[1:]] != g[o[:-1]]) | (addr[o[1:]] != addr[o[:-1]])
                     | (kernel[o[1:]] != kernel[o[:-1]]) | (foreign[o[1:]] != foreign[o[:-1]]))
    uniq = order[first]
    which = np.empty(len(order), dtype=np.int64)
    which[order] = np.cumsum(first) - 1
    # an address never sampled as a leaf is a return address: lines of the call before it
    is_leaf = np.ones(len(addr), dtype=bool)
    if len(addr) > 1:
        is_leaf[1:] = owner[1:] != owner[:-1]  # entries are in stack order, leaf first
    seen_as_leaf = np.bincount(which[is_leaf], minlength=len(uniq)) > 0
    res = _resolve_entries(resolver, pid[uniq], g[uniq], addr[uniq], kernel[uniq], foreign[uniq], ~seen_as_leaf)
    counts = np.bincount(owner, minlength=u)
    stack_start = np.zeros(u + 1, dtype=np.int64)
    np.cumsum(counts, out=stack_start[1:])
    table = StackTable(stack_start, res.frame[which], res.offset[which], res.shown[which], addr,
                       res.srcline[which])
    return expand_inlined(table, which, res) if res.inlined else table


def with_every_stack(entries: CallchainEntries, sub: SampleColumns, u: int) -> CallchainEntries:
    """``entries`` of ``u`` stacks, where a stack left with no address gets its sample's ip in
    its cpumode's context: every stack has a leaf. A stack is left with none when every word of
    its chain is a ``PERF_CONTEXT_*`` marker, or when the sampled ip itself reads as one
    ((u64)-1: perf shows it as ``[unknown]``, and so do we)."""
    missing = np.flatnonzero(np.bincount(entries.owner, minlength=u)[:u] == 0)
    if not len(missing):
        return entries
    owner = np.concatenate([entries.owner, missing])
    order = np.argsort(owner, kind="stable")  # each stack's entries stay leaf first
    return CallchainEntries(owner[order], np.concatenate([entries.addr, sub.ip[missing]])[order],
                            np.concatenate([entries.context, cpumode_context(sub.cpumode[missing])])[order])


def expand_inlined(table: StackTable, which: I64, res: Resolved) -> StackTable:
    """Each address with inlined functions becomes several entries, innermost first, the
    function itself last: ``[inlined..., function]`` in place of ``[function]``."""
    u = len(res.frame)
    extra = np.zeros(u, np.int64)
    for i, chain in res.inlined.items():
        extra[i] = len(chain)
    # per unique address, its entries: inlined frames then the function (CSR)
    ustart = np.zeros(u + 1, np.int64)
    np.cumsum(extra + 1, out=ustart[1:])
    uframe = np.empty(int(ustart[-1]), np.int64)
    uline = np.empty(int(ustart[-1]), np.int64)
    uframe[ustart[1:] - 1] = res.frame
    uline[ustart[1:] - 1] = res.srcline
    for i, chain in res.inlined.items():
        a = int(ustart[i])
        uframe[a:a + len(chain)] = [f for f, _ in chain]
        uline[a:a + len(chain)] = [line for _, line in chain]
    per_entry = extra[which] + 1
    idx = ranges(ustart[which], per_entry)
    lens = np.diff(table.start)
    owner = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    start = np.zeros(len(table.start), np.int64)
    np.cumsum(np.bincount(owner, weights=per_entry, minlength=len(lens)).astype(np.int64), out=start[1:])
    rep = np.repeat(np.arange(len(which), dtype=np.int64), per_entry)
    leaf = table.frames[table.start[:-1]] if len(table.frames) else np.zeros(0, np.int64)
    return StackTable(start, uframe[idx], table.offsets[rep], table.shown[rep], table.addrs[rep],
                      uline[idx], leaf)


def _resolve_entries(resolver: SymbolResolver, pid: I64, gen: I64, addr: U64,
                     kernel: npt.NDArray[np.bool_], foreign: npt.NDArray[np.bool_],
                     returns: npt.NDArray[np.bool_]) -> Resolved:
    """Host addresses through the resolver; a guest's or the hypervisor's (``foreign``) as
    ``[unknown]`` frames with their address: no host map or symbol table names them.
    ``returns``: addresses only ever seen as return addresses (see SymbolResolver.resolve)."""
    if not foreign.any():
        return resolver.resolve(pid, gen, addr, kernel, returns)
    out = Resolved(np.full(len(addr), -1, dtype=np.int64), np.zeros(len(addr), dtype=np.uint64), addr.copy())
    host = np.flatnonzero(~foreign)
    if len(host):
        out.put(host, resolver.resolve(pid[host], gen[host], addr[host], kernel[host], returns[host]))
    for i in np.flatnonzero(foreign).tolist():
        out.frame[i] = resolver.frames.intern(FrameInfo(None, UNKNOWN, UNKNOWN, "unknown", int(addr[i])))
    return out


def filter_by_leaf(profile: Profile, f: Filters) -> Profile:
    """Keep the samples whose leaf frame is in one of ``f.dsos`` / named one of ``f.symbols``."""
    ok_frame = np.zeros(len(profile.frames), dtype=bool)
    for i, fr in enumerate(profile.frames.frames):
        dso_ok = not f.dsos or fr.dso in f.dsos or fr.dso_path in f.dsos
        sym_ok = not f.symbols or (fr.symbol is not None and (
            fr.symbol in f.symbols or fr.name(True) in f.symbols))
        ok_frame[i] = dso_ok and sym_ok
    leaf_ok = ok_frame[profile.leaf_frames()] if profile.num_stacks else np.zeros(0, dtype=bool)
    mask = leaf_ok[profile.stack] if len(profile.stack) else np.zeros(0, dtype=bool)
    if mask.all():
        return profile
    profile.samples = profile.samples.take(mask)
    if profile.raw is not None:
        profile.raw = profile.raw[mask]
    profile.comm = profile.comm[mask]
    profile.stack = profile.stack[mask]
    if profile.weight is not None:
        profile.weight = profile.weight[mask]
    if profile.cgroup_ns is not None:
        profile.cgroup_ns = profile.cgroup_ns[mask]
    return profile
