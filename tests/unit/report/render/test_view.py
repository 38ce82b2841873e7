"""``profiler view``'s file, read back in Python (tests/support/viewfile.py): the packed tables
carry exactly the stacks and weights the report pipeline gives the other commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.capture_factory import write_small_capture
from tests.support.cli import run_main
from tests.support.offcpu_factory import COMMS, timeline, write_offcpu_capture
from tests.support.viewfile import read_view

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "benchmarks"))


def folded(capsys: pytest.CaptureFixture[str], capture: str, *args: str) -> dict[str, int]:
    code, out, err = run_main(capsys, "export", "-f", "folded", "-i", capture, *args)
    assert code == 0, err
    return {line.rpartition(" ")[0]: int(line.rpartition(" ")[2]) for line in out.splitlines()}


def view(capsys: pytest.CaptureFixture[str], capture: str, out: Path, *args: str) -> str:
    code, _, err = run_main(capsys, "view", "-i", capture, "-o", str(out), *args)
    assert code == 0, err
    return err


@pytest.fixture()
def offcpu_capture(tmp_path: Path) -> str:
    path = tmp_path / "offcpu.prof"
    write_offcpu_capture(path, timeline()[0], COMMS)
    return str(path)


def test_every_event_has_the_stacks_and_weights_of_the_folded_export(capsys: pytest.CaptureFixture[str],
                                                                        offcpu_capture: str, tmp_path: Path) -> None:
    out = tmp_path / "view.html"
    err = view(capsys, offcpu_capture, out)
    assert "wrote" in err
    v = read_view(out)
    names = [e["name"] for e in v.doc["events"]]
    assert "offcpu" in names and "wall" in names
    for name in names:
        weight = "period" if name in ("offcpu", "wall") else "samples"
        want = folded(capsys, offcpu_capture, "--event", name, "--weight", weight)
        assert v.folded(name, weight) == want, name
        times = v.times(name)
        assert (np.diff(times) >= 0).all()  # time order
    assert v.event("offcpu")["weight"] == "period" and v.event("cpu-clock")["weight"] == "samples"


def test_the_time_origin_is_the_capture_start_that_report_time_counts_from(
        capsys: pytest.CaptureFixture[str], offcpu_capture: str, tmp_path: Path) -> None:
    out = tmp_path / "view.html"
    view(capsys, offcpu_capture, out)
    v = read_view(out)
    times = v.times("cpu-clock") + v.doc["start_ns"]  # perf's absolute seconds, as script prints them
    lo, hi = (times[0] + times[1]) / 2e9, (times[-2] + times[-1]) / 2e9  # two samples fewer than the whole
    code, text, _ = run_main(capsys, "report", "-i", offcpu_capture, "--event", "cpu-clock", "--time",
                             f"{lo:.9f},{hi:.9f}", "--format", "json", "-g", "none")
    assert code == 0
    assert json.loads(text)["total_samples"] == len(times) - 2


def test_above_max_rows_samples_merge_into_time_buckets_and_stay_counted(capsys: pytest.CaptureFixture[str],
                                                                          tmp_path: Path) -> None:
    from bench_decode import write_capture

    capture = tmp_path / "big.prof"
    write_capture(capture, 6000, depth=4, per_frame=1000)
    out = tmp_path / "view.html"
    view(capsys, str(capture), out, "--max-rows", "1000")
    v = read_view(out)
    e = v.event("cpu-clock")
    assert e["rows"] <= 1000 and e["samples"] == 6000 and e["reduced_bucket_ns"] > 0
    assert int(v.column(e["count"]).sum()) == 6000
    assert v.folded("cpu-clock") == folded(capsys, str(capture))
    assert v.folded("cpu-clock", "period") == folded(capsys, str(capture), "--weight", "period")


def test_max_rows_below_a_thousand_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    capture = tmp_path / "small.prof"
    write_small_capture(capture)
    code, _, err = run_main(capsys, "view", "-i", str(capture), "-o", str(tmp_path / "v.html"), "--max-rows", "10")
    assert code != 0 and "--max-rows" in err


def test_markers_and_threads(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    capture = tmp_path / "small.prof"
    write_small_capture(capture)
    out = tmp_path / "view.html"
    view(capsys, str(capture), out, "--no-source")
    v = read_view(out)
    assert v.doc["source_omitted"] and v.doc["sources"] == {}
    kinds = {m[0] for m in v.doc["markers"]}
    assert kinds <= {"exec", "fork", "exit", "lost", "throttle", "unthrottle", "note"}
    assert all(len(t) == 3 for t in v.doc["threads"])
    html = out.read_text()
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert "http://" not in html.split('id="pv-data"')[0].replace("http-equiv", "")


def test_names_that_are_not_utf8_follow_the_one_rule(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    capture = Path(__file__).resolve().parents[4] / "fixtures" / "captures" / "nonutf8-name.prof"
    out = tmp_path / "view.html"
    view(capsys, str(capture), out)
    strings = read_view(out).doc["strings"]
    assert any("\\x" in s for s in strings)  # render/utf8.py: bytes that are not UTF-8 as \xNN
