"""``report --thread-states`` on a capture built from a known timeline (docs/offcpu.md)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from profiler.report.capture import Capture
from profiler.report.options import LoadOptions
from profiler.report.pipeline import load_profile
from profiler.report.render import threadstates as render
from profiler.report.threadstates import add_top_blocking, thread_times
from tests.support.cli import run_main
from tests.support.offcpu_factory import COMMS, timeline, write_offcpu_capture

END = 1_000_000  # the timeline's last record


@pytest.fixture()
def capture_path(tmp_path: Path) -> Path:
    path = tmp_path / "offcpu.prof"
    write_offcpu_capture(path, timeline()[0], COMMS)
    return path


def test_running_runnable_and_blocked_follow_the_switches(capture_path: Path) -> None:
    capture = Capture(str(capture_path))
    states = thread_times(capture, capture.data)
    got = {t: (st.running, st.runnable, st.blocked, st.blocked_io, st.open_ns) for t, st in states.items()}
    assert got == {
        # on a CPU from its first sample (1 us) to its switch-out (10 us), then from its
        # switch-in (510 us) to the end; blocked in between
        101: (9_000 + END - 510_000, 0, 500_000, 0, 0),
        # first seen at its switch-out: running after its switch-in (120 us) to the end
        102: (END - 120_000, 100_000, 0, 0, 0),
        103: (0, 0, END - 30_000, END - 30_000, END - 30_000),  # still in D when the recording ended
        104: (END - 90_000, 0, 50_000, 0, 0),
        105: (0, 0, 20_000, 0, 0),  # ends at its exit
        106: (0, 0, 0, 0, 0),  # its only switch-out is its last (X)
    }
    assert states[101].switches == 1 and states[106].switches == 0


def test_the_table_and_the_top_blocking_stacks(capture_path: Path) -> None:
    capture = Capture(str(capture_path))
    states = thread_times(capture, capture.data)
    add_top_blocking(states, load_profile(LoadOptions(input=str(capture_path)), capture, "offcpu"))
    assert states[101].comm == "sleeper" and [ns for _, ns in states[101].top_blocking] == [500_000]
    assert states[102].top_blocking == []  # runnable is not blocking
    out = io.StringIO()
    render.write(states.values(), out)
    text = out.getvalue()
    assert "sleeper" in text and "500.000" not in text and "0.500" in text
    assert "1 thread(s) were still waiting when the recording ended" in text
    assert [st.tid for st in render.ordered(states.values())][:2] == [101, 102]


def test_the_report_option(capsys: pytest.CaptureFixture[str], capture_path: Path) -> None:
    code, out, err = run_main(capsys, "report", "-i", str(capture_path), "--thread-states", "--comm", "sleeper")
    assert code == 0, err
    assert "sleeper" in out and "spinner" not in out


def test_a_capture_without_switches_is_one_sentence(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from tests.support.capture_factory import write_small_capture

    path = tmp_path / "plain.prof"
    write_small_capture(path)
    code, _, err = run_main(capsys, "report", "-i", str(path), "--thread-states")
    assert code != 0 and "Traceback" not in err and "record with 'profiler record --off-cpu'" in err


def test_every_event_outputs_leave_out_an_off_cpu_event_they_cannot_make(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A capture whose tracepoint format was lost (cut before it): exports and the view of every
    event write the recorded events and say once why ``offcpu`` and ``wall`` are left out; asked
    for by name, the off-CPU event is still one sentence and a failure."""
    path = tmp_path / "noformat.prof"
    write_offcpu_capture(path, timeline()[0], COMMS, formats=False)
    out = tmp_path / "out.json"
    code, _, err = run_main(capsys, "export", "-i", str(path), "-f", "firefox", "-o", str(out))
    assert code == 0 and out.exists(), err
    assert "does not hold the format of sched:sched_switch" in err and "'offcpu' event is left out" in err
    assert "Traceback" not in err
    code, _, err = run_main(capsys, "view", "-i", str(path), "-o", str(tmp_path / "v.html"))
    assert code == 0 and (tmp_path / "v.html").exists(), err
    code, _, err = run_main(capsys, "report", "-i", str(path), "--event", "offcpu")
    assert code != 0 and "does not hold the format of sched:sched_switch" in err and "Traceback" not in err
