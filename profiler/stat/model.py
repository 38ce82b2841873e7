"""Rows of a stat report as plain data: one per (event, slot), counts averaged over runs.

A slot is None when counts are summed over every counter of an event (perf's default
aggregation), a CPU for ``-A`` and a thread for ``--per-thread``. Renderers only format rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field

from profiler.dataclass import dataclass
from profiler.record.events import EventSpec
from profiler.stat.counters import Slot
from profiler.stat.metrics import Context, Metric, context_for, is_clock, metric_for
from profiler.stat.values import Reading, RunningStats, mean_stats

COUNTED, NOT_COUNTED, NOT_SUPPORTED = "counted", "<not counted>", "<not supported>"
NSEC_PER_MSEC = 1e6

# One measurement: {(event index, slot): summed Reading}
Counts = Mapping[tuple[int, Slot | None], Reading]


@dataclass(frozen=True)
class Row:
    event: str
    unit: str  # "msec" for the clock events, else ""
    status: str  # COUNTED, NOT_COUNTED or NOT_SUPPORTED
    value: float  # in display units (milliseconds for clocks); 0 unless COUNTED
    enabled: float  # nanoseconds (mean over runs)
    running: float
    metric: Metric
    noise_pct: float | None = None  # relative stddev of the mean, with -r
    slot: Slot | None = None

    @property
    def running_pct(self) -> float:
        if self.running == self.enabled or not self.enabled:
            return 100.0
        return 100.0 * self.running / self.enabled


@dataclass
class StatReport:
    """Everything the final summary prints."""

    title: str  # what was measured: "'true'", "system wide", "process id '42'"
    runs: int
    rows: list[Row]
    wall_ns: RunningStats
    user_s: float | None = None  # the command's rusage, when one run of a command
    sys_s: float | None = None
    notices: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Averaged:
    scaled: RunningStats
    enabled: float
    running: float


def _average(readings: Sequence[Reading]) -> _Averaged:
    n = len(readings) or 1
    return _Averaged(
        mean_stats(r.scaled() for r in readings),
        sum(r.enabled for r in readings) / n,
        sum(r.running for r in readings) / n,
    )


def build_rows(
    events: Sequence[EventSpec],
    unsupported: set[int],
    runs: Sequence[Counts],
    slots: Sequence[Slot | None],
    wall_ns: float,
) -> list[Row]:
    """Rows for every event and slot, in event order; threads by decreasing count (perf)."""
    averaged = {
        (e, slot): _average([run[(e, slot)] for run in runs if (e, slot) in run])
        for e in range(len(events)) for slot in slots
    }
    contexts = {
        slot: context_for([(spec, _value_or_none(averaged[(e, slot)])) for e, spec in enumerate(events)], wall_ns)
        for slot in slots
    }
    rows: list[Row] = []
    for e, spec in enumerate(events):
        event_rows = [_row(spec, e in unsupported, averaged[(e, slot)], contexts[slot], slot, len(runs))
                      for slot in slots]
        if any(slot is not None and slot.tid >= 0 for slot in slots):
            event_rows.sort(key=lambda r: -r.value)
        rows.extend(event_rows)
    return rows


def _value_or_none(avg: _Averaged) -> float | None:
    return avg.scaled.mean if avg.running > 0 else None


def _row(spec: EventSpec, unsupported: bool, avg: _Averaged, ctx: Context, slot: Slot | None, runs: int) -> Row:
    clock = is_clock(spec)
    unit = "msec" if clock else ""
    if unsupported:
        return Row(spec.name, unit, NOT_SUPPORTED, 0.0, 0.0, 0.0, Metric(0.0, None, ""), None, slot)
    noise = avg.scaled.rel_pct if runs > 1 else None
    if avg.running <= 0 or avg.enabled <= 0:
        return Row(spec.name, unit, NOT_COUNTED, 0.0, avg.enabled, avg.running, Metric(0.0, None, ""), noise, slot)
    metric = metric_for(spec, avg.scaled.mean, ctx)
    value = avg.scaled.mean / NSEC_PER_MSEC if clock else avg.scaled.mean
    return Row(spec.name, unit, COUNTED, value, avg.enabled, avg.running, metric, noise, slot)


def aggregate(
    readings: Mapping[tuple[int, int], Reading], slot_of_target: Sequence[Slot | None]
) -> dict[tuple[int, Slot | None], Reading]:
    """Sum the per-(event, target) readings into their slots."""
    out: dict[tuple[int, Slot | None], Reading] = {}
    for (event, target), reading in readings.items():
        key = (event, slot_of_target[target])
        out[key] = out.get(key, Reading()) + reading
    return out


def delta(now: Counts, before: Counts) -> dict[tuple[int, Slot | None], Reading]:
    """What each counter counted between two reads (for -I)."""
    return {key: reading - before.get(key, Reading()) for key, reading in now.items()}
