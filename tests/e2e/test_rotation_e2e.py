"""``record --switch-output`` (issue 29): files that each report alone, nothing lost or counted
twice across a switch, the disk bounded by --switch-max-files and --max-size, SIGUSR2."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]
EXECS = 60


def profiler(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler", *args], capture_output=True, text=True, timeout=180,
                          **kw)  # type: ignore[call-overload]


def exec_loop(n: int = EXECS) -> list[str]:
    """A shell that runs /bin/true and sleep n times: exactly 2n + 1 execs (the shell's own)."""
    return ["sh", "-c", f"i=0; while [ $i -lt {n} ]; do /bin/true; sleep 0.015; i=$((i+1)); done"]


def execs(path: Path) -> int:
    res = profiler("script", "-i", str(path), "--event", "sched:sched_process_exec", "-F", "comm")
    if res.returncode != 0 and "has no samples of event 'sched:sched_process_exec'" in res.stderr:
        return 0  # a slice of a fast loop with no exec in it (script says so and exits 1)
    assert res.returncode == 0, res.stderr
    return len([line for line in res.stdout.splitlines() if line.strip()])


def test_no_record_is_lost_or_doubled_across_switches(tmp_path: Path) -> None:
    one = tmp_path / "one.prof"
    res = profiler("record", "-q", "-e", "sched:sched_process_exec", "-o", str(one), "--", *exec_loop())
    assert res.returncode == 0, res.stderr
    res = profiler("record", "-q", "-e", "sched:sched_process_exec", "--switch-output", "250ms",
                   "-o", str(tmp_path / "rot.prof"), "--", *exec_loop())
    assert res.returncode == 0, res.stderr
    files = sorted(tmp_path.glob("rot.prof.*"))
    assert len(files) >= 3
    assert execs(one) == 2 * EXECS + 1
    assert sum(execs(f) for f in files) == 2 * EXECS + 1  # every exec once, in exactly one file


def test_each_file_reports_alone(tmp_path: Path, fixtures_dir: Path) -> None:
    res = profiler("record", "-q", "-g", "--switch-output", "300ms", "-o", str(tmp_path / "s.prof"), "--",
                   str(fixtures_dir / "workloads" / "shares"), "1")
    assert res.returncode == 0, res.stderr
    files = sorted(tmp_path.glob("s.prof.*"))
    assert len(files) >= 3
    middle = files[len(files) // 2]
    for other in files:
        if other != middle:
            other.unlink()  # nothing of the other files is needed
    rep = profiler("report", "-i", str(middle), "--no-children", "-g", "none", "--sort", "dso,sym")
    assert rep.returncode == 0, rep.stderr
    named = {line.split()[-1] for line in rep.stdout.splitlines() if line.strip() and not line.startswith("#")}
    assert {"work_a", "work_b", "work_c"} <= named, rep.stdout
    info = profiler("info", "-i", str(middle))
    assert info.returncode == 0 and "ended cleanly: yes" in info.stdout


def test_disk_bounded_by_file_count_and_total_size(tmp_path: Path) -> None:
    res = profiler("record", "-q", "-e", "sched:sched_process_exec", "--switch-output", "200ms",
                   "--switch-max-files", "2", "-o", str(tmp_path / "n.prof"), "--", *exec_loop(50))
    assert res.returncode == 0, res.stderr
    assert len(list(tmp_path.glob("n.prof.*"))) == 2
    res = profiler("record", "-q", "-F", "1000", "--switch-output", "100ms", "--max-size", "40K",
                   "-o", str(tmp_path / "m.prof"), "--", *exec_loop(50))
    assert res.returncode == 0, res.stderr
    kept = list(tmp_path.glob("m.prof.*"))
    assert kept and sum(p.stat().st_size for p in kept[:-1]) <= 40 * 1024


def test_sigusr2_switches(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "profiler", "record", "-q", "-e", "sched:sched_process_exec",
                             "--switch-output", "-o", str(tmp_path / "u.prof"), "--", *exec_loop(70)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(2):
        time.sleep(0.4)
        os.kill(proc.pid, signal.SIGUSR2)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    files = sorted(tmp_path.glob("u.prof.*"))
    assert len(files) == 3 and sum(execs(f) for f in files) == 141


def test_bad_rotation_options_are_one_sentence(tmp_path: Path) -> None:
    out = str(tmp_path / "x.prof")
    for args, said in ((["--switch-output", "5x"], "give signal, a size"),
                       (["--switch-max-files", "2"], "apply to the files of --switch-output"),
                       (["--switch-output", "1s", "-o", "-"], "give -o a file name"),
                       (["--switch-output", "1s", "--max-size", "lots"], "give a size")):
        res = profiler("record", "-q", *args, *(["-o", out] if "-o" not in args else []), "--", "true")
        assert res.returncode == 2 and said in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_system_wide_rotation_bounded_and_sigkill_leaves_closed_files_whole(tmp_path: Path) -> None:
    """A long -a -F 49 recording compressed in time: a switch every 0.5 s for 5 s, the newest
    4 files kept; every file kept reports alone; then a recorder killed with SIGKILL: every file
    it had closed is whole, and the one it was writing is readable."""
    res = profiler("record", "-q", "-a", "-F", "49", "--switch-output", "500ms", "--switch-max-files", "4",
                   "-o", str(tmp_path / "a.prof"), "--", "sleep", "5")
    assert res.returncode == 0, res.stderr
    kept = sorted(tmp_path.glob("a.prof.*"))
    assert len(kept) >= 2
    assert len(kept) == 4  # of about 10 written (each file's size follows the machine's process count)
    for path in kept:
        info = profiler("info", "-i", str(path))
        assert "ended cleanly: yes" in info.stdout, info.stdout
        rep = profiler("report", "-i", str(path), "--sort", "comm", "-g", "none")
        assert rep.returncode in (0, 1), rep.stderr  # a quiet half-second may hold no sample
        assert "Traceback" not in rep.stderr
    proc = subprocess.Popen([sys.executable, "-m", "profiler", "record", "-q", "-a", "-F", "99",
                             "--switch-output", "300ms", "-o", str(tmp_path / "k.prof"), "--", "sleep", "4"])
    time.sleep(2.0)
    proc.kill()
    proc.wait(timeout=30)
    files = sorted(tmp_path.glob("k.prof.*"))
    assert len(files) >= 3
    for path in files[:-1]:
        assert "ended cleanly: yes" in profiler("info", "-i", str(path)).stdout
    last = profiler("info", "-i", str(files[-1]))
    assert last.returncode == 0 and "Traceback" not in last.stderr


def test_disk_full_during_rotation_keeps_the_files_and_the_exit_status(tmp_path: Path) -> None:
    """A 96 KiB tmpfs (in a private mount namespace made with unshare) fills up while files
    rotate: the recording ends with one sentence and the command's exit status, and every file
    written so far stays readable."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    mnt = tmp_path / "small"
    mnt.mkdir()
    profiler_cmd = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "profiler"))
    where, out = shlex.quote(str(mnt)), shlex.quote(str(mnt / "d.prof"))
    busy = "sh -c 'i=0; while [ $i -lt 1500000 ]; do i=$((i+1)); done; exit 3'"
    script = f"""
mount -t tmpfs -o size=96k tmpfs {where} || exit 77
{profiler_cmd} record -q -g -F 2000 --switch-output 100ms -o {out} -- {busy}
echo "status $?"
for f in {where}/d.prof.*; do
  {profiler_cmd} info -i "$f" >/dev/null 2>&1 && echo readable || echo "unreadable $f"
done
"""
    res = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                         capture_output=True, text=True, timeout=180)
    if res.returncode == 77:
        pytest.skip("cannot mount a tmpfs here")
    assert "status 3" in res.stdout, res.stdout + res.stderr  # the command's status
    assert "the disk is full" in res.stderr and "files before it are whole" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert res.stdout.count("readable") >= 2 and "unreadable" not in res.stdout, res.stdout


@pytest.mark.parametrize("mode", [["--switch-output", "300ms"], ["--overwrite", "--snapshot-on", "0.4,exit"]])
def test_archived_files_report_without_the_binaries(tmp_path: Path, fixtures_dir: Path, mode: list[str]) -> None:
    """--archive with rotation or the flight recorder: each file is archived as it is finished
    (in the background), so it names its functions with the program deleted (another machine)."""
    program = tmp_path / "prog"
    shutil.copy(fixtures_dir / "workloads" / "shares", program)
    res = profiler("record", "-g", "--archive", *mode, "-o", str(tmp_path / "z.prof"), "--", str(program), "1")
    assert res.returncode == 0, res.stderr
    assert "files archived" in res.stderr, res.stderr
    program.unlink()
    # a recording that ended keeps archiving for a while (filequeue.AT_EXIT_S), then leaves the rest
    # queued for the next recorder: on a loaded machine the last files can be among them
    queue = tmp_path / "z.prof.push-queue"
    queued = set(queue.read_text().split()) if queue.exists() else set()
    files = sorted(p for p in tmp_path.glob("z.prof.2*") if str(p) not in queued)
    assert len(files) >= 2, (res.stderr, queued)
    for path in files:
        rep = profiler("report", "-i", str(path), "--no-children", "-g", "none", "--sort", "dso,sym")
        assert rep.returncode == 0, rep.stderr
        assert "work_a" in rep.stdout, rep.stdout
