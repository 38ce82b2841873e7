"""The offcpu and wall pseudo-events through every command (docs/offcpu.md)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from tests.support.cli import run_main
from tests.support.offcpu_factory import COMMS, timeline, write_offcpu_capture


@pytest.fixture()
def capture(tmp_path: Path) -> str:
    path = tmp_path / "offcpu.prof"
    write_offcpu_capture(path, timeline()[0], COMMS)
    return str(path)


def folded(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, int]:
    code, out, err = run_main(capsys, "export", "-f", "folded", *args)
    assert code == 0, err
    return {line.rpartition(" ")[0]: int(line.rpartition(" ")[2]) for line in out.splitlines()}


def test_folded_offcpu_weighs_by_nanoseconds_with_the_state_at_the_root(capsys: pytest.CaptureFixture[str],
                                                                         capture: str) -> None:
    lines = folded(capsys, "-i", capture, "--event", "offcpu")
    by_thread = {line.split(";")[0]: (line.split(";")[1], ns) for line, ns in lines.items()}
    want = timeline()[1]
    assert by_thread == {COMMS[tid]: (state, ns) for tid, (ns, state) in want.items()}


def test_wall_is_the_wall_event_and_excludes_another_event(capsys: pytest.CaptureFixture[str], capture: str) -> None:
    assert folded(capsys, "-i", capture, "--wall") == folded(capsys, "-i", capture, "--event", "wall")
    code, _, err = run_main(capsys, "report", "-i", capture, "--wall", "--event", "cpu-clock")
    assert code == 2 and "--wall is the 'wall' event" in err


def test_report_and_script_take_the_offcpu_event(capsys: pytest.CaptureFixture[str], capture: str) -> None:
    code, out, err = run_main(capsys, "report", "-i", capture, "--event", "offcpu", "--no-children")
    assert code == 0, err
    assert "of event 'offcpu'" in out and "Event count (approx.): 1640000" in out
    code, out, err = run_main(capsys, "script", "-i", capture, "--event", "offcpu")
    assert code == 0, err
    assert out.count("offcpu:") == 5 and "prev_state=D" in out


def test_pprof_names_the_sample_type_off_cpu_nanoseconds(capsys: pytest.CaptureFixture[str], capture: str,
                                                         tmp_path: Path) -> None:
    from profiler.report.render.proto import profile_pb2

    out = tmp_path / "p.pb.gz"
    code, _, err = run_main(capsys, "export", "-f", "pprof", "-i", capture, "--event", "offcpu", "-o", str(out))
    assert code == 0, err
    prof = profile_pb2.Profile()
    prof.ParseFromString(gzip.decompress(out.read_bytes()))
    types = [(prof.string_table[t.type], prof.string_table[t.unit]) for t in prof.sample_type]
    assert types == [("samples", "count"), ("off-cpu", "nanoseconds")]
    assert sum(s.value[1] for s in prof.sample) == 1_640_000


def test_flamegraph_wall_writes_state_frames(capsys: pytest.CaptureFixture[str], capture: str, tmp_path: Path) -> None:
    out = tmp_path / "wall.html"
    code, _, err = run_main(capsys, "flamegraph", "-i", capture, "--wall", "-o", str(out))
    assert code == 0, err
    text = out.read_text()
    data = json.loads(text.split('id="fg-data">', 1)[1].split("</script>", 1)[0])
    assert data["meta"]["weight"] == "period" and data["meta"]["unit"] == "ns"
    assert {"[running]", "[blocked]", "[runnable]"} <= set(data["strings"])
    assert "state" in data["kinds"]


def test_wall_without_an_on_cpu_clock_event_is_one_sentence(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    from tests.support import offcpu_factory

    path = tmp_path / "cycles.prof"
    header = offcpu_factory.offcpu_header
    try:
        def renamed() -> dict[str, object]:
            h = header()
            h["events"][0]["name"] = "cycles"  # type: ignore[index]
            return h
        offcpu_factory.offcpu_header = renamed
        write_offcpu_capture(path, timeline()[0], COMMS)
    finally:
        offcpu_factory.offcpu_header = header
    code, out, err = run_main(capsys, "report", "-i", str(path), "--wall")
    assert code != 0 and "Traceback" not in err
    assert "has no event 'wall'" in err and "offcpu" in err
    code, _, err = run_main(capsys, "export", "-f", "pprof", "-i", str(path), "-o", str(tmp_path / "all.pb.gz"))
    assert code == 0, err  # every event the capture offers, without wall


def test_a_recorded_off_cpu_capture_reads_the_same_through_every_view(capsys: pytest.CaptureFixture[str]) -> None:
    """fixtures/captures/offcpu-small.prof (a real ``record --off-cpu`` of the ping-pong, read on
    a machine without its binaries): each thread's off-CPU time in the ``offcpu`` event is its
    runnable + blocked time in --thread-states, and its ~100 switch-outs are there; its waits
    were ended by the other thread (sched_waking)."""
    from tests.support.paths import CAPTURES

    path = str(CAPTURES / "offcpu-small.prof")
    code, out, err = run_main(capsys, "report", "-i", path, "--thread-states")
    assert code == 0, err
    rows = {int(m[1]): (int(m[2]), float(m[3]), float(m[4]), int(m[5])) for m in re.finditer(
        r"^\s+(\d+)\s+(\d+)\s+pingpong\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+(\d+)$", out, re.M)}
    assert len(rows) == 2 and len({pid for pid, *_ in rows.values()}) == 1, out
    assert all(95 <= switches <= 105 for *_, switches in rows.values()), rows
    tids = sorted(rows)
    for tid, other in zip(tids, reversed(tids)):
        assert f"woken by pingpong {other}" in out.split(f"pingpong {tid}\n", 1)[1], out
    for tid, (_, runnable, blocked, _) in rows.items():
        ns = sum(folded(capsys, "-i", path, "--event", "offcpu", "--tid", str(tid)).values())
        assert abs(ns / 1e6 - (runnable + blocked)) < 0.01, (tid, ns, runnable, blocked)


def test_the_flat_offcpu_view_names_where_threads_waited(capsys: pytest.CaptureFixture[str]) -> None:
    """``--no-children -g none`` (the flat view that reads no call chains for a recorded event):
    an off-CPU row's leaf is its user-space chain's first frame, as in the call-graph view, not
    the sampled ip, which is the scheduler's in every switch-out."""
    from tests.support.paths import CAPTURES

    path = str(CAPTURES / "offcpu-small.prof")
    flat = {}
    for args in ([], ["-g", "none"]):
        code, out, err = run_main(capsys, "report", "-i", path, "--event", "offcpu", "--no-children",
                                  "--format", "csv", "--sort", "dso,sym", *args)
        assert code == 0, err
        flat[bool(args)] = out
    assert flat[True] == flat[False]
    assert "kernel.kallsyms" not in flat[True] and "read" in flat[True], flat[True]
