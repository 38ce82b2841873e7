"""``profiler stat`` end to end: events, targets, the workload, wall time, repeats, intervals.

A command is started and held (:class:`~profiler.stat.workload.HeldCommand`) until its
counters exist, then released: its leaders have ``enable_on_exec``, so counting starts exactly
at the exec, as in perf. The wall time runs from the release to ``wait4`` (which also gives the
command's user and system time). Without a command, counting runs until Ctrl-C, or until every
attached thread has exited. SIGINT during a command only reaches the command (as in a shell);
its counts are still printed, and its exit status becomes ours.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TextIO

from profiler.dataclass import dataclass
from profiler.errors import UsageError
from profiler.record import cpus as metadata
from profiler.record.events import EventGroup, EventSpec, parse_event, parse_event_groups
from profiler.record.target import PROC, Thread, threads_by_id, threads_of_processes
from profiler.stat.counters import CounterSet, Slot, Target
from profiler.stat.model import Counts, StatReport, aggregate, build_rows, delta
from profiler.stat.options import StatOptions
from profiler.stat.render import GLOBAL, PER_CPU, PER_THREAD, Renderer
from profiler.stat.values import RunningStats
from profiler.stat.workload import HeldCommand

DEFAULT_SOFTWARE = ("task-clock", "context-switches", "cpu-migrations", "page-faults")
DEFAULT_HARDWARE = ("cycles", "instructions", "branches", "branch-misses")


def default_groups(system_wide: bool) -> tuple[list[EventGroup], frozenset[int]]:
    """perf stat's default list; the hardware events may show as ``<not supported>``.
    System-wide counting uses cpu-clock, as perf does."""
    names = list(DEFAULT_SOFTWARE)
    if system_wide:
        names[0] = "cpu-clock"
    names += DEFAULT_HARDWARE
    groups = [EventGroup((parse_event(name),)) for name in names]
    return groups, frozenset(range(len(DEFAULT_SOFTWARE), len(names)))


def resolve_groups(opts: StatOptions) -> tuple[list[EventGroup], frozenset[int]]:
    if opts.events:
        return parse_event_groups(opts.events), frozenset()
    return default_groups(opts.system_wide)


def aggregation_mode(opts: StatOptions) -> str:
    if opts.per_cpu:
        return PER_CPU
    if opts.per_thread:
        return PER_THREAD
    return GLOBAL


def resolve_cpus(opts: StatOptions) -> list[int]:
    online = metadata.online_cpus()
    if opts.cpus is None:
        return online
    missing = [c for c in opts.cpus if c not in online]
    if missing:
        raise UsageError(f"CPU {missing[0]} is not online (online CPUs: {','.join(map(str, online))}).")
    return list(opts.cpus)


def comm_of(tid: int) -> str:
    try:
        with open(os.path.join(PROC, str(tid), "comm")) as stream:
            return stream.read().strip()
    except OSError:
        return "?"


def build_targets(opts: StatOptions, child_pid: int | None, threads: list[Thread]) -> list[Target]:
    """Where every group is opened: per CPU for -a/-C/-A, per thread for -p/-t, else the
    command's process with cpu = -1 (inherit follows its children on any CPU)."""
    if opts.system_wide:
        pids = [-1]
    elif threads:
        pids = [t.tid for t in threads]
    else:
        assert child_pid is not None
        pids = [child_pid]
    per_cpu_open = opts.system_wide or opts.per_cpu or opts.cpus is not None
    cpus = resolve_cpus(opts) if per_cpu_open else [-1]
    targets = []
    for cpu in cpus:
        for pid in pids:
            slot = Slot(cpu=cpu) if opts.per_cpu else Slot(tid=pid, comm=comm_of(pid)) if opts.per_thread else Slot()
            targets.append(Target(pid, cpu, slot))
    return targets


def slot_of(opts: StatOptions, target: Target) -> Slot | None:
    return target.slot if (opts.per_cpu or opts.per_thread) else None


def title(opts: StatOptions) -> str:
    if opts.system_wide:
        return f"'CPU(s) {opts.cpu_list}'" if opts.cpu_list else "'system wide'"
    if opts.pids:
        return f"process id '{opts.pid_text}'"
    if opts.tids:
        return f"thread id '{opts.tid_text}'"
    return "'" + " ".join(opts.command) + "'"


class _Stop(Exception):
    """Raised by the SIGINT/SIGTERM handler to end a measurement without a command."""


@dataclass
class Measurement:
    counts: Counts
    wall_ns: int
    exit_code: int = 0
    user_s: float | None = None
    sys_s: float | None = None


class StatRunner:
    """One ``profiler stat`` invocation; ``run()`` prints and returns the exit code."""

    def __init__(self, opts: StatOptions, out: TextIO = sys.stderr, err: TextIO = sys.stderr) -> None:
        opts.validate()
        self.opts = opts
        self.out, self.err = out, err
        self.groups, self.optional = resolve_groups(opts)
        self.events: list[EventSpec] = [spec for g in self.groups for spec in g.members]
        self.mode = aggregation_mode(opts)
        self.renderer = Renderer(out, csv_sep=opts.csv_sep, as_json=opts.json, mode=self.mode, runs=opts.repeat,
                                 table_format=opts.table_format)
        self.threads: list[Thread] = []
        self.slots: list[Slot | None] = []  # per target of the current measurement
        self.unsupported: set[int] = set()  # event indexes shown as <not supported>
        self._signal: int | None = None
        self._printed_notices: set[str] = set()

    def run(self) -> int:
        opts = self.opts
        if opts.pids:
            self.threads = threads_of_processes(opts.pids)
        elif opts.tids:
            self.threads = threads_by_id(opts.tids)
        runs: list[Measurement] = []
        walls = RunningStats()
        for _ in range(opts.repeat):
            m = self.measure()
            runs.append(m)
            walls.add(m.wall_ns)
            if self._signal is not None:
                break
        if opts.interval_ms is None:
            self.renderer.runs = len(runs)
            self.renderer.summary(self.report(runs, walls))
        return runs[-1].exit_code

    def report(self, runs: list[Measurement], walls: RunningStats) -> StatReport:
        rows = build_rows(self.events, self.unsupported, [m.counts for m in runs], self.unique_slots(), walls.mean)
        last = runs[-1]
        rusage = len(runs) == 1 and bool(self.opts.command) and not self.opts.attached \
            and not self.opts.system_wide
        return StatReport(title(self.opts), len(runs), rows, walls,
                          last.user_s if rusage else None, last.sys_s if rusage else None)

    def unique_slots(self) -> list[Slot | None]:
        return list(dict.fromkeys(self.slots)) if self.mode != GLOBAL else [None]

    # one measurement ------------------------------------------------------------------------

    def measure(self) -> Measurement:
        opts = self.opts
        counted_child = bool(opts.command) and not opts.attached and not opts.system_wide
        child = HeldCommand(opts.command) if opts.command else None
        targets = build_targets(opts, child.pid if child is not None and counted_child else None, self.threads)
        self.slots = [slot_of(opts, t) for t in targets]
        counters = CounterSet(self.groups, targets, inherit=opts.inherit,
                              enable_on_exec=counted_child, optional=self.optional)
        try:
            counters.open()
        except BaseException:
            if child is not None:
                child.abandon()
            raise
        try:
            self.unsupported = self._unsupported_events(counters.unsupported)
            self._print_notices(counters.notices)
            return self._count(counters, child, counted_child)
        finally:
            counters.close()

    def _unsupported_events(self, groups: set[int]) -> set[int]:
        out, index = set(), 0
        for g, group in enumerate(self.groups):
            for _ in group.members:
                if g in groups:
                    out.add(index)
                index += 1
        return out

    def _count(self, counters: CounterSet, child: HeldCommand | None, counted_child: bool) -> Measurement:
        rusage = None
        last: Counts = {}
        with self._signals(child is not None):
            start = time.monotonic_ns()
            if not counted_child:
                counters.enable()
            if child is not None:
                child.release()
            if self.opts.interval_ms is not None:
                last = self._interval_loop(counters, child, start)
            if child is not None:
                rusage = _reap(child)
            elif self.opts.interval_ms is None:
                self._wait_for_stop(counters)
            end = time.monotonic_ns()
            counters.disable()
        m = Measurement(aggregate(counters.read(), self.slots), end - start)
        if child is not None:
            m.exit_code = child.exit_code()
            if rusage is not None:
                m.user_s, m.sys_s = rusage.ru_utime, rusage.ru_stime
        if self.opts.interval_ms is not None:
            self._print_interval(m.counts, last, end - start)
        return m

    # waiting ----------------------------------------------------------------------------------

    def _wait_for_stop(self, counters: CounterSet) -> None:
        try:
            while not self._poll_until_gone(counters, None):
                pass
        except _Stop:
            pass

    def _poll_until_gone(self, counters: CounterSet, timeout_ms: int | None) -> bool:
        """poll() the leaders; True once every attached task has exited (all hung up)."""
        fds = [og.fds[0] for og in counters.opened] if self.threads else []
        if not fds:
            if timeout_ms is None:
                signal.pause()
            else:
                time.sleep(timeout_ms / 1000)
            return False
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        ready = poller.poll(timeout_ms)
        hung = {fd for fd, mask in ready if mask & (select.POLLHUP | select.POLLERR)}
        return hung == set(fds)

    def _interval_loop(self, counters: CounterSet, child: HeldCommand | None, start: int) -> Counts:
        """Print every -I interval until the command exits, Ctrl-C, or every task has gone;
        returns the counts at the last printed interval."""
        assert self.opts.interval_ms is not None
        step = self.opts.interval_ms * 1_000_000
        last: Counts = {}
        tick = start + step
        pidfd = os.pidfd_open(child.pid) if child is not None else -1
        try:
            while not self._tick_wait(counters, pidfd, max(0, (tick - time.monotonic_ns()) // 1_000_000)):
                now = time.monotonic_ns()
                if now >= tick:
                    counts = aggregate(counters.read(), self.slots)
                    self._print_interval(counts, last, now - start)
                    last, tick = counts, tick + step
        except _Stop:
            pass
        finally:
            if pidfd >= 0:
                os.close(pidfd)
        return last

    def _tick_wait(self, counters: CounterSet, pidfd: int, timeout_ms: int) -> bool:
        """Wait for the next tick; True when the measurement is over."""
        if pidfd < 0:
            return self._poll_until_gone(counters, timeout_ms)
        return bool(select.select([pidfd], [], [], timeout_ms / 1000)[0])

    def _print_interval(self, now: Counts, before: Counts, elapsed_ns: int) -> None:
        assert self.opts.interval_ms is not None
        rows = build_rows(self.events, self.unsupported, [delta(now, before)], self.unique_slots(),
                          self.opts.interval_ms * 1_000_000)
        self.renderer.interval(elapsed_ns, rows)

    # signals -----------------------------------------------------------------------------------

    @contextmanager
    def _signals(self, with_command: bool) -> Iterator[None]:
        """SIGINT/SIGTERM end a measurement without a command; with one, the command gets
        the terminal's signal itself and we keep waiting for it (as perf does)."""

        def on_signal(signum: int, frame: FrameType | None) -> None:
            self._signal = signum
            if not with_command:
                raise _Stop()

        saved = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)

    def _print_notices(self, notices: list[str]) -> None:
        for notice in dict.fromkeys(notices):
            if notice not in self._printed_notices:
                self._printed_notices.add(notice)
                print(notice, file=self.err)


def _reap(child: HeldCommand) -> resource.struct_rusage | None:
    """wait4() the command: its status, and its (and its waited-for children's) CPU times."""
    while child.status is None:
        try:
            _, status, rusage = os.wait4(child.pid, 0)
        except ChildProcessError:
            child.status = 0
            return None
        child.status = status
        return rusage
    return None


def run_stat(opts: StatOptions, out: TextIO = sys.stderr, err: TextIO = sys.stderr) -> int:
    """Count according to ``opts``, print like perf stat, return the command's exit status."""
    return StatRunner(opts, out, err).run()
