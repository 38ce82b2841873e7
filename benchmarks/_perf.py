"""Helpers shared by benchmarks that compare against ``perf`` (when it is installed)."""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def perf_binary() -> str | None:
    return shutil.which("perf")


def fixtures_dir() -> Path:
    """The built workload fixtures: $(OUT)/fixtures from the Makefile, else built now."""
    out = Path(os.environ.get("OUT", ROOT / "out")) / "fixtures"
    if not (out / "workloads" / "shares").exists():
        subprocess.run(["make", "--no-print-directory", "-s", "-C", str(ROOT / "fixtures"), f"OUT={out}"],
                       check=True, stdout=subprocess.DEVNULL)
    return out


@dataclass
class Run:
    wall: float  # seconds, whole command
    cpu: float  # user + sys of the process and every descendant it reaped
    stdout: str
    stderr: str
    returncode: int


def run_tree(argv: list[str], cwd: Path | None = None) -> Run:
    """Run ``argv``; its wall time and the CPU time of its whole process tree (os.wait4
    reports the child plus every descendant that was waited for)."""
    start = time.perf_counter()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        if cwd is not None:
            os.chdir(cwd)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    os.close(out_w)
    os.close(err_w)
    stdout, stderr = _read_both(out_r, err_r)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    return Run(wall, usage.ru_utime + usage.ru_stime, stdout, stderr, os.waitstatus_to_exitcode(status))


def _read_both(out_r: int, err_r: int) -> tuple[str, str]:
    import selectors

    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    sel = selectors.DefaultSelector()
    for fd in (out_r, err_r):
        sel.register(fd, selectors.EVENT_READ)
    open_fds = 2
    while open_fds:
        for key, _ in sel.select():
            data = os.read(key.fd, 65536)
            if data:
                chunks[key.fd].append(data)
            else:
                sel.unregister(key.fd)
                os.close(key.fd)
                open_fds -= 1
    return b"".join(chunks[out_r]).decode(errors="replace"), b"".join(chunks[err_r]).decode(errors="replace")


_SHARES_RE = re.compile(r"shares: pid \d+ rounds \d+ wall ([\d.]+) cpu ([\d.]+)")


def shares_times(stdout: str) -> tuple[float, float]:
    """(sum of wall, sum of CPU seconds) that the shares processes report for their own work."""
    walls, cpus = [], []
    for match in _SHARES_RE.finditer(stdout):
        walls.append(float(match.group(1)))
        cpus.append(float(match.group(2)))
    return sum(walls), sum(cpus)


def perf_stats(perf: str, path: Path) -> dict[str, int]:
    """SAMPLE and LOST event counts of a perf.data file (``perf report --stats``)."""
    out = subprocess.run([perf, "report", "-i", str(path), "--stats"], capture_output=True, text=True).stdout
    stats = {"samples": 0, "lost": 0}
    m = re.search(r"SAMPLE events:\s+(\d+)", out)
    if m:
        stats["samples"] = int(m.group(1))
    m = re.search(r"LOST events:\s+(\d+)", out)
    if m:
        stats["lost_records"] = int(m.group(1))
    m = re.search(r"LOST_SAMPLES events:\s+(\d+)", out)
    if m:
        stats["lost_samples_records"] = int(m.group(1))
    return stats


def perf_lost_samples(perf: str, path: Path) -> int:
    """Samples perf lost, summed from its LOST records (``perf report -D``)."""
    out = subprocess.run([perf, "report", "-i", str(path), "-D"], capture_output=True, text=True).stdout
    return sum(int(m.group(1)) for m in re.finditer(r"PERF_RECORD_LOST: id:\d+: lost:(\d+)", out))


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
