"""``profiler diff``'s output: perf diff's text layout (``write``), or a Markdown table for a
pull-request comment (``write_markdown``, through ``tabulate``). Both take a
:class:`~profiler.report.diff.DiffData` and a stream.

perf diff's layout: ``# Event 'NAME'``, ``#``, with more than one new file the list of data
files, then the column titles, a line of dots and ``#``; a row per entry. Its value columns
have fixed widths (Baseline 8, Delta 7, Delta Abs 9, Ratio and Weighted diff 14, Period and
Base period 14, Formula 70; wider when the title is, as ``Baseline/0`` with several files);
the key columns are as wide as their longest text; the title line pads every column, the
rows every column but a last Symbol.

With ``-t SEP`` (perf's ``--field-separator``) the columns are joined by SEP instead of two
spaces, and perf's layout changes in its own ways, which this follows: no line of dots, no
indent; a title wider than its value column's fixed width is right-aligned to it; values are
left-aligned to their column's width, the Baseline without its ``%`` sign, except a Ratio's or
Weighted diff's number, which stays right-aligned (and a Weighted diff of 0, left blank).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TextIO

from profiler.dataclass import dataclass
from profiler.tables import md_escape, table_text
from profiler.report.diff import DiffData, DiffRow

KEY_TITLES = {"comm": "Command", "pid": "Pid", "tid": "Tid", "cpu": "CPU", "dso": "Shared Object",
              "sym": "Symbol", "srcline": "Source:Line"}
RIGHT_KEYS = frozenset({"pid", "tid", "cpu"})
COMPUTE_TITLES = {"delta": ("Delta", 7), "delta-abs": ("Delta Abs", 0), "ratio": ("Ratio", 14),
                  "wdiff": ("Weighted diff", 14)}


@dataclass(frozen=True)
class Column:
    title: str
    width: int  # perf's fixed width (0: as wide as the title / texts)
    right: bool
    cell: Callable[[DiffRow], str]
    sep_right: bool = False  # with -t: a number right-aligned (Ratio, Weighted diff)


def _titled(name: str, i: int, several: bool) -> str:
    return f"{name}/{i}" if several else name


def value_columns(data: DiffData) -> list[Column]:
    """Baseline (and Base period), then per new side its computed column, Formula and Period."""
    several = len(data.sides) > 2
    cols = [Column(_titled("Baseline", 0, several), 0, True, lambda r: _pct(data.baseline(r)))]
    numeric = data.compute.kind in ("ratio", "wdiff")
    if data.show_period:
        cols.append(Column(_titled("Base period", 0, several), 14, True, lambda r: str(data.base_period(r))))
    name, width = COMPUTE_TITLES[data.compute.kind]
    for i in range(1, len(data.sides)):
        cols.append(Column(_titled(name, i, several), width, True, partial(compute_cell, data, i=i), numeric))
        if data.show_formula:
            cols.append(Column(_titled("Formula", i, several), 70, True, partial(_formula, data, i=i)))
        if data.show_period:
            cols.append(Column(_titled("Period", i, several), 14, True, partial(_period, data, i=i)))
    return cols


def _formula(data: DiffData, row: DiffRow, i: int) -> str:
    return data.formula(row, i) or ""


def _period(data: DiffData, row: DiffRow, i: int) -> str:
    return _opt(data.period(row, i))


def _key_text(j: int, row: DiffRow) -> str:
    return row.key[j]


def compute_cell(data: DiffData, row: DiffRow, i: int) -> str:
    """New side ``i``'s computed value as perf prints it."""
    kind = data.compute.kind
    if kind in ("delta", "delta-abs"):
        d = data.delta(row, i)
        return "" if d is None else f"{d:+.2f}%"
    if not row.in_new[i - 1]:
        return ""
    if not row.in_base:
        return "N/A"
    if kind == "ratio":
        r = data.ratio(row, i)
        return "" if r is None else f"{r:.6f}"
    w = data.wdiff(row, i)
    return "" if w is None else str(w)


def key_columns(data: DiffData) -> list[Column]:
    return [Column(KEY_TITLES[k], 0, k in RIGHT_KEYS, partial(_key_text, j)) for j, k in enumerate(data.sort)]


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:6.2f}%"


def _opt(v: int | None) -> str:
    return "" if v is None else str(v)


def header_lines(data: DiffData) -> list[str]:
    """The lines before the column titles."""
    lines = [f"# Event '{data.event}'", "#"]
    if data.shares == "baseline":
        lines += ["# Shares of new files: of the baseline's total period (--shares baseline)", "#"]
    if len(data.sides) > 2:
        lines.append("# Data files:")
        for i, side in enumerate(data.sides):
            lines.append(f"#  [{i}] {side.label} {'(Baseline)' if i == 0 else ''}")
        lines.append("#")
    return lines


def write_sections(sections: list[DiffData], out: TextIO, sep: str | None = None) -> None:
    """perf diff's text output of every event compared: a section each, a blank line apart."""
    for n, data in enumerate(sections):
        if n:
            out.write("\n")
        write(data, out, sep)


def write(data: DiffData, out: TextIO, sep: str | None = None) -> None:
    """perf diff's text output (``sep``: ``-t``'s field separator)."""
    out.write("\n".join(header_lines(data)) + "\n")
    values, keys = value_columns(data), key_columns(data)
    cols = values + keys
    cells = [[c.cell(r) for c in cols] for r in data.rows]
    widths = [max(len(c.title), c.width) for c in values]
    widths += [max([len(c.title)] + [len(row[len(values) + j]) for row in cells]) for j, c in enumerate(keys)]

    def fit(text: str, c: Column, w: int) -> str:
        return text.rjust(w) if c.right else text.ljust(w)

    last = len(cols) - 1 if data.sort[-1] == "sym" else -1  # perf pads every column but a last Symbol
    if sep is not None:
        _write_separated(data, out, sep, cols, len(values), widths, last)
        return
    out.write("# " + "  ".join(fit(c.title, c, w) for c, w in zip(cols, widths)) + "\n")
    out.write("# " + "  ".join("." * w for w in widths) + "\n")
    out.write("#\n")
    for row in cells:
        parts = [t if j == last else fit(t, cols[j], w)
                 for j, (t, w) in enumerate(zip(row, widths))]
        out.write("  " + "  ".join(parts) + "\n")


def _write_separated(data: DiffData, out: TextIO, sep: str, cols: list[Column], n_values: int,
                     widths: list[int], last: int) -> None:
    """``-t SEP``'s rows (see the module docstring)."""
    titles = [c.title.rjust(w) if j < n_values else c.title.ljust(w)
              for j, (c, w) in enumerate(zip(cols, widths))]
    out.write("# " + sep.join(titles) + "\n")
    for r in data.rows:
        parts = []
        for j, (c, w) in enumerate(zip(cols, widths)):
            text = c.cell(r)
            if j == 0:
                text = text.strip().rstrip("%")  # the Baseline: "49.99"
            elif c.sep_right and data.compute.kind == "wdiff" and text == "0":
                text = ""  # perf leaves a weighted diff of 0 blank here (not in its spaced layout)
            if j == last:
                parts.append(text)
            elif c.sep_right and text not in ("", "N/A"):
                parts.append(text.rjust(c.width).ljust(w))  # right in its fixed width, then padded
            else:
                parts.append(text.ljust(w))
        out.write(sep.join(parts) + "\n")


def markdown_cells(data: DiffData) -> tuple[list[str], list[list[str]]]:
    """The titles and the cells of the Markdown table: the same texts as the text output,
    trimmed (a blank cell stays empty)."""
    cols = value_columns(data) + key_columns(data)
    return [c.title for c in cols], [[c.cell(r).strip() for c in cols] for r in data.rows]


def write_markdown_sections(sections: list[DiffData], out: TextIO, fmt: str = "github") -> None:
    """A table per event compared, a blank line apart."""
    for n, data in enumerate(sections):
        if n:
            out.write("\n")
        write_markdown(data, out, fmt)


def write_markdown(data: DiffData, out: TextIO, fmt: str = "github") -> None:
    """The diff as a table through tabulate (``fmt``: markdown, github — GitHub-flavoured, for
    a pull-request comment —, simple), headed by the event and the captures."""
    titles, rows = markdown_cells(data)
    right = [c.right for c in value_columns(data) + key_columns(data)]
    esc = md_escape if fmt != "simple" else str
    head = (f"{esc(data.event)}: {esc(data.base.label)} (baseline) vs "
            f"{', '.join(esc(s.label) for s in data.sides[1:])}")
    out.write(f"**{head}**\n\n" if fmt != "simple" else f"{head}\n\n")
    out.write(table_text(titles, rows, fmt, right))
