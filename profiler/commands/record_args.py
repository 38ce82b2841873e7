"""``profiler record``'s options, declared once, and what the command does with them.

Click builds the command from :data:`OPTIONS` (profiler/commands/record.py). The entry point
(profiler/main.py) also reads a plain ``profiler record`` command line with :func:`parse`, without
importing click: every recording pays for its imports in CPU time (the recorder's own CPU is a
benchmark row, docs/benchmarks.md), and click with its imports was about a fifth of it. Anything
:func:`parse` does not read exactly as click would (help, ``--name=value``, ``-F4000``, short
flags run together, an unknown option, a value of the wrong type) goes to click, which answers
as it always does.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

from profiler.commands._targets import cpu_list_option, id_list_option
from profiler.record.python import PYTHON_MODES, python_call_graph
from profiler.record.target import find_on_path
from profiler.errors import ProfilerError, UsageError
from profiler.record.options import (
    DEFAULT_OUTPUT,
    DWARF_DATA_PAGES,
    RecordOptions,
    parse_call_graph,
    parse_clockid,
    parse_mmap_pages,
)

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

FLAG, VALUE, MULTIPLE, OPTIONAL = "flag", "value", "multiple", "optional"


class Option:
    """One option: its names, the keyword it fills, and how it is read (FLAG: True when given;
    VALUE: the next argument, the last one given wins; MULTIPLE: a tuple of every one given;
    OPTIONAL: ``--name=VALUE`` or ``--name`` alone for ``default``'s flag value, read by click
    only)."""

    __slots__ = ("names", "dest", "kind", "convert", "metavar", "default", "help")

    def __init__(
        self,
        names: tuple[str, ...],
        dest: str,
        kind: str = FLAG,
        convert: Callable[[str], Any] = str,  # str, int or float (click's types of the same names)
        metavar: str | None = None,
        default: Any = None,
        help: str = "",
    ) -> None:
        self.names = names
        self.dest = dest
        self.kind = kind
        self.convert = convert
        self.metavar = metavar
        self.default = default
        self.help = help

    @property
    def unset(self) -> Any:
        """The value when the option is not given, as click passes it."""
        if self.kind == OPTIONAL:
            return None
        return {FLAG: False, MULTIPLE: ()}.get(self.kind, self.default)


OPTIONS: tuple[Option, ...] = (
    Option(("-e", "--event"), "event", MULTIPLE, metavar="EVENT[,EVENT...]",
           help="Events to sample (see 'profiler list'); default cycles, or cpu-clock without a PMU."),
    Option(("--filter",), "filter_", MULTIPLE, metavar="EXPR",
           help="A tracepoint filter in the kernel's syntax ('prev_pid == 123 && prev_state == 1') for "
                "the events of the -e before it, as perf's --filter (fields: "
                "/sys/kernel/tracing/events/SUBSYSTEM/EVENT/format)."),
    Option(("-F", "--freq"), "freq", VALUE, int, help="Sampling frequency in Hz (default 4000)."),
    Option(("-c", "--count"), "count", VALUE, int, help="Sample every COUNT events instead of a frequency."),
    Option(("-g",), "call_graph", help="Record frame-pointer call chains."),
    Option(("--call-graph",), "call_graph_mode", VALUE, metavar="fp|dwarf[,SIZE]",
           help="Call chains from frame pointers (fp, as -g) or unwound at report time from "
                "DWARF CFI with SIZE bytes of user stack per sample (dwarf, default 8192)."),
    Option(("--callchain-max-stack",), "callchain_max_stack", VALUE, int, help="Deepest call chain to record."),
    Option(("-p", "--pid"), "pid", VALUE, metavar="PID[,PID...]", help="Attach to running processes (all threads)."),
    Option(("-t", "--tid"), "tid", VALUE, metavar="TID[,TID...]", help="Attach to these threads only."),
    Option(("-a", "--all-cpus"), "all_cpus", help="System-wide: every process on every CPU."),
    Option(("-C", "--cpu"), "cpu", VALUE, metavar="CPULIST", help="Only these CPUs, e.g. 0-1,3."),
    Option(("--duration",), "duration", VALUE, float, metavar="SECONDS", help="Stop after this many seconds."),
    Option(("--switch-output",), "switch_output", OPTIONAL, metavar="[=signal|SIZE|TIME]", default="signal",
           help="Cut the recording into files OUTPUT.TIMESTAMP, each a whole capture that reports alone: "
                "on SIGUSR2 (alone, or =signal), when a file reaches SIZE (=100M) or every TIME (=30s, =5m)."),
    Option(("--switch-max-files",), "switch_max_files", VALUE, int, metavar="N",
           help="With --switch-output, keep the newest N files (older ones are deleted)."),
    Option(("--max-size",), "max_size", VALUE, metavar="SIZE",
           help="With --switch-output, keep the newest files that fit in SIZE together (1G)."),
    Option(("--overwrite",), "overwrite",
           help="Flight recorder: the kernel keeps the last -m pages of records per CPU, overwriting the "
                "oldest, and a snapshot file OUTPUT.TIMESTAMP is written when --snapshot-on says."),
    Option(("--snapshot-on",), "snapshot_on", VALUE, metavar="signal,exit,SECONDS",
           help="With --overwrite: on SIGUSR2, at the end, and/or every SECONDS (default signal,exit)."),
    Option(("--push",), "push_url", VALUE, metavar="URL",
           help="With --switch-output, send each finished file in the background to an OTLP/HTTP receiver "
                "(or --push-format pyroscope), through a queue on disk (OUTPUT.push-queue) that a later "
                "recording with the same -o resumes."),
    Option(("--push-format",), "push_format", VALUE, metavar="otlp|pyroscope", default="otlp",
           help="What --push sends: OTLP profiles, or pprof to Pyroscope's /ingest."),
    Option(("--push-tenant",), "push_tenant", VALUE, metavar="ID", help="--push's X-Scope-OrgID."),
    Option(("--push-token-env",), "push_token_env", VALUE, metavar="VAR",
           help="--push's bearer token, read from environment variable VAR (never printed)."),
    Option(("-k", "--clockid"), "clockid", VALUE, metavar="CLOCK",
           help="The clock of sample times: monotonic (default), monotonic_raw, realtime, boottime, tai "
                "(perf's -k; the capture keeps its offset to wall time either way: script -F tod, "
                "--time with dates)."),
    Option(("-m", "--mmap-pages"), "mmap_pages", VALUE, metavar="PAGES",
           help="Ring buffer data pages per CPU (power of two) or a size like 512K."),
    Option(("-o", "--output"), "output", VALUE, default=DEFAULT_OUTPUT,
           help="Capture file to write ('-' for standard output)."),
    Option(("-q", "--quiet"), "quiet", help="Print nothing but errors."),
    Option(("--user-only",), "user_only", help="Exclude kernel samples."),
    Option(("--kernel-only",), "kernel_only", help="Exclude user-space samples."),
    Option(("--data-mmaps",), "data_mmaps", help="Also record data (non-executable) mappings."),
    Option(("--no-inherit",), "no_inherit", help="Do not follow children and new threads."),
    Option(("--buildid-mmap",), "buildid_mmap",
           help="Ask the kernel for build-ids in MMAP2 records (as perf's --buildid-mmap); by default "
                "they are read from the mapped files, which leaves other tools' records intact."),
    Option(("--no-compress",), "no_compress",
           help="Write the ring-buffer data as the kernel wrote it (as perf does without -z) "
                "instead of zstd-compressed (about 15x smaller with -g; buffers of -m 16 pages or "
                "less are never compressed)."),
    Option(("--off-cpu",), "off_cpu",
           help="Also record where threads wait: sched:sched_switch at every switch-out (with -g "
                "or --call-graph dwarf, its user-space stack, as perf's --off-cpu) and "
                "context-switch records; report's 'offcpu' event, --wall and --thread-states read "
                "them (docs/offcpu.md)."),
    Option(("--off-cpu-kernel",), "off_cpu_kernel",
           help="--off-cpu with the kernel's frames in each switch-out's stack too (the kernel "
                "function a thread slept in): on a program that switches often, about 1.5x the "
                "CPU time --off-cpu adds to it."),
    Option(("--switch-events",), "switch_events",
           help="Record context-switch records (PERF_RECORD_SWITCH), as perf's --switch-events."),
    Option(("--archive",), "archive",
           help="When recording ends, pack the sampled DSOs' symbols into the capture (as 'profiler archive')."),
    Option(("-G", "--cgroup"), "cgroup", VALUE, metavar="PATH",
           help="With -a: record only the tasks of this cgroup (a cgroup2 directory, or its path from "
                "the hierarchy's root), as perf's -G."),
    Option(("--all-cgroups",), "all_cgroups",
           help="Record the cgroup of every sample and every cgroup's path (PERF_SAMPLE_CGROUP, "
                "PERF_RECORD_CGROUP), as perf's --all-cgroups: report --sort cgroup."),
    Option(("--python",), "python", VALUE, metavar="auto|perf|jit|off", default="auto",
           help="CPython's perf support for the command and its children: auto (-X perf with call "
                "graphs), perf (-X perf), jit (-X perf_jit, 3.13+), off. "
                "A Python command's -g records DWARF stacks (docs/python.md)."),
    Option(("--namespaces",), "namespaces",
           help="Record the namespaces of every task (PERF_RECORD_NAMESPACES), as perf's --namespaces: "
                "report --sort cgroup_id."),
    Option(("--no-namespace-symbols",), "no_namespace_symbols",
           help="Do not pack the symbols of files only a container (another mount namespace) has, nor "
                "namespaced JIT maps, at the end (packed by default: docs/containers.md)."),
    Option(("--python-lines",), "python_lines",
           help="Read the Python frames of the recorded CPython (3.11-3.13) processes' threads as the "
                "ring buffers are drained, so reports show Python line numbers (docs/python.md)."),
)


def parse(args: list[str]) -> dict[str, Any] | None:
    """The keywords of :func:`run` for ``profiler record ARGS``, as click would pass them; None
    when ARGS hold anything this reader leaves to click. Options end at ``--`` or at the first
    argument that is not one (the command), as in perf."""
    by_name = {name: opt for opt in OPTIONS for name in opt.names}
    values = {opt.dest: opt.unset for opt in OPTIONS}
    values["filter_after"] = ()
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            i += 1
            break
        opt = by_name.get(args[i])
        if opt is None or opt.kind == OPTIONAL or (opt.kind != FLAG and i + 1 == len(args)):
            return None
        if opt.kind == FLAG:
            values[opt.dest] = True
            i += 1
            continue
        try:
            value = opt.convert(args[i + 1])
        except ValueError:
            return None
        values[opt.dest] = (*values[opt.dest], value) if opt.kind == MULTIPLE else value
        if opt.dest == "filter_":  # which -e it follows: perf's --filter is positional
            values["filter_after"] = (*values["filter_after"], len(values["event"]))
        i += 2
    values["command"] = tuple(args[i:])
    return values


def filter_positions(order: list[str]) -> tuple[int, ...]:
    """For each ``--filter`` in ``order`` (the options' destinations in command-line order),
    how many ``-e`` came before it."""
    seen, out = 0, []
    for dest in order:
        if dest == "event":
            seen += 1
        elif dest == "filter_":
            out.append(seen)
    return tuple(out)


def event_filters(events: tuple[str, ...], filters: tuple[str, ...],
                  after: tuple[int, ...]) -> tuple[tuple[int, str], ...]:
    """(index of the -e argument, filter) for each --filter: it applies to the events of the
    -e just before it (a later filter for the same -e replaces an earlier one, as in perf)."""
    if len(after) != len(filters):  # not told the order: each filter follows the last -e
        after = (len(events),) * len(filters)
    chosen: dict[int, str] = {}
    for text, n in zip(filters, after):
        if n == 0:
            raise UsageError("--filter must follow the -e tracepoint option it applies to "
                             "(-e sched:sched_switch --filter 'prev_pid == 1').")
        if not text.strip() or "\0" in text:
            raise UsageError(f"--filter {text!r}: an empty filter.")
        chosen[n - 1] = text
    return tuple(sorted(chosen.items()))


def run(command: tuple[str, ...], archive: bool, **kwargs: Any) -> None:
    """Record COMMAND (or the processes, threads or CPUs the options name)."""
    from profiler.record.recorder import record

    opts = options_from_cli(command, **kwargs)
    if archive:
        check_archivable(opts.output)
        if opts.switch_output is not None or opts.overwrite:  # each file as it is finished, in the background
            opts = opts.replace(archive_files=True)
    result = record(opts)
    if archive and not opts.archive_files:
        archive_after_recording(result.path, opts.quiet)
    if result.stopped_by is not None:
        die_by_signal(result.stopped_by)
    if result.exit_code:
        sys.exit(result.exit_code)


def options_from_cli(
    command: tuple[str, ...],
    *,
    event: tuple[str, ...],
    freq: int | None,
    count: int | None,
    call_graph: bool,
    call_graph_mode: str | None,
    callchain_max_stack: int | None,
    pid: str | None,
    tid: str | None,
    all_cpus: bool,
    cpu: str | None,
    duration: float | None,
    mmap_pages: str | None,
    output: str,
    quiet: bool,
    user_only: bool,
    kernel_only: bool,
    data_mmaps: bool,
    no_inherit: bool,
    buildid_mmap: bool = False,
    no_compress: bool = False,
    filter_: tuple[str, ...] = (),
    filter_after: tuple[int, ...] = (),
    clockid: str | None = None,
    switch_output: str | None = None,
    switch_max_files: int | None = None,
    max_size: str | None = None,
    push_url: str | None = None,
    push_format: str = "otlp",
    push_tenant: str | None = None,
    push_token_env: str | None = None,
    overwrite: bool = False,
    snapshot_on: str | None = None,
    off_cpu: bool = False,
    off_cpu_kernel: bool = False,
    switch_events: bool = False,
    no_namespace_symbols: bool = False,
    python_lines: bool = False,
    all_cgroups: bool = False,
    cgroup: str | None = None,
    python: str = "auto",
    namespaces: bool = False,
) -> RecordOptions:
    cpus = cpu_list_option(cpu)
    pids, tids = id_list_option(pid, "-p"), id_list_option(tid, "-t")
    # -C means those CPUs system-wide, as in perf; with a command, for as long as it runs.
    system_wide = all_cpus or (cpus is not None and not pids and not tids)
    page_size = os.sysconf("SC_PAGE_SIZE")
    dwarf = parse_call_graph(call_graph_mode) if call_graph_mode is not None else None
    if python not in PYTHON_MODES:
        raise UsageError(f"--python {python!r}: give one of {', '.join(PYTHON_MODES)}.")
    if command and (call_graph or call_graph_mode is not None):
        path = command[0] if "/" in command[0] else find_on_path(command[0])
        dwarf, note = python_call_graph(python, command, path, dwarf,
                                        call_graph_mode is not None and "," in call_graph_mode)
        if note and not quiet:
            print(f"profiler: {note}", file=sys.stderr)
    if mmap_pages:
        data_pages = parse_mmap_pages(mmap_pages, page_size)
    else:  # larger buffers where each sample is large (DWARF) or every context switch is one (--off-cpu)
        data_pages = DWARF_DATA_PAGES if dwarf is not None or off_cpu or off_cpu_kernel else RecordOptions.data_pages
    opts = RecordOptions(
        command=command,
        pids=pids,
        tids=tids,
        system_wide=system_wide,
        cpus=cpus,
        duration=duration,
        events=event,
        freq=freq,
        period=count,
        callgraph=call_graph or call_graph_mode is not None,
        dwarf_stack_size=dwarf,
        callchain_max_stack=callchain_max_stack,
        user_only=user_only,
        kernel_only=kernel_only,
        data_pages=data_pages,
        output=output,
        quiet=quiet,
        data_mmaps=data_mmaps,
        inherit=not no_inherit,
        buildid_mmap=buildid_mmap,
        compress=not no_compress,
        cmdline=tuple(sys.argv),
        filters=event_filters(event, filter_, filter_after),
        clockid=parse_clockid(clockid) if clockid is not None else RecordOptions.clockid,
        switch_output=switch_output,
        switch_max_files=switch_max_files,
        max_size=max_size,
        push=push_arguments(push_url, push_format, push_tenant, push_token_env),
        overwrite=overwrite,
        snapshot_on=snapshot_on,
        off_cpu=off_cpu,
        off_cpu_kernel=off_cpu_kernel,
        switch_events=switch_events,
        namespace_symbols=not no_namespace_symbols,
        python_lines=python_lines,
        all_cgroups=all_cgroups,
        cgroup=cgroup,
        python=python,
        namespaces=namespaces,
    )
    opts.validate()
    return opts


def push_arguments(url: str | None, fmt: str, tenant: str | None, token_env: str | None) -> tuple[str, ...]:
    """``profiler push FILE``'s options for ``record --push``; () without a URL."""
    if url is None:
        if tenant or token_env:
            raise UsageError("--push-tenant and --push-token-env go with --push URL.")
        return ()
    if fmt not in ("otlp", "pyroscope"):
        raise UsageError(f"--push-format {fmt!r}: otlp or pyroscope.")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--push {url!r} is not an http:// or https:// URL.")
    if token_env and not os.environ.get(token_env):
        raise UsageError(f"--push-token-env {token_env}: the environment variable is not set.")
    args = [f"--{fmt}", url]
    if tenant:
        args += ["--tenant", tenant]
    if token_env:
        args += ["--token-env", token_env]
    return tuple(args)


def die_by_signal(signum: int) -> None:
    """Stopped by SIGINT/SIGTERM, the recorder ends by the same signal once the capture is
    written, as perf does: the shell sees 130 (143), and a script's loop stops on Ctrl-C."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    sys.exit(128 + signum)  # only reached if the signal is blocked


def check_archivable(output: str) -> None:
    """``--archive`` rewrites the capture file once recording ends: refused up front for a
    capture written to standard output, a device or a FIFO, which cannot be read back."""
    from profiler.format.container.layout import STDOUT
    from profiler.format.localfile import written_in_place

    try:
        streamed = output == STDOUT or written_in_place(output)
    except OSError:
        return  # the recorder says what is wrong with the output
    if streamed:
        raise UsageError("--archive packs the symbols into the capture file: it needs -o FILE, not standard "
                         "output, a device or a FIFO (run profiler archive on the saved stream instead).")


def archive_after_recording(path: str, quiet: bool) -> None:
    """``--archive``: pack the symbols into the new capture. A failure is only a warning:
    ``archive_capture`` leaves the capture as recorded, and the exit status stays record's."""
    from profiler.report.offline.archive import archive_capture, summary_line

    try:
        result = archive_capture(path)
    except (ProfilerError, OSError) as exc:
        print(f"profiler: warning: archiving failed, {path} is left as recorded: {exc}", file=sys.stderr)
        return
    if not quiet:
        print(summary_line(result), file=sys.stderr)
