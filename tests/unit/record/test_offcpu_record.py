"""``record --off-cpu`` and ``--switch-events``: the options and the attrs they make (nothing is
opened; tracefs is faked)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from profiler.cli import cli
from profiler.format import abi as R
from profiler.format.attr import PERF_TYPE_TRACEPOINT
from profiler.record import events as ev
from profiler.record import recorder
from profiler.record.options import RecordOptions


@pytest.fixture()
def fake_tracefs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "tracing" / "events" / "sched" / "sched_switch"
    d.mkdir(parents=True)
    (d / "id").write_text("316\n")
    monkeypatch.setattr(ev, "TRACEFS_ROOTS", (tmp_path / "tracing",))


def attrs(opts: RecordOptions) -> list[tuple[str, Any]]:
    members, _ = recorder.resolve_events(opts)
    return [(m.spec.name, recorder.build_attr(m.spec, opts, tracking=i == 0, several=len(members) > 1,
                                              enable_on_exec=True, inherit=True, data_size=1 << 19))
            for i, m in enumerate(members)]


def test_off_cpu_adds_sched_switch_at_every_switch_and_switch_records(fake_tracefs: None) -> None:
    made = attrs(RecordOptions(command=("true",), events=("cpu-clock",), callgraph=True, freq=99, off_cpu=True))
    assert [name for name, _ in made] == ["cpu-clock", "sched:sched_switch"]
    clock, switch = made[0][1], made[1][1]
    assert clock.context_switch == 1 and switch.context_switch == 0  # once, on the tracking event
    assert (switch.type, switch.config, switch.freq, switch.sample_period) == (PERF_TYPE_TRACEPOINT, 316, 0, 1)
    assert switch.sample_type & R.PERF_SAMPLE_CALLCHAIN and switch.sample_type & R.PERF_SAMPLE_RAW
    assert (clock.freq, clock.sample_period) == (1, 99)


def test_off_cpu_keeps_a_sched_switch_the_user_asked_for(fake_tracefs: None) -> None:
    made = attrs(RecordOptions(command=("true",), events=("sched:sched_switch",), off_cpu=True))
    assert [name for name, _ in made] == ["sched:sched_switch"]


def test_dwarf_off_cpu_copies_the_stack_at_every_switch_out(fake_tracefs: None) -> None:
    made = attrs(RecordOptions(command=("true",), events=("cpu-clock",), callgraph=True, dwarf_stack_size=4096,
                               off_cpu=True))
    switch = made[1][1]
    assert switch.sample_type & R.PERF_SAMPLE_STACK_USER and switch.sample_stack_user == 4096


def test_switch_outs_keep_their_user_space_stack_only_unless_kernel_frames_are_asked_for(fake_tracefs: None) -> None:
    def switch_attr(**kw: Any) -> Any:
        made = attrs(RecordOptions(command=("true",), events=("cpu-clock",), callgraph=True, **kw))
        return made[0][1], made[1][1]

    clock, switch = switch_attr(off_cpu=True)
    assert switch.exclude_callchain_kernel == 1 and switch.exclude_callchain_user == 0
    assert switch.sample_type & R.PERF_SAMPLE_CALLCHAIN
    assert clock.exclude_callchain_kernel == 0  # the on-CPU samples keep their kernel frames
    _, switch = switch_attr(off_cpu_kernel=True)
    assert switch.exclude_callchain_kernel == 0 and switch.sample_type & R.PERF_SAMPLE_CALLCHAIN
    # DWARF: the kernel's callchain would hold only kernel frames, so none is asked for
    clock, switch = switch_attr(off_cpu=True, dwarf_stack_size=4096)
    assert not switch.sample_type & R.PERF_SAMPLE_CALLCHAIN and switch.exclude_callchain_user == 0
    assert switch.sample_type & R.PERF_SAMPLE_STACK_USER
    assert clock.sample_type & R.PERF_SAMPLE_CALLCHAIN and clock.exclude_callchain_user == 1
    _, switch = switch_attr(off_cpu_kernel=True, dwarf_stack_size=4096)
    assert switch.sample_type & R.PERF_SAMPLE_CALLCHAIN and switch.exclude_callchain_user == 1
    _, switch = switch_attr(off_cpu=True, kernel_only=True)  # the kernel frames are all it has
    assert switch.exclude_callchain_kernel == 0 and switch.exclude_user == 1
    # a sched_switch recorded without --off-cpu is any tracepoint: its whole chain
    made = attrs(RecordOptions(command=("true",), events=("sched:sched_switch",), callgraph=True))
    assert made[0][1].exclude_callchain_kernel == 0


def test_switch_events_alone_adds_no_event() -> None:
    made = attrs(RecordOptions(command=("true",), events=("cpu-clock",), switch_events=True))
    assert [name for name, _ in made] == ["cpu-clock"] and made[0][1].context_switch == 1
    assert attrs(RecordOptions(command=("true",), events=("cpu-clock",)))[0][1].context_switch == 0


def test_the_options_reach_record_options(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[RecordOptions] = []

    def fake_record(opts: RecordOptions, stderr: Any = None) -> recorder.RecordResult:
        seen.append(opts)
        return recorder.RecordResult(exit_code=0, path=opts.output, samples=0, lost=0, bytes_written=0)

    monkeypatch.setattr(recorder, "record", fake_record)
    result = CliRunner().invoke(cli, ["record", "--off-cpu", "--switch-events", "-g", "--", "true"])
    assert result.exit_code == 0, result.output
    assert seen[0].off_cpu and seen[0].switch_events and seen[0].callgraph

    from profiler.commands import record_args

    parsed = record_args.parse(["--off-cpu", "-g", "--", "true"])
    assert parsed is not None and parsed["off_cpu"] and not parsed["switch_events"]
    result = CliRunner().invoke(cli, ["record", "--off-cpu-kernel", "-g", "--", "true"])
    assert result.exit_code == 0, result.output
    assert seen[1].off_cpu and seen[1].off_cpu_kernel  # it implies --off-cpu
