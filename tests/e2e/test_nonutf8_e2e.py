"""A program whose path (and so its comm) is not UTF-8, recorded for real and then archived while
the program is still there (tests/unit/commands/test_nonutf8_outputs.py runs every reading
output on a committed recording of such a program)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]

NAME = b"sh\xffres"


@pytest.fixture
def recording(fixtures_dir: Path, tmp_path: Path, profiler_cmd: list[str]) -> Path:
    prog = os.path.join(os.fsencode(tmp_path), NAME)
    shutil.copy(fixtures_dir / "workloads" / "shares", prog)
    out = tmp_path / "c.prof"
    done = subprocess.run([*profiler_cmd, "record", "-q", "-g", "-F", "300", "-o", str(out), "--", prog, "0.1", "1"],
                          capture_output=True, timeout=120)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    return out


def test_record_and_report_name_the_program_as_its_bytes(recording: Path, profiler_cmd: list[str]) -> None:
    done = subprocess.run([*profiler_cmd, "report", "--sort", "comm,dso", "-g", "none", "-i", str(recording)],
                          capture_output=True, timeout=120)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    assert NAME in done.stdout and b"work_a" not in done.stderr


def test_annotate_shows_the_program_whose_path_is_not_utf8(recording: Path, profiler_cmd: list[str]) -> None:
    done = subprocess.run([*profiler_cmd, "annotate", "work_a", "-i", str(recording)], capture_output=True,
                          timeout=120)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    assert NAME in done.stdout or "sh\ufffdres".encode() in done.stdout, done.stdout[:500]


def test_archive_of_a_program_whose_path_is_not_utf8(recording: Path, profiler_cmd: list[str]) -> None:
    done = subprocess.run([*profiler_cmd, "archive", "-i", str(recording)], capture_output=True, timeout=120)
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert done.returncode == 0, done.stderr
    report = subprocess.run([*profiler_cmd, "report", "-g", "none", "-i", str(recording)], capture_output=True,
                            timeout=120)
    assert report.returncode == 0 and b"work_a" in report.stdout, report.stderr
