"""``record --python-lines`` end to end on the real kernel and pyenv's CPython 3.11, 3.12 and
3.13 (REQUIRE_PERF=1, as CI sets, makes a missing interpreter a failure).

fixtures/python/lines.py runs main → mid → leaf, whose two hot lines take a CPU time it
measures itself (the truth). Recorded with ``--call-graph dwarf``: on 3.12 and 3.13 (``-X
perf``) the unwound stack reaches ``py::leaf`` and the lines are attached to it; on 3.11 (no
trampolines) the reader's frames are inserted above ``_PyEval_EvalFrameDefault``; a 3.12 not
started with perf support, recorded with ``-p``, takes the reader's frames too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from profiler.report.options import LoadOptions
from profiler.report.pipeline import load_profile
from profiler.report.pylines import python_key

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "python" / "lines.py"
PYENV = Path("/root/.pyenv/versions")
SECONDS = 4.0
SHARE_TOLERANCE = 0.12  # of HOT_A's share among the two hot lines (about 190 reads in leaf: ±0.033 one sigma)


def python(version: str) -> str:
    exe = PYENV / version / "bin" / "python3"
    if not exe.exists():
        if os.environ.get("REQUIRE_PERF") == "1":
            pytest.fail(f"REQUIRE_PERF=1 but {exe} is missing")
        pytest.skip(f"no CPython {version} here")
    return str(exe)


def record(tmp_path: Path, argv: list[str]) -> tuple[Path, str]:
    capture = tmp_path / "lines.prof"
    done = subprocess.run([sys.executable, "-m", "profiler", "record", "--call-graph", "dwarf", "--python-lines",
                           "-o", str(capture), *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return capture, done.stderr


def leaf_lines(capture: Path) -> tuple[Counter[str | None], list[str], list[tuple[str, ...]]]:
    """Per source line of leaf's frames (``py::leaf:FILE`` or a Python frame ``leaf``), their
    samples; the header notes; the Python frames (innermost first) of the stacks through leaf."""
    p = load_profile(LoadOptions(input=str(capture)))
    t = p.stack_table
    per_stack = np.bincount(p.stack, minlength=p.num_stacks)
    lines: Counter[str | None] = Counter()
    stacks = []
    for k in range(p.num_stacks):
        keys = [python_key(p.frames[int(t.frames[e])]) for e in range(t.start[k], t.start[k + 1])]
        py = tuple(key[0] for key in keys if key is not None)
        for e in range(t.start[k], t.start[k + 1]):
            key = keys[e - t.start[k]]
            if key is not None and key[0] == "leaf":
                srcline = int(t.srclines[e]) if t.srclines is not None else -1
                lines[p.srclines[srcline] if srcline >= 0 else None] += int(per_stack[k])
                stacks.append(py)
                break
    return lines, p.header_notes, stacks


def first_line_of(function: str) -> int:
    """The line of ``def function`` in the fixture (what its code object's co_firstlineno says)."""
    return next(n for n, text in enumerate(FIXTURE.read_text().splitlines(), 1)
                if text.startswith(f"def {function}("))


def check_lines(capture: Path, truth_path: Path) -> tuple[list[str], list[tuple[str, ...]]]:
    truth = json.loads(truth_path.read_text())
    lines, notes, stacks = leaf_lines(capture)
    total = sum(lines.values())
    assert total > 1000, lines
    a = lines.get(f"{FIXTURE}:{truth['lines']['HOT_A']}", 0)
    b = lines.get(f"{FIXTURE}:{truth['lines']['HOT_B']}", 0)
    assert (a + b) / total >= 0.9, lines  # samples in leaf with one of its hot lines
    want = truth["cpu"]["HOT_A"] / (truth["cpu"]["HOT_A"] + truth["cpu"]["HOT_B"])
    assert abs(a / (a + b) - want) <= SHARE_TOLERANCE, (a, b, want)
    m = re.match(r"# Python lines: (\d+) samples with lines, (\d+) whose Python frames disagree .* of (\d+) samples",
                 notes[0])
    assert m is not None, notes
    agreed, disagreed, with_reads = map(int, m.groups())
    assert disagreed <= 0.05 * with_reads and agreed >= 0.9 * with_reads, notes
    return notes, stacks


@pytest.mark.parametrize("version, flags", [("3.12.1", ["-X", "perf"]), ("3.13.0", ["-X", "perf"]),
                                           ("3.13.0", ["-X", "perf_jit"])])
def test_lines_on_perf_trampolines(version: str, flags: list[str], tmp_path: Path, require_perf: None) -> None:
    truth = tmp_path / "truth.json"
    capture, _ = record(tmp_path, ["--", python(version), *flags, str(FIXTURE), str(SECONDS), str(truth)])
    notes, stacks = check_lines(capture, truth)
    inserted = int(notes[1].split()[4]) if len(notes) > 1 else 0  # "# Python stacks of N samples ..."
    assert inserted < 100, notes  # the reader's frames alone only where no trampoline ran (start-up)
    assert all(s[0] == "leaf" for s in stacks)
    # the unwound Python stack is whole, and each function has its first line (pprof's start_line)
    assert Counter(stacks).most_common(1)[0][0] == ("leaf", "mid", "main", "<module>")
    p = load_profile(LoadOptions(input=str(capture)))
    assert ("leaf", str(FIXTURE)) in p.python_first_lines
    assert p.python_first_lines[("leaf", str(FIXTURE))] == first_line_of("leaf")
    out = tmp_path / "p.pb.gz"
    subprocess.run([sys.executable, "-m", "profiler", "export", "-i", str(capture), "--format", "pprof", "-o",
                    str(out)], check=True, capture_output=True, timeout=120)
    import gzip

    from profiler.report.render.proto import profile_pb2  # type: ignore[attr-defined]

    prof = profile_pb2.Profile.FromString(gzip.decompress(out.read_bytes()))
    starts = {prof.string_table[f.name]: f.start_line for f in prof.function
              if prof.string_table[f.filename] == str(FIXTURE)}
    assert starts.get("leaf") == first_line_of("leaf") and starts.get("mid") == first_line_of("mid")


@pytest.mark.parametrize("version, flags", [("3.11.7", [])])
def test_the_reader_alone_gives_the_python_stack(version: str, flags: list[str], tmp_path: Path,
                                                 require_perf: None) -> None:
    """3.11 has no trampolines: the reader's frames are the Python stack."""
    truth = tmp_path / "truth.json"
    capture, _ = record(tmp_path, ["--", python(version), *flags, str(FIXTURE), str(SECONDS), str(truth)])
    notes, stacks = check_lines(capture, truth)
    assert len(notes) == 2 and "reader alone" in notes[1] and "approximate" in notes[1]
    assert Counter(stacks).most_common(1)[0][0] == ("leaf", "mid", "main", "<module>")


def test_attached_to_a_running_python_without_perf_support(tmp_path: Path, require_perf: None) -> None:
    truth = tmp_path / "truth.json"
    target = subprocess.Popen([python("3.12.1"), str(FIXTURE), str(SECONDS + 2), str(truth)])
    try:
        time.sleep(0.5)
        capture, _ = record(tmp_path, ["-p", str(target.pid), "--", "sleep", str(SECONDS)])
    finally:
        target.wait(timeout=30)
    notes, stacks = check_lines(capture, truth)
    assert "reader alone" in notes[1]
    assert Counter(stacks).most_common(1)[0][0][:3] == ("leaf", "mid", "main")


def test_a_process_that_is_not_cpython_gets_one_notice(tmp_path: Path, require_perf: None) -> None:
    capture, err = record(tmp_path, ["--", "sleep", "0.3"])
    assert err.count("not a CPython") == 1, err
    done = subprocess.run([sys.executable, "-m", "profiler", "report", "-i", str(capture)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "Python lines" not in done.stdout
