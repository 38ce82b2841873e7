"""Benchmark: `profiler report` against `perf report` on captures of the same workload.

Records fixtures/workloads/shares (two processes, both CPUs) at a high rate with
`profiler record -g` and with `perf record -g` (about 1M samples each at the default scale),
then times both reporters, best of N runs, and prints wall-time and peak-memory ratios:

    default report (children + self, call graphs)   target <= 0.5 x perf report --stdio
    flat report (--no-children -g none)              target <= 0.7 x perf
    peak memory (max RSS)                            target <= 0.5 x perf

Usage: python benchmarks/bench_report.py [--scale 11] [--freq 20000] [--runs 3] [--keep DIR]
(--keep reuses or keeps the captures in DIR). Peak memory is read with /usr/bin/time -f %M.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import _tree_rss_kb  # noqa: E402


def timed(cmd: list[str], runs: int, env: dict[str, str] | None = None) -> tuple[float, int, int]:
    """(best wall seconds over ``runs`` runs, largest max RSS of one process in KB, largest PSS
    summed over the process and its workers in KB); output discarded. PSS is sampled in one
    more run of its own: reading a process tree's smaps every 20 ms takes CPU time that a
    report using both CPUs would lose (and a poll loop's sleep added up to 20 ms a run)."""
    best, rss, pss = float("inf"), 0, 0
    gnu_time = shutil.which("time") or "/usr/bin/time"
    for run in range(runs + 1):
        t0 = time.perf_counter()
        proc = subprocess.Popen([gnu_time, "-f", "%M", *cmd], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, env=env)
        peak = [0]
        done = threading.Event()
        sampler = threading.Thread(target=_sample_pss, args=(proc.pid, peak, done))
        if run == runs:
            sampler.start()
        err = proc.communicate()[1] or ""
        wall = time.perf_counter() - t0
        done.set()
        if run == runs:
            sampler.join()
            pss = peak[0]
        elif proc.returncode == 0:
            best = min(best, wall)
        if proc.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{err[-2000:]}")
        rss = max(rss, int(err.strip().splitlines()[-1]))
    return best, rss, pss


def _sample_pss(pid: int, peak: list[int], done: threading.Event) -> None:
    """The largest PSS of ``pid``'s tree into ``peak[0]``, every 20 ms until ``done``."""
    while not done.is_set():
        peak[0] = max(peak[0], _tree_rss_kb(pid))
        done.wait(0.02)


def record(workdir: Path, scale: str, freq: str) -> tuple[Path, Path]:
    build = workdir / "fixtures"
    subprocess.run(["make", "-s", "-C", str(ROOT / "fixtures"), f"OUT={build}"], check=True,
                   stdout=subprocess.DEVNULL)
    shares = str(build / "workloads" / "shares")
    ours, theirs = workdir / "bench.prof", workdir / "bench.perf.data"
    if not ours.exists():
        print(f"recording with profiler at {freq} Hz (scale {scale}) ...", flush=True)
        subprocess.run([PY, "-m", "profiler", "record", "-q", "-g", "-F", freq, "-o", str(ours), "--",
                        shares, scale, "2"], check=True, stdout=subprocess.DEVNULL)
    if not theirs.exists():
        print(f"recording with perf at {freq} Hz ...", flush=True)
        subprocess.run(["perf", "record", "-q", "-g", "-F", freq, "-o", str(theirs), "--", shares, scale, "2"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return ours, theirs


def sample_count(ours: Path) -> int:
    from profiler.format.decode.decoder import load_capture
    from profiler.format.container.reader import CaptureReader

    return len(load_capture(CaptureReader.open(ours)).samples)


def perf_sample_count(theirs: Path) -> int:
    """Samples in a perf.data file, from `perf report --stats`-free parsing of `-n` output."""
    res = subprocess.run(["perf", "report", "-i", str(theirs), "--stdio", "--no-children", "-g", "none",
                          "--sort", "comm", "-n"], capture_output=True, text=True)
    total = 0
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith("%") and parts[1].isdigit():
            total += int(parts[1])
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="11")
    ap.add_argument("--freq", default="20000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", help="directory to keep (and reuse) the captures in")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        sys.exit("perf is not installed: nothing to compare against")
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-report-"))
    workdir.mkdir(parents=True, exist_ok=True)
    ours, theirs = record(workdir, args.scale, args.freq)
    n_ours, n_theirs = sample_count(ours), perf_sample_count(theirs)
    print(f"samples: profiler {n_ours}, perf {n_theirs}")
    env_cache = os.environ.setdefault("PROFILER_CACHE_DIR", str(workdir / "cache"))
    subprocess.run([PY, "-m", "profiler", "report", "-i", str(ours)], stdout=subprocess.DEVNULL)  # warm caches
    cases = [
        ("default report", ["--stdio"], []),
        ("flat report", ["--stdio", "--no-children", "-g", "none"], ["--no-children", "-g", "none"]),
    ]
    print(f"\n{'case':<16} {'jobs':>4} {'perf s':>8} {'ours s':>8} {'ratio':>6} {'perf MB':>8} {'ours MB':>8} "
          f"{'ratio':>6} {'PSS MB':>7}")
    for name, perf_args, our_args in cases:
        p_wall, p_rss, _ = timed(["perf", "report", "-i", str(theirs), *perf_args], args.runs)
        for jobs in ("auto", "1"):
            env = dict(os.environ)
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # as users run it: bytecode cache on
            env.pop("PROFILER_JOBS", None)
            if jobs != "auto":
                env["PROFILER_JOBS"] = jobs
            o_wall, o_rss, o_pss = timed([PY, "-m", "profiler", "report", "-i", str(ours), *our_args], args.runs, env)
            # normalise wall time to the same sample count
            o_norm = o_wall * (n_theirs / n_ours) if n_ours and n_theirs else o_wall
            print(f"{name:<16} {jobs:>4} {p_wall:8.2f} {o_wall:8.2f} {o_norm / p_wall:6.2f} {p_rss / 1024:8.0f} "
                  f"{o_rss / 1024:8.0f} {o_rss / p_rss:6.2f} {o_pss / 1024:7.0f}", flush=True)
    print("\n(ratio = ours / perf; wall-time ratio normalised to perf's sample count; MB: the largest "
          "single process's max RSS (/usr/bin/time), PSS: ours summed over its worker processes; "
          f"load average {os.getloadavg()[0]:.1f}; "
          f"symbol cache in {env_cache})")
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
