"""--time with dates: the forms read, and their conversion to the capture's sample clock."""

from __future__ import annotations

import pytest

from profiler.errors import ReportError, UsageError
from profiler.report.options import TimeRange, on_sample_clock, parse_time


def test_dates_in_time_ranges_go_on_the_sample_clock() -> None:
    (r,) = parse_time("2026-11-27T10:00:00Z,+30s")
    assert r.unit == "wall" and r.end is not None and r.start is not None and r.end - r.start == 30 * 10**9
    assert r.start == 1_795_773_600 * 10**9  # whole ns since the epoch
    (o,) = parse_time("2026-11-27T10:00:00+01:00,")
    assert o.end is None and o.start == r.start - 3600 * 10**9
    (m,) = parse_time("2026-11-27T10:00:00Z,2026-11-27T10:00:00.5Z")
    assert m.end == r.start + 500_000_000  # type: ignore[operator]
    assert parse_time("2026-11-27T10:00:00Z,+250ms 100.0,200.0")[1] == TimeRange("s", 100.0, 200.0)
    # the capture's clock started at 5000 s while the wall clock read r.start - 10 s
    start_wall_ns, start_clock_ns = int(r.start - 10 * 10**9), 5_000_000_000_000  # type: ignore[operator]
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


def test_a_date_selects_the_sample_at_its_own_microsecond() -> None:
    """A date printed by script -F tod (truncated to the microsecond) selects that sample even
    when it lies a few ns past the microsecond: seconds as a float lose ~240 ns today."""
    import numpy as np

    from profiler.report.options import time_mask

    start_wall_ns, start_clock_ns = 1_795_773_600_123_456_789, 28_657_000_000_000
    offset = start_wall_ns - start_clock_ns
    sample_wall = 1_795_773_601_986_807_013  # tod prints ...:01.986807
    times = np.array([sample_wall - offset - 1_000, sample_wall - offset], dtype=np.uint64)
    (r,) = on_sample_clock(parse_time("2026-11-27T10:00:01.986807Z,+20ms"), start_wall_ns, start_clock_ns)
    assert time_mask(times, (r,), start_clock_ns).tolist() == [False, True]
