"""perf stat's derived lines, from plain numbers."""

from __future__ import annotations

import pytest

from profiler.record.events import parse_event
from profiler.stat.metrics import NO_METRIC, Context, context_for, convert_unit, metric_for


def m(name: str, value: float, **ctx: float) -> tuple[float, str | None, str]:
    metric = metric_for(parse_event(name), value, Context(wall_ns=ctx.pop("wall_ns", 0.0), **ctx))
    return round(metric.value, 6), metric.fmt, metric.unit


def test_clock_is_cpus_utilized() -> None:
    assert m("task-clock", 2e9, wall_ns=1e9) == (2.0, "%8.3f", "CPUs utilized")
    assert m("cpu-clock", 5e8, wall_ns=1e9) == (0.5, "%8.3f", "CPUs utilized")
    assert m("task-clock", 5e8) == (0.0, None, "CPUs utilized")  # no wall time: empty column


@pytest.mark.parametrize(
    ("value", "clock_ns", "rate", "unit"),
    [(74, 0.93e6, 79.569892, "K/sec"), (1, 1e9, 1.0, "/sec"), (5e6, 1e9, 5.0, "M/sec"),
     (3e9, 1e9, 3.0, "G/sec"), (0, 1e6, 0.0, "/sec")],
)
def test_rates_are_per_second_of_clock_time(value: float, clock_ns: float, rate: float, unit: str) -> None:
    assert m("page-faults", value, clock_ns=clock_ns) == (rate, "%8.3f", unit)


def test_no_clock_no_rate() -> None:
    assert metric_for(parse_event("page-faults"), 10, Context(wall_ns=1e9)) == NO_METRIC


def test_hardware_ratios() -> None:
    assert m("instructions", 3e9, cycles=2e9) == (1.5, "%7.2f ", "insn per cycle")
    assert m("instructions", 3e9) == (0.0, None, "insn per cycle")
    assert m("cycles", 3e9, clock_ns=1e9) == (3.0, "%8.3f", "GHz")
    assert m("branch-misses", 5, branches=100) == (5.0, "%7.2f%%", "of all branches")
    assert m("cache-misses", 25, cache_refs=100) == (25.0, "%8.3f %%", "of all cache refs")
    assert m("branches", 2e6, clock_ns=1e9) == (2.0, "%8.3f", "M/sec")


def test_convert_unit_boundaries() -> None:
    assert convert_unit(1000.0) == (1000.0, "")
    assert convert_unit(1001.0) == (1.001, "K")


def test_context_collects_divisors_of_counted_events_only() -> None:
    pairs = [(parse_event("task-clock"), 2e6), (parse_event("cycles"), None),
             (parse_event("instructions"), 5.0), (parse_event("cpu-clock"), 1e6)]
    ctx = context_for(pairs, 1e9)
    assert ctx.clock_ns == 3e6 and ctx.cycles is None and ctx.wall_ns == 1e9
