"""The CI gate (profiler.report.diffgate): its rule parser and its verdicts on plain data, with
and without repeats."""

from __future__ import annotations

import math

import pytest

from profiler.errors import UsageError
from profiler.report.aggregate import ReportRow, ReportRows
from profiler.report.diff import Compute, DiffData, build_diff, side_of
from profiler.report.diffgate import Rule, check, parse_rules

SORT = ("dso", "sym")


def flat(rows: dict[str, int]) -> ReportRows:
    made = [ReportRow(1, p, 0, 0, dso="app", symbol=s) for s, p in rows.items()]
    return ReportRows("cpu-clock", SORT, False, len(made), sum(rows.values()), 0, made)


def diff(base: list[dict[str, int]], new: list[dict[str, int]]) -> DiffData:
    return build_diff("cpu-clock", SORT, [side_of(["b"] * len(base), [flat(r) for r in base]),
                                          side_of(["n"] * len(new), [flat(r) for r in new])], Compute("delta"))


def test_parses_the_documented_rules() -> None:
    rules = parse_rules("any>+2pp, sym:parse_*>+5%,total>+3%,dso:lib{a,b}*<-1.5pp")
    assert rules == [
        Rule("any>+2pp", "any", "", ">", 2.0, "pp"),
        Rule("sym:parse_*>+5%", "sym", "parse_*", ">", 5.0, "%"),
        Rule("total>+3%", "total", "", ">", 3.0, "%"),
        Rule("dso:lib{a,b}*<-1.5pp", "dso", "lib{a,b}*", "<", -1.5, "pp"),
    ]


@pytest.mark.parametrize("text", ["", "any", "any>2", "any>+2px", "total>+3pp", "foo>+1pp", "any=+1pp",
                                  "sym:>+1pp", "any>+2pp,,bogus"])
def test_bad_rules_are_one_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        parse_rules(text)


def test_points_rule_names_the_rows_that_broke_it() -> None:
    data = diff([{"f": 200, "g": 800}], [{"f": 500, "g": 500}])
    broken = check(data, parse_rules("any>+2pp"))
    assert [b.what for b in broken] == ["app  [.] f"]
    assert broken[0].change == pytest.approx(30.0)
    assert "any>+2pp" in broken[0].sentence() and "[.] f" in broken[0].sentence()
    assert check(data, parse_rules("any>+31pp")) == []
    assert [b.what for b in check(data, parse_rules("any<-2pp"))] == ["app  [.] g"]


def test_relative_rule_and_globs() -> None:
    data = diff([{"parse_a": 100, "parse_b": 100, "run": 800}], [{"parse_a": 104, "parse_b": 120, "run": 776}])
    broken = check(data, parse_rules("sym:parse_*>+5%"))
    assert [b.what for b in broken] == ["app  [.] parse_b"]
    assert broken[0].change == pytest.approx(20.0)
    added = check(diff([{"run": 100}], [{"run": 100, "parse_new": 5}]), parse_rules("sym:parse_*>+5%"))
    assert len(added) == 1 and math.isinf(added[0].change)


def test_total_rule() -> None:
    data = diff([{"f": 1000}], [{"f": 1040}])
    assert [b.what for b in check(data, parse_rules("total>+3%"))] == ["the total period"]
    assert check(data, parse_rules("total>+5%")) == []


def test_repeats_spread_keeps_noise_from_failing() -> None:
    # f moves by 3 points on average, but the repeats scatter by several points: not a failure
    noisy = diff([{"f": 200, "g": 800}, {"f": 260, "g": 740}, {"f": 140, "g": 860}],
                 [{"f": 230, "g": 770}, {"f": 290, "g": 710}, {"f": 170, "g": 830}])
    assert check(noisy, parse_rules("any>+2pp")) == []
    # the same mean change with tight repeats fails
    tight = diff([{"f": 200, "g": 800}, {"f": 201, "g": 799}, {"f": 199, "g": 801}],
                 [{"f": 230, "g": 770}, {"f": 231, "g": 769}, {"f": 229, "g": 771}])
    broken = check(tight, parse_rules("any>+2pp"))
    assert [b.what for b in broken] == ["app  [.] f"] and 0 < broken[0].noise < 3
    # k scales the noise band
    assert check(tight, parse_rules("any>+2pp"), k=100.0) == []


def test_a_glob_on_a_key_the_diff_does_not_have_is_a_usage_error() -> None:
    data = build_diff("e", ("sym",), [side_of(["b"], [flat({"f": 1})]), side_of(["n"], [flat({"f": 2})])])
    with pytest.raises(UsageError):
        check(data, parse_rules("dso:app>+1pp"))
