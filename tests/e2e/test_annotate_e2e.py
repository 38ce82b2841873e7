"""``profiler annotate`` against ``perf annotate --stdio`` on fixtures/workloads/inline.

Both tools record the same workload (one after the other); the instruction addresses of
``drive`` must be objdump's (perf annotate prints objdump's disassembly), and every
instruction holding at least 5 % of the function's samples in either tool must hold the
same share in the other within sampling noise. Per-source-line shares must add up to the
function's samples and agree with ``--sort srcline``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.offline_helpers import record

pytestmark = pytest.mark.e2e


def profiler(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "profiler", *map(str, args)], capture_output=True, text=True)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def shares(text: str) -> dict[int, float]:
    return {int(m.group(2), 16): float(m.group(1))
            for m in re.finditer(r"^\s*([\d.]+) :\s+([0-9a-f]+):", text, re.M)}


@pytest.fixture
def binary(fixtures_dir: Path, tmp_path: Path) -> Path:
    path = tmp_path / "app" / "inline"
    path.parent.mkdir()
    shutil.copy(fixtures_dir / "workloads" / "inline", path)
    return path


@pytest.fixture
def ours(binary: Path, tmp_path: Path, require_perf: None) -> Path:
    capture = tmp_path / "inline.prof"
    record(capture, [str(binary), "1.0"])
    return capture


def test_annotate_agrees_with_perf_annotate(binary: Path, ours: Path, tmp_path: Path) -> None:
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("perf is not installed")
    data = tmp_path / "perf.data"
    rec = subprocess.run([perf, "record", "-q", "-o", str(data), "--", str(binary), "1.0"],
                         capture_output=True, text=True)
    if rec.returncode != 0:
        pytest.skip(f"perf record does not work here: {rec.stderr.strip()[:200]}")
    theirs = shares(subprocess.run([perf, "annotate", "-i", str(data), "--stdio", "drive"],
                                   capture_output=True, text=True, check=True).stdout)
    # the same samples (perf's own file, which we read too): the same share at every address
    same = shares(profiler("annotate", "-i", data, "drive").stdout)
    assert sorted(same) == sorted(theirs) and len(same) > 20
    for addr, share in theirs.items():
        assert same[addr] == pytest.approx(share, abs=0.01), (hex(addr), same, theirs)
    # our own recording of another run: the same instructions, and as much of the time in the
    # hot ones (which of two neighbouring instructions a timer interrupt lands on varies from
    # run to run: 3.7 against 10.4 % at one address was seen, the hot loop's total agreeing)
    mine = shares(profiler("annotate", "-i", ours, "drive").stdout)
    assert sorted(mine) == sorted(theirs) and len(mine) > 20
    hot = {a for a, p in theirs.items() if p >= 5.0} | {a for a, p in mine.items() if p >= 5.0}
    assert hot
    assert sum(mine[a] for a in hot) == pytest.approx(sum(theirs[a] for a in hot), abs=10.0), (mine, theirs)
    assert sum(mine.values()) == pytest.approx(100.0, abs=0.5)


def test_source_line_summary_matches_sort_srcline(ours: Path) -> None:
    text = profiler("annotate", "-i", ours, "drive").stdout
    summary = {m.group(2): float(m.group(1))
               for m in re.finditer(r"^\s+([\d.]+) :\t(inline\.c:\d+) \(\d+ samples\)$", text, re.M)}
    assert sum(summary.values()) == pytest.approx(100.0, abs=0.5) and len(summary) >= 3
    assert "mix() inlined into drive()" in text
    report = profiler("report", "-i", ours, "--sort", "srcline", "--no-children", "-g", "none",
                      "--comm", "inline", "--symbol", "drive", "--format", "csv").stdout
    rows = {line.split(",")[3]: float(line.split(",")[0]) for line in report.splitlines()[1:]}
    total = sum(rows.values())
    for key, pct in summary.items():
        assert pct == pytest.approx(100.0 * rows[key] / total, abs=0.05), key


def test_annotate_errors_are_one_sentence(binary: Path, ours: Path) -> None:
    missing = profiler("annotate", "-i", ours, "no_such_function", check=False)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "no samples in a function named 'no_such_function'" in missing.stderr
    binary.unlink()
    gone = profiler("annotate", "-i", ours, "drive", check=False)
    assert gone.returncode != 0 and "Traceback" not in gone.stderr
