"""perf stat's three layouts, on a stream the caller gives: the aligned text (the default),
``-x SEP`` (CSV) and ``--json`` (one object per line). The column widths, field orders and
number formats are perf 6.1's (tools/perf/util/stat-display.c), so scripts written for
``perf stat -x,`` or ``--json`` read ours.
"""

from __future__ import annotations

import json
from typing import TextIO

from profiler.stat.counters import Slot
from profiler.stat.model import COUNTED, Row, StatReport

COUNTS_LEN = 18  # the count column
EVNAME_LEN = 32  # the event name column
UNCOUNTED_EVNAME_LEN = 25  # the name column of a "<not counted>" row
METRIC_LEN = 35  # " # value unit" column
UNIT_WIDTH = 4  # strlen("unit"), perf's minimum
HEADER_EVERY = 25  # -I repeats its column header every 25 intervals

GLOBAL, PER_CPU, PER_THREAD = "global", "per-cpu", "per-thread"


class Renderer:
    """Formats rows in one of the three layouts; ``mode`` is the aggregation (prefix column)."""

    def __init__(self, stream: TextIO, *, csv_sep: str | None = None, as_json: bool = False,
                 mode: str = GLOBAL, runs: int = 1, table_format: str | None = None) -> None:
        self.stream = stream
        self.csv_sep = csv_sep
        self.as_json = as_json
        self.table_format = table_format
        self.mode = mode
        self.runs = runs
        self._intervals = 0

    @property
    def std(self) -> bool:
        return self.csv_sep is None and not self.as_json

    # the final summary ------------------------------------------------------------------------

    def summary(self, report: StatReport) -> None:
        out = self.stream
        if self.table_format is not None:
            out.write(table_summary(report, self.table_format))
            out.flush()
            return
        if self.std:
            runs = f" ({report.runs} runs)" if report.runs > 1 else ""
            out.write(f"\n Performance counter stats for {report.title}{runs}:\n\n")
        for row in report.rows:
            out.write(self.row(row) + "\n")
        if self.std:
            out.write(footer(report))
        out.flush()

    # -I ---------------------------------------------------------------------------------------

    def interval(self, elapsed_ns: int, rows: list[Row]) -> None:
        out = self.stream
        if self.std and self._intervals % HEADER_EVERY == 0:
            out.write(interval_header(self.mode))
        self._intervals += 1
        for row in rows:
            out.write(self.row(row, elapsed_ns) + "\n")
        out.flush()

    # one row ----------------------------------------------------------------------------------

    def row(self, row: Row, elapsed_ns: int | None = None) -> str:
        if self.as_json:
            return json_row(row, self.runs, elapsed_ns)
        if self.csv_sep is not None:
            return csv_row(row, self.runs, self.csv_sep, elapsed_ns)
        return std_row(row, self.runs, elapsed_ns)


def _timestamp(elapsed_ns: int, sep: str) -> str:
    sec, nsec = divmod(elapsed_ns, 1_000_000_000)
    return f"{sec:6d}.{nsec:09d}{sep}"


def interval_header(mode: str) -> str:
    unit = "unit".rjust(UNIT_WIDTH)
    if mode == PER_CPU:
        return f"#           time CPU                    counts {unit} events\n"
    if mode == PER_THREAD:
        return f"#           time             comm-pid                  counts {unit} events\n"
    return f"#           time             counts {unit} events\n"


# the aligned text layout --------------------------------------------------------------------------


def _std_slot(slot: Slot | None) -> str:
    if slot is None:
        return ""
    if slot.tid >= 0:
        return f"{slot.comm:>16}-{slot.tid:<8d} "
    return f"CPU{slot.cpu:<7d} "


def _count_fmt(row: Row) -> str:
    """Two decimals for scaled units (the clocks' msec), none for plain counts."""
    return "%.2f" if row.unit else "%.0f"


def std_metric(row: Row) -> str:
    metric = row.metric
    if metric.fmt is None or not metric.unit:
        return " " * METRIC_LEN
    head = " # " + metric.fmt % metric.value
    return head + " " + metric.unit.ljust(METRIC_LEN - len(head) - 1)


def std_row(row: Row, runs: int, elapsed_ns: int | None = None) -> str:
    text = _timestamp(elapsed_ns, " ") if elapsed_ns is not None else ""
    text += _std_slot(row.slot)
    unit = row.unit.ljust(UNIT_WIDTH)
    if row.status == COUNTED:
        count = (_count_fmt(row) % row.value).rjust(COUNTS_LEN)
        text += f"{count} {unit} {row.event.ljust(EVNAME_LEN)}{std_metric(row)}"
    else:
        text += f"{row.status.rjust(COUNTS_LEN)} {unit} {row.event.ljust(UNCOUNTED_EVNAME_LEN)}{' ' * METRIC_LEN}"
    if runs > 1 and row.noise_pct:
        text += f"  ( +-{row.noise_pct:6.2f}% )"
    if row.running != row.enabled:
        text += f"  ({row.running_pct:.2f}%)"
    return text


def footer(report: StatReport) -> str:
    wall = report.wall_ns
    avg = wall.mean / 1e9
    if report.runs == 1:
        text = f"\n {avg:17.9f} seconds time elapsed\n\n"
        if report.user_s is not None and report.sys_s is not None:
            text += f" {report.user_s:17.9f} seconds user\n {report.sys_s:17.9f} seconds sys\n\n\n"
        return text
    sd = wall.stderr / 1e9
    digits = precision(sd) + 2
    text = f"\n {avg:17.{digits}f} +- {sd:.{digits}f} seconds time elapsed"
    if wall.rel_pct:
        text += f"  ( +-{wall.rel_pct:6.2f}% )"
    return text + "\n\n"


def precision(value: float) -> int:
    """perf's ``get_precision``: the decimal places that show the first digit of ``value``."""
    import math

    if value > 1 or value <= 0:
        return 0
    return int(math.ceil(-math.log10(value)))


# CSV ------------------------------------------------------------------------------------------------


def csv_metric_value(fmt: str, value: float) -> str:
    """perf prints the metric with its format, then keeps the digits: ``"%8.3f" → "0.186"``."""
    text = (fmt % value).lstrip()
    end = 0
    while end < len(text) and (text[end].isdigit() or text[end] == "."):
        end += 1
    return text[:end]


def csv_row(row: Row, runs: int, sep: str, elapsed_ns: int | None = None) -> str:
    fields: list[str] = []
    if elapsed_ns is not None:
        fields.append(_timestamp(elapsed_ns, ""))
    if row.slot is not None:
        fields.append(f"{row.slot.comm}-{row.slot.tid}" if row.slot.tid >= 0 else f"CPU{row.slot.cpu}")
    fields.append(_count_fmt(row) % row.value if row.status == COUNTED else row.status)
    fields += [row.unit, row.event]
    if runs > 1:
        fields.append(f"{row.noise_pct or 0.0:.2f}%")
    fields += [f"{int(row.running)}", f"{row.running_pct:.2f}"]
    metric = row.metric
    if row.status == COUNTED and metric.fmt is not None and metric.unit:
        fields += [csv_metric_value(metric.fmt, metric.value), metric.unit]
    else:
        fields += ["", ""]
    return sep.join(fields)


# JSON ------------------------------------------------------------------------------------------------


def json_row(row: Row, runs: int, elapsed_ns: int | None = None) -> str:
    parts: list[str] = []
    if elapsed_ns is not None:
        parts.append(f'"interval" : {elapsed_ns / 1e9:.9f}')
    if row.slot is not None:
        slot = f"{row.slot.comm}-{row.slot.tid}" if row.slot.tid >= 0 else str(row.slot.cpu)
        parts.append(f'"{"thread" if row.slot.tid >= 0 else "cpu"}" : {json.dumps(slot)}')
    value = f"{row.value:f}" if row.status == COUNTED else row.status
    parts += [f'"counter-value" : {json.dumps(value)}', f'"unit" : {json.dumps(row.unit)}',
              f'"event" : {json.dumps(row.event)}']
    if runs > 1:
        parts.append(f'"variance" : {row.noise_pct or 0.0:.2f}')
    parts += [f'"event-runtime" : {int(row.running)}', f'"pcnt-running" : {row.running_pct:.2f}']
    metric = row.metric if row.status == COUNTED else None
    parts += [f'"metric-value" : {metric.value if metric else 0.0:f}',
              f'"metric-unit" : {json.dumps(metric.unit if metric else "")}']
    return "{" + ", ".join(parts) + "}"


def table_summary(report: StatReport, fmt: str) -> str:
    """The final counts as a table through tabulate (``stat --format``): one row per counter
    with its count (or why there is none), unit, event, derived metric, the runs' noise and the
    share of the time it was counted; the title and elapsed time head it."""
    from profiler.tables import table_text

    runs = f" ({report.runs} runs)" if report.runs > 1 else ""
    head = f"Performance counter stats for {report.title}{runs}: {report.wall_ns.mean / 1e9:.9f} seconds time elapsed"
    titles = ["where", "counts", "unit", "event", "metric", "noise", "counted"]
    rows = []
    for row in report.rows:
        metric = row.metric
        rows.append([
            _std_slot(row.slot).strip(),
            (_count_fmt(row) % row.value) if row.status == COUNTED else row.status,
            row.unit, row.event,
            f"{metric.fmt % metric.value} {metric.unit}" if metric.fmt is not None and metric.unit else "",
            f"+-{row.noise_pct:.2f}%" if report.runs > 1 and row.noise_pct else "",
            f"{row.running_pct:.2f}%",
        ])
    keep = [i for i in range(len(titles)) if i != 0 or any(r[0] for r in rows)]
    text = table_text([titles[i] for i in keep], [[r[i] for i in keep] for r in rows], fmt,
                      [[False, True, False, False, False, True, True][i] for i in keep])
    return (f"**{head}**\n\n" if fmt != "simple" else f"{head}\n\n") + text
