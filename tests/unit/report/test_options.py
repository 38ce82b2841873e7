"""--time with dates: the forms read, and their conversion to the capture's sample clock."""

from __future__ import annotations

import pytest

from profiler.errors import ReportError, UsageError
from profiler.report.options import TimeRange, on_sample_clock, parse_time


def test_dates_in_time_ranges_go_on_the_sample_clock() -> None:
    (r,) = parse_time("2026-11-27T10:00:00Z,+30s")
    assert r.unit == "wall" and r.end is not None and r.start is not None and r.end - r.start == 30.0
    (o,) = parse_time("2026-11-27T10:00:00+01:00,")
    assert o.end is None and o.start == r.start - 3600
    (m,) = parse_time("2026-11-27T10:00:00Z,2026-11-27T10:00:00.5Z")
    assert m.end == r.start + 0.5  # type: ignore[operator]
    assert parse_time("2026-11-27T10:00:00Z,+250ms 100.0,200.0")[1] == TimeRange("s", 100.0, 200.0)
    # the capture's clock started at 5000 s while the wall clock read r.start - 10 s
    start_wall_ns, start_clock_ns = int((r.start - 10) * 1e9), 5_000_000_000_000  # type: ignore[operator]
    (c,) = on_sample_clock((r,), start_wall_ns, start_clock_ns)
    assert c.unit == "s" and abs(c.start - 5010.0) < 1e-6 and abs(c.end - 5040.0) < 1e-6  # type: ignore[operator]
    (early,) = on_sample_clock(parse_time("2020-01-01T00:00:00Z,+1s"), start_wall_ns, start_clock_ns)
    assert early.start == early.end == 5000.0  # before the recording: nothing, not seconds from the start
    with pytest.raises(ReportError, match="wall-clock start"):
        on_sample_clock((r,), None, start_clock_ns)
    for bad in ("2026-11-27T25:00:00,", "2026-11-27T10:00:00", "2026-11-27T10:00:00,+5x",
                "2026-11-27T10:00:00Z,2026-11-27T09:00:00Z"):
        with pytest.raises(UsageError):
            parse_time(bad)
