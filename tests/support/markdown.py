"""Markdown tables read back into their cells, with a real Markdown parser (markdown-it-py,
CommonMark with GitHub's tables): what a pull-request comment would show."""

from __future__ import annotations

from html.parser import HTMLParser

from markdown_it import MarkdownIt


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def markdown_cells(text: str) -> list[list[str]]:
    """Every row of the tables in ``text`` (titles first), each cell's text as a reader sees it."""
    parser = _Cells()
    parser.feed(MarkdownIt("commonmark").enable("table").render(text))
    return parser.rows
