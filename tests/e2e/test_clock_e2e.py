"""Clocks (issue 29): ``record -k``, perf's ``script -F tod`` and ``--time`` with dates.

* ``-k realtime`` puts sample times on the wall clock, ``-k boot`` on CLOCK_BOOTTIME, the
  default on CLOCK_MONOTONIC: each sample time lies between the clock read before and after;
* ``script -F tod`` prints what perf script prints for the same perf.data recorded with
  ``perf record -k mono`` (line for line), and a perf.data without clock data is one sentence;
* ``--time DATE,+LEN`` keeps the same samples as the same range in sample-clock seconds.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]
PERF = shutil.which("perf")


def profiler(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("clock", "clockid"), [("realtime", time.CLOCK_REALTIME), ("boot", time.CLOCK_BOOTTIME),
                                                (None, time.CLOCK_MONOTONIC)])
def test_samples_are_on_the_chosen_clock(tmp_path: Path, clock: str | None, clockid: int) -> None:
    out = tmp_path / "k.prof"
    before = time.clock_gettime_ns(clockid)
    res = profiler("record", "-q", *(["-k", clock] if clock else []), "-o", str(out), "--", "sh", "-c",
                   "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
    after = time.clock_gettime_ns(clockid)
    assert res.returncode == 0, res.stderr
    times = [float(line.split()[0].rstrip(":")) for line in profiler("script", "-i", str(out), "-F", "time")
             .stdout.splitlines() if line.strip()]
    assert times and all(before / 1e9 <= t <= after / 1e9 for t in times), (before, times[:3], after)


def test_tod_is_perfs(tmp_path: Path) -> None:
    assert PERF is not None
    data = tmp_path / "k.data"
    subprocess.run([PERF, "record", "-q", "-k", "mono", "-o", str(data), "--", "sh", "-c",
                    "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"], check=True, capture_output=True, timeout=120)
    theirs = subprocess.run([PERF, "script", "-i", str(data), "-F", "comm,tid,tod,time"], capture_output=True,
                            text=True, timeout=120).stdout
    ours = profiler("script", "-i", str(data), "-F", "comm,tid,tod,time")
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == theirs.splitlines() and len(theirs.splitlines()) > 20
    plain = tmp_path / "plain.data"
    subprocess.run([PERF, "record", "-q", "-o", str(plain), "--", "true"], check=True, capture_output=True, timeout=60)
    res = profiler("script", "-i", str(plain), "-F", "comm,tod")
    assert res.returncode == 1 and "cannot print 'tod'" in res.stderr and "Traceback" not in res.stderr
    res = profiler("report", "-i", str(plain), "--time", "2026-01-01T00:00:00,")
    assert res.returncode == 1 and "--time with dates needs" in res.stderr


def test_dates_select_what_clock_seconds_select(tmp_path: Path) -> None:
    out = tmp_path / "d.prof"
    assert profiler("record", "-q", "-o", str(out), "--", "sh", "-c",
                    "i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done").returncode == 0
    lines = profiler("script", "-i", str(out), "-F", "tod,time").stdout.splitlines()
    assert len(lines) > 40
    day, clock, _ = lines[10].split(" ", 2)[0], lines[10].split()[1], lines[10].split()[2].rstrip(":")
    date = f"{day}T{clock}"  # local time, as tod prints it
    by_date = profiler("script", "-i", str(out), "-F", "tod,time", "--time", f"{date},+20ms").stdout.splitlines()
    start = float(lines[10].split()[2].rstrip(":"))
    by_clock = profiler("script", "-i", str(out), "-F", "tod,time", "--time",
                        f"{start:.6f},{start + 0.02:.6f}").stdout.splitlines()
    assert by_date and by_date[0] == lines[10]
    assert abs(len(by_date) - len(by_clock)) <= 1  # the same samples, up to the microsecond printed
    assert set(by_date) <= set(lines)
