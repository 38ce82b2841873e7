"""perf stat's derived lines ("shadow metrics"), from the counts of one aggregation slot.

* ``task-clock`` / ``cpu-clock`` (nanoseconds): ``CPUs utilized`` = clock time / wall time;
* ``cycles``: ``GHz`` = cycles / clock nanoseconds; ``instructions``: ``insn per cycle``;
* ``branch-misses``: ``of all branches``; ``cache-misses``: ``of all cache refs``;
* every other event, when a clock event was counted: a rate per second of *clock* time
  (not wall time, as perf), scaled to K/M/G like perf's ``convert_unit_double``.
"""

from __future__ import annotations

from profiler.dataclass import dataclass
from profiler.format.attr import PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE
from profiler.record.events import HARDWARE_EVENTS, SOFTWARE_EVENTS, EventSpec

NSEC_PER_SEC = 1e9
CLOCK_CONFIGS = (SOFTWARE_EVENTS["cpu-clock"], SOFTWARE_EVENTS["task-clock"])


@dataclass(frozen=True)
class Metric:
    """``fmt % value`` then ``unit``; ``fmt`` None means perf's empty metric column (the unit
    is still given to JSON, as perf does)."""

    value: float
    fmt: str | None
    unit: str


NO_METRIC = Metric(0.0, None, "")


@dataclass(frozen=True)
class Context:
    """What the metrics of one slot may divide by (None: that event was not counted)."""

    wall_ns: float
    clock_ns: float | None = None
    cycles: float | None = None
    branches: float | None = None
    cache_refs: float | None = None


def is_clock(spec: EventSpec) -> bool:
    return spec.type == PERF_TYPE_SOFTWARE and spec.config in CLOCK_CONFIGS


def is_hw(spec: EventSpec, name: str) -> bool:
    return spec.type == PERF_TYPE_HARDWARE and spec.config == HARDWARE_EVENTS[name]


def convert_unit(value: float) -> tuple[float, str]:
    """perf's ``convert_unit_double``: above 1e9 G, 1e6 M, 1e3 K."""
    for limit, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if value > limit:
            return value / limit, prefix
    return value, ""


def metric_for(spec: EventSpec, value: float, ctx: Context) -> Metric:
    """The derived line for one event's scaled count ``value`` in slot context ``ctx``."""
    if is_hw(spec, "instructions"):
        if ctx.cycles:
            return Metric(value / ctx.cycles, "%7.2f ", "insn per cycle")
        return Metric(0.0, None, "insn per cycle")
    if is_hw(spec, "branch-misses"):
        if ctx.branches is not None:
            return Metric(100.0 * value / ctx.branches if ctx.branches else 0.0, "%7.2f%%", "of all branches")
        return Metric(0.0, None, "of all branches")
    if is_hw(spec, "cache-misses"):
        if ctx.cache_refs is not None:
            ratio = 100.0 * value / ctx.cache_refs if ctx.cache_refs else 0.0
            return Metric(ratio, "%8.3f %%", "of all cache refs")
        return NO_METRIC
    if is_hw(spec, "cycles"):
        if ctx.clock_ns:
            return Metric(value / ctx.clock_ns, "%8.3f", "GHz")
        return NO_METRIC
    if is_clock(spec):
        if ctx.wall_ns:
            return Metric(value / ctx.wall_ns, "%8.3f", "CPUs utilized")
        return Metric(0.0, None, "CPUs utilized")
    if ctx.clock_ns is not None:
        rate, prefix = convert_unit(NSEC_PER_SEC * value / ctx.clock_ns if ctx.clock_ns else 0.0)
        return Metric(rate, "%8.3f", f"{prefix}/sec")
    return NO_METRIC


def context_for(pairs: list[tuple[EventSpec, float | None]], wall_ns: float) -> Context:
    """The divisors found among one slot's (spec, scaled count or None when not counted)."""
    found: dict[str, float] = {}
    for spec, value in pairs:
        if value is None:
            continue
        if is_clock(spec):
            found["clock_ns"] = found.get("clock_ns", 0.0) + value
        for key, name in (("cycles", "cycles"), ("branches", "branches"), ("cache_refs", "cache-references")):
            if is_hw(spec, name):
                found[key] = found.get(key, 0.0) + value
    return Context(wall_ns, found.get("clock_ns"), found.get("cycles"), found.get("branches"),
                   found.get("cache_refs"))
