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


def test_baseline_only_keeps_paired_rows_and_recomputes_the_baseline_column() -> None:
    base = side({("app", "f"): 200, ("app", "g"): 600, ("app", "gone"): 200})
    new = side({("app", "f"): 300, ("app", "g"): 600, ("app", "new_fn"): 100})
    data = build_diff("cpu-clock", SORT, [base, new], Compute.parse("delta"), baseline_only=True)
    rows = {r.key[1]: r for r in data.rows}
    assert set(rows) == {"[.] f", "[.] g"}  # rows only in one file are gone
    assert data.baseline(rows["[.] f"]) == 25.0  # of the kept rows' 800, as perf -b shows it
    # the deltas stay those of the whole files (perf's): 300/1000 - 200/1000
    assert data.delta(rows["[.] f"], 1) == pytest.approx(10.0)
    plain = build_diff("cpu-clock", SORT, [base, new], Compute.parse("delta"))
    assert len(plain.rows) == 4 and plain.baseline({r.key[1]: r for r in plain.rows}["[.] f"]) == 20.0


def test_period_normalised_shares_are_of_the_baselines_total() -> None:
    base = side({("app", "f"): 500, ("app", "g"): 500})
    new = side({("app", "f"): 500, ("app", "g"): 1500})  # g got slower, f did not change
    own = build_diff("cpu-clock", SORT, [base, new], Compute.parse("delta"))
    norm = build_diff("cpu-clock", SORT, [base, new], Compute.parse("delta"), shares="baseline")
    f_own, f_norm = ({r.key[1]: r for r in d.rows}["[.] f"] for d in (own, norm))
    g_norm = {r.key[1]: r for r in norm.rows}["[.] g"]
    assert own.delta(f_own, 1) == pytest.approx(-25.0)  # its share fell: 50 % -> 25 %
    assert norm.delta(f_norm, 1) == pytest.approx(0.0)  # its period did not change
    assert norm.delta(g_norm, 1) == pytest.approx(100.0)  # +1000 of the baseline's 1000
    assert norm.formula(g_norm, 1) == "(1500 * 100 / 1000) - (500 * 100 / 1000)"
    assert norm.rows[0].key[1] == "[.] g"
    with pytest.raises(UsageError, match="--shares"):
        build_diff("cpu-clock", SORT, [base, new], shares="mine")


def test_repeats_period_normalised_shares_use_the_baselines_mean_total() -> None:
    base = side_of(["a1", "a2"], [flat({("app", "f"): 100}), flat({("app", "f"): 300})])
    new = side_of(["b1", "b2"], [flat({("app", "f"): 200}), flat({("app", "f"): 400})])
    data = build_diff("cpu-clock", SORT, [base, new], shares="baseline")
    assert data.sides[1].repeat_shares(("app", "[.] f")) == [100.0, 200.0]  # of the mean 200


def test_a_capture_without_the_event_is_an_empty_repeat() -> None:
    s = side_of(["a1", "a2"], [flat({("app", "f"): 100}), None])
    assert s.total == 100 and s.repeat_totals == (100, 0) and s.repeat_periods[1] == {}
