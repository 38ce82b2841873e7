"""perf stat's text, CSV and JSON layouts. The expected lines are perf 6.1's own output on
this machine (``perf stat ... | cat -A``) with the same numbers put into our rows."""

from __future__ import annotations

import io
import statistics

import pytest

from profiler.record.events import parse_event
from profiler.stat.counters import Slot
from profiler.stat.metrics import Metric
from profiler.stat.model import COUNTED, NOT_COUNTED, NOT_SUPPORTED, Row, StatReport, build_rows
from profiler.stat.render import (
    PER_CPU,
    PER_THREAD,
    Renderer,
    csv_metric_value,
    csv_row,
    footer,
    interval_header,
    json_row,
    precision,
    std_row,
)
from profiler.stat.values import Reading, mean_stats

CLOCK = Row("task-clock", "msec", COUNTED, 0.93, 930000, 930000, Metric(0.018, "%8.3f", "CPUs utilized"))
FAULTS = Row("page-faults", "", COUNTED, 74, 930000, 930000, Metric(79.634, "%8.3f", "K/sec"))
CYCLES = Row("cycles", "", NOT_SUPPORTED, 0, 0, 0, Metric(0.0, None, ""))
BARE = Row("page-faults", "", COUNTED, 50, 1, 1, Metric(0.0, None, ""))


def test_std_rows_match_perf() -> None:
    assert std_row(CLOCK, 1) == "              0.93 msec task-clock                       #    0.018 CPUs utilized          "  # noqa: E501
    assert std_row(FAULTS, 1) == "                74      page-faults                      #   79.634 K/sec                  "  # noqa: E501
    assert std_row(CYCLES, 1) == "   <not supported>      cycles" + " " * 54
    assert std_row(BARE, 1) == "                50      page-faults" + " " * 56
    assert len(std_row(BARE, 1)) == 91 and len(std_row(CYCLES, 1)) == 84


def test_std_noise_and_multiplexing() -> None:
    row = Row("task-clock", "msec", COUNTED, 0.80, 1.0, 1.0, Metric(0.291, "%8.3f", "CPUs utilized"), 9.21)
    assert std_row(row, 3) == ("              0.80 msec task-clock                       #    0.291 CPUs utilized"
                               "            ( +-  9.21% )")
    muxed = Row("page-faults", "", COUNTED, 400, 1000, 250, Metric(0.0, None, ""))
    assert std_row(muxed, 1).endswith(" " * 35 + "  (25.00%)")


def test_std_prefixes() -> None:
    cpu = Row("task-clock", "msec", COUNTED, 103.25, 1, 1, Metric(1.0, "%8.3f", "CPUs utilized"), slot=Slot(cpu=0))
    assert std_row(cpu, 1).startswith("CPU0                   103.25 msec task-clock")
    thread = Row("task-clock", "msec", NOT_COUNTED, 0, 0, 0, Metric(0.0, None, ""), slot=Slot(tid=12649, comm="sleep"))
    assert std_row(thread, 1) == "           sleep-12649         <not counted> msec task-clock" + " " * 50
    assert std_row(CLOCK, 1, 100257239).startswith("     0.100257239               0.93 msec task-clock")


def test_interval_headers() -> None:
    assert interval_header("global") == "#           time             counts unit events\n"
    assert interval_header(PER_CPU) == "#           time CPU                    counts unit events\n"
    assert interval_header(PER_THREAD) == "#           time             comm-pid                  counts unit events\n"


def test_footer_one_run_and_repeats() -> None:
    one = StatReport("'true'", 1, [], mean_stats([1083434.0]), 0.001162, 0.0)
    assert footer(one) == ("\n       0.001083434 seconds time elapsed\n\n"
                           "       0.001162000 seconds user\n       0.000000000 seconds sys\n\n\n")
    attached = StatReport("process id '1'", 1, [], mean_stats([105878547.0]))
    assert footer(attached) == "\n       0.105878547 seconds time elapsed\n\n"
    runs = StatReport("'true'", 2, [], mean_stats([0.000891e9, 0.001101e9]))
    text = footer(runs)
    assert text.startswith("\n          0.000996 +- 0.000105 seconds time elapsed  ( +- 10.54% )")
    assert precision(0.000105) == 4 and precision(2.5) == 0


def test_csv_rows_match_perf() -> None:
    clock = Row("task-clock", "msec", COUNTED, 0.59, 585467, 585467, Metric(0.545, "%8.3f", "CPUs utilized"))
    assert csv_row(clock, 1, ",") == "0.59,msec,task-clock,585467,100.00,0.545,CPUs utilized"
    assert csv_row(CYCLES, 1, ",") == "<not supported>,,cycles,0,100.00,,"
    assert csv_row(BARE, 1, ",") == "50,,page-faults,1,100.00,,"
    noisy = Row("task-clock", "msec", COUNTED, 0.66, 655581, 655581, Metric(0.186, "%8.3f", "CPUs utilized"), 4.73)
    assert csv_row(noisy, 3, ",") == "0.66,msec,task-clock,4.73%,655581,100.00,0.186,CPUs utilized"
    cpu = Row("task-clock", "msec", COUNTED, 52.36, 52359848, 52359848, Metric(1.01, "%8.3f", "CPUs utilized"),
              slot=Slot(cpu=0))
    assert csv_row(cpu, 1, ",") == "CPU0,52.36,msec,task-clock,52359848,100.00,1.010,CPUs utilized"
    assert csv_row(clock, 1, ";", 50156974) == "     0.050156974;0.59;msec;task-clock;585467;100.00;0.545;CPUs utilized"
    assert csv_metric_value("%7.2f%%", 12.345) == "12.35"


def test_json_rows_match_perf() -> None:
    clock = Row("task-clock", "msec", COUNTED, 0.582603, 582603, 582603, Metric(226.42946, "%8.3f", "CPUs utilized"))
    assert json_row(clock, 1) == (
        '{"counter-value" : "0.582603", "unit" : "msec", "event" : "task-clock", "event-runtime" : 582603, '
        '"pcnt-running" : 100.00, "metric-value" : 226.429460, "metric-unit" : "CPUs utilized"}')
    assert json_row(CYCLES, 1) == (
        '{"counter-value" : "<not supported>", "unit" : "", "event" : "cycles", "event-runtime" : 0, '
        '"pcnt-running" : 100.00, "metric-value" : 0.000000, "metric-unit" : ""}')
    noisy = Row("task-clock", "msec", COUNTED, 0.628211, 628211, 628211, Metric(0.461673, "%8.3f", "CPUs utilized"),
                6.85)
    assert '"event" : "task-clock", "variance" : 6.85, "event-runtime" : 628211' in json_row(noisy, 3)
    cpu = Row("task-clock", "msec", COUNTED, 1.0, 1, 1, Metric(1.0, "%8.3f", "CPUs utilized"), slot=Slot(cpu=1))
    assert json_row(cpu, 1, 50098998).startswith('{"interval" : 0.050098998, "cpu" : "1", "counter-value"')


def test_build_rows_scales_averages_and_sorts_threads() -> None:
    events = [parse_event("task-clock"), parse_event("page-faults"), parse_event("cycles")]
    t1, t2 = Slot(tid=1, comm="a"), Slot(tid=2, comm="b")
    run = {(0, t1): Reading(1_000_000, 10, 10), (0, t2): Reading(3_000_000, 10, 10),
           (1, t1): Reading(5, 10, 10), (1, t2): Reading(100, 20, 10)}
    rows = build_rows(events, {2}, [run], [t1, t2], wall_ns=1e6)
    assert [(r.event, r.slot) for r in rows] == [("task-clock", t2), ("task-clock", t1), ("page-faults", t2),
                                                 ("page-faults", t1), ("cycles", t1), ("cycles", t2)]
    assert rows[0].value == 3.0 and rows[0].metric.value == 3.0  # msec; 3 CPUs utilized
    assert rows[2].value == 200.0 and rows[2].running_pct == 50.0  # multiplexed, scaled
    assert rows[4].status == NOT_SUPPORTED


def test_build_rows_repeats_give_mean_and_noise() -> None:
    events = [parse_event("page-faults")]
    runs = [{(0, None): Reading(v, 1, 1)} for v in (10, 12, 11, 15)]
    [row] = build_rows(events, set(), runs, [None], wall_ns=1.0)
    assert row.value == 12.0 and row.noise_pct == pytest.approx(100 * statistics.stdev([10, 12, 11, 15]) / 2 / 12)
    [never] = build_rows(events, set(), [{(0, None): Reading(0, 100, 0)}], [None], wall_ns=1.0)
    assert never.status == NOT_COUNTED and never.running_pct == 0.0


def test_renderer_summary_layout() -> None:
    out = io.StringIO()
    report = StatReport("'sleep 0.05'", 1, [CLOCK, FAULTS], mean_stats([52798284.0]), 0.001596, 0.0)
    Renderer(out).summary(report)
    lines = out.getvalue().split("\n")
    assert lines[:3] == ["", " Performance counter stats for 'sleep 0.05':", ""]
    assert lines[5:8] == ["", "       0.052798284 seconds time elapsed", ""]
    csv_out = io.StringIO()
    Renderer(csv_out, csv_sep=",").summary(report)
    assert csv_out.getvalue().splitlines() == [csv_row(CLOCK, 1, ","), csv_row(FAULTS, 1, ",")]
