"""The typed capture header: every field read once from the header map, with defaults for what
an older version or another tool's file does not have, and never an exception on bad types."""

from __future__ import annotations

from tests.support.capture_factory import make_test_header

from profiler.format.typed_header import CaptureHeader, Target


def test_a_recorded_header_reads_into_its_fields() -> None:
    raw = make_test_header()
    raw.update({"start_time_ns": 1_700_000_000_000_000_000, "start_perf_clock_ns": 12345, "nr_cpus": 2,
                "cmdline": ["profiler", "record"], "target": {"command": ["./a", "x"], "system_wide": False}})
    h = CaptureHeader.from_map(raw)
    assert h.events and h.events[0]["name"] == raw["events"][0]["name"]
    assert (h.start_time_ns, h.start_perf_clock_ns, h.nr_cpus) == (1_700_000_000_000_000_000, 12345, 2)
    assert h.target == Target(command=("./a", "x")) and h.describe_target() == "./a x"
    assert h.event_attr(raw["events"][0]["name"]) == raw["events"][0]["attr"]
    assert h.event_attr("no-such-event") == {}


def test_missing_or_mistyped_fields_take_their_defaults() -> None:
    h = CaptureHeader.from_map({"events": "x", "arch": 5, "byte_order": "sideways", "nr_cpus": True,
                                "start_perf_clock_ns": 0, "target": ["x"], "cmdline": None,
                                "perf_data": [], "imported_from": "perf"})
    assert h == CaptureHeader()
    assert h.byte_order == "little" and h.start_perf_clock_ns is None and h.describe_target() == "capture"


def test_targets_are_described_as_titles_say_them() -> None:
    assert CaptureHeader.from_map({"target": {"system_wide": True}}).describe_target() == "system-wide"
    assert CaptureHeader.from_map({"target": {"pids": [4, 5]}}).describe_target() == "pid 4,5"
    assert CaptureHeader.from_map({"cmdline": ["perf", "record"]}).describe_target() == "perf record"
