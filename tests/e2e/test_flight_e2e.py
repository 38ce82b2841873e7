"""``record --overwrite`` (issue 29): the flight recorder keeps the last -m pages per CPU and
writes snapshots that report alone: names resolve from the side-band kept apart (the program's
maps were written long before the window), the window is the end of the run, SIGUSR2 and a
period add snapshots."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]


def profiler(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler", *args], capture_output=True, text=True, timeout=180)


def sample_times(path: Path) -> list[float]:
    res = profiler("script", "-i", str(path), "-F", "time")
    assert res.returncode == 0, res.stderr
    return [float(line.strip().rstrip(":")) for line in res.stdout.splitlines() if line.strip()]


def test_the_exit_snapshot_holds_the_last_moments_named(tmp_path: Path, fixtures_dir: Path) -> None:
    # pinned to one CPU: that CPU's buffer then holds the end of the run (each CPU keeps its own)
    work = ["taskset", "-c", "0", str(fixtures_dir / "workloads" / "shares"), "1.5"]
    out = tmp_path / "fl.prof"
    res = profiler("record", "-q", "-g", "--overwrite", "-m", "8", "-o", str(out), "--", *work)
    assert res.returncode == 0, res.stderr
    (snap,) = tmp_path.glob("fl.prof.*")
    times = sample_times(snap)
    full = profiler("record", "-q", "-g", "-o", str(tmp_path / "all.prof"), "--", *work)
    assert full.returncode == 0
    everything = sample_times(tmp_path / "all.prof")
    assert 50 < len(times) < len(everything) / 2  # a window, not the run
    assert times == sorted(times)
    span = max(everything) - min(everything)
    recent = [t for t in times if t >= max(times) - span / 2]
    assert len(recent) >= 0.95 * len(times)  # the end of the run (a few samples before the pinning: CPU 1's)
    rep = profiler("report", "-i", str(snap), "--no-children", "-g", "none", "--sort", "dso,sym")
    assert rep.returncode == 0, rep.stderr
    named = {line.split()[-1] for line in rep.stdout.splitlines() if line.strip() and not line.startswith("#")}
    assert {"work_a", "work_b", "work_c"} <= named  # the maps came from the side-band, written long before


def test_sigusr2_and_a_period_add_snapshots(tmp_path: Path) -> None:
    loop = ["sh", "-c", "i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done"]  # about 1.5 s
    proc = subprocess.Popen([sys.executable, "-m", "profiler", "record", "-q", "--overwrite", "-m", "8",
                             "--snapshot-on", "signal", "-o", str(tmp_path / "u.prof"), "--", *loop],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGUSR2)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert len(list(tmp_path.glob("u.prof.*"))) == 1  # the signal's; none at exit (not asked)
    res = profiler("record", "-q", "--overwrite", "-m", "8", "--snapshot-on", "0.3,exit", "--switch-max-files", "3",
                   "-o", str(tmp_path / "p.prof"), "--", *loop)
    assert res.returncode == 0, res.stderr
    snaps = sorted(tmp_path.glob("p.prof.*"))
    assert len(snaps) == 3  # more were written; the newest three kept
    for snap in snaps:
        assert profiler("info", "-i", str(snap)).stdout.count("ended cleanly: yes") == 1


def test_flight_options_are_one_sentence(tmp_path: Path) -> None:
    out = str(tmp_path / "x.prof")
    for args, said in ((["--snapshot-on", "exit"], "goes with --overwrite"),
                       (["--overwrite", "--snapshot-on", "soon"], "signal, exit or a number"),
                       (["--overwrite", "--switch-output=1s"], "not --switch-output")):
        res = profiler("record", "-q", *args, "-o", out, "--", "true")
        assert res.returncode == 2 and said in res.stderr and "Traceback" not in res.stderr, res.stderr
