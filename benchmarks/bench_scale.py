"""How `profiler report` scales with the number of samples: 0.1M, 1M and 10M synthetic samples.

    make bench-scale      (or: python benchmarks/bench_scale.py [--sizes 100000,1000000,10000000])

Each capture is written with the format's own encoder (bench_decode.write_capture: depth-12
callchains, 400 distinct stacks, two CPUs, 5000 records a frame; 160 bytes a sample, so the
10M capture is 1.6 GB on disk), then reported twice: the default report (children, call
graphs) and the flat one (--no-children -g none). Printed per size: wall seconds, seconds per
million samples, and peak resident memory summed over the report's processes (the main one and
its worker processes: their PSS, polled every 20 ms), in one process (PROFILER_JOBS=1) and with the
default workers. Targets (issue "reports that stay fast and small"): time linear in the
samples, memory flat, 10M samples in < 300 MB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_decode import write_capture  # noqa: E402


def _tree_rss_kb(pid: int) -> int:
    """Proportional resident memory (PSS, KB: pages shared after the fork counted once) of a
    process and its descendants, from /proc."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total


def run(argv: list[str], jobs: str | None) -> tuple[float, int]:
    """(wall seconds, peak summed RSS in KB) of one report."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as users run it: bytecode cache on
    if jobs is not None:
        env["PROFILER_JOBS"] = jobs
    else:
        env.pop("PROFILER_JOBS", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "profiler", "report", *argv], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"report failed: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
    return wall, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000,10000000")
    ap.add_argument("--dir", help="where to write (and keep) the captures; default: a temporary directory")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"{'samples':>10} {'case':<8} {'jobs':>4} {'wall s':>8} {'s / M':>7} {'peak MB':>8}")
    try:
        for n in sizes:
            path = workdir / f"scale-{n}.prof"
            if not path.exists():
                write_capture(path, n)
            for case, extra in (("default", []), ("flat", ["--no-children", "-g", "none"])):
                for jobs in ("1", None):
                    wall, peak = run(["-i", str(path), *extra], jobs)
                    print(f"{n:>10} {case:<8} {jobs or 'auto':>4} {wall:8.2f} {wall / n * 1e6:7.2f} "
                          f"{peak / 1024:8.0f}", flush=True)
            if not args.dir:
                path.unlink()
    finally:
        if not args.dir:
            for p in workdir.glob("*.prof"):
                p.unlink()
            workdir.rmdir()
    print(f"\n(load average {os.getloadavg()[0]:.1f}; targets: s / M flat across sizes, peak MB flat, "
          "10M < 300 MB)")


if __name__ == "__main__":
    main()
