"""perf diff's text layout and the Markdown table (profiler.report.render.difftable), on plain
data; the Markdown is read back by a Markdown parser (markdown-it-py, GFM tables) into the same
cells."""

from __future__ import annotations

import io


from tests.support.markdown import markdown_cells
from profiler.report.aggregate import ReportRow, ReportRows
from profiler.report.diff import Compute, DiffData, build_diff, side_of
from profiler.report.render import difftable

SORT = ("dso", "sym")


def flat(rows: dict[tuple[str, str], int]) -> ReportRows:
    made = [ReportRow(1, p, 0, 0, dso=d, symbol=s, kernel=d.startswith("[")) for (d, s), p in rows.items()]
    return ReportRows("cpu-clock", SORT, False, len(made), sum(rows.values()), 0, made)


def data(compute: str = "delta", news: int = 1, **kw: bool) -> DiffData:
    base = side_of(["a.prof"], [flat({("app", "work_a"): 500, ("app", "gone"): 100,
                                      ("[kernel.kallsyms]", "k_f|*_x"): 400})])
    new = [side_of([f"n{i}.prof"], [flat({("app", "work_a"): 700, ("app", "added"): 100,
                                          ("[kernel.kallsyms]", "k_f|*_x"): 200})]) for i in range(news)]
    return build_diff("cpu-clock", SORT, [base, *new], Compute.parse(compute), **kw)


def text(d: DiffData) -> list[str]:
    out = io.StringIO()
    difftable.write(d, out)
    return out.getvalue().splitlines()


def test_text_layout_is_perf_diffs() -> None:
    lines = text(data())
    assert lines[:2] == ["# Event 'cpu-clock'", "#"]
    assert lines[2:] == [
        "# Baseline    Delta  Shared Object      Symbol     ",  # titles padded to the widest text
        "# ........  .......  .................  ...........",
        "#",
        "    50.00%  +20.00%  app                [.] work_a",  # sorted by delta, the last Symbol unpadded
        "            +10.00%  app                [.] added",  # only in the new file: no Baseline
        "    40.00%  -20.00%  [kernel.kallsyms]  [k] k_f|*_x",
        "    10.00%           app                [.] gone",  # only in the baseline: no Delta, last
    ]


def test_ratio_and_wdiff_cells_and_na() -> None:
    r = {line.rsplit(" ", 1)[-1]: line for line in text(data("ratio"))[5:]}
    assert "1.400000" in r["work_a"] and "N/A" in r["added"] and r["gone"].split()[:1] == ["10.00%"]
    w = {line.rsplit(" ", 1)[-1]: line for line in text(data("wdiff:1,2"))[5:]}
    assert w["work_a"].split()[1] == str(700 * 2 - 500)


def test_several_new_files_list_the_data_files_and_number_the_columns() -> None:
    lines = text(data(news=2, show_period=True, show_formula=True))
    assert lines[2:7] == ["# Data files:", "#  [0] a.prof (Baseline)", "#  [1] n0.prof ", "#  [2] n1.prof ", "#"]
    titles = lines[7]
    for t in ("Baseline/0", "Base period/0", "Delta/1", "Formula/1", "Period/1", "Delta/2", "Period/2"):
        assert t in titles
    row = next(line for line in lines if line.endswith("work_a"))
    assert "(700 * 100 / 1000) - (500 * 100 / 1000)" in row


def test_markdown_parses_back_into_the_same_cells() -> None:
    for compute in ("delta", "ratio", "wdiff:1,1"):
        d = data(compute, show_period=True)
        out = io.StringIO()
        difftable.write_markdown(d, out)
        titles, rows = difftable.markdown_cells(d)
        assert markdown_cells(out.getvalue()) == [titles, *rows]
        assert any(c == "[k] k_f|*_x" for row in rows for c in row)  # escaped, and read back whole
