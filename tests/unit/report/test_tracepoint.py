"""Tracepoint formats (kernel 6.18's, copied into fixtures/tracepoints/), payload decoding,
perf-script text and --trace-filter; --time forms; script -F selection."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from profiler.errors import UsageError
from profiler.format.tracepoint import formats_from_meta, parse_format
from profiler.report.options import time_bounds, time_mask
from profiler.report.options import TimeRange, parse_time
from profiler.report.render.script import DEFAULT_FIELDS, parse_fields
from profiler.report.tracepoint_print import TracePrinter, generic_layout
from profiler.report.tracefilter import parse_trace_filter

from tests.support.paths import FIXTURES

FORMATS = FIXTURES / "tracepoints"


def fmt(name: str):  # type: ignore[no-untyped-def]
    return parse_format((FORMATS / f"{name}.format").read_text(), name.split("_")[0])


def switch_payload(prev: str, prev_pid: int, state: int, nxt: str, next_pid: int) -> bytes:
    head = struct.pack("<HBBi", 372, 0, 0, prev_pid)
    return head + struct.pack("<16sii q16sii", prev.encode(), prev_pid, 120, state, nxt.encode(), next_pid, 120)


def test_sched_switch_fields_and_perf_text() -> None:
    f = fmt("sched_switch")
    assert f.name == "sched_switch" and f.id == 372
    assert [x.name for x in f.fields if not x.common][:3] == ["prev_comm", "prev_pid", "prev_prio"]
    raw = switch_payload("sh", 42, 1, "swapper/0", 0)
    assert f.decode(raw)["prev_comm"] == "sh" and f.decode(raw)["next_pid"] == 0
    printer = TracePrinter.of(f)
    assert printer.text is not None  # the print fmt parses
    # the line perf 6.1 prints for the same payload
    assert printer.format(raw) == ("prev_comm=sh prev_pid=42 prev_prio=120 prev_state=S ==> "
                                   "next_comm=swapper/0 next_pid=0 next_prio=120")
    assert "prev_state=R+ ==>" in printer.format(switch_payload("a", 1, 256, "b", 2))
    assert "prev_state=R ==>" in printer.format(switch_payload("a", 1, 0, "b", 2))
    assert "prev_state=D|W" not in printer.format(switch_payload("a", 1, 2, "b", 2))


def test_data_loc_string_and_casts() -> None:
    f = fmt("sched_process_exec")
    name = b"/usr/bin/ls\0"
    raw = struct.pack("<HBBi", 365, 0, 0, 7) + struct.pack("<Iii", (len(name) << 16) | 20, 7, 7) + name
    assert TracePrinter.of(f).format(raw) == "filename=/usr/bin/ls pid=7 old_pid=7"
    o = fmt("sys_enter_openat")
    # int dfd stored in 8 bytes, as the kernel does
    raw = struct.pack("<HBBi", 1, 0, 0, 7) + struct.pack("<iiQqqq", 257, 0, 0xFFFFFF9C, 0x7ffe1234, 0x80000, 0)
    assert TracePrinter.of(o).format(raw) == ("dfd: 0xffffff9c, filename: 0x7ffe1234, flags: 0x00080000, "
                                              "mode: 0x00000000")


def test_unknown_names_fall_back_to_the_generic_layout() -> None:
    f = fmt("hrtimer_start")  # __print_symbolic over enum names the kernel left unresolved
    raw = struct.pack("<HBBi", 1, 0, 0, 7) + struct.pack("<QQqqIB3x", 0x10, 0x20, 5, 6, 1, 1)
    text = TracePrinter.of(f).format(raw)
    assert text == generic_layout(f, raw)
    assert text.startswith("hrtimer=16 function=32 expires=5 softexpires=6 mode=1 was_armed=1")


def test_short_payloads_never_read_past_their_end() -> None:
    f = fmt("sched_switch")
    raw = switch_payload("sh", 42, 1, "x", 0)[:30]
    assert "next_pid" not in f.decode(raw)
    assert TracePrinter.of(f).format(raw).startswith("prev_comm=sh")


def test_formats_from_meta_skips_garbage() -> None:
    text = (FORMATS / "sched_switch.format").read_text()
    got = formats_from_meta([{"event": "sched:sched_switch", "format": text}, {"event": 1}, "x",
                             {"event": "a:b", "format": "nonsense"}])
    assert list(got) == ["sched:sched_switch"]


def test_trace_filter() -> None:
    flt = parse_trace_filter('prev_comm == "sh" && next_pid != 0 || prev_comm ~ "kwork*"')
    assert flt.matches({"prev_comm": "sh", "next_pid": 5})
    assert not flt.matches({"prev_comm": "sh", "next_pid": 0})
    assert flt.matches({"prev_comm": "kworker/0:1", "next_pid": 0})
    assert parse_trace_filter("prev_pid >= 10").matches({"prev_pid": 10})
    with pytest.raises(UsageError):
        parse_trace_filter("prev_pid")
    with pytest.raises(UsageError, match="has no field 'nope'"):
        parse_trace_filter("nope == 1").check(fmt("sched_switch"))


# --- --time ------------------------------------------------------------------------------------


def test_time_forms() -> None:
    assert parse_time("1.5,2") == (TimeRange("s", 1.5, 2.0),)
    assert parse_time("1240.5,1240.6 1241,") == (TimeRange("s", 1240.5, 1240.6), TimeRange("s", 1241.0, None))
    assert parse_time("10%-20%") == (TimeRange("%", 0.1, 0.2),)
    assert parse_time("10%/2") == (TimeRange("%", 0.1, 0.2, inclusive_end=False),)
    assert parse_time("10%/1,10%/2")[1] == TimeRange("%", 0.1, 0.2, inclusive_end=False)
    assert parse_time("50%/2") == (TimeRange("%", 0.5, 1.0),)
    for bad in ("x", "1,2,3", "2,1", "10%", "10%/11", "120%-130%", "20%-10%"):
        with pytest.raises(UsageError):
            parse_time(bad)


def test_time_bounds_absolute_relative_percent() -> None:
    start = 1_000_000_000_000  # the capture started at 1000 s on the sample clock
    times = np.asarray([start + i * 10_000_000 for i in range(101)], dtype=np.uint64)  # 0..1 s
    # absolute (as script prints) and relative seconds select the same samples
    absolute = time_mask(times, parse_time("1000.1,1000.2"), start)
    relative = time_mask(times, parse_time("0.1,0.2"), start)
    assert absolute.sum() == 11 and (absolute == relative).all()
    assert time_mask(times, parse_time("1000.0,1000.05 1000.95,"), start).sum() == 6 + 6
    assert time_mask(times, parse_time("0%-10%"), start).sum() == 11
    slices = [time_mask(times, parse_time(f"25%/{n}"), start).sum() for n in (1, 2, 3, 4)]
    assert sum(slices) == 101  # slices do not overlap and cover everything
    assert time_bounds(TimeRange("%", 0.0, 1.0), times, start) == (int(times[0]), int(times[-1]))


# --- script -F ------------------------------------------------------------------------------------


def test_script_fields() -> None:
    assert parse_fields(None, False) is None
    assert parse_fields("comm,tid,time", False) == ("comm", "tid", "time")
    assert parse_fields("+trace", True) == parse_fields(None, True)
    assert parse_fields("-cpu", False) == tuple(f for f in DEFAULT_FIELDS if f != "cpu")
    assert "ip" not in (parse_fields(None, True, chains=False) or ())
    with pytest.raises(UsageError, match="unknown field 'bogus'"):
        parse_fields("comm,bogus", False)
