"""The pseudo-events ``offcpu`` and ``wall``: rows computed from switch-outs (docs/offcpu.md).

A capture with ``sched:sched_switch`` samples (``profiler record --off-cpu``, or ``perf record
-e sched:sched_switch -g``) gets two more events in :meth:`Capture.event_names
<profiler.report.capture.Capture.event_names>`:

* ``offcpu``: a row per off-CPU interval (:mod:`profiler.report.intervals`): the switch-out
  sample with its call chain, its period the interval's nanoseconds; the stack's root frame
  says why the thread waited (``[blocked]``, ``[blocked (D)]``, ``[runnable]``; ``, open at
  end`` when the recording ended first).
* ``wall``: those rows and the on-CPU samples of a nanosecond event (cpu-clock, task-clock:
  their period is already nanoseconds) under ``[running]``: elapsed time per thread in one tree.

Both are read whole, then :func:`~profiler.report.assemble.assemble` resolves them like any
event, so every command, renderer and exporter takes them unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from profiler.arrays import dense_ids, ranges
from profiler.dataclass import dataclass
from profiler.errors import ReportError
from profiler.format import records as R
from profiler.format.decode.columns import CaptureData, SampleColumns
from profiler.format.tracepoint import TraceFormat
from profiler.report.intervals import DEAD, RUNNING, STATE_NAMES, classify, close_intervals, last_at_or_before
from profiler.report.model import OFFCPU_EVENT, SWITCH_TRACEPOINT, period_is_nanoseconds
from profiler.report.profile import Profile, StackTable
from profiler.report.resolver import FrameInfo
from profiler.report.tracepoints import raw_payloads, trace_format

if TYPE_CHECKING:
    from profiler.report.capture import Capture

I64 = npt.NDArray[np.int64]

STATE_DSO = "[thread state]"  # the DSO of the state frames at the root of offcpu/wall stacks
IDLE_TID = 0  # the idle task (swapper/N): its switch-outs in a system-wide capture are not waits


@dataclass
class SwitchOuts:
    """Every switch-out of the capture: the ``sched_switch`` samples (their index in the
    decoded samples) with the interval each starts, its state and whether it was still open."""

    rows: I64
    tid: I64  # the thread switched out (prev_pid: perf.data gives an exiting thread's last one tid -1)
    end: I64
    state: I64
    open: npt.NDArray[np.bool_]
    run_tid: I64  # every moment a thread was seen on a CPU (see running_evidence)
    run_time: I64

    @property
    def codes(self) -> I64:
        """Each interval's state frame, as an index into :data:`STATE_LABELS`."""
        out: I64 = self.state * 2 + self.open
        return out


# the state frames' names by code: state * 2, + 1 for an interval still open at the end
STATE_LABELS: tuple[str, ...] = tuple(f"[{name}{', open at end' if still_open else ''}]"
                                      for name in STATE_NAMES for still_open in (False, True))


def switch_outs(capture: Capture, data: CaptureData, keep_dead: bool = False) -> SwitchOuts:
    """The off-CPU intervals of every thread (see :mod:`profiler.report.intervals`);
    ``keep_dead``: also the exiting threads' last switch-outs (state DEAD, no interval).

    Made once per capture (``report --thread-states`` asks twice, with and without): each
    interval's end depends on its own switch-out only, so leaving the DEAD ones out afterwards
    gives what leaving them out first would."""
    memo = capture.memo.get("switch_outs")
    if memo is None or memo[0] is not data:
        memo = capture.memo["switch_outs"] = (data, _switch_outs(capture, data))
    outs: SwitchOuts = memo[1]
    if keep_dead:
        return outs
    live = outs.state != DEAD
    return replace(outs, rows=outs.rows[live], tid=outs.tid[live], end=outs.end[live], state=outs.state[live],
                   open=outs.open[live])


def _switch_outs(capture: Capture, data: CaptureData) -> SwitchOuts:
    s = data.samples
    event = capture.names.index(SWITCH_TRACEPOINT)
    tfmt = trace_format(capture.reader, SWITCH_TRACEPOINT)
    if tfmt is None:
        raise ReportError(f"{capture.path} does not hold the format of {SWITCH_TRACEPOINT}: "
                          "its off-CPU intervals cannot be read.")
    rows = np.flatnonzero(s.event == event)
    fields = read_fields(capture, s, rows, tfmt, ("prev_state", "prev_pid", "next_pid"))
    state = classify(fields["prev_state"])
    tid = s.tid[rows].astype(np.int64)
    tid = np.where(tid < 0, fields["prev_pid"], tid)
    keep = tid != IDLE_TID
    run_tid, run_time = running_evidence(data, rows, fields["next_pid"])
    exit_tid, exit_time = exits(data)
    rows, state, tid = rows[keep], state[keep], tid[keep]
    end, still_open = close_intervals(tid, s.time[rows].astype(np.int64), run_tid, run_time,
                                      exit_tid, exit_time, end_time(data))
    return SwitchOuts(rows, tid, end, state, still_open, run_tid, run_time)


WAKE_TRACEPOINTS = ("sched:sched_waking", "sched:sched_wakeup")


# trace_entry's common_flags (kernel/trace/trace.h): the event ran in a hard or soft interrupt
# or an NMI, so the task it interrupted is not the one that woke anybody (a timer, a device did)
IN_INTERRUPT = 0x08 | 0x10 | 0x40
INTERRUPT_WAKER = -2  # the waker of a wake-up made in interrupt context


def wake_event(capture: Capture) -> str | None:
    """The wake-up tracepoint the capture recorded (``sched_waking`` first), if any."""
    return next((n for n in WAKE_TRACEPOINTS if n in capture.names), None)


def wakers(capture: Capture, data: CaptureData, outs: SwitchOuts) -> tuple[I64, I64]:
    """Per interval, the thread whose wake-up ended it — the tid of the last ``sched_waking``
    (or ``sched_wakeup``) sample naming the thread between its switch-out and its switch-in —
    :data:`INTERRUPT_WAKER` when that wake-up ran in an interrupt, -1 without one (no wake-up
    event recorded, a preempted thread, a wake-up by a thread that was not recorded); and the
    row of that wake-up's sample (an index into ``data.samples``; -1 without one)."""
    out = np.full(len(outs.rows), -1, dtype=np.int64)
    sample = out.copy()
    name = wake_event(capture)
    if name is None or not len(out):
        return out, sample
    tfmt = trace_format(capture.reader, name)
    if tfmt is None or tfmt.get("pid") is None or tfmt.get("common_flags") is None:
        return out, sample
    s = data.samples
    rows = np.flatnonzero(s.event == capture.names.index(name))
    if not len(rows):
        return out, sample
    fields = read_fields(capture, s, rows, tfmt, ("pid", "common_flags"))
    at = s.time[rows].astype(np.int64)
    t0 = s.time[outs.rows].astype(np.int64)
    found = last_at_or_before(outs.tid, outs.end, fields["pid"], at)
    ok = found >= 0
    ok[ok] &= at[found[ok]] >= t0[ok]
    hit = found[ok]
    out[ok] = np.where((fields["common_flags"][hit] & IN_INTERRUPT) != 0, INTERRUPT_WAKER,
                       s.tid[rows[hit]].astype(np.int64))
    sample[ok] = rows[hit]
    return out, sample


def read_fields(capture: Capture, s: SampleColumns, rows: I64, tfmt: TraceFormat,
                names: tuple[str, ...]) -> dict[str, I64]:
    """Integer fields of the tracepoint payloads of samples ``rows``, as int64 columns; a
    payload too short for a field reads 0 there."""
    out: dict[str, I64] = {}
    if s.raw is not None:
        view = np.frombuffer(capture.reader.raw_view(), dtype=np.uint8)
        offset, size = s.raw.offset[rows], s.raw.size[rows]
    else:  # a decoder without the RAW column: the payloads by record number
        payloads = raw_payloads(capture.reader, s.seq[rows])
        flat = b"".join(payloads.tolist())
        view = np.frombuffer(flat, dtype=np.uint8)
        size = np.fromiter((len(p) for p in payloads.tolist()), dtype=np.int64, count=len(payloads))
        offset = np.zeros(len(size), dtype=np.int64)
        np.cumsum(size[:-1], out=offset[1:])
    little = capture.byte_order == "little"
    for name in names:
        f = tfmt.get(name)
        if f is None or f.size not in (1, 2, 4, 8) or f.array_len is not None:
            raise ReportError(f"{capture.path}: {tfmt.event} has no integer field {name!r}.")
        ok = size >= f.offset + f.size
        at = np.where(ok, offset + f.offset, 0)
        value = _words(view, at, f.size, little) if f.size >= 4 and not (at & 3).any() else None
        if value is None:  # any alignment: byte by byte
            raw = view[at[:, None] + np.arange(f.size)] if len(at) else np.zeros((0, f.size), np.uint8)
            dtype = np.dtype(f"{'<' if little else '>'}u{f.size}")
            value = raw.view(dtype).reshape(-1).astype(np.uint64)
        value = value.astype(np.int64)
        if f.signed and f.size < 8:
            value = np.where(value >= 1 << (8 * f.size - 1), value - (1 << (8 * f.size)), value)
        out[name] = np.where(ok, value, 0)
    if s.raw is not None:
        # the payloads are spread over the whole capture: give its pages back once read (they
        # stay in the page cache), so the report's memory does not keep the file's size
        capture.reader.release(0, len(view))
    return out


def _words(view: npt.NDArray[np.uint8], at: I64, size: int, little: bool) -> npt.NDArray[np.uint64]:
    """Fields of 4 or 8 bytes at 4-aligned offsets ``at``, read as u32 words (a tracepoint's
    payload follows RAW's u32 size: its fields are 4-aligned, not 8)."""
    w32 = view[:len(view) - len(view) % 4].view("<u4" if little else ">u4")
    first: npt.NDArray[np.uint64] = w32[at >> 2].astype(np.uint64)
    if size == 4:
        return first
    second: npt.NDArray[np.uint64] = w32[(at >> 2) + 1].astype(np.uint64)
    low, high = (first, second) if little else (second, first)
    out: npt.NDArray[np.uint64] = low | (high << np.uint64(32))
    return out


def running_evidence(data: CaptureData, switch_rows: I64, next_pid: I64) -> tuple[I64, I64]:
    """(tid, time) of every moment the capture shows a thread on a CPU: its samples (any
    event), its switch-in records, and sched_switch's ``next_pid`` (system-wide)."""
    s = data.samples
    tids = [s.tid.astype(np.int64), next_pid]
    times = [s.time.astype(np.int64), s.time[switch_rows].astype(np.int64)]
    sw = data.switches
    if sw is not None and len(sw):
        # an in record names the thread switched in; a CPU-wide out record names it too
        tids += [sw.tid[~sw.out], sw.next_prev_tid[sw.out & (sw.next_prev_tid >= 0)]]
        times += [sw.time[~sw.out], sw.time[sw.out & (sw.next_prev_tid >= 0)]]
    rec_tid, rec_time = [], []
    for o in data.others:  # captures whose events' trailers differ: the records as objects
        rec = o.record
        if isinstance(rec, R.Switch):
            if not rec.switch_out and rec.sample_id is not None and rec.sample_id.tid is not None:
                rec_tid.append(rec.sample_id.tid)
                rec_time.append(o.time)
        elif isinstance(rec, R.SwitchCpuWide):
            if rec.switch_out:
                rec_tid.append(rec.next_prev_tid)  # the thread switched in
                rec_time.append(o.time)
            elif rec.sample_id is not None and rec.sample_id.tid is not None:
                rec_tid.append(rec.sample_id.tid)
                rec_time.append(o.time)
    tids.append(np.asarray(rec_tid, dtype=np.int64))
    times.append(np.asarray(rec_time, dtype=np.int64))
    return np.concatenate(tids), np.concatenate(times)


# The intervals are computed on signed 64-bit times: a time of 2^63 ns or more (292 years of
# uptime, a damaged record) is taken as the latest representable one, not an overflow.
LATEST = (1 << 63) - 1


def exits(data: CaptureData) -> tuple[I64, I64]:
    pairs = [(o.record.tid, min(o.time, LATEST)) for o in data.others if isinstance(o.record, R.Exit)]
    return (np.asarray([p[0] for p in pairs], dtype=np.int64), np.asarray([p[1] for p in pairs], dtype=np.int64))


def end_time(data: CaptureData) -> int:
    """The last time the capture holds: where still-open intervals end."""
    last = int(data.samples.time.max()) if len(data.samples) else 0
    if data.others:
        last = max(last, max(o.time for o in data.others))
    if data.switches is not None and len(data.switches):
        last = max(last, int(data.switches.time.max()))
    return min(last, LATEST)


def state_rows(capture: Capture, data: CaptureData, event: str) -> tuple[I64, I64, I64]:
    """The rows of pseudo-event ``event`` (indices into the decoded samples, time order),
    their periods in nanoseconds, and the code of each row's state frame (:data:`STATE_LABELS`)."""
    outs = switch_outs(capture, data)
    periods = outs.end - data.samples.time[outs.rows].astype(np.int64)
    if event == OFFCPU_EVENT:
        return outs.rows, periods, outs.codes
    on_cpu = [i for i, name in enumerate(capture.names) if period_is_nanoseconds(name) and name != event]
    if not on_cpu:
        raise ReportError(f"--wall adds on-CPU samples of cpu-clock or task-clock: {capture.path} has "
                          f"{', '.join(capture.names)} (record with -e cpu-clock).")
    running = np.flatnonzero(data.samples.event == on_cpu[0])
    rows = np.concatenate([running, outs.rows])
    order = np.argsort(rows, kind="stable")  # the decoded samples are in time order
    period = np.concatenate([data.samples.period[running].astype(np.int64), periods])
    codes = np.concatenate([np.full(len(running), RUNNING * 2, dtype=np.int64), outs.codes])
    return rows[order], period[order], codes[order]


def add_state_roots(profile: Profile, codes: I64) -> Profile:
    """Each row's stack gets one more frame at its root, its thread state (``codes``, per row
    an index into :data:`STATE_LABELS`): stacks that only differ by state become distinct stacks."""
    if profile.resolver is None or not len(profile.stack):
        return profile
    frames = profile.resolver.frames
    ids = np.asarray([frames.intern(FrameInfo(label, STATE_DSO, STATE_DSO, "state")) for label in STATE_LABELS],
                     dtype=np.int64)
    span = len(STATE_LABELS)
    key = profile.stack.astype(np.int64) * span + codes  # the same order as (stack, state frame)
    new_stack = dense_ids(key)  # O(n) with a presence table: stacks are few beside the rows
    uniq = np.empty(int(new_stack.max()) + 1, dtype=np.int64)
    uniq[new_stack] = key
    old = uniq // span
    extra = ids[uniq % span]
    t = profile.stack_table
    lens = np.diff(t.start)[old] + 1
    start = np.zeros(len(uniq) + 1, dtype=np.int64)
    np.cumsum(lens, out=start[1:])
    total = int(start[-1])
    entry = np.empty(total, dtype=np.int64)
    is_root = np.zeros(total, dtype=bool)
    is_root[start[1:] - 1] = True
    entry[~is_root] = ranges(t.start[old], lens - 1)
    entry[is_root] = -1
    src = np.where(is_root, 0, entry)

    def grow(column: Any, root: Any) -> Any:
        out = column[src].copy()
        out[is_root] = root
        return out

    table = StackTable(start, grow(t.frames, extra), grow(t.offsets, 0), grow(t.shown, 0), grow(t.addrs, 0),
                       None if t.srclines is None else grow(t.srclines, -1),
                       None if t.leaf is None else t.leaf[old])
    profile.stack = new_stack.astype(np.int64)
    profile.stack_table = table
    profile.stack_start, profile.stack_frames = table.start, table.frames
    return profile
