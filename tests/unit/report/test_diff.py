"""The diff's plain data (profiler.report.diff): rows matched by their texts, perf diff's numbers
and order, on hand-made flat profiles."""

from __future__ import annotations

import pytest

from profiler.errors import UsageError
from profiler.report.aggregate import ReportRow, ReportRows
from profiler.report.diff import Compute, Side, build_diff, row_key, side_of

SORT = ("dso", "sym")


def flat(rows: dict[tuple[str, str], int], total: int | None = None) -> ReportRows:
    """A --no-children flat profile: (dso, symbol) -> self period."""
    made = [ReportRow(1, p, 0, 0, dso=d, dso_path=f"/build/{d}", symbol=s, kernel=d.startswith("[kernel"))
            for (d, s), p in rows.items()]
    return ReportRows("cpu-clock", SORT, False, len(made), total or sum(rows.values()), 0, made)


def side(rows: dict[tuple[str, str], int], total: int | None = None, path: str = "x") -> Side:
    return side_of([path], [flat(rows, total)])


def test_rows_match_by_dso_short_name_and_symbol_name_not_by_path() -> None:
    a = ReportRow(1, 10, 0, 0, dso="app", dso_path="/old/build/app", symbol="parse")
    b = ReportRow(1, 20, 0, 0, dso="app", dso_path="/new/build/app", symbol="parse")
    assert row_key(a, SORT) == row_key(b, SORT) == ("app", "[.] parse")
    k = ReportRow(1, 20, 0, 0, dso="[kernel.kallsyms]", symbol="parse", kernel=True)
    assert row_key(k, SORT) != row_key(a, SORT)


def test_repeats_are_summed_and_kept_apart() -> None:
    s = side_of(["a1", "a2"], [flat({("app", "f"): 30, ("app", "g"): 70}),
                               flat({("app", "f"): 50, ("app", "h"): 50})])
    f = ("app", "[.] f")
    assert s.total == 200 and s.periods[f] == 80 and s.share(f) == 40.0
    assert s.repeat_shares(f) == [30.0, 50.0]
    assert s.repeat_shares(("app", "[.] h")) == [0.0, 50.0]


def test_numbers_follow_perf_diffs_definitions() -> None:
    base = side({("app", "f"): 250, ("app", "g"): 750})
    new = side({("app", "f"): 600, ("app", "g"): 1200, ("app", "new_fn"): 200})
    for kind in ("delta", "ratio", "wdiff:2,3"):
        data = build_diff("cpu-clock", SORT, [base, new], Compute.parse(kind))
        rows = {r.key[1]: r for r in data.rows}
        f, g, n = rows["[.] f"], rows["[.] g"], rows["[.] new_fn"]
        assert data.baseline(f) == 25.0 and data.baseline(n) is None
        assert data.delta(f, 1) == pytest.approx(30.0 - 25.0)
        assert data.delta(n, 1) == pytest.approx(10.0)  # against nothing
        assert data.ratio(g, 1) == pytest.approx(1200 / 750)
        assert data.ratio(n, 1) is None  # perf prints N/A
        assert data.wdiff(f, 1) == 600 * data.compute.w2 - 250 * data.compute.w1
        assert data.formula(f, 1) is not None


def test_unmatched_rows_baseline_only_and_new_only() -> None:
    base = side({("app", "gone"): 100, ("app", "kept"): 100})
    new = side({("app", "kept"): 100, ("app", "added"): 100})
    data = build_diff("e", SORT, [base, new], Compute("delta"))
    rows = {r.key[1]: r for r in data.rows}
    assert rows["[.] gone"].in_base and rows["[.] gone"].in_new == (False,)
    assert not rows["[.] added"].in_base and rows["[.] added"].in_new == (True,)
    assert data.delta(rows["[.] gone"], 1) is None  # blank, as perf
    assert data.rows[-1].key == ("app", "[.] gone")  # rows without a pair come last


def test_order_delta_abs_delta_and_ratio() -> None:
    base = side({("a", "up"): 100, ("a", "down"): 500, ("a", "same"): 400})
    new = side({("a", "up"): 300, ("a", "down"): 300, ("a", "same"): 400, ("a", "fresh"): 10})
    names = lambda d: [r.key[1][4:] for r in d.rows]  # noqa: E731
    assert names(build_diff("e", SORT, [base, new], Compute("delta"))) == ["up", "fresh", "same", "down"]
    assert names(build_diff("e", SORT, [base, new], Compute("delta-abs"))) == ["down", "up", "fresh", "same"]
    # ratio: rows with a value, then the N/A rows (only in the new file)
    assert names(build_diff("e", SORT, [base, new], Compute("ratio"))) == ["up", "same", "down", "fresh"]


def test_order_picks_the_new_file_to_sort_by() -> None:
    base = side({("a", "x"): 100, ("a", "y"): 100})
    one = side({("a", "x"): 300, ("a", "y"): 100})
    two = side({("a", "x"): 100, ("a", "y"): 300})
    assert build_diff("e", SORT, [base, one, two], Compute("delta"), order=2).rows[0].key[1] == "[.] y"
    with pytest.raises(UsageError):
        build_diff("e", SORT, [base, one], order=2)


@pytest.mark.parametrize("text", ["nope", "wdiff", "wdiff:1", "wdiff:0,1", "ratio:1,2", "wdiff:a,b"])
def test_bad_computations_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        Compute.parse(text)


def test_compute_parses_wdiff_weights() -> None:
    assert Compute.parse("wdiff:2,-3") == Compute("wdiff", 2, -3)
    assert Compute.parse("delta-abs") == Compute("delta-abs")
