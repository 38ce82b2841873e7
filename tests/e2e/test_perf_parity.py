"""A perf user's first hour (issue 13): the same command line with perf 6.1 and with us,
on the same workload, and the behaviours compared. Tests skip the perf side when perf is
not installed (it is a reference, never a run-time dependency)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from profiler.format import records as R
from profiler.format.container import CaptureReader

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]


def perf_bin() -> str:
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("perf is not installed (the reference these tests compare with)")
    return perf


def ours(profiler_cmd: list[str], *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*profiler_cmd, *args], capture_output=True, text=True, timeout=120, **kw)


def perf(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([perf_bin(), *args], capture_output=True, text=True, timeout=120, **kw)


def samples(path: Path) -> list[R.Sample]:
    with CaptureReader.open(path) as reader:
        return [r for r in reader.iter_records() if isinstance(r, R.Sample)]


def perf_samples(data: Path, fields: str = "pid,cpu") -> list[list[str]]:
    res = perf("script", "-i", str(data), "-F", fields)
    assert res.returncode == 0, res.stderr
    return [line.split() for line in res.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def workloads(fixtures_dir: Path) -> Path:
    return fixtures_dir / "workloads"


@pytest.fixture()
def pinned_spinner(workloads: Path) -> Iterator[int]:
    """A CPU-bound process pinned to the last CPU: whoever records that CPU must see it."""
    proc = subprocess.Popen([str(workloads / "spinner")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("ready")
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(proc.pid, {cpu})
    yield proc.pid
    proc.kill()
    proc.wait()


# --- -C CPUS -- cmd, -a -- cmd ---------------------------------------------------------------


@pytest.mark.parametrize("target", ["-C", "-a"])
def test_cpus_with_a_command_record_every_task_while_it_runs(
    target: str, pinned_spinner: int, tmp_path: Path, profiler_cmd: list[str]
) -> None:
    cpu = max(os.sched_getaffinity(0))
    where = ["-C", str(cpu)] if target == "-C" else ["-a"]
    mine, theirs = tmp_path / "c.prof", tmp_path / "c.data"
    res = ours(profiler_cmd, "record", *where, "-o", str(mine), "--", "sleep", "0.5")
    assert res.returncode == 0, res.stderr
    got = samples(mine)
    pres = perf("record", "-q", *where, "-o", str(theirs), "--", "sleep", "0.5")
    assert pres.returncode == 0, pres.stderr
    perf_pids = {int(f[0]) for f in perf_samples(theirs)}
    perf_cpus = {int(f[1].strip("[]")) for f in perf_samples(theirs)}
    # both: the pinned spinner, which the command never touches, is recorded
    assert pinned_spinner in perf_pids
    assert pinned_spinner in {s.pid for s in got}
    spinner_share = Counter(s.pid for s in got if s.cpu == cpu)[pinned_spinner]
    assert spinner_share > 10
    if target == "-C":
        assert perf_cpus == {cpu}
        assert {s.cpu for s in got} == {cpu}
    # the command's life bounds the recording: the header names it and the run ended with it
    with CaptureReader.open(mine) as reader:
        tgt = reader.header["target"]
    assert tgt["command"] == ["sleep", "0.5"] and tgt["system_wide"]


# --- signals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("where", [("-a",), ("--", "sigcatch")])
def test_sigint_ends_the_recorder_like_perf(where: tuple[str, ...], workloads: Path, tmp_path: Path,
                                            profiler_cmd: list[str]) -> None:
    args = [str(workloads / a) if a == "sigcatch" else a for a in where]
    codes = []
    for tool, out in ((profiler_cmd + ["record"], tmp_path / "s.prof"), ([perf_bin(), "record", "-q"], tmp_path / "s.data")):
        proc = subprocess.Popen([*tool, "-o", str(out), *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        if "--" in where:
            assert proc.stdout.readline() == "ready\n"
        else:
            time.sleep(1.0)  # let the recorder set up; not a timing assertion
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert "Traceback" not in stderr
        codes.append(proc.returncode)
    assert codes[0] == codes[1] == -signal.SIGINT  # both end by SIGINT: a shell sees 130
    with CaptureReader.open(tmp_path / "s.prof") as reader:
        assert reader.clean_end


# --- event labels ----------------------------------------------------------------------------


@pytest.mark.parametrize(("our_flag", "perf_flag", "suffix"), [("--kernel-only", "--all-kernel", ":k"),
                                                              ("--user-only", "--all-user", ":u")])
def test_privilege_flags_label_the_event_like_perf(our_flag: str, perf_flag: str, suffix: str, workloads: Path,
                                                   tmp_path: Path, profiler_cmd: list[str]) -> None:
    cmd = ["--", str(workloads / "shares"), "0.2"]
    assert ours(profiler_cmd, "record", "-q", our_flag, "-e", "cpu-clock", "-o", str(tmp_path / "k.prof"), *cmd).returncode == 0
    assert perf("record", "-q", "-e", "cpu-clock" + suffix, "-o", str(tmp_path / "k.data"), *cmd).returncode == 0
    mine = ours(profiler_cmd, "report", "-i", str(tmp_path / "k.prof"))
    theirs = perf("report", "-i", str(tmp_path / "k.data"), "--stdio")
    label = f"of event 'cpu-clock{suffix}'"
    assert label in mine.stdout and label in theirs.stdout


def test_max_stack_above_the_kernel_limit_names_it(profiler_cmd: list[str], tmp_path: Path) -> None:
    limit = int(Path("/proc/sys/kernel/perf_event_max_stack").read_text())
    res = ours(profiler_cmd, "record", "-g", "--callchain-max-stack", str(limit + 1), "-o",
               str(tmp_path / "x.prof"), "--", "true")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"limit of {limit}" in lines[0] and "perf_event_max_stack" in lines[0]
    ok = ours(profiler_cmd, "record", "-q", "-g", "--callchain-max-stack", str(limit), "-o",
              str(tmp_path / "y.prof"), "--", "true")
    assert ok.returncode == 0, ok.stderr
