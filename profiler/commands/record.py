"""``profiler record``: parse options into RecordOptions and run the recorder."""

from __future__ import annotations

import os
import signal
import sys

import click

from profiler.errors import ProfilerError, UsageError
from profiler.record.metadata import parse_cpu_list
from profiler.record.options import (
    DEFAULT_OUTPUT,
    DWARF_DATA_PAGES,
    RecordOptions,
    parse_call_graph,
    parse_mmap_pages,
)


def _int_list(text: str | None, what: str) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"{what} must be a comma-separated list of numbers, not {text!r}.") from None
    if any(v <= 0 for v in values):
        raise UsageError(f"{what} must list positive ids, not {text!r}.")
    return values


def _cpus(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(parse_cpu_list(text))
    except ValueError:
        raise UsageError(f"-C {text!r} is not a CPU list such as 0-3,6.") from None


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
) -> RecordOptions:
    cpus = _cpus(cpu)
    pids, tids = _int_list(pid, "-p"), _int_list(tid, "-t")
    # -C means those CPUs system-wide, as in perf; with a command, for as long as it runs.
    system_wide = all_cpus or (cpus is not None and not pids and not tids)
    page_size = os.sysconf("SC_PAGE_SIZE")
    dwarf = parse_call_graph(call_graph_mode) if call_graph_mode is not None else None
    if mmap_pages:
        data_pages = parse_mmap_pages(mmap_pages, page_size)
    else:
        data_pages = DWARF_DATA_PAGES if dwarf is not None else RecordOptions.data_pages
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
    )
    opts.validate()
    return opts


@click.command(
    "record",
    context_settings={"ignore_unknown_options": False, "allow_interspersed_args": False},
)
@click.option("-e", "--event", multiple=True, metavar="EVENT[,EVENT...]",
              help="Events to sample (see 'profiler list'); default cycles, or cpu-clock without a PMU.")
@click.option("-F", "--freq", type=int, help="Sampling frequency in Hz (default 4000).")
@click.option("-c", "--count", type=int, help="Sample every COUNT events instead of a frequency.")
@click.option("-g", "call_graph", is_flag=True, help="Record frame-pointer call chains.")
@click.option("--call-graph", "call_graph_mode", metavar="fp|dwarf[,SIZE]",
              help="Call chains from frame pointers (fp, as -g) or unwound at report time from "
                   "DWARF CFI with SIZE bytes of user stack per sample (dwarf, default 8192).")
@click.option("--callchain-max-stack", type=int, help="Deepest call chain to record.")
@click.option("-p", "--pid", metavar="PID[,PID...]", help="Attach to running processes (all threads).")
@click.option("-t", "--tid", metavar="TID[,TID...]", help="Attach to these threads only.")
@click.option("-a", "--all-cpus", is_flag=True, help="System-wide: every process on every CPU.")
@click.option("-C", "--cpu", metavar="CPULIST", help="Only these CPUs, e.g. 0-1,3.")
@click.option("--duration", type=float, metavar="SECONDS", help="Stop after this many seconds.")
@click.option("-m", "--mmap-pages", metavar="PAGES", help="Ring buffer data pages per CPU (power of two) or a size like 512K.")
@click.option("-o", "--output", default=DEFAULT_OUTPUT, show_default=True, help="Capture file to write.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.option("--user-only", is_flag=True, help="Exclude kernel samples.")
@click.option("--kernel-only", is_flag=True, help="Exclude user-space samples.")
@click.option("--data-mmaps", is_flag=True, help="Also record data (non-executable) mappings.")
@click.option("--no-inherit", is_flag=True, help="Do not follow children and new threads.")
@click.option("--buildid-mmap", is_flag=True,
              help="Ask the kernel for build-ids in MMAP2 records (as perf's --buildid-mmap); by default "
                   "they are read from the mapped files, which leaves other tools' records intact.")
@click.option("--no-compress", is_flag=True,
              help="Write the ring-buffer data as the kernel wrote it (format 1.1, as perf without -z) "
                   "instead of zstd-compressed (about 15x smaller with -g; buffers of -m 16 pages or "
                   "less are never compressed).")
@click.option("--archive", "archive", is_flag=True,
              help="When recording ends, pack the sampled DSOs' symbols into the capture (as 'profiler archive').")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(command: tuple[str, ...], archive: bool, **kwargs: object) -> None:
    """Run COMMAND (after --) or attach to processes, and record samples into a capture."""
    from profiler.record.recorder import record

    opts = options_from_cli(command, **kwargs)  # type: ignore[arg-type]
    result = record(opts)
    if archive:
        archive_after_recording(result.path, opts.quiet)
    if result.stopped_by is not None:
        die_by_signal(result.stopped_by)
    if result.exit_code:
        sys.exit(result.exit_code)


def die_by_signal(signum: int) -> None:
    """Stopped by SIGINT/SIGTERM, the recorder ends by the same signal once the capture is
    written, as perf does: the shell sees 130 (143), and a script's loop stops on Ctrl-C."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    sys.exit(128 + signum)  # only reached if the signal is blocked


def archive_after_recording(path: str, quiet: bool) -> None:
    """``--archive``: pack the symbols into the new capture. A failure is only a warning:
    ``archive_capture`` leaves the capture as recorded, and the exit status stays record's."""
    from profiler.report.offline.archive import archive_capture, summary_line

    try:
        result = archive_capture(path)
    except (ProfilerError, OSError) as exc:
        click.echo(f"profiler: warning: archiving failed, {path} is left as recorded: {exc}", err=True)
        return
    if not quiet:
        click.echo(summary_line(result), err=True)
