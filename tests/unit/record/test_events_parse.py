"""Event-spec parsing without privileges: names, modifiers, raw, cache, PMU and tracepoints
(the last two against a fake sysfs / tracefs tree)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler.errors import EventError
from profiler.format.attr import (
    PERF_TYPE_HARDWARE,
    PERF_TYPE_HW_CACHE,
    PERF_TYPE_RAW,
    PERF_TYPE_SOFTWARE,
    PERF_TYPE_TRACEPOINT,
)
from profiler.record import events as ev


@pytest.mark.parametrize(
    ("name", "type_", "config"),
    [
        ("cpu-clock", PERF_TYPE_SOFTWARE, 0),
        ("task-clock", PERF_TYPE_SOFTWARE, 1),
        ("page-faults", PERF_TYPE_SOFTWARE, 2),
        ("context-switches", PERF_TYPE_SOFTWARE, 3),
        ("cpu-migrations", PERF_TYPE_SOFTWARE, 4),
        ("minor-faults", PERF_TYPE_SOFTWARE, 5),
        ("major-faults", PERF_TYPE_SOFTWARE, 6),
        ("alignment-faults", PERF_TYPE_SOFTWARE, 7),
        ("emulation-faults", PERF_TYPE_SOFTWARE, 8),
        ("cycles", PERF_TYPE_HARDWARE, 0),
        ("instructions", PERF_TYPE_HARDWARE, 1),
        ("cache-misses", PERF_TYPE_HARDWARE, 3),
        ("branch-misses", PERF_TYPE_HARDWARE, 5),
        ("ref-cycles", PERF_TYPE_HARDWARE, 9),
        ("stalled-cycles-backend", PERF_TYPE_HARDWARE, 8),
        # id | op << 8 | result << 16 (perf_event_open(2), PERF_TYPE_HW_CACHE)
        ("L1-dcache-load-misses", PERF_TYPE_HW_CACHE, 0 | 0 << 8 | 1 << 16),
        ("L1-dcache-loads", PERF_TYPE_HW_CACHE, 0),
        ("LLC-store-misses", PERF_TYPE_HW_CACHE, 2 | 1 << 8 | 1 << 16),
        ("dTLB-prefetches", PERF_TYPE_HW_CACHE, 3 | 2 << 8),
        ("branch-load-misses", PERF_TYPE_HW_CACHE, 5 | 1 << 16),
        ("r1a8", PERF_TYPE_RAW, 0x1A8),
        ("rFF", PERF_TYPE_RAW, 0xFF),
    ],
)
def test_symbolic_and_raw_names(name: str, type_: int, config: int) -> None:
    spec = ev.parse_event(name)
    assert (spec.name, spec.type, spec.config) == (name, type_, config)
    assert not spec.exclude_user and not spec.exclude_kernel


@pytest.mark.parametrize(
    ("token", "user", "kernel", "precise"),
    [("cycles:u", False, True, 0), ("cycles:k", True, False, 0), ("cycles:uk", False, False, 0),
     ("cycles:upp", False, True, 2), ("cpu-clock:ppppp", False, False, 3)],
)
def test_modifiers(token: str, user: bool, kernel: bool, precise: int) -> None:
    spec = ev.parse_event(token)
    assert spec.name == token
    assert (spec.exclude_user, spec.exclude_kernel, spec.precise_ip) == (user, kernel, precise)


def test_comma_list_keeps_pmu_terms_together() -> None:
    assert ev.split_event_list("cycles,cpu/event=0x3c,umask=0x0/,r1a8") == [
        "cycles", "cpu/event=0x3c,umask=0x0/", "r1a8"]


def test_duplicates_are_dropped_and_order_kept() -> None:
    specs = ev.parse_events(["task-clock,cpu-clock", "task-clock"])
    assert [s.name for s in specs] == ["task-clock", "cpu-clock"]


def test_unknown_name_suggests_close_ones() -> None:
    with pytest.raises(EventError, match="did you mean 'cycles'"):
        ev.parse_event("cylces")
    with pytest.raises(EventError, match="did you mean 'L1-dcache-load-misses'"):
        ev.parse_event("L1-dcache-load-mises")
    with pytest.raises(EventError, match=r"unknown event 'zzzzzz'\.$"):
        ev.parse_event("zzzzzz")
    with pytest.raises(EventError, match="empty event"):
        ev.parse_events(["cycles,"])


# --- sysfs PMUs --------------------------------------------------------------------------------


@pytest.fixture()
def fake_pmu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pmu = tmp_path / "devices" / "cpu"
    (pmu / "format").mkdir(parents=True)
    (pmu / "events").mkdir()
    (pmu / "type").write_text("4\n")
    (pmu / "format" / "event").write_text("config:0-7\n")
    (pmu / "format" / "umask").write_text("config:8-15\n")
    (pmu / "format" / "inv").write_text("config:23\n")
    (pmu / "format" / "cmask").write_text("config:24-31\n")
    (pmu / "format" / "ldlat").write_text("config1:0-15\n")
    (pmu / "format" / "split").write_text("config2:0-3,8-11\n")
    (pmu / "events" / "mem-loads").write_text("event=0xcd,umask=0x1,ldlat=3\n")
    monkeypatch.setattr(ev, "PMU_ROOT", tmp_path / "devices")
    return pmu


def test_pmu_terms_are_placed_by_the_format_files(fake_pmu: Path) -> None:
    spec = ev.parse_event("cpu/event=0x3c,umask=0x2,inv,cmask=1/")
    assert spec.type == 4
    assert spec.config == 0x3C | 0x2 << 8 | 1 << 23 | 1 << 24
    assert spec.name == "cpu/event=0x3c,umask=0x2,inv,cmask=1/"


def test_pmu_alias_and_config1_and_split_ranges(fake_pmu: Path) -> None:
    spec = ev.parse_event("cpu/mem-loads/:u")
    assert (spec.config, spec.config1, spec.exclude_kernel) == (0xCD | 0x1 << 8, 3, True)
    # 0xAB: low 4 bits into 0-3, next 4 bits into 8-11
    assert ev.parse_event("cpu/split=0xab/").config2 == 0xB | 0xA << 8


def test_pmu_errors(fake_pmu: Path) -> None:
    with pytest.raises(EventError, match="unknown PMU 'cpx'.*did you mean 'cpu'"):
        ev.parse_event("cpx/event=1/")
    with pytest.raises(EventError, match="has no term 'evnt'"):
        ev.parse_event("cpu/evnt=1/")
    with pytest.raises(EventError, match="does not fit"):
        ev.parse_event("cpu/event=0x1ff/")


def test_place_bits() -> None:
    assert ev.place_bits(0b101, [(4, 6)]) == 0b101 << 4
    assert ev.place_bits(0xFF, [(0, 3), (8, 11)]) == 0xF | 0xF << 8
    assert ev.parse_format("config1:0-15\n") == ("config1", [(0, 15)])
    with pytest.raises(ValueError):
        ev.parse_format("bogus:1")


# --- tracefs -------------------------------------------------------------------------------------


@pytest.fixture()
def fake_tracefs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tracing"
    for sub, name, ident in (("sched", "sched_switch", 316), ("sched", "sched_wakeup", 318),
                             ("irq", "irq_handler_entry", 40)):
        d = root / "events" / sub / name
        d.mkdir(parents=True)
        (d / "id").write_text(f"{ident}\n")
    monkeypatch.setattr(ev, "TRACEFS_ROOTS", (tmp_path / "missing", root))
    return root


def test_tracepoint_id_from_tracefs(fake_tracefs: Path) -> None:
    spec = ev.parse_event("sched:sched_switch")
    assert (spec.type, spec.config) == (PERF_TYPE_TRACEPOINT, 316)
    spec = ev.parse_event("sched:sched_switch:k")
    assert spec.exclude_user and spec.config == 316
    assert list(ev.iter_tracepoints()) == [
        ("irq", "irq_handler_entry"), ("sched", "sched_switch"), ("sched", "sched_wakeup")]


def test_unknown_tracepoint_suggests(fake_tracefs: Path) -> None:
    with pytest.raises(EventError, match="did you mean 'sched:sched_switch'"):
        ev.parse_event("sched:sched_swich")
    with pytest.raises(EventError, match="unknown tracepoint 'schde:x'"):
        ev.parse_event("schde:x")


def test_tracefs_not_mounted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev, "TRACEFS_ROOTS", (tmp_path / "a", tmp_path / "b"))
    with pytest.raises(EventError, match="tracefs is not mounted"):
        ev.parse_event("sched:sched_switch")


def test_default_event_falls_back_when_cycles_cannot_open(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev, "probe", lambda spec: False)
    spec, notice = ev.default_event()
    assert spec.name == "cpu-clock" and notice and "cpu-clock" in notice
    monkeypatch.setattr(ev, "probe", lambda spec: True)
    assert ev.default_event() == (ev.DEFAULT_EVENT, None)


def test_supported_events_lists_only_what_probes(monkeypatch: pytest.MonkeyPatch, fake_tracefs: Path,
                                                 fake_pmu: Path) -> None:
    monkeypatch.setattr(ev, "probe", lambda spec: spec.name == "instructions")
    listed = {e.name: e.kind for e in ev.supported_events()}
    assert listed["cpu-clock"] == "Software event"
    assert listed["instructions"] == "Hardware event"
    assert "cycles" not in listed and "L1-dcache-loads" not in listed
    assert listed["cpu/mem-loads/"] == "Kernel PMU event"
    assert listed["sched:sched_switch"] == "Tracepoint event"


def test_groups_and_their_modifiers() -> None:
    groups = ev.parse_event_groups(["{task-clock,page-faults:k}:u,cs", "{cpu-clock,cs}:S"])
    first, lone, sampled = groups
    assert first.braced and first.name == "{task-clock,page-faults:k}" and not first.leader_sampling
    clock, faults = first.members
    assert clock.exclude_kernel and not clock.exclude_user  # the group's :u, the name unchanged
    assert faults.name == "page-faults:k" and not faults.exclude_user and not faults.exclude_kernel  # :k + :u
    assert not lone.braced and lone.members[0].config == 3
    assert sampled.leader_sampling and [m.name for m in sampled.members] == ["cpu-clock", "cs"]
    # the flat list keeps every member in place
    assert [s.name for s in ev.parse_events(["{task-clock,cs},page-faults"])] == ["task-clock", "cs", "page-faults"]


def test_group_commas_do_not_split_pmu_terms() -> None:
    assert ev.split_event_list("{a,b/x=1,y=2/},c") == ["{a,b/x=1,y=2/}", "c"]


@pytest.mark.parametrize(
    ("text", "message"),
    [("{task-clock", "unbalanced"), ("task-clock}", "unbalanced"), ("{}", "empty member"),
     ("{cs,}", "empty member"), ("{cs,{cs}}", "nested"), ("cs:S", "applies to a group"),
     ("{cs}:x", "unknown modifier")],
)
def test_bad_groups(text: str, message: str) -> None:
    with pytest.raises(EventError, match=message):
        ev.parse_event_groups([text])
