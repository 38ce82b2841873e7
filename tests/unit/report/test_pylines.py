"""Python lines in the report: the ``python_lines`` metadata read and checked, samples paired
with reads, and damaged metadata that never stops a report."""

from __future__ import annotations

import random
import struct
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from profiler.report.pylines import LineStats, python_frame
from profiler.report.pyreads import load_reads, nearest_reads
from tests.fuzz import capture_fuzz as cf
from tests.unit.test_hostile_captures import assert_clean, run_cli, seed, write

# two one-line entries (code 11: the line + 1), 2 code units (4 bytes) each: lines 11 and 12
TABLE = bytes([0x80 | (11 << 3) | 1, 0, 0, 0x80 | (11 << 3) | 1, 0, 0])


def batch(times: list[int], tids: list[int], frames: list[list[tuple[int, int]]],
          codes: list[list[Any]] | None = None) -> dict[str, Any]:
    start = array("I", [0])
    code, offset = array("I"), array("i")
    for fr in frames:
        for c, o in fr:
            code.append(c)
            offset.append(o)
        start.append(len(code))
    return {"version": 1, "clockid": 1, "processes": [{"pid": 7, "path": "/x/python3.12", "version": "3.12"}],
            "codes": codes if codes is not None else [[0, "leaf", "/app.py", 10, TABLE],
                                                      [1, "main", "/app.py", 1, b""]],
            "reads": {"time": array("Q", times).tobytes(), "pid": array("I", [7] * len(times)).tobytes(),
                      "tid": array("I", tids).tobytes(), "start": start.tobytes(), "code": code.tobytes(),
                      "offset": offset.tobytes()}}


def test_reads_are_joined_sorted_and_give_lines() -> None:
    reads = load_reads([batch([300, 100], [8, 7], [[(0, 4), (1, 0)], [(0, 0)]]), batch([200], [7], [[(0, 2)]])])
    assert reads is not None and not reads.warnings and len(reads) == 3
    assert reads.tid.tolist() == [7, 7, 8] and reads.time.tolist() == [100, 200, 300]
    assert reads.frames(0) == [(0, 0)] and reads.frames(2) == [(0, 4), (1, 0)]
    leaf = reads.codes[0]
    assert [leaf.line(o) for o in (0, 2, 4, 6, 8, -1)] == [11, 11, 12, 12, -1, -1]
    assert reads.versions == {7: "3.12"}


def test_samples_take_their_threads_nearest_read_within_the_gap() -> None:
    reads = load_reads([batch([100, 200, 1000], [7, 7, 7], [[(0, 0)], [(0, 0)], [(0, 0)]])])
    assert reads is not None
    near = nearest_reads(reads, np.array([7, 7, 7, 8, 7]), np.array([90, 160, 140, 100, 5000]), 500)
    assert near.tolist() == [0, 1, 0, -1, -1]


def test_python_frame_names() -> None:
    assert python_frame("py::Box.run:/app/x.py") == ("Box.run", "/app/x.py")
    assert python_frame("py::<module>:<frozen importlib._bootstrap>") == ("<module>", "<frozen importlib._bootstrap>")
    assert python_frame("_PyEval_EvalFrameDefault") is None and python_frame(None) is None
    assert "2 whose Python frames disagree" in LineStats(3, 1, 2).header_lines()[0]


def test_damaged_payloads_are_skipped_with_one_warning_each() -> None:
    good = batch([1], [7], [[(0, 0)]])
    bad_len = batch([1, 2], [7], [[(0, 0)]])
    bad_code = batch([1], [7], [[(9, 0)]])
    bad_start = batch([1], [7], [[(0, 0)]])
    bad_start["reads"]["start"] = array("I", [0, 5]).tobytes()
    ragged = batch([1], [7], [[(0, 0)]])
    ragged["reads"]["time"] = b"\x01\x02\x03"
    reads = load_reads([good, bad_len, bad_code, bad_start, ragged, {"version": 2}, "junk",  # type: ignore[list-item]
                        {"version": 1, "codes": 5}])
    assert reads is not None and len(reads) == 1 and len(reads.warnings) == 7
    assert all(w.startswith("a damaged python_lines metadata frame was skipped") for w in reads.warnings)


def test_hostile_values_never_raise() -> None:
    rng = random.Random(25)
    for _ in range(500):
        payload = batch([1, 2], [7, 7], [[(0, 0), (1, 2)], [(0, 4)]])
        for _ in range(rng.randrange(1, 4)):
            path = rng.choice(list(cf.paths_in(payload)))
            node: Any = payload
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = cf.hostile_value(rng)
        reads = load_reads([payload])
        assert reads is not None
        for i in range(len(reads)):
            for code, offset in reads.frames(i):
                reads.codes[code].line(offset)


def test_a_capture_with_damaged_python_lines_is_reported(tmp_path: Path) -> None:
    parts = seed("small.prof")
    body = batch([1], [7], [[(0, 0)]])
    body["reads"]["start"] = 12345
    meta = cf.FrameParts(4, 0, 0xFFFF, 0, b"")
    cf.set_meta(meta, {"kind": "python_lines", "data": body}, compress=False)
    parts.frames.insert(len(parts.frames) - 1, meta)
    for i, f in enumerate(parts.frames):
        f.seq = i
    path = write(tmp_path, cf.build(parts))
    for args in (["report"], ["script"]):
        rc, err, rss = run_cli(path, *args)
        assert_clean(rc, err, rss)
        assert rc == 0 and "damaged python_lines metadata frame" in err, err
    assert struct.calcsize("<I") == 4


def test_python_frames_are_matched_in_both_namings() -> None:
    from profiler.report.pylines import python_key, reader_frame
    from profiler.report.resolver import FrameInfo

    assert python_key(FrameInfo("py::Box.run:/app/x.py", "perf-1.map", "/tmp/perf-1.map", "jit")) == ("Box.run",
                                                                                                      "/app/x.py")
    assert python_key(FrameInfo("Box.run", "/app/x.py", "/app/x.py", "python")) == ("Box.run", "/app/x.py")
    assert python_key(FrameInfo("leaf", "libc.so.6", "/lib/libc.so.6", "user")) is None
    assert python_key(reader_frame("leaf", "/app/x.py")) == ("leaf", "/app/x.py")
