"""perf report's rows as a ``tabulate`` table (``report --format markdown|github|simple``): the
same columns and cells as the ``--stdio`` table (``table.columns``), without its ``#`` header
lines and call graphs; the event and totals head the table in one line."""

from __future__ import annotations

from typing import TextIO

from profiler.report.callgraph import PerfReport
from profiler.report.render.table import columns, unit_number
from profiler.tables import table_text


def write(report: PerfReport, out: TextIO, fmt: str) -> None:
    flat = report.flat
    cols = columns(flat)
    head = (f"{unit_number(flat.total_samples)} samples of event '{flat.event}', "
            f"event count {flat.total_period}")
    out.write(f"**{head}**\n\n" if fmt != "simple" else f"{head}\n\n")
    out.write(table_text([title for title, _, _ in cols], [[cell(r) for _, _, cell in cols] for r in flat.rows],
                         fmt, [right for _, right, _ in cols]))
