"""The flat profile as CSV: a header row, then one row per profile line (same fields as JSON)."""

from __future__ import annotations

import csv
from typing import TextIO

from profiler.report.aggregate import ReportRows
from profiler.report.callgraph import PerfReport
from profiler.report.render.jsonout import row_dict


def csv_fields(flat: ReportRows) -> list[str]:
    fields = ["children", "self", "samples", "period"] if flat.children else ["self", "samples", "period"]
    return fields + ["symbol" if k == "sym" else k for k in flat.sort] + ["kernel"]


def write(report: PerfReport, out: TextIO) -> None:
    """The rows as CSV (a call graph is left out)."""
    flat = report.flat
    fields = csv_fields(flat)
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(fields)
    for row in flat.rows:
        d = row_dict(flat, row)
        writer.writerow(["" if d[f] is None else d[f] for f in fields])
