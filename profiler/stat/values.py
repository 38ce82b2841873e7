"""Counter values: one read (value, time_enabled, time_running), sums, multiplexing scale,
and run-to-run statistics for ``-r``.

perf_event_open(2): when more events are enabled than the PMU can count at once, the kernel
multiplexes them, and ``time_running`` < ``time_enabled``; the estimate of the full count is
``value * time_enabled / time_running``. A counter that never ran has no estimate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from profiler.dataclass import dataclass
from profiler.format.records import ReadValues


@dataclass(frozen=True)
class Reading:
    """One counter's (or a sum of counters') raw value and times, in nanoseconds."""

    value: int = 0
    enabled: int = 0
    running: int = 0

    def __add__(self, other: Reading) -> Reading:
        return Reading(self.value + other.value, self.enabled + other.enabled, self.running + other.running)

    def __sub__(self, other: Reading) -> Reading:
        return Reading(self.value - other.value, self.enabled - other.enabled, self.running - other.running)

    @property
    def counted(self) -> bool:
        return self.running > 0

    @property
    def multiplexed(self) -> bool:
        return 0 < self.running < self.enabled

    def scaled(self) -> float:
        """The count scaled to the whole enabled time (0 when the counter never ran)."""
        if self.running <= 0:
            return 0.0
        if self.running >= self.enabled:
            return float(self.value)
        return self.value * self.enabled / self.running

    @property
    def running_pct(self) -> float:
        """perf's "pcnt-running": 100 unless running and enabled differ."""
        if self.running == self.enabled or self.enabled == 0:
            return 100.0
        return 100.0 * self.running / self.enabled


def readings_from(values: ReadValues) -> list[tuple[int | None, Reading]]:
    """(id, Reading) per counter of a decoded ``struct read_format`` (group or single)."""
    enabled = values.time_enabled or 0
    running = values.time_running or 0
    return [(ident, Reading(value, enabled, running)) for value, ident, _ in values.values]


def total(readings: Iterable[Reading]) -> Reading:
    out = Reading()
    for r in readings:
        out = out + r
    return out


@dataclass
class RunningStats:
    """Mean and variance by Welford's method, as perf's ``update_stats``; ``stderr`` is the
    standard deviation of the mean (perf's ``stddev_stats``), ``rel_pct`` its percentage of
    the mean (``rel_stddev_stats``), which ``-r`` prints as ``( +- x% )``."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    @property
    def stderr(self) -> float:
        if self.n < 2:
            return 0.0
        return math.sqrt(self.m2 / (self.n - 1) / self.n)

    @property
    def rel_pct(self) -> float:
        return 100.0 * self.stderr / self.mean if self.mean else 0.0


def mean_stats(samples: Iterable[float]) -> RunningStats:
    stats = RunningStats()
    for x in samples:
        stats.add(x)
    return stats
