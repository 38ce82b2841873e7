"""``report --group``: the flat profiles of a ':S' group's events side by side, as perf report
shows an event group: one percentage per event in each row, the rows of every event joined
by their sort keys and ordered by the leader's share, then the members'."""

from __future__ import annotations

from typing import TextIO

from profiler.report.aggregate import ReportRows, ReportRow
from profiler.report.render.table import columns, unit_number

RowKey = tuple[object, ...]


def row_key(r: ReportRow) -> RowKey:
    return (r.comm, r.pid, r.tid, r.cpu, r.dso, r.symbol, r.kernel, r.srcline)


def group_rows(flats: list[ReportRows]) -> list[tuple[RowKey, list[ReportRow | None]]]:
    """Every row key of any event with each event's row (None where it has none), ordered by
    the events' periods, the leader's first."""
    by_event = [{row_key(r): r for r in f.rows} for f in flats]
    keys = list(dict.fromkeys(row_key(r) for f in flats for r in f.rows))
    joined = [(k, [rows.get(k) for rows in by_event]) for k in keys]

    def weight(item: tuple[RowKey, list[ReportRow | None]]) -> tuple[int, ...]:
        return tuple(-_period(r, f) for r, f in zip(item[1], flats))

    return sorted(joined, key=weight)


def _period(r: ReportRow | None, flat: ReportRows) -> int:
    if r is None:
        return 0
    return r.children_period if flat.children else r.self_period


def write(flats: list[ReportRows], out: TextIO) -> None:
    leader = flats[0]
    names = ", ".join(f.event for f in flats)
    out.write("\n".join([
        "# To display the capture's header, use --header.", "#", "#",
        f"# Total Lost Samples: {leader.lost_samples}", "#",
        f"# Samples: {unit_number(leader.total_samples)} of events 'anon group {{ {names} }}'",
        f"# Event count (approx.): {leader.total_period}", "#",
    ]) + "\n")
    numeric = 3 + int(leader.children)  # (Children, Self | Overhead), Samples, Period
    keys = columns(leader)[numeric:]
    rows = group_rows(flats)

    def shares(row: list[ReportRow | None], children: bool) -> str:
        return "  ".join(f"{_share(r, f, children):6.2f}%" for r, f in zip(row, flats))

    share_cols = [("Children", True), ("Self", False)] if leader.children else [("Overhead", False)]
    cells = []
    for _key, row in rows:
        first = next(r for r in row if r is not None)
        cells.append([shares(row, children) for _, children in share_cols]
                     + [str(_samples(row[0], leader))] + [cell(first) for _, _, cell in keys])
    titles = [t for t, _ in share_cols] + ["Samples"] + [t for t, _, _ in keys]
    right = [True] * (len(share_cols) + 1) + [r for _, r, _ in keys]
    widths = [max([len(t)] + [len(c[i]) for c in cells]) for i, t in enumerate(titles)]
    out.write(("# " + "  ".join(t.rjust(w) if r else t.ljust(w)
                                for t, w, r in zip(titles, widths, right))).rstrip() + "\n")
    out.write(("# " + "  ".join("." * w for w in widths)).rstrip() + "\n#\n")
    last = len(titles) - 1
    for c in cells:
        parts = [v if j == last else (v.rjust(w) if right[j] else v.ljust(w))
                 for j, (v, w) in enumerate(zip(c, widths))]
        out.write("  " + "  ".join(parts) + "\n")
    out.write("\n")


def _share(r: ReportRow | None, flat: ReportRows, children: bool) -> float:
    if r is None:
        return 0.0
    return flat.percent(r.children_period if children else r.self_period)


def _samples(r: ReportRow | None, flat: ReportRows) -> int:
    if r is None:
        return 0
    return r.children_samples if flat.children else r.self_samples
