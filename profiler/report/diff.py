"""``profiler diff``'s plain data: two or more profiles of one event matched row by row, with
perf diff's numbers (``perf diff``'s default output, ``-c delta|delta-abs|ratio|wdiff:W1,W2``).

Each capture is aggregated like ``perf report --no-children`` (self periods per sort key,
:func:`profiler.report.aggregate.aggregate`); rows are keyed by their *texts* — the DSO's short
name and the symbol's name, not addresses — so two builds of one program compare. A side may be
several captures (repeats of one run): its periods and totals are then summed (the numbers are
those of one capture holding every repeat), and :class:`Side` keeps each repeat's own periods
for the CI gate's noise estimate (:mod:`profiler.report.diffgate`).

The numbers, as perf diff defines them (``tools/perf/Documentation/perf-diff.txt``), for a row
with period ``p0`` in the baseline (total ``T0``) and ``p1`` in a new file (total ``T1``):

* Baseline: ``p0 * 100 / T0``;
* delta (and delta-abs, which only sorts by the absolute value): ``p1 * 100 / T1 - p0 * 100 / T0``
  (with ``--shares baseline``, period-normalised: ``p1 * 100 / T0 - p0 * 100 / T0``, the row's
  change of period as a share of the baseline's total, so a row whose period did not change
  shows 0 whatever the other rows did);
* ratio: ``p1 / p0`` (``p0`` taken as 1 when 0);
* wdiff: ``p1 * W2 - p0 * W1``.

A row only in the baseline has no value for the new file (blank); a row only in a new file is
perf's "dummy" baseline row: Baseline blank, its delta against 0, its ratio and wdiff "N/A".
With ``-b`` (perf's ``--baseline-only``) only the baseline's rows that a new file has too are
kept, and the Baseline column becomes a share of their summed periods (as perf shows it); the
deltas stay those of the whole files (perf's too; its ``-F`` text then names the kept rows'
total, which its delta did not use: ours names the total used).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import field, replace

from profiler.dataclass import dataclass
from profiler.errors import UsageError
from profiler.report.aggregate import ReportRow, ReportRows

COMPUTES: tuple[str, ...] = ("delta", "delta-abs", "ratio", "wdiff")
SHARES: tuple[str, ...] = ("own", "baseline")  # what a new file's shares are of (``--shares``)
DIFF_SORT_KEYS: tuple[str, ...] = ("comm", "pid", "tid", "cpu", "dso", "sym", "srcline")
DEFAULT_DIFF_SORT: tuple[str, ...] = ("dso", "sym")  # perf diff's default

Key = tuple[str, ...]


@dataclass(frozen=True)
class Compute:
    """``-c``: what the new files' columns show and sort by."""

    kind: str = "delta-abs"  # perf 6.1's default
    w1: int = 1  # wdiff's weights: p1 * w2 - p0 * w1
    w2: int = 1

    @classmethod
    def parse(cls, text: str) -> Compute:
        """``delta``, ``delta-abs``, ``ratio`` or ``wdiff:W1,W2`` (non-zero integers)."""
        name, _, arg = text.partition(":")
        if name not in COMPUTES:
            raise UsageError(f"-c {text!r}: the computation is one of delta, delta-abs, ratio, wdiff:W1,W2.")
        if name != "wdiff":
            if arg:
                raise UsageError(f"-c {text!r}: only wdiff takes weights.")
            return cls(name)
        try:
            w1, w2 = (int(w) for w in arg.split(","))
        except ValueError:
            raise UsageError(f"-c {text!r}: wdiff needs two integer weights, as in wdiff:1,2.") from None
        if not w1 or not w2:
            raise UsageError(f"-c {text!r}: wdiff's weights must not be 0.")
        return cls(name, w1, w2)


@dataclass(frozen=True)
class Side:
    """One column group of the diff: a capture, or several repeats of one run summed."""

    paths: tuple[str, ...]
    total: int  # summed total period (the share's denominator)
    periods: dict[Key, int]  # summed self period per row key
    repeat_totals: tuple[int, ...] = ()
    repeat_periods: tuple[dict[Key, int], ...] = ()
    share_total: int = 0  # the shares' denominator when not ``total`` (``--shares baseline``)
    repeat_share_total: float = 0.0  # the same for each repeat

    @property
    def label(self) -> str:
        return " ".join(self.paths)

    @property
    def denominator(self) -> int:
        """What the shares are of: the side's own total, or the baseline's."""
        return self.share_total or self.total

    def share(self, key: Key) -> float:
        """The row's percentage of the side's denominator (0 when absent)."""
        d = self.denominator
        return self.periods.get(key, 0) * 100.0 / d if d else 0.0

    def repeat_shares(self, key: Key) -> list[float]:
        """The row's percentage in each repeat."""
        return [p.get(key, 0) * 100.0 / (self.repeat_share_total or t) if t else 0.0
                for p, t in zip(self.repeat_periods, self.repeat_totals)]

    def over(self, base: Side) -> Side:
        """This side with its shares taken of ``base``'s total (``--shares baseline``)."""
        mean = sum(base.repeat_totals) / len(base.repeat_totals) if base.repeat_totals else 0.0
        return replace(self, share_total=base.total, repeat_share_total=mean)


@dataclass(frozen=True)
class DiffRow:
    """One row: its key's texts (one per sort key) and whether each side has it."""

    key: Key
    in_base: bool  # False: perf's dummy row (only in new files)
    in_new: tuple[bool, ...]


@dataclass
class DiffData:
    """What the renderers print: the sides (baseline first), the rows in perf diff's order."""

    event: str
    sort: tuple[str, ...]
    compute: Compute
    sides: list[Side]
    rows: list[DiffRow]
    show_period: bool = False
    show_formula: bool = False
    order: int = 1
    warnings: list[str] = field(default_factory=list)
    shares: str = "own"  # what the new files' shares are of: their own totals or the baseline's
    baseline_total: int = 0  # the Baseline column's denominator when not the base's total (-b)

    @property
    def base(self) -> Side:
        return self.sides[0]

    def baseline(self, row: DiffRow) -> float | None:
        """Baseline percentage; None for a row only in new files."""
        if not row.in_base:
            return None
        total = self.baseline_total or self.base.total
        return self.base.periods[row.key] * 100.0 / total if total else 0.0

    def base_period(self, row: DiffRow) -> int:
        return self.base.periods.get(row.key, 0)

    def period(self, row: DiffRow, i: int) -> int | None:
        """The row's period in new side ``i`` (1-based); None when that side lacks it."""
        return self.sides[i].periods[row.key] if row.in_new[i - 1] else None

    def delta(self, row: DiffRow, i: int) -> float | None:
        """Share in new side ``i`` minus share in the baseline, in percentage points."""
        if not row.in_new[i - 1]:
            return None
        return self.sides[i].share(row.key) - self.base.share(row.key)

    def ratio(self, row: DiffRow, i: int) -> float | None:
        if not row.in_new[i - 1] or not row.in_base:
            return None
        return self.sides[i].periods[row.key] / (self.base_period(row) or 1)

    def wdiff(self, row: DiffRow, i: int) -> int | None:
        if not row.in_new[i - 1] or not row.in_base:
            return None
        return self.sides[i].periods[row.key] * self.compute.w2 - self.base_period(row) * self.compute.w1

    def value(self, row: DiffRow, i: int) -> float | None:
        """The computed value new side ``i``'s column shows (what it sorts by)."""
        kind = self.compute.kind
        if kind in ("delta", "delta-abs"):
            return self.delta(row, i)
        if kind == "ratio":
            return self.ratio(row, i)
        w = self.wdiff(row, i)
        return None if w is None else float(w)

    def formula(self, row: DiffRow, i: int) -> str | None:
        """perf diff's ``--formula`` text for new side ``i``."""
        if not row.in_new[i - 1]:
            return None
        new, old = self.sides[i].periods[row.key], self.base_period(row)
        kind = self.compute.kind
        if kind in ("delta", "delta-abs"):
            return f"({new} * 100 / {self.sides[i].denominator}) - ({old} * 100 / {self.base.total})"
        if kind == "ratio":
            return f"{new} / {old}"
        return f"({new} * {self.compute.w2}) - ({old} * {self.compute.w1})"


def row_key(row: ReportRow, sort: Sequence[str]) -> Key:
    """A report row's texts for the sort keys: what matches rows across captures (the DSO's
    short name and the symbol's name, never an address of a symbol)."""
    out: list[str] = []
    for k in sort:
        if k == "comm":
            out.append(row.comm or "")
        elif k == "pid":
            out.append(str(row.pid))
        elif k == "tid":
            out.append(str(row.tid))
        elif k == "cpu":
            out.append("" if row.cpu is None else "%.3d" % row.cpu)
        elif k == "dso":
            out.append(row.dso or "")
        elif k == "sym":
            out.append(f"[{'k' if row.kernel else '.'}] {row.symbol}")
        elif k == "srcline":
            out.append(row.srcline or "")
    return tuple(out)


def side_of(paths: Sequence[str], flats: Sequence[ReportRows | None]) -> Side:
    """One side from the flat profiles of its captures (repeats summed); None for a capture
    without the event (no rows, a total of 0)."""
    repeats: list[dict[Key, int]] = []
    for flat in flats:
        periods: dict[Key, int] = {}
        if flat is not None:
            for r in flat.rows:
                k = row_key(r, flat.sort)
                periods[k] = periods.get(k, 0) + r.self_period
        repeats.append(periods)
    summed: dict[Key, int] = {}
    for periods in repeats:
        for k, p in periods.items():
            summed[k] = summed.get(k, 0) + p
    totals = tuple(f.total_period if f is not None else 0 for f in flats)
    return Side(tuple(paths), sum(totals), summed, totals, tuple(repeats))


def build_diff(event: str, sort: tuple[str, ...], sides: list[Side], compute: Compute = Compute(),
               order: int = 1, show_period: bool = False, show_formula: bool = False, *,
               baseline_only: bool = False, shares: str = "own") -> DiffData:
    """Match the sides' rows by key and order them as perf diff does (see :func:`sort_rows`);
    ``baseline_only`` is ``-b``, ``shares`` what a new file's shares are of (``own`` total, or
    the ``baseline``'s: period-normalised)."""
    if shares not in SHARES:
        raise UsageError(f"--shares {shares!r}: one of {', '.join(SHARES)}.")
    if len(sides) < 2:
        raise UsageError("diff needs a baseline and at least one capture to compare with it.")
    if shares == "baseline":
        sides = [sides[0], *(s.over(sides[0]) for s in sides[1:])]
    if not 1 <= order < len(sides):
        raise UsageError(f"--order {order}: there are {len(sides) - 1} captures to compare with the baseline "
                         f"(1 to {len(sides) - 1}).")
    base = sides[0]
    keys = list(base.periods)
    seen = set(keys)
    for s in sides[1:]:
        for k in s.periods:
            if k not in seen:
                seen.add(k)
                keys.append(k)
    rows = [DiffRow(k, k in base.periods, tuple(k in s.periods for s in sides[1:])) for k in keys]
    data = DiffData(event, sort, compute, sides, rows, show_period, show_formula, order, shares=shares)
    if baseline_only:
        data.rows = [r for r in rows if r.in_base and any(r.in_new)]
        data.baseline_total = sum(base.periods[r.key] for r in data.rows)
    data.rows = sort_rows(data)
    return data


def sort_rows(data: DiffData) -> list[DiffRow]:
    """perf diff's order: by the computed value of new side ``order`` (descending; delta-abs by
    its absolute value), rows with a value first; for ratio and wdiff, rows only in new files
    (no value: "N/A") after them, ordered by their new period; rows that side lacks last.
    Ties by baseline period (descending), then by the keys' texts."""
    i, kind = data.order, data.compute.kind

    def rank(row: DiffRow) -> tuple[int, float, int, Key]:
        v = data.value(row, i)
        if v is None:
            if row.in_new[i - 1]:  # perf still computes it against a period of 0 (ratio: 1)
                return (1, -float(data.sides[i].periods[row.key]), 0, row.key)
            return (2, 0.0, -data.base_period(row), row.key)
        if kind == "delta-abs":
            v = math.fabs(v)
        return (0, -v, -data.base_period(row), row.key)

    return sorted(data.rows, key=rank)
