"""The flight recorder's own CPU: ``profiler record --overwrite`` against ``perf record --overwrite``.

Both record a busy workload (the ``shares`` fixture on every CPU) with ``--overwrite`` for the
same time, writing one snapshot at the end; the recorder's CPU is the user + system time of the
recording process tree less the workload's (each measured by ``os.wait4`` on the process and
read from /proc for the workload), alternating ours and perf's. The goal (issue 29): idle CPU in
--overwrite mode <= perf's. For comparison the same with a normal recording (every buffer
drained).

Second case, the recorder idle: ``-a -F 49 --overwrite -- sleep S`` (a whole machine at a
continuous-profiling rate, nothing asked of the recorder until the end): the tree's CPU is the
recorder's (sleep uses none), ours against perf's.

Usage: python benchmarks/bench_flight.py [--runs N] [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf import fixtures_dir, median, perf_binary  # noqa: E402

PROFILER = [sys.executable, "-m", "profiler"]


def tree_cpu(cmd: list[str]) -> float:
    """User + system seconds of ``cmd`` and its descendants (the recorder and the workload)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", default="3")
    args = ap.parse_args()
    perf = perf_binary()
    if perf is None:
        sys.exit("perf is not installed: nothing to compare against")
    ncpu = str(os.cpu_count() or 1)
    work = [str(fixtures_dir() / "workloads" / "shares"), args.seconds, ncpu]
    rows: dict[str, list[float]] = {k: [] for k in ("workload", "ours --overwrite", "perf --overwrite",
                                                     "ours (drained)", "perf (drained)")}
    with tempfile.TemporaryDirectory(prefix="bench-flight-") as d:
        for _ in range(args.runs):
            rows["workload"].append(tree_cpu(work))
            rows["ours --overwrite"].append(tree_cpu([*PROFILER, "record", "-q", "-g", "--overwrite", "-o",
                                                      f"{d}/o.prof", "--", *work]))
            rows["perf --overwrite"].append(tree_cpu([perf, "record", "-q", "-g", "--overwrite", "-o",
                                                      f"{d}/p.data", "--", *work]))
            rows["ours (drained)"].append(tree_cpu([*PROFILER, "record", "-q", "-g", "-o", f"{d}/n.prof",
                                                    "--", *work]))
            rows["perf (drained)"].append(tree_cpu([perf, "record", "-q", "-g", "-o", f"{d}/n.data", "--", *work]))
    base = median(rows["workload"])
    print(f"{'busy workload: case':<28} {'tree CPU s':>10} {'recorder CPU s':>15}")
    for name, values in rows.items():
        m = median(values)
        print(f"{name:<28} {m:10.2f} {m - base if name != 'workload' else 0.0:15.2f}")
    print(f"(medians of {args.runs}; recorder CPU = tree CPU - the workload's alone, which includes start-up)")
    idle: dict[str, list[float]] = {"ours -a -F 49 --overwrite": [], "perf -a -F 49 --overwrite": []}
    with tempfile.TemporaryDirectory(prefix="bench-flight-") as d:
        for _ in range(args.runs):
            idle["ours -a -F 49 --overwrite"].append(tree_cpu([*PROFILER, "record", "-q", "-a", "-F", "49", "-g",
                                                                "--overwrite", "-o", f"{d}/i.prof", "--", "sleep",
                                                                args.seconds]))
            idle["perf -a -F 49 --overwrite"].append(tree_cpu([perf, "record", "-q", "-a", "-F", "49", "-g",
                                                                "--overwrite", "-o", f"{d}/i.data", "--", "sleep",
                                                                args.seconds]))
    print(f"\n{'idle machine-wide: case':<28} {'recorder CPU s':>15}")
    for name, values in idle.items():
        print(f"{name:<28} {median(values):15.2f}")


if __name__ == "__main__":
    main()
