"""``report --thread-states``: per thread its time running, runnable and blocked, and the
stacks it blocked in most (docs/offcpu.md).

The off-CPU intervals are those of the ``offcpu`` event (:mod:`profiler.report.offcpu`). A
thread runs from each switch-in — the end of its previous off-CPU interval, or for its first
slice the first moment the capture shows it on a CPU — to its next switch-out (an exiting
thread's last switch-out included); after its last interval it runs until it exits or the
recording ends. These are the numbers ``perf sched timehist -s`` gives as run time, and as
wait time plus scheduling delay. With ``sched:sched_waking`` (or ``sched_wakeup``) samples, a
blocked interval is also credited to the thread whose wake-up ended it (``woken_by``).
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from profiler.arrays import distinct
from profiler.dataclass import dataclass
from profiler.report.intervals import BLOCKED, BLOCKED_IO, DEAD, RUNNABLE, close_intervals
from profiler.report.offcpu import INTERRUPT_WAKER, SwitchOuts, end_time, exits, switch_outs, wakers

if TYPE_CHECKING:
    from profiler.format.decode.columns import CaptureData
    from profiler.report.capture import Capture
    from profiler.report.profile import Profile

I64 = npt.NDArray[np.int64]
TOP_STACKS = 3  # blocking stacks shown per thread
STACK_FRAMES = 6  # frames shown of each (its user frames, leaf first)


@dataclass
class ThreadState:
    """One thread's times in nanoseconds."""

    tid: int
    pid: int
    comm: str
    running: int = 0
    runnable: int = 0
    blocked: int = 0  # every sleep, D included
    blocked_io: int = 0  # of which uninterruptible (D)
    switches: int = 0  # switch-outs
    open_ns: int = 0  # of the waits, time in intervals still open when the recording ended
    top_blocking: list[tuple[str, int]] = field(default_factory=list)  # (stack text, ns)
    # blocked ns by the thread whose wake-up ended the wait (tid, or offcpu.INTERRUPT_WAKER;
    # a capture with sched_waking samples only)
    woken_by: dict[int, int] = field(default_factory=dict)
    # per waker, blocked ns by the wake-up sample that ended the wait (its row in the decoded
    # samples), and the waker's stack most of that time was woken from (add_waker_stacks)
    wake_rows: dict[int, dict[int, int]] = field(default_factory=dict)
    waker_stack: dict[int, str] = field(default_factory=dict)
    waker_comm: dict[int, str] = field(default_factory=dict)  # the waker's comm at that wake-up

    @property
    def total(self) -> int:
        return self.running + self.runnable + self.blocked


def thread_times(capture: Capture, data: CaptureData) -> dict[int, ThreadState]:
    """Every thread with a switch-out, its running, runnable and blocked times."""
    s = data.samples
    outs = switch_outs(capture, data, keep_dead=True)
    tid = outs.tid
    pid = s.pid[outs.rows].astype(np.int64)
    t_out = s.time[outs.rows].astype(np.int64)
    dead = outs.state == DEAD
    length = np.where(dead, 0, outs.end - t_out)
    states: dict[int, ThreadState] = {}
    for t, p in zip(tid.tolist(), pid.tolist()):
        if t not in states:
            states[t] = ThreadState(t, p, "")
    _add(states, tid, outs.state == RUNNABLE, length, "runnable")
    blocked = (outs.state == BLOCKED) | (outs.state == BLOCKED_IO)
    _add(states, tid, blocked, length, "blocked")
    _add(states, tid, outs.state == BLOCKED_IO, length, "blocked_io")
    _add(states, tid, outs.open & ~dead, length, "open_ns")
    _add(states, tid, ~dead, np.ones(len(tid), dtype=np.int64), "switches")
    _add(states, tid, np.ones(len(tid), dtype=bool), _running_slices(data, outs, tid, t_out, dead), "running")
    woke, wake_row = wakers(capture, data, outs)
    for i in np.flatnonzero(blocked & (woke != -1)).tolist():
        st, waker, ns = states[int(tid[i])], int(woke[i]), int(length[i])
        st.woken_by[waker] = st.woken_by.get(waker, 0) + ns
        if waker != INTERRUPT_WAKER:
            rows = st.wake_rows.setdefault(waker, {})
            rows[int(wake_row[i])] = rows.get(int(wake_row[i]), 0) + ns
    return states


def add_waker_stacks(states: dict[int, ThreadState], data: CaptureData, wakes: Profile) -> None:
    """For each thread's wakers, the stack (one line, :func:`stack_text`) of the wake-ups that
    ended most of its blocked time: ``wakes`` is the wake-up event's profile, a row per sample."""
    at = {seq: i for i, seq in enumerate(wakes.samples.seq.tolist())}
    seqs = data.samples.seq
    for st in states.values():
        for waker, rows in st.wake_rows.items():
            by_stack: dict[int, int] = {}
            for row, ns in rows.items():
                i = at.get(int(seqs[row]))
                if i is not None:
                    k = int(wakes.stack[i])
                    by_stack[k] = by_stack.get(k, 0) + ns
                    st.waker_comm[waker] = wakes.comm_names[int(wakes.comm[i])]
            if by_stack:
                k = min(by_stack, key=lambda key: (-by_stack[key], key))
                st.waker_stack[waker] = stack_text(wakes, k, skip=WAKE_MACHINERY, state_root=False)


def _add(states: dict[int, ThreadState], tid: I64, mask: npt.NDArray[np.bool_], values: I64, name: str) -> None:
    if not mask.any():
        return
    uniq, inverse = np.unique(tid[mask], return_inverse=True)
    sums = np.bincount(inverse, weights=values[mask].astype(np.float64), minlength=len(uniq))
    for t, v in zip(uniq.tolist(), sums.tolist()):
        st = states[int(t)]
        setattr(st, name, getattr(st, name) + int(round(v)))


def _running_slices(data: CaptureData, outs: SwitchOuts, tid: I64, t_out: I64, dead: npt.NDArray[np.bool_]) -> I64:
    """Per switch-out (time order), the running time before it since the thread's previous
    switch-in; the slice after a thread's last interval (until it exits or the recording ends)
    is added to its last switch-out."""
    order = np.lexsort((t_out, tid))
    tid_o, out_o, end_o, dead_o = tid[order], t_out[order], outs.end[order], dead[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = tid_o[1:] != tid_o[:-1]
    start = np.empty(len(order), dtype=np.int64)
    start[1:] = end_o[:-1]
    # a thread's first slice starts at the first moment the capture shows it on a CPU
    first_seen = _first_at_or_before(tid_o[first], out_o[first], outs.run_tid, outs.run_time)
    start[np.flatnonzero(first)] = first_seen
    slices = np.maximum(out_o - start, 0)
    last = np.ones(len(order), dtype=bool)
    last[:-1] = tid_o[1:] != tid_o[:-1]
    tail = np.flatnonzero(last & ~dead_o)
    if len(tail):  # running again after its last wait, until it exits or the capture ends
        e_tid, e_time = exits(data)
        # (an exit at the very moment its last wait ended counts: the queries are 1 ns earlier)
        stop, _ = close_intervals(tid_o[tail], end_o[tail] - 1, e_tid, e_time, np.zeros(0, np.int64),
                                  np.zeros(0, np.int64), end_time(data))
        slices[tail] += np.maximum(stop - end_o[tail], 0)
    out = np.empty(len(order), dtype=np.int64)
    out[order] = slices
    return out


def _first_at_or_before(q_tid: I64, q_time: I64, e_tid: I64, e_time: I64) -> I64:
    """Per query, the earliest evidence of its thread (the query's own time if none is earlier)."""
    out = q_time.copy()
    if not len(e_tid):
        return out
    order = np.lexsort((e_time, e_tid))
    st, stime = e_tid[order], e_time[order]
    at = np.searchsorted(st, q_tid, side="left")
    ok = (at < len(st)) & (st[np.minimum(at, len(st) - 1)] == q_tid)
    found = stime[np.minimum(at, len(st) - 1)]
    return np.where(ok, np.minimum(found, q_time), q_time)


def add_top_blocking(states: dict[int, ThreadState], profile: Profile, n: int = TOP_STACKS) -> None:
    """Each thread's ``n`` stacks with the most blocked time, and its comm, from the ``offcpu``
    event's profile (its rows: one per interval, the state frame at the root). The rows are
    summed per (thread, stack) with whole-array steps; only the distinct stacks are looked at."""
    rows = len(profile.samples)
    if not rows:
        return
    tid = profile.samples.tid.astype(np.int64)
    stack = profile.stack.astype(np.int64)
    # each thread's comm: that of its last row
    order = np.lexsort((np.arange(rows), tid))
    last = order[np.r_[tid[order][1:] != tid[order][:-1], True]]
    for i in last.tolist():
        st = states.get(int(tid[i]))
        if st is not None:
            st.comm = profile.comm_names[int(profile.comm[i])]
    kinds = distinct(stack)
    blocked_kinds = [k for k in kinds.tolist()
                     if profile.frame(int(profile.stack_frame_ids(k)[-1])).name().startswith("[blocked")]
    keep = np.isin(stack, np.asarray(blocked_kinds, dtype=np.int64))
    if not keep.any():
        return
    t, k, ns = tid[keep], stack[keep], profile.samples.period[keep].astype(np.int64)
    order = np.lexsort((k, t))
    t, k, ns = t[order], k[order], ns[order]
    first = np.flatnonzero(np.r_[True, (t[1:] != t[:-1]) | (k[1:] != k[:-1])])
    sums = np.add.reduceat(ns, first)
    pairs = sorted(zip((-sums).tolist(), t[first].tolist(), k[first].tolist()))  # most time first, then tid, stack
    texts: dict[int, str] = {}
    for neg, thread, key in pairs:
        st = states.get(thread)
        if st is None or len(st.top_blocking) >= n:
            continue
        if key not in texts:
            texts[key] = stack_text(profile, key)
        st.top_blocking.append((texts[key], -neg))


SCHEDULER = ("__schedule", "schedule", "schedule_timeout", "schedule_hrtimeout_range", "io_schedule")
# the kernel's wake-up path, below the function that woke a thread (pipe_write, futex_wake, ...)
WAKE_MACHINERY = ("try_to_wake_up", "wake_up_process", "wake_up_q", "default_wake_function",
                  "autoremove_wake_function", "woken_wake_function", "__wake_up_common", "__wake_up_common_lock",
                  "__wake_up", "__wake_up_sync_key", "__wake_up_locked_key", "swake_up_one", "swake_up_locked")


def stack_text(profile: Profile, k: int, frames: int = STACK_FRAMES, skip: tuple[str, ...] = SCHEDULER,
               state_root: bool = True) -> str:
    """A blocking stack in one line: its user frames leaf first, then the kernel function it
    waited in (the first that is not the scheduler's, ``skip``): ``wait_pipe <- thread_main <- ...
    (in anon_pipe_read)``; a kernel thread's kernel frames alone. ``state_root``: the stack's
    root is the offcpu event's state frame, left out."""
    ids = profile.stack_frame_ids(k)
    infos = [profile.frame(int(f)) for f in (ids[:-1] if state_root else ids)]
    kernel = [f.name() for f in infos if f.is_kernel and f.name() not in skip]
    user = [f.name() for f in infos if not f.is_kernel]
    if not user:
        return " <- ".join(kernel[:frames]) if kernel else "[unknown]"
    return " <- ".join(user[:frames]) + (f" (in {kernel[0]})" if kernel else "")
