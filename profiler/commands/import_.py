"""``profiler import``: convert a perf.data file into a capture."""

from __future__ import annotations

import click

from profiler.commands._common import warn
from profiler.format.container.layout import DEFAULT_CAPTURE


@click.command("import")
@click.argument("input_path", metavar="PERF_DATA", default="perf.data")
@click.option("-o", "--output", default=DEFAULT_CAPTURE, show_default=True, metavar="OUT",
              help="The capture to write.")
@click.option("--archive", "archive", is_flag=True,
              help="Then pack the symbols it needs into it (profiler archive), for other machines.")
def command(input_path: str, output: str, archive: bool) -> None:
    """Convert PERF_DATA (from `perf record`, file or pipe mode, compressed or not; '-' reads
    standard input) into a capture. Every command also reads perf.data directly: importing
    makes one versioned file that `profiler archive` can make portable."""
    from pathlib import Path

    from profiler.errors import UsageError
    from profiler.format.container.reader import CaptureReader
    from profiler.format.perfdata import PerfDataReader
    from profiler.format.perfdata.convert import write_capture

    if input_path != "-" and Path(input_path).exists() and Path(output).exists() \
            and Path(input_path).samefile(output):
        raise UsageError("-o must name another file than the perf.data input.")
    with CaptureReader.open(input_path) as reader:
        if not isinstance(reader, PerfDataReader):
            raise UsageError(f"{input_path} is already a profiler capture: nothing to import.")
        for message in reader.warnings:
            warn(message)
        result = write_capture(reader, output)
    click.echo(f"[ profiler import: wrote {result.bytes_written / 1e6:.3f} MB {output} "
               f"({result.frames} frames, {result.record_bytes} bytes of records) ]")
    if archive:
        import sys

        from profiler.report.offline.archive import archive_capture, render_result

        render_result(archive_capture(output), sys.stdout)
