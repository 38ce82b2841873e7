"""``profiler record`` end to end: events, target, capture, loop, metadata, closing line.

Order matters for what the capture can explain:
1. the command is forked and held (or the running threads are listed);
2. every event is opened disabled, one per (CPU, task) — ring buffers mapped, ids read;
3. the capture is created with a header naming the events and their kernel ids;
4. host facts (kernel build-id, modules, vdso image, ``_text``) and synthesized records for
   what already runs are written; the events are enabled (or the command released, and its
   exec enables them);
5. the loop copies ring buffers until the command exits, a signal, ``--duration``, or every
   attached task is gone; then events are disabled, buffers drained a last time, build-ids,
   the kernel symbols that samples hit, and statistics written, and the trailer marks the
   clean end.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from functools import partial
from types import SimpleNamespace

from profiler.errors import DiskFullError, ProfilerError, RecordError, UsageError
from profiler.format import abi as R
from profiler.format.attr import PERF_TYPE_TRACEPOINT, attr_to_dict, new_attr, perf_event_attr
from profiler.format.container.layout import STDOUT, VERSION_FRAME_CPU, VERSION_PLAIN, VERSION_STACKS, VERSION_ZSTD
from profiler.format.container.layout import with_index
from profiler.format.container.writer import CaptureWriter
from profiler.names import KERNEL_DSO
from profiler.record import kallsyms, metadata, perf_event, synth
from profiler.record.attrs import add_cgroup_sampling, add_dwarf_sampling, user_space_switch_outs
from profiler.record.cgroups import open_cgroup
from profiler.record.events import EventSpec, default_event, parse_event, split_modifiers
from profiler.record.flight import SIDEBAND, SideBand, SnapshotOn, backward_window, fly
from profiler.record.groups import Member, configure, member_filters, members_of
from profiler.record.options import DEFAULT_FREQ, OFFCPU_TRACEPOINT, RecordOptions
from profiler.record.python import python_environment
from profiler.record.result import RecordResult
from profiler.record.session import OpenedEvent, Session
from profiler.record.rotate import Totals, carry_sideband, process_tree, rotation_for, summed
from profiler.record.packing import write_mapped_metadata
from profiler.record.perf_event import drain_scheduling
from profiler.record.stopper import Stopper, installed
from profiler.record.target import Child, Thread, threads_by_id, threads_of_processes

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any, TextIO

POLL_MS = 250  # also the longest a quiet buffer waits before it reaches the file
# The recorder's scheduling slice while it drains (sched_setattr's sched_runtime for SCHED_OTHER,
# Linux >= 6.12; the kernel's minimum). It asks for no more CPU time: it tells the EEVDF
# scheduler that the recorder runs in short bursts, so that a wakeup (a ring buffer crossing
# its watermark) preempts the busy target now rather than at its next tick, milliseconds
# later, when a small buffer has long overflowed.
DRAIN_SLICE_NS = 100_000
# Nice levels the drain loop gives itself when the process may (CAP_SYS_NICE, or an RLIMIT_NICE
# that allows it; root here): a busy target on every CPU delays the recorder's wakeups by
# milliseconds often enough to overflow a small buffer, and a 3x heavier scheduling weight puts
# it first in line. It costs no CPU (the same passes, served sooner), the command was forked
# before (it keeps its own nice value), and an unprivileged recorder simply goes without. At
# -m 1 -F 100000, 5 alternating runs, load 1.2-1.4: 0.4 % lost against perf's 0.7 %, where it
# was 3.3 % against 1.3 % without. perf offers the same as an option (-r, SCHED_FIFO).
DRAIN_NICE_BOOST = 5
# Bytes of ring-buffer data area; see wakeup_watermark. Such small buffers are also written
# raw (uncompressed) unless the recording is --call-graph dwarf: one at a high rate fills every
# millisecond, and compressing each few KiB (~11 us for 4 KiB) delayed the next pass enough to
# lose about twice as many samples at -m 1 -F 100000 (5.7-9.2 % against 3.5-4.3 % raw, 3
# alternating runs at load 4).
SMALL_BUFFER = 64 << 10
SAMPLE_BASE = R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_PERIOD


def build_attr(
    spec: EventSpec,
    opts: RecordOptions,
    *,
    tracking: bool,
    several: bool,
    enable_on_exec: bool,
    inherit: bool,
    data_size: int,
    sample_cpu: bool = True,
) -> perf_event_attr:
    """The attr for one event. Only the first event tracks mmap/comm/task side-band records
    (perf does the same), so each side-band record appears once. ``sample_cpu``: samples
    carry PERF_SAMPLE_CPU (see ``Recorder._sample_cpu``)."""
    sample_type = SAMPLE_BASE
    if sample_cpu:
        sample_type |= R.PERF_SAMPLE_CPU
    if opts.callgraph:
        sample_type |= R.PERF_SAMPLE_CALLCHAIN
    if spec.type == PERF_TYPE_TRACEPOINT:
        sample_type |= R.PERF_SAMPLE_RAW  # the tracepoint's payload, as perf records it
    if several:
        sample_type |= R.PERF_SAMPLE_IDENTIFIER
    attr = new_attr(
        type=spec.type,
        config=spec.config,
        sample_type=sample_type,
        disabled=1,
        sample_id_all=1,
        watermark=1,
        wakeup_events=wakeup_watermark(data_size),  # union: wakeup_watermark, in bytes
        use_clockid=1,
        clockid=opts.clockid,
        exclude_user=int(spec.exclude_user or opts.kernel_only),
        exclude_kernel=int(spec.exclude_kernel or opts.user_only),
        precise_ip=spec.precise_ip,
        inherit=int(inherit),
        enable_on_exec=int(enable_on_exec),
    )
    attr.config1, attr.config2 = spec.config1, spec.config2
    if opts.off_cpu and spec.name == OFFCPU_TRACEPOINT:
        attr.sample_period = 1  # every switch-out: an off-CPU interval starts at each
    elif opts.period is not None:
        attr.sample_period = opts.period
    elif opts.freq is None and spec.type == PERF_TYPE_TRACEPOINT:
        attr.sample_period = 1  # every tracepoint hit, as perf does by default
    else:
        attr.freq = 1
        attr.sample_period = opts.freq or DEFAULT_FREQ  # union: sample_freq
    if opts.callgraph and opts.callchain_max_stack:
        attr.sample_max_stack = opts.callchain_max_stack
    if opts.dwarf_stack_size is not None:
        add_dwarf_sampling(attr, opts.dwarf_stack_size)
    if opts.off_cpu and spec.name == OFFCPU_TRACEPOINT and not (opts.off_cpu_kernel or attr.exclude_user):
        user_space_switch_outs(attr)  # (--kernel-only: the kernel frames are all there is)
    if opts.all_cgroups:
        add_cgroup_sampling(attr, tracking)
    if tracking:
        attr.mmap = attr.mmap2 = attr.comm = attr.comm_exec = attr.task = 1
        # Off by default, as in perf: the kernel would flag other tools' MMAP2 records too
        # (profiler/record/mapped.py); build-ids are read from the mapped files instead.
        attr.build_id = int(opts.buildid_mmap)
        attr.mmap_data = int(opts.data_mmaps)
        # PERF_RECORD_SWITCH (per task), SWITCH_CPU_WIDE (-a): switch-ins end off-CPU intervals (docs/offcpu.md)
        attr.context_switch = int(opts.off_cpu or opts.switch_events)
        attr.namespaces = int(opts.namespaces)  # PERF_RECORD_NAMESPACES at each fork, unshare, setns
    return attr


def wakeup_watermark(data_size: int) -> int:
    """Bytes in a ring buffer that wake the loop: half the buffer (the kernel's default, perf's),
    three quarters in a buffer of SMALL_BUFFER or less. A small buffer at a high rate wakes us
    thousands of times a second, and what loses samples is the occasional wakeup the scheduler
    serves milliseconds late (the buffer overflows whatever its last quarter or half): fewer
    wakeups, fewer such delays. ``make bench-lost`` (-m 1 -F 100000, 9 runs each at load 4-6):
    median lost 7.5 % at half, 5.4 % at three quarters."""
    if data_size <= SMALL_BUFFER:
        return max(data_size * 3 // 4, 1)
    return max(data_size // 2, 1)


def resolve_events(opts: RecordOptions) -> tuple[list[Member], list[str]]:
    if opts.events:
        members = members_of(opts.events)
        notices = []
    else:
        spec, notice = default_event()
        members, notices = [Member(spec, 0)], [notice] if notice else []
    if opts.off_cpu and not any(m.spec.name == OFFCPU_TRACEPOINT for m in members):
        members.append(Member(parse_event(OFFCPU_TRACEPOINT), len(members)))
    return [m.replace(spec=_privilege_label(m.spec, opts)) for m in members], notices


def _privilege_label(spec: EventSpec, opts: RecordOptions) -> EventSpec:
    """``--kernel-only`` / ``--user-only`` show in the event's name as perf's ``:k`` / ``:u``
    modifiers do (``cpu-clock:k``), unless the event already carries modifiers."""
    suffix = "k" if opts.kernel_only else "u" if opts.user_only else ""
    if not suffix or spec.type == PERF_TYPE_TRACEPOINT or spec.exclude_user or spec.exclude_kernel:
        return spec
    if split_modifiers(spec.name)[1]:
        return spec
    return spec.replace(name=f"{spec.name}:{suffix}")


def resolve_cpus(opts: RecordOptions) -> list[int]:
    online = metadata.online_cpus()
    if opts.cpus is None:
        return online
    missing = [c for c in opts.cpus if c not in online]
    if missing:
        raise UsageError(
            f"CPU {missing[0]} is not online (online CPUs: {','.join(map(str, online))})."
        )
    return list(opts.cpus)


class Recorder:
    """One recording. ``run()`` returns the result; errors are ProfilerError sentences."""

    def __init__(self, opts: RecordOptions, stderr: TextIO = sys.stderr) -> None:
        self.opts = opts
        self.stderr = stderr
        self.page_size = os.sysconf("SC_PAGE_SIZE")
        self.session = Session(opts.data_pages, self.page_size)
        self.session.stats.kernel_build_ids = opts.buildid_mmap
        self.child: Child | None = None
        self.threads: list[Thread] = []
        self.events: list[OpenedEvent] = []
        self.notices: list[str] = []
        self.rotation = rotation_for(opts.switch_output, opts.overwrite, opts.output, opts.switch_max_files,
                                     opts.max_size)
        self._done = Totals()  # the files --switch-output already finished
        self.push: Any = None
        if opts.push or opts.archive_files:
            from profiler.record.filequeue import FileQueue  # subprocess and re: only for --push

            self.push = FileQueue(opts.output, list(opts.push), archive=opts.archive_files)
        self._file_started = 0.0  # when the current file was started (monotonic)
        self.writer: CaptureWriter | None = None
        self.flight = SnapshotOn.parse(opts.snapshot_on) if opts.overwrite else None
        self.sideband = SideBand()
        self.session.overwrite, self.session.stats.keep_sideband = opts.overwrite, opts.switch_output is not None
        self._version: tuple[int, int] = VERSION_PLAIN
        self._tracepoint_formats: Any = None

    # setup ---------------------------------------------------------------------------------

    @property
    def command_is_target(self) -> bool:
        """Whether the events follow the command we start. With -a, -p or -t the command is
        only a timer (``-p PID -- sleep 3``, as in perf): the recording lasts as long as it."""
        return self.child is not None and not (self.opts.system_wide or self.threads)

    def _pids_to_open(self) -> list[int]:
        if self.opts.system_wide:
            return [-1]
        if self.threads:
            return [t.tid for t in self.threads]
        if self.child is not None:
            return [self.child.pid]
        return [-1]

    def _sample_cpu(self, cpus: list[int]) -> bool:
        """Whether samples carry PERF_SAMPLE_CPU (8 bytes each). Every event is opened per CPU
        and only redirected (SET_OUTPUT) into the ring buffer of its own CPU, so each RAW frame
        holds the records of the one CPU its header names, and a sample without the field
        takes its frame's (format 3.0). perf 6.1 sets the bit only for ``-a`` and ``-C``
        (``perf evlist -v``): so do we, and everywhere a ring could mix CPUs (cpu -1)."""
        return self.opts.system_wide or self.opts.cpus is not None or any(cpu < 0 for cpu in cpus)

    @property
    def sample_cpu(self) -> bool:
        return all(e.attr.sample_type & R.PERF_SAMPLE_CPU for e in self.events)

    def _open_events(self, specs: list[Member], cpus: list[int]) -> None:
        if self.opts.cgroup is not None:  # -G: every event on the group's directory, per CPU
            self.session.cgroup_fd = open_cgroup(self.opts.cgroup)
        command = self.command_is_target
        inherit = self.opts.inherit and (command or bool(self.opts.pids))
        data_size = self.opts.data_pages * self.page_size
        sample_cpu = self._sample_cpu(cpus)
        overwrite = self.opts.overwrite  # the side-band then has its own event: record/flight.py
        specs = [*specs, Member(SIDEBAND, len(specs))] if overwrite else specs
        for index, member in enumerate(specs):
            attr = build_attr(member.spec, self.opts, tracking=index == len(specs) - 1 if overwrite else index == 0,
                              several=len(specs) > 1, enable_on_exec=command, inherit=inherit,
                              data_size=data_size, sample_cpu=sample_cpu)
            configure(attr, member)
            attr.write_backward = int(overwrite and member.spec is not SIDEBAND)
            self.events.append(OpenedEvent(member.spec.name, attr))
        filters = member_filters(self.opts.events, self.opts.filters, specs)
        opened_any = False
        leader_fds: dict[tuple[int, int, int], int] = {}  # (event, pid, cpu) -> fd, for group_fd
        for cpu in cpus:
            for index, event in enumerate(self.events):
                for pid in self._pids_to_open():
                    try:
                        group_fd = leader_fds.get((specs[index].leader, pid, cpu), -1)
                        fd = leader_fds[(index, pid, cpu)] = self.session.open(
                            event, pid, cpu, group_fd=group_fd, side=specs[index].spec is SIDEBAND)
                        expr = filters[index]
                        if expr is not None:
                            perf_event.set_filter(fd, expr, event.name)
                        opened_any = True
                    except RecordError:
                        if pid > 0 and self.threads and not os.path.exists(f"/proc/{pid}"):
                            continue  # the thread exited since we listed it
                        raise
        if not opened_any:
            raise RecordError("every target thread exited before recording could start.")
        self.notices.extend(dict.fromkeys(self.session.notices))

    def _target_dict(self) -> dict[str, Any]:
        o = self.opts
        return {
            "command": list(o.command) if o.command else None,
            "pids": list(o.pids),
            "tids": list(o.tids),
            "system_wide": o.system_wide,
            "cpus": list(o.cpus) if o.cpus is not None else None,
        }

    def _header(self) -> dict[str, Any]:
        events = [
            {"name": e.name, "attr": attr_to_dict(e.attr), "ids": list(e.ids)} for e in self.events
        ]
        cmdline = list(self.opts.cmdline) or list(sys.argv)
        return metadata.build_header(target=self._target_dict(), events=events, cmdline=cmdline,
                                     clockid=self.opts.clockid)

    def _layouts(self) -> list[R.SampleLayout]:
        return [R.SampleLayout.from_attr(attr_to_dict(e.attr), sys.byteorder) for e in self.events]

    def _kernel_wanted(self) -> bool:
        return any(not e.attr.exclude_kernel for e in self.events)

    def _write_host_facts(self, writer: CaptureWriter) -> tuple[int | None, str]:
        """The kernel, its modules and the vdso image; of /proc/kallsyms only the head now
        (``_text``, and whether the addresses are hidden): the kernel symbols that samples
        hit are packed at the end (:meth:`_kernel_symbols`). Returns (``_text``, modules)."""
        kernel = metadata.kernel_info()
        self._kernel_build_id = kernel["build_id"]
        writer.write_meta("kernel", kernel)
        modules = metadata.read_modules()
        writer.write_meta("modules", modules)
        vdso = metadata.vdso_image()
        if vdso is not None:
            writer.write_meta("vdso", vdso)
        if not self._kernel_wanted():
            return None, str(modules["text"])
        head = kallsyms.read_head()
        if head.hidden:
            restrict = metadata.kptr_restrict()
            # as captures always said it: readers name kernel frames [unknown] and say why
            writer.write_meta("kallsyms", {"text": head.lines.decode("utf-8", "replace"),
                                           "kptr_restrict": restrict, "hidden": True})
            if not self.opts.quiet:
                self.notices.append(
                    "notice: kernel addresses are hidden (kernel.kptr_restrict="
                    f"{restrict}): kernel symbols will not resolve."
                )
        elif head.text_address is not None:
            self._kallsyms_head = head
            stats = self.session.stats
            stats.kernel_floor = kallsyms.kernel_floor()
            stats.span = kallsyms.SampleSpan.of(
                R.SampleLayout.from_attr(attr_to_dict(e.attr), sys.byteorder) for e in self.events)
        return head.text_address, str(modules["text"])

    def _kernel_symbols(self, writer: CaptureWriter) -> None:
        """The kernel symbols covering every kernel address a sample holds, in the layout of
        ``profiler archive``'s kernel entry (docs/format.md, metadata ``symbols``)."""
        stats = self.session.stats
        if not stats.kernel_floor:
            return
        packed = kallsyms.read_subset(stats.kernel_code_addresses(), head=self._kallsyms_head,
                                      cache=kallsyms.cache_file(self._kernel_build_id))
        if packed is None:
            return
        writer.write_meta("symbols", {
            "kind": "kernel", "path": KERNEL_DSO, "build_id": self._kernel_build_id, "layout": None,
            "kallsyms": packed, "count": kallsyms.count(packed), "coverage": "sampled",
            "source": "recorded"})

    def _synthesize(self, writer: CaptureWriter, text_address: int | None, modules_text: str,
                    live: bool = False) -> None:
        """The state before the first record: the kernel and the target processes (``live``:
        at a --switch-output switch, the command's process tree as it is now too)."""
        layout, first = self._layouts()[0], self.events[0]
        ident = first.ids[0] if first.ids else 0
        records: list[SimpleNamespace] = []
        if text_address is not None:
            records.extend(synth.kernel_records(text_address, modules_text, ident))
        if self.opts.system_wide:
            pids = synth.all_pids()
            records.extend(synth.idle_records(ident))
        else:
            pids = sorted({t.pid for t in self.threads})
            if live and self.child is not None and self.child.pid is not None:
                pids = sorted({*pids, *process_tree(self.child.pid)})
            elif self.opts.namespaces and self.child is not None and self.child.pid is not None:
                records.append(synth.namespaces_record(self.child.pid, self.child.pid, ident))  # not yet exec'd
        for pid in pids:
            records.extend(synth.process_records(pid, ident, data_mmaps=self.opts.data_mmaps,
                                                 namespaces=self.opts.namespaces))
        if self.opts.all_cgroups:
            records.extend(synth.cgroup_records(ident))
        self.session.stats.mapped.seen_records(records)
        if records:
            writer.write_synth(synth.encode_all(records, layout))

    # the loop ------------------------------------------------------------------------------

    def _loop(self, writer: CaptureWriter, stopper: Stopper) -> None:
        deadline = None if self.opts.duration is None else time.monotonic() + self.opts.duration
        while True:
            timeout = POLL_MS
            if deadline is not None:
                timeout = max(0, min(POLL_MS, int((deadline - time.monotonic()) * 1000) + 1))
            if self.rotation is not None:
                timeout = min(timeout, self.rotation.wait_ms() or timeout)
            ready = self.session.wait_and_drain(writer, timeout)
            if self.rotation is not None and self.rotation.due(writer.bytes_written, stopper.switch_requested):
                stopper.switch_requested = False
                writer = self._switch(writer)
            if self.push is not None:
                self.push.poll()
            # the signal pipe (SIGINT/SIGTERM, and SIGCHLD when the command exits) or a quiet
            # poll timeout: only then is there anything to check; a busy recording's wakeups
            # are ring buffers crossing their watermark, and each costs no more than the copy
            woken = stopper.read_fd in ready or not ready
            if woken:
                stopper.clear()
            if stopper.signal is not None:
                return
            if woken and self.child is not None and self.child.poll():
                return
            if deadline is not None and time.monotonic() >= deadline:
                return
            if self.threads and self.session.all_hung_up:
                return  # every target exited: a timer command still running gets SIGTERM

    def _fly(self, stopper: Stopper, specs: list[Member]) -> ProfilerError | None:
        """--overwrite: start the target, sleep until a snapshot is due or the recording ends,
        a last snapshot at the end if asked (record/flight.py)."""
        tracepoints = [m.spec.name for m in specs if m.spec.type == PERF_TYPE_TRACEPOINT]
        self._tracepoint_formats = metadata.tracepoint_formats(tracepoints) if tracepoints else None
        self._print_notices()
        self.session.register_wakeup(stopper.read_fd)
        if stopper.signal is not None:
            self._stop_command()  # never released: it exits unstarted
            return None
        if not self.command_is_target:
            self.session.enable()
        if self.child is not None:
            self._released = True
            self.child.release()
            stopper.attach(self.child)
        try:
            fly(self.session, stopper, self.child, self.opts.duration, bool(self.threads), self.flight or SnapshotOn(),
                self._snapshot, lambda: self.sideband.add(self.session.take_side()))
        except DiskFullError as exc:
            return exc.with_traceback(None)
        finally:
            self.session.disable()
        self._finish_queue()
        return None

    def _snapshot(self) -> None:
        """One flight-recorder snapshot: a whole capture of the buffers' window."""
        assert self.rotation is not None
        self.session.stats = self.session.stats.fresh()
        started = time.monotonic()
        writer = CaptureWriter.create(self.rotation.next_path(), self._header(), self._version)
        try:
            text_address, modules_text = self._write_host_facts(writer)
            if self._tracepoint_formats is not None:
                writer.write_meta("tracepoint_formats", self._tracepoint_formats)
            self._synthesize(writer, text_address, modules_text, live=True)
            side = self.sideband.add(self.session.take_side())
            for cpu, data in side:
                self.session.stats.scan(cpu, data)
            raws = self.session.snapshot(partial(backward_window, page_size=self.page_size))
            if side or raws:
                writer.write_pass([*side, *raws], compressed=self.session.compress)
            self._close_file(writer, started)
        except BaseException:
            writer.abort()
            raise
        self._done.add(self.session.stats, writer.bytes_written)
        self.session.stats = self.session.stats.fresh()
        self.rotation.prune()
        if self.push is not None:
            self.push.add(writer.path)

    def _switch(self, writer: CaptureWriter) -> CaptureWriter:
        """--switch-output: finish the current file (the rings were just drained into it) and
        start the next, a whole capture of its own: host facts, the processes as they are now;
        then drop the oldest files beyond the limits."""
        assert self.rotation is not None
        stats = self.session.stats
        self._done.add(stats, writer.bytes_written)
        self._close_file(writer, self._file_started)
        if self.push is not None:
            self.push.add(writer.path)
        self.session.stats = stats.fresh()
        self.writer = writer = CaptureWriter.create(self.rotation.next_path(), self._header(), self._version)
        self._file_started = time.monotonic()
        text_address, modules_text = self._write_host_facts(writer)
        if self._tracepoint_formats is not None:
            writer.write_meta("tracepoint_formats", self._tracepoint_formats)
        self._synthesize(writer, text_address, modules_text, live=True)
        carry_sideband(self.sideband, stats, self.session.stats, writer, self.session.compress)
        self.rotation.prune()
        return writer

    def _finish(self, writer: CaptureWriter, started: float) -> None:
        self.session.disable()
        self.session.drain(writer)
        if self.rotation is not None:
            self._close_file(writer, self._file_started)
            self.rotation.prune()
            if self.push is not None:
                self.push.add(writer.path)
            self._finish_queue()
            return
        self._close_file(writer, started)

    def _finish_queue(self) -> None:
        if self.push is not None:
            self.push.finish(None if self.opts.quiet else self.stderr)

    def _close_file(self, writer: CaptureWriter, started: float) -> None:
        """The closing metadata of one capture file (build-ids, kernel symbols, lost, stats)."""
        stats = self.session.stats
        self.session.flush_python_lines(writer)  # --python-lines (record/pylines.py)
        write_mapped_metadata(writer, stats.mapped, self.opts.dwarf_stack_size is not None, self.opts.namespace_symbols)
        self._kernel_symbols(writer)
        writer.write_meta("lost", {"per_cpu": dict(stats.lost_per_cpu)})
        summary = {
            "samples": stats.samples,
            "lost": stats.lost,
            "records": {R.record_name(t): n for t, n in sorted(stats.counts.items())},
            "raw_bytes": stats.raw_bytes,
            "wakeups": stats.wakeups,
            "duration_s": round(time.monotonic() - started, 6),
        }
        writer.write_meta("stats", summary)
        writer.close(summary)

    # run -----------------------------------------------------------------------------------

    def run(self) -> RecordResult:
        opts = self.opts
        opts.validate()
        specs, notices = resolve_events(opts)
        self.notices.extend(notices)
        cpus = resolve_cpus(opts)
        if opts.pids:
            self.threads = threads_of_processes(opts.pids)
        elif opts.tids:
            self.threads = threads_by_id(opts.tids)
        if opts.command:
            self.child = Child(opts.command, stdout_to_stderr=_is_our_stdout(opts.output),
                               env=python_environment(opts.python, opts.callgraph, os.environ))
        try:
            return self._record(specs, cpus)
        except BaseException:
            self._stop_command()
            raise
        finally:
            self.session.close()

    _released = False
    _kernel_build_id: str | None = None
    _kallsyms_head: kallsyms.Head | None = None

    def _stop_command(self) -> None:
        """Recording failed: a command not yet released exits without running anything, a
        running one is terminated (SIGTERM, then SIGKILL if it lingers) and reaped."""
        child = self.child
        if child is None or child.status is not None:
            return
        if self._released:
            child.terminate()
        else:
            child.abandon()

    def _record(self, specs: list[Member], cpus: list[int]) -> RecordResult:
        self._open_events(specs, cpus)
        dwarf = self.opts.dwarf_stack_size is not None
        compress = self.opts.compress and (dwarf or self.opts.data_pages * self.page_size > SMALL_BUFFER)
        version = VERSION_ZSTD if compress else VERSION_PLAIN
        self.session.compress = compress
        split = False
        if dwarf:  # numpy, and stack copies apart (format 4.0): only --call-graph dwarf needs them
            from profiler.format.splitstacks import dwarf_compaction

            self.session.compact, split = dwarf_compaction(self._layouts(), compress)
        version = VERSION_FRAME_CPU if not self.sample_cpu else version  # samples' CPU from their frame
        version = VERSION_STACKS if split else with_index(version) if compress else version  # + INDEX frames
        error: ProfilerError | None = None
        started = self._file_started = time.monotonic()
        # The handlers are in place before the capture file exists, as perf installs its own
        # before it creates perf.data: a SIGINT while the host facts are read ends the
        # recording like one during the loop.
        stopper = Stopper(None)
        stopper.on_switch_signal = self.flight.signal if self.flight is not None else (
            self.rotation is not None and self.rotation.spec.kind == "signal")
        self._version = version
        with installed(stopper):
            if self.flight is not None:
                return self._result(stopper, self._fly(stopper, specs))
            path = self.rotation.next_path() if self.rotation is not None else self.opts.output
            self.writer = CaptureWriter.create(path, self._header(), version, keep_old=self.rotation is None)
            try:
                self._setup_and_loop(self.writer, stopper, specs)
                self._finish(self.writer, started)
            except DiskFullError as exc:
                error = exc.with_traceback(None)  # its frames hold views of the ring buffers
                if self.rotation is not None:
                    error = self.rotation.disk_full(error)
                self.session.disable()
                self.writer.abort()
                if not self._released:
                    raise error from None  # the command never ran: run() lets it exit unstarted
            except BaseException:
                self.writer.abort()
                raise
        return self._result(stopper, error)

    def _result(self, stopper: Stopper, error: ProfilerError | None) -> RecordResult:
        done = self._done
        result = RecordResult(
            exit_code=0,
            path=self.rotation.describe() if self.rotation is not None else self.writer.path if self.writer else "",
            samples=self.session.stats.samples + done.samples,
            lost=self.session.stats.lost + done.lost,
            bytes_written=(self.writer.bytes_written if self.writer is not None else 0) + done.bytes_written,
            lost_per_cpu=summed(done.lost_per_cpu, self.session.stats.lost_per_cpu),
            notices=self.notices,
        )
        self.session.close()
        result.exit_code = self._wait_for_command(stopper.signal, error is not None)
        result.stopped_by = stopper.signal
        if error is not None:
            # The disk filled up while the command ran: it was left to finish, and its exit
            # status is ours; the sentence says what happened to the capture.
            error.exit_code = result.exit_code
            raise error
        return result

    def _setup_and_loop(self, writer: CaptureWriter, stopper: Stopper, specs: list[Member]) -> None:
        """Host facts, then (unless a signal already asked to stop) enable, release the
        command, synthesize the existing state and drain until the end. A command stopped
        before its release never runs: it exits unstarted, the capture is still whole."""
        text_address, modules_text = self._write_host_facts(writer)
        tracepoints = [m.spec.name for m in specs if m.spec.type == PERF_TYPE_TRACEPOINT]
        if tracepoints:
            self._tracepoint_formats = metadata.tracepoint_formats(tracepoints)
            writer.write_meta("tracepoint_formats", self._tracepoint_formats)
        self._print_notices()
        self.session.register_wakeup(stopper.read_fd)
        if stopper.signal is not None:
            if self.child is not None:
                self.child.abandon()
            return
        if not self.command_is_target:
            self.session.enable()  # CPUs or running threads count from now, a timer command or not
        if self.child is not None:
            self._released = True
            self.child.release()
            stopper.attach(self.child)
        self._synthesize(writer, text_address, modules_text)
        self.session.start_python_lines(self.opts, self.child if self.command_is_target else None, self.stderr)
        try:
            with drain_scheduling(DRAIN_SLICE_NS, DRAIN_NICE_BOOST):
                self._loop(writer, stopper)
        finally:
            self.session.disable()

    def _print_notices(self) -> None:
        if not self.opts.quiet:
            for notice in self.notices:
                print(notice, file=self.stderr)

    def _wait_for_command(self, stopped_by: int | None, failed: bool) -> int:
        """The command's exit status becomes ours; a command still running when recording
        ended by --duration is sent SIGTERM (as perf does); after a full disk it is left to
        finish undisturbed."""
        if self.child is None:
            return 0
        if not failed and stopped_by is None and self.child.status is None:
            self.child.kill(signal.SIGTERM)
        return self.child.exit_code()


def _is_our_stdout(path: str) -> bool:
    """Whether the capture goes to the pipe or file that is our standard output (``-o
    /dev/stdout``): the command's output then goes to standard error, as perf sends a
    workload's when it writes perf.data to stdout, so that it does not land in the capture.
    A shared device (``/dev/null`` for both) is left alone."""
    if path == STDOUT:
        return True
    try:
        ours, out = os.fstat(1), os.stat(path)
    except (OSError, ValueError):
        return False
    return (ours.st_dev, ours.st_ino) == (out.st_dev, out.st_ino) and not stat.S_ISCHR(out.st_mode)


def record(opts: RecordOptions, stderr: TextIO = sys.stderr) -> RecordResult:
    """Record according to ``opts``; print notices and the closing line unless quiet."""
    result = Recorder(opts, stderr).run()
    if not opts.quiet:
        print(result.closing_line(), file=stderr)
        if result.lost:
            print(
                f"[ profiler record: {result.lost} samples were lost because the ring buffers "
                "filled up: use a larger -m or a lower -F ]",
                file=stderr,
            )
    return result

