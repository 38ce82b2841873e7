"""Off-CPU intervals from switch-outs and the evidence that a thread ran again.

The model (docs/offcpu.md): a thread's off-CPU interval starts at its switch-out — a
``sched:sched_switch`` sample taken in the thread's own context, with its call chain and its
``prev_state`` — and ends at the first later moment the capture shows the thread running
again: a switch-in record (PERF_RECORD_SWITCH without PERF_RECORD_MISC_SWITCH_OUT, or
SWITCH_CPU_WIDE naming it), a ``sched_switch`` whose ``next_pid`` it is (system-wide), or any
sample of the thread. An interval nothing closes ends at the thread's EXIT, else at the end of
the recording, and is marked open.

Everything here is arrays in, arrays out (no capture): :func:`close_intervals` is the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.arrays import dense_ids

I64 = npt.NDArray[np.int64]
Ints = npt.NDArray[Any]

# A thread's state at its switch-out: the tracepoint's ``prev_state`` (TASK_REPORT bits, as its
# print fmt spells them: S 0x1, D 0x2, T 0x4, t 0x8, X 0x10, Z 0x20, P 0x40, I 0x80; and
# TASK_REPORT_MAX 0x100, printed "+", for a preempted task).
RUNNING, RUNNABLE, BLOCKED, BLOCKED_IO = 0, 1, 2, 3
STATE_NAMES: tuple[str, ...] = ("running", "runnable", "blocked", "blocked (D)")
_SLEEPING, _DISK, _DEAD, _PREEMPTED = 0x1, 0x2, 0x10 | 0x20, 0x100
DEAD = -1  # an exiting thread's last switch-out: no interval follows it


def classify(prev_state: Ints) -> I64:
    """RUNNABLE (preempted, or yielded while runnable: "R", "R+"), BLOCKED_IO ("D"), BLOCKED
    (any other sleep: "S", "I", stopped, parked) or DEAD ("X", "Z") per switch-out."""
    state = np.asarray(prev_state, dtype=np.int64)
    report = state & 0xFF
    out = np.full(len(state), BLOCKED, dtype=np.int64)
    out[(report == 0) | ((state & _PREEMPTED) != 0)] = RUNNABLE
    out[((report & _DISK) != 0) & ((state & _PREEMPTED) == 0)] = BLOCKED_IO
    out[(report & _DEAD) != 0] = DEAD
    return out


def close_intervals(out_tid: Ints, out_time: Ints, run_tid: Ints, run_time: Ints, exit_tid: Ints,
                    exit_time: Ints, end_time: int) -> tuple[I64, npt.NDArray[np.bool_]]:
    """(end time, open) of the interval starting at each switch-out (``out_tid``,
    ``out_time``): the first ``run_time`` of the same thread strictly after it; else its first
    exit after it (closed); else ``end_time`` (open: the recording ended first).

    One sort of every switch-out and every piece of evidence by (tid, time), evidence before a
    switch-out at the same nanosecond, then a backward scan for the next evidence."""
    ends = next_after(out_tid, out_time, run_tid, run_time)
    missing = ends < 0
    if missing.any():
        by_exit = next_after(np.asarray(out_tid)[missing], np.asarray(out_time)[missing], exit_tid, exit_time)
        ends[np.flatnonzero(missing)] = by_exit
    still_open = ends < 0
    ends[still_open] = end_time
    ends = np.maximum(ends, np.asarray(out_time, dtype=np.int64))
    return ends, still_open


def next_after(q_tid: Ints, q_time: Ints, e_tid: Ints, e_time: Ints, packed: bool = True) -> I64:
    """Per query, the time of the first evidence of its tid strictly after it; -1 if none.

    Both sides packed into one 63-bit key (tid, time, 1 for a query / 0 for evidence), the
    evidence keys sorted once, and each query's first larger evidence key found by binary
    search: a key of the same thread and a later time, or another thread's (none)."""
    nq = len(q_tid)
    if nq == 0:
        return np.zeros(0, dtype=np.int64)
    qt, qs = np.asarray(q_tid, dtype=np.int64), np.asarray(q_time, dtype=np.int64)
    et, es = np.asarray(e_tid, dtype=np.int64), np.asarray(e_time, dtype=np.int64)
    if not len(et):
        return np.full(nq, -1, dtype=np.int64)
    tid0, t0 = min(int(qt.min()), int(et.min())), min(int(qs.min()), int(es.min()))
    tid_bits = max(max(int(qt.max()), int(et.max())) - tid0, 1).bit_length()
    time_bits = max(max(int(qs.max()), int(es.max())) - t0, 1).bit_length()
    if not packed or tid_bits + time_bits + 1 > 63:
        return _next_after_lexsort(qt, qs, et, es)
    e_key = _sorted_keys(et - tid0, es - t0, time_bits)
    q_key = ((qt - tid0) << (time_bits + 1)) | ((qs - t0) << 1) | 1
    at = np.searchsorted(e_key, q_key, side="right")
    found = e_key[np.minimum(at, len(e_key) - 1)]
    ok = (at < len(e_key)) & ((found >> (time_bits + 1)) == (q_key >> (time_bits + 1)))
    return np.where(ok, ((found >> 1) & ((1 << time_bits) - 1)) + t0, -1)


def _sorted_keys(tid: I64, time: I64, time_bits: int) -> I64:
    """The keys ``tid << (time_bits + 1) | time << 1``, sorted, without a sort of the keys.

    The evidence comes nearly in time order (the decoded samples are in time order, the switch
    records in per-CPU runs), so a stable sort by time finds few runs to merge; a stable sort of
    the threads' ranks in that order, a radix sort for up to 65 536 threads, then groups each
    thread's evidence in time order. 3M pieces of evidence: 0.05 s where one sort of the keys took
    0.2-0.3 s."""
    by_time = np.argsort(time, kind="stable")
    rank = dense_ids(tid)
    narrow = rank[by_time].astype(np.uint16 if int(rank.max()) < 1 << 16 else np.int64)
    order = by_time[np.argsort(narrow, kind="stable")]
    out: I64 = (tid[order] << (time_bits + 1)) | (time[order] << 1)
    return out


def _next_after_lexsort(q_tid: I64, q_time: I64, e_tid: I64, e_time: I64) -> I64:
    """:func:`next_after` for spans no 63-bit key holds: one lexsort of both sides, evidence
    before a query at equal (tid, time), then a backward scan for the next evidence."""
    nq, ne = len(q_tid), len(e_tid)
    tid = np.concatenate([e_tid, q_tid])
    time = np.concatenate([e_time, q_time])
    is_query = np.concatenate([np.zeros(ne, dtype=np.int64), np.ones(nq, dtype=np.int64)])
    order = np.lexsort((is_query, time, tid))
    s_tid, s_time, s_query = tid[order], time[order], is_query[order] == 1
    big = len(order)
    pos = np.where(~s_query, np.arange(big), big)
    nxt = np.minimum.accumulate(pos[::-1])[::-1]
    found = nxt < big
    idx = np.where(found, nxt, 0)
    ok = found & (s_tid[idx] == s_tid) & s_query
    result_sorted = np.where(ok, s_time[idx], -1)
    out = np.empty(nq, dtype=np.int64)
    q_positions = np.flatnonzero(s_query)
    out[order[q_positions] - ne] = result_sorted[q_positions]
    return out


def last_at_or_before(q_tid: Ints, q_time: Ints, e_tid: Ints, e_time: Ints) -> I64:
    """Per query, the index (into the evidence arrays) of the latest evidence of its tid at or
    before its time; -1 if none. One lexsort of both sides (evidence before a query at equal
    (tid, time)), then a forward running maximum of the evidence positions."""
    nq, ne = len(q_tid), len(e_tid)
    if nq == 0 or ne == 0:
        return np.full(nq, -1, dtype=np.int64)
    tid = np.concatenate([np.asarray(e_tid, dtype=np.int64), np.asarray(q_tid, dtype=np.int64)])
    time = np.concatenate([np.asarray(e_time, dtype=np.int64), np.asarray(q_time, dtype=np.int64)])
    is_query = np.concatenate([np.zeros(ne, dtype=np.int64), np.ones(nq, dtype=np.int64)])
    order = np.lexsort((is_query, time, tid))
    s_tid, s_query = tid[order], is_query[order] == 1
    last = np.maximum.accumulate(np.where(s_query, -1, np.arange(len(order))))
    found = last >= 0
    idx = np.where(found, last, 0)
    ok = found & (s_tid[idx] == s_tid)
    out = np.full(nq, -1, dtype=np.int64)
    q_positions = np.flatnonzero(s_query)
    hits = ok[q_positions]
    out[order[q_positions[hits]] - ne] = order[idx[q_positions[hits]]]
    return out
