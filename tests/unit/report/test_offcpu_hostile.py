"""Damaged off-CPU captures (untrusted input): one sentence or what is intact, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler.format import records as R
from tests.support.cli import run_main
from tests.support.offcpu_factory import COMMS, MAIN, Timeline, timeline, write_offcpu_capture


def test_payloads_too_short_for_their_fields_read_as_zero(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import offcpu_factory

    monkeypatch.setattr(offcpu_factory, "switch_payload", lambda *a, **k: b"\0" * 12)  # 16 with RAW's size
    path = tmp_path / "short.prof"
    write_offcpu_capture(path, timeline()[0], COMMS)
    for args in (["report", "--event", "offcpu"], ["report", "--thread-states"], ["report", "--wall"]):
        code, _, err = run_main(capsys, *args, "-i", str(path))
        assert "Traceback" not in err and code in (0, 1, 2), err


def test_times_spanning_the_whole_clock_are_one_sentence(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    t = Timeline()
    t.switch_out(1, 101, "S", (0x400200, MAIN))
    t.switch_out(2, 102, "S", (0x400200, MAIN))
    t.on_cpu((1 << 63) - 2, 103, (0x400100, MAIN))  # the end of the recording, 292 years later
    path = tmp_path / "far.prof"
    write_offcpu_capture(path, t, COMMS)
    code, out, err = run_main(capsys, "report", "-i", str(path), "--event", "offcpu")
    assert "Traceback" not in err and code in (0, 1, 2), err


def test_thread_ids_far_apart_take_the_slow_sort(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    t = Timeline()
    t.switch_out(10, 0x7FFFFFF0, "S", (0x400200, MAIN))
    t.switch_in(30, 0x7FFFFFF0)
    t.switch_out(20, 3, "R", (0x400200, MAIN))
    t.switch_in(70, 3)
    t.records.append((1 << 62, R.Exit(100, 100, 5, 100, 1 << 62, sample_id=R.SampleId(pid=100, tid=5,
                                                                                       time=1 << 62))))
    path = tmp_path / "far.prof"
    write_offcpu_capture(path, t, COMMS)
    code, out, err = run_main(capsys, "export", "-f", "folded", "-i", str(path), "--event", "offcpu")
    assert code == 0, err
    assert sorted(int(line.rpartition(" ")[2]) for line in out.splitlines()) == [20, 50]


@pytest.mark.parametrize("entries", [1.5, "sched:sched_switch", {"event": "sched:sched_switch"}, [None, 3, ["x"]]])
def test_a_damaged_list_of_tracepoint_formats_is_one_sentence(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                              entries: object) -> None:
    """The stored formats' list of another type than a list of maps (found by a capture fuzzing
    run on a real --off-cpu capture): as if no format were stored, every command says so."""
    path = tmp_path / "formats.prof"
    write_offcpu_capture(path, timeline()[0], COMMS, damaged_formats=entries)
    for args in (["report", "--event", "offcpu"], ["report", "--thread-states"], ["report", "-g", "caller"],
                 ["script"]):
        code, _, err = run_main(capsys, *args, "-i", str(path))
        assert "Traceback" not in err, err
        if args[1:2] != ["-g"] and args != ["script"]:  # the recorded event still reports, without payloads
            assert code != 0 and "does not hold the format of sched:sched_switch" in err, err


@pytest.mark.parametrize("when", [1 << 63, (1 << 64) - 1])
def test_a_record_time_past_the_signed_range_is_no_overflow(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                            when: int) -> None:
    """An EXIT record (and so the end of the recording) at 2^63 ns or later, which no clock
    gives (found by a capture fuzzing run on a real --off-cpu capture): the intervals are read
    on signed 64-bit times, where it is the latest one, not an OverflowError."""
    t = Timeline()
    t.switch_out(10, 101, "S", (0x400200, MAIN))  # never switched in again: open until the end
    t.switch_out(20, 102, "S", (0x400200, MAIN))
    t.switch_in(70, 102)
    t.records.append((when, R.Exit(100, 100, 5, 100, when, sample_id=R.SampleId(pid=100, tid=5, time=when))))
    path = tmp_path / "late.prof"
    write_offcpu_capture(path, t, COMMS)
    for args in (["report", "--event", "offcpu"], ["report", "--thread-states"], ["report", "--wall"],
                 ["script", "--event", "offcpu"]):
        code, _, err = run_main(capsys, *args, "-i", str(path))
        assert "Traceback" not in err and code in (0, 1, 2), (args, err)
