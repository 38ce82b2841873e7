"""Tables for people and pull requests, through ``tabulate``: ``--format markdown|github|simple``
on ``report``, ``diff``, ``buildids`` and ``stat``. perf's own layouts stay hand-written where
they must match perf byte for byte; these are the other layouts of the same cells.

``markdown`` is a pipe table with alignment colons, ``github`` GitHub's pipe table, ``simple``
plain aligned columns. In the two Markdown forms the characters that would end a cell or start
emphasis are escaped, so a parser reads back exactly the cells."""

from __future__ import annotations

from collections.abc import Sequence

TABLE_FORMATS: tuple[str, ...] = ("markdown", "github", "simple")
_TABULATE = {"markdown": "pipe", "github": "github", "simple": "simple"}
_MARKDOWN_SPECIAL = ("\\", "|", "*", "_", "`", "[", "]", "<", ">")


def md_escape(text: str) -> str:
    """Characters that would end a cell or start Markdown emphasis, escaped."""
    for ch in _MARKDOWN_SPECIAL:
        text = text.replace(ch, "\\" + ch)
    return text


def table_text(headers: Sequence[str], rows: Sequence[Sequence[str]], fmt: str,
               right: Sequence[bool] | None = None) -> str:
    """The table in ``fmt`` (one of :data:`TABLE_FORMATS`), cells as given (no number parsing),
    columns right-aligned where ``right`` says; ends with a newline."""
    from tabulate import tabulate

    if fmt not in _TABULATE:
        raise ValueError(f"unknown table format {fmt!r}")
    if fmt != "simple":
        headers = [md_escape(h) for h in headers]
        rows = [[md_escape(c) for c in row] for row in rows]
    aligns = None if right is None else ["right" if r else "left" for r in right]
    text: str = tabulate([list(r) for r in rows], headers=list(headers), tablefmt=_TABULATE[fmt],
                         colalign=aligns, disable_numparse=True)
    return text + "\n"
