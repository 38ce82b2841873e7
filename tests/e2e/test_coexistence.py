"""``perf record -p`` and ``profiler record -p`` on one process at the same time, in both
start orders: both must exit 0 and both captures must report.

The kernel shares an MMAP2 record's header between every event of the mmap, and sets
PERF_RECORD_MISC_MMAP_BUILD_ID on it for an event with ``attr.build_id`` without ever
clearing it. A profiler that set that bit made a concurrent ``perf record`` abort at exit
("assertion failed at util/build-id.c"); a ``perf record --buildid-mmap`` attached first
flags our MMAP2 records over bytes that are maj/min/ino. The ``mapper`` workload maps its
executable again and again while both tools are attached, so every run has fresh MMAP2
records. perf is the reference here, so these tests need it installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path


import pytest

from profiler.format import records as R
from profiler.format.container.reader import CaptureReader

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]

PERF = shutil.which("perf")
needs_perf = pytest.mark.skipif(PERF is None, reason="perf (the reference) is not installed")
SECONDS = "2.5"  # the workload's busy time once both tools are attached
DELAY = "1.0"  # it waits this long first, while the tools start


@pytest.fixture(scope="module")
def workloads(fixtures_dir: Path) -> Path:
    return fixtures_dir / "workloads"


def start_mapper(workloads: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([str(workloads / "mapper"), SECONDS, DELAY], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
    return proc


def perf_record(pid: int, out: Path, *extra: str) -> subprocess.Popen[str]:
    assert PERF is not None
    return subprocess.Popen([PERF, "record", "-q", "-F", "1000", *extra, "-p", str(pid), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def profiler_record(profiler_cmd: list[str], pid: int, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([*profiler_cmd, "record", "-F", "1000", "-p", str(pid), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_file(path: Path, proc: subprocess.Popen[str]) -> None:
    """A tool is attached once it has written its output file's first bytes."""
    for _ in range(200):
        if path.exists() and path.stat().st_size > 0 or proc.poll() is not None:
            return
        time.sleep(0.02)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def run_both(workloads: Path, tmp_path: Path, profiler_cmd: list[str], perf_first: bool,
             *perf_extra: str) -> tuple[Path, Path, int]:
    target = start_mapper(workloads)
    ours, theirs = tmp_path / "ours.prof", tmp_path / "perf.data"
    try:
        if perf_first:
            perf = perf_record(target.pid, theirs, *perf_extra)
            wait_for_file(theirs, perf)
            prof = profiler_record(profiler_cmd, target.pid, ours)
        else:
            prof = profiler_record(profiler_cmd, target.pid, ours)
            wait_for_file(ours, prof)
            perf = perf_record(target.pid, theirs, *perf_extra)
        # Both end by themselves when the workload exits (as `perf record -p` does).
        prof_rc, prof_err = finish(prof)
        perf_rc, perf_err = finish(perf)
    finally:
        target.kill()
        target.wait()
    assert perf_rc == 0, f"perf record exited {perf_rc}: {perf_err}"
    assert prof_rc == 0, f"profiler record exited {prof_rc}: {prof_err}"
    return ours, theirs, target.pid


def check_perf_reports(perf_data: Path) -> None:
    assert PERF is not None
    result = subprocess.run([PERF, "report", "-i", str(perf_data), "--stdio", "--sort", "sym"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "spin" in result.stdout, result.stdout[-2000:]


def check_our_capture(profiler_cmd: list[str], capture: Path, workloads: Path) -> None:
    binary = str(workloads / "mapper")
    st = os.stat(binary)
    identity = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    with CaptureReader.open(capture) as reader:
        maps = [r for r in reader.iter_records() if isinstance(r, R.Mmap2) and r.filename == binary]
    assert len(maps) > 10, "the workload's mmaps while attached"
    # Whatever another tool's event asked for, our MMAP2 records are read in the inode form.
    assert all(m.build_id is None and (m.maj, m.min, m.ino) == identity for m in maps)
    result = subprocess.run([*profiler_cmd, "report", "-i", str(capture), "--no-children", "-g", "none",
                             "--format", "csv"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "changed since the capture" not in result.stderr
    spin = [line for line in result.stdout.splitlines() if ",spin" in line or line.endswith("spin")]
    assert spin, result.stdout[:2000]


@needs_perf
@pytest.mark.parametrize("perf_first", [True, False], ids=["perf-first", "profiler-first"])
def test_perf_and_profiler_attached_to_one_process(workloads: Path, tmp_path: Path, profiler_cmd: list[str],
                                                   perf_first: bool) -> None:
    ours, theirs, _ = run_both(workloads, tmp_path, profiler_cmd, perf_first)
    check_perf_reports(theirs)
    check_our_capture(profiler_cmd, ours, workloads)


@needs_perf
@pytest.mark.parametrize("perf_first", [True, False], ids=["perf-first", "profiler-first"])
def test_beside_perf_with_kernel_build_ids(workloads: Path, tmp_path: Path, profiler_cmd: list[str],
                                           perf_first: bool) -> None:
    """perf --buildid-mmap sets attr.build_id: the flag lands on our records too."""
    ours, theirs, _ = run_both(workloads, tmp_path, profiler_cmd, perf_first, "--buildid-mmap")
    check_perf_reports(theirs)
    check_our_capture(profiler_cmd, ours, workloads)


