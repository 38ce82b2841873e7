"""The flat profile as perf report's ``--stdio`` text: ``#`` header lines, then one line per
row with columns sized to their contents, and optionally each row's call tree."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from profiler.report.aggregate import ReportRows, ReportRow
from profiler.report.callgraph import PerfReport
from profiler.report.render.callgraph_text import render_tree


def unit_number(n: int) -> str:
    """perf's short count: 3211 -> "3K", 1500 -> "1500", 2500000 -> "2M"."""
    units = ["", "K", "M", "G"]
    i = 0
    while n // 1000 > 1 and i < 3:
        n //= 1000
        i += 1
    return f"{n}{units[i]}"


def header_lines(flat: ReportRows) -> list[str]:
    """perf's preamble: lost samples, sample count and event, event count."""
    return [
        "# To display the capture's header, use --header.",
        "#",
        "#",
        f"# Total Lost Samples: {flat.lost_samples}",
        "#",
        f"# Samples: {unit_number(flat.total_samples)} of event '{flat.event}'",
        f"# Event count (approx.): {flat.total_period}",
        *flat.unwind_lines,
        "#",
    ]


def columns(flat: ReportRows) -> list[tuple[str, bool, Callable[[ReportRow], str]]]:
    """(title, right-aligned?, cell) for each column, in order."""
    pct = flat.percent
    cols: list[tuple[str, bool, Callable[[ReportRow], str]]] = []
    if flat.children:
        cols.append(("Children", True, lambda r: f"{pct(r.children_period):.2f}%"))
        cols.append(("Self", True, lambda r: f"{pct(r.self_period):.2f}%"))
    else:
        cols.append(("Overhead", True, lambda r: f"{pct(r.self_period):.2f}%"))
    cols.append(("Samples", True, lambda r: str(r.children_samples if flat.children else r.self_samples)))
    cols.append(("Period", True, lambda r: str(r.children_period if flat.children else r.self_period)))
    for key in flat.sort:
        if key == "comm":
            cols.append(("Command", False, lambda r: r.comm or ""))
        elif key == "pid":
            cols.append(("Pid", True, lambda r: str(r.pid)))
        elif key == "tid":
            cols.append(("Tid", True, lambda r: str(r.tid)))
        elif key == "cpu":
            # an unknown CPU (-1) as perf prints it: -001
            cols.append(("CPU", True, lambda r: "" if r.cpu is None else "%.3d" % r.cpu))
        elif key == "dso":
            cols.append(("Shared Object", False, lambda r: r.dso or ""))
        elif key == "sym":
            cols.append(("Symbol", False, lambda r: f"[{'k' if r.kernel else '.'}] {r.symbol}"))
        elif key == "srcline":
            cols.append(("Source:Line", False, lambda r: r.srcline or ""))
        elif key == "cgroup":
            cols.append(("Cgroup", False, lambda r: r.cgroup or ""))
        elif key == "cgroup_id":
            cols.append(("cgroup id (dev/inode)", False, lambda r: r.cgroup_id or ""))
    return cols


def write(report: PerfReport, out: TextIO, preamble: bool = True) -> None:
    """Write the table; with a call graph each row's tree follows it."""
    flat, graph = report.flat, report.graph
    if preamble:
        out.write("\n".join(header_lines(flat)) + "\n")
    cols = columns(flat)
    cells = [[cell(r) for _, _, cell in cols] for r in flat.rows]
    widths = [max([len(title)] + [len(row[i]) for row in cells]) for i, (title, _, _) in enumerate(cols)]
    if flat.children:
        widths[0] = widths[1] = max(widths[0], widths[1], 8)
    titles = [(t.rjust(w) if right else t.ljust(w)) for (t, right, _), w in zip(cols, widths)]
    out.write(("# " + "  ".join(titles)).rstrip() + "\n")
    out.write(("# " + "  ".join("." * w for w in widths)).rstrip() + "\n")
    out.write("#\n")
    last = len(cols) - 1
    for i, row in enumerate(cells):
        parts = [c if j == last else (c.rjust(w) if cols[j][1] else c.ljust(w))
                 for j, (c, w) in enumerate(zip(row, widths))]
        out.write("  " + "  ".join(parts) + "\n")
        if graph is not None:
            weight = flat.rows[i].children_period if flat.children else flat.rows[i].self_period
            render_tree(out, graph.trees[i], weight, flat.total_period, graph.label)
    out.write("\n")
