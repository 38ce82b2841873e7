"""``profiler stat``: parse options into StatOptions and run the counting library."""

from __future__ import annotations

import sys
from typing import TextIO

import click

from profiler.tables import TABLE_FORMATS

from profiler.commands._targets import cpu_list_option as _cpus
from profiler.commands._targets import id_list_option as _int_list
from profiler.errors import ProfilerError
from profiler.stat.options import StatOptions


def options_from_cli(
    command: tuple[str, ...],
    *,
    event: tuple[str, ...],
    pid: str | None,
    tid: str | None,
    all_cpus: bool,
    cpu: str | None,
    repeat: int,
    interval_print: int | None,
    per_thread: bool,
    per_cpu: bool,
    field_separator: str | None,
    as_json: bool,
    no_inherit: bool,
    table_format: str | None = None,
) -> StatOptions:
    cpus = _cpus(cpu)
    pids, tids = _int_list(pid, "-p"), _int_list(tid, "-t")
    opts = StatOptions(
        command=command,
        events=event,
        pids=pids,
        tids=tids,
        # -C alone means those CPUs system-wide, as in perf.
        system_wide=all_cpus or (cpus is not None and not pids and not tids),
        cpus=cpus,
        cpu_list=cpu if cpu and not all_cpus else None,
        repeat=repeat,
        interval_ms=interval_print,
        per_thread=per_thread,
        per_cpu=per_cpu,
        csv_sep=field_separator,
        json=as_json,
        table_format=table_format,
        inherit=not no_inherit,
        pid_text=pid or "",
        tid_text=tid or "",
    )
    opts.validate()
    return opts


@click.command("stat", context_settings={"allow_interspersed_args": False})
@click.option("-e", "--event", multiple=True, metavar="EVENT[,EVENT...]",
              help="Events to count, '{a,b}' groups and :u/:k as in record (see 'profiler list'); "
                   "default: perf's set.")
@click.option("-p", "--pid", metavar="PID[,PID...]", help="Count running processes (all threads).")
@click.option("-t", "--tid", metavar="TID[,TID...]", help="Count these threads only.")
@click.option("-a", "--all-cpus", is_flag=True, help="System-wide: every process on every CPU.")
@click.option("-C", "--cpu", metavar="CPULIST", help="Only these CPUs, e.g. 0-1,3 (system-wide unless -p/-t).")
@click.option("-r", "--repeat", type=int, default=1, show_default=True,
              help="Run the command N times; print means and '+- x%' relative standard deviations.")
@click.option("-I", "--interval-print", type=int, metavar="MS", help="Print the counts every MS milliseconds.")
@click.option("--per-thread", is_flag=True, help="One line per thread (with -p/-t).")
@click.option("-A", "--no-aggr", "--per-cpu", "per_cpu", is_flag=True, help="One line per CPU, no sums.")
@click.option("-x", "--field-separator", metavar="SEP", help="CSV output with this separator (perf's fields).")
@click.option("-j", "--json", "as_json", is_flag=True, help="JSON output, one object per line (perf's keys).")
@click.option("--format", "table_format", type=click.Choice(TABLE_FORMATS), default=None,
              help="The final counts as a table through tabulate (markdown for a pull request, github, "
                   "simple) instead of perf's layout.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), metavar="FILE",
              help="Write the counts to FILE instead of stderr.")
@click.option("-i", "--no-inherit", is_flag=True, help="Do not count children and new threads.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(command: tuple[str, ...], output: str | None, **kwargs: object) -> None:
    """Run COMMAND (after --) or attach to processes or CPUs, and count events like perf stat."""
    from profiler.stat.runner import run_stat

    opts = options_from_cli(command, **kwargs)  # type: ignore[arg-type]
    out: TextIO = sys.stderr
    if output is not None:
        try:
            out = open(output, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise ProfilerError(f"cannot write {output}: {exc.strerror}.") from None
    try:
        exit_code = run_stat(opts, out, sys.stderr)
    finally:
        if out is not sys.stderr:
            out.close()
    if exit_code:
        sys.exit(exit_code)
