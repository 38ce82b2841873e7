"""The event two captures are compared on (report/pair.py): --event's when both have it, else
BASE's first event that NEW has, modifiers aside; one sentence otherwise."""

from __future__ import annotations

import pytest

from profiler.errors import ReportError
from profiler.report.pair import check_arch, common_event


def test_without_event_base_order_decides_and_modifiers_do_not_count() -> None:
    assert common_event("b", ["task-clock", "cpu-clock:u"], "n", ["cpu-clock", "task-clock"], None) == "task-clock"
    assert common_event("b", ["page-faults", "cpu-clock:ppp"], "n", ["cpu-clock"], None) == "cpu-clock"


def test_event_named_must_be_in_both() -> None:
    assert common_event("b", ["task-clock", "cpu-clock:u"], "n", ["cpu-clock"], "cpu-clock") == "cpu-clock"
    with pytest.raises(ReportError, match=r"^n has no event 'task-clock' \(it has cpu-clock\)"):
        common_event("b", ["task-clock"], "n", ["cpu-clock"], "task-clock")


def test_no_common_event_names_both_sides_events() -> None:
    with pytest.raises(ReportError, match=r"^no event in common to compare: b has cpu-clock, n has page-faults\.$"):
        common_event("b", ["cpu-clock"], "n", ["page-faults"], None)


def test_architectures_must_match_when_both_are_known() -> None:
    check_arch("b", "x86_64", "n", "x86_64")
    check_arch("b", "", "n", "aarch64")  # unknown on one side: nothing to say
    with pytest.raises(ReportError, match="b was recorded on x86_64 and n on aarch64"):
        check_arch("b", "x86_64", "n", "aarch64")
