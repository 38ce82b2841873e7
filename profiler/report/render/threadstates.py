"""``report --thread-states``: the per-thread table of running, runnable and blocked times
(built by :mod:`profiler.report.threadstates`), and each thread's top blocking stacks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TextIO

from profiler.report.offcpu import INTERRUPT_WAKER
from profiler.report.threadstates import ThreadState

TOP_WAKERS = 3  # per thread, the threads whose wake-ups ended most of its blocked time
HEADER = ("tid", "pid", "comm", "running ms", "runnable ms", "blocked ms", "of which D", "switches")


def ordered(states: Iterable[ThreadState]) -> list[ThreadState]:
    """Threads by their total time, largest first, ties by tid."""
    return sorted(states, key=lambda st: (-st.total, st.tid))


def write(states: Iterable[ThreadState], stream: TextIO) -> None:
    rows = ordered(states)
    stream.write("# Thread states: running = on a CPU, runnable = waiting for a CPU (preempted), "
                 "blocked = sleeping (timer, pipe, lock, I/O); see docs/offcpu.md\n")
    stream.write("#\n")
    stream.write(f"# {HEADER[0]:>8} {HEADER[1]:>8}  {HEADER[2]:<16} {HEADER[3]:>12} {HEADER[4]:>12} "
                 f"{HEADER[5]:>12} {HEADER[6]:>10} {HEADER[7]:>9}\n")
    for st in rows:
        stream.write(f"  {st.tid:>8} {st.pid:>8}  {st.comm[:16]:<16} {_ms(st.running):>12} {_ms(st.runnable):>12} "
                     f"{_ms(st.blocked):>12} {_ms(st.blocked_io):>10} {st.switches:>9}\n")
    opened = [st for st in rows if st.open_ns]
    if opened:
        stream.write(f"#\n# {len(opened)} thread(s) were still waiting when the recording ended: their last "
                     "wait is counted up to the end of the recording.\n")
    blocking = [st for st in rows if st.top_blocking]
    if blocking:
        stream.write("\n# Top blocking stacks (leaf first)\n")
    names = {st.tid: st.comm for st in rows}
    for st in blocking:
        stream.write(f"\n  {st.comm} {st.tid}\n")
        for text, ns in st.top_blocking:
            stream.write(f"    {_ms(ns):>12} ms  {text}\n")
        for waker, ns in sorted(st.woken_by.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_WAKERS]:
            who = "an interrupt (a timer or a device)" if waker == INTERRUPT_WAKER else \
                f"{names.get(waker) or st.waker_comm.get(waker) or 'tid'} {waker}"
            stream.write(f"    {_ms(ns):>12} ms  woken by {who}\n")
            if waker in st.waker_stack:
                stream.write(f"    {'':>12}     from {st.waker_stack[waker]}\n")


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f}"
