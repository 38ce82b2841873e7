"""Benchmark ``profiler record --off-cpu`` against ``perf record -e sched:sched_switch -g`` on a
switch-heavy workload, measured in the same run (issue 24; docs/offcpu.md).

The workload is fixtures/offcpu/pingpong: two threads passing a byte through a pair of pipes,
a context switch per message; it reports its own elapsed time. Runs alternate unprofiled /
ours / perf's (and, with ``--variants``, ours without the cpu-clock event or without -g), and
medians are compared:

* target slowdown: the workload's elapsed time profiled / unprofiled, ours against perf's;
* lost records or samples at default buffers (ours must be 0);
* the capture: samples, bytes, and ``report --wall`` / ``report --thread-states`` time on it.

Usage: python benchmarks/bench_offcpu.py [--runs N] [--rounds R] [--variants]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf import fixtures_dir, median, perf_binary, perf_lost_samples, perf_stats, run_tree  # noqa: E402

from profiler.format.container.reader import CaptureReader  # noqa: E402

PROFILER = [sys.executable, "-m", "profiler"]


def elapsed(stdout: str) -> float:
    m = re.search(r"elapsed_ns (\d+)", stdout)
    assert m, stdout
    return int(m.group(1)) / 1e9


def our_stats(path: Path) -> tuple[int, int]:
    with CaptureReader.open(path) as reader:
        stats = reader.trailer or {}
    return int(stats.get("samples", 0)), int(stats.get("lost", 0))


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    res = run_tree(argv)
    assert res.returncode == 0, res.stderr
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", default="100000")
    parser.add_argument("--variants", action="store_true",
                        help="also ours with -e sched:sched_switch only, and without -g")
    args = parser.parse_args()
    perf = perf_binary()
    workload = [str(fixtures_dir() / "offcpu" / "pingpong"), args.rounds]
    configs: dict[str, list[str]] = {"ours --off-cpu -g": ["--off-cpu", "-g"]}
    if args.variants:
        configs["ours --off-cpu -g -e sched:sched_switch"] = ["--off-cpu", "-g", "-e", "sched:sched_switch"]
        configs["ours --off-cpu"] = ["--off-cpu"]
    times: dict[str, list[float]] = {"unprofiled": [], **{k: [] for k in configs}, "perf -e sched:sched_switch -g": []}
    lost: dict[str, list[int]] = {k: [] for k in times}
    samples: dict[str, list[int]] = {k: [] for k in times}
    sizes: dict[str, list[int]] = {k: [] for k in times}
    report_times: dict[str, list[float]] = {"report --wall": [], "report --thread-states": []}
    with tempfile.TemporaryDirectory(prefix="bench-offcpu-") as tmpdir:
        tmp = Path(tmpdir)
        for i in range(args.runs):
            base = run_tree(workload)
            times["unprofiled"].append(elapsed(base.stdout))
            for name, opts in configs.items():
                out = tmp / f"ours{i}.prof"
                res = run_tree([*PROFILER, "record", "-q", "-o", str(out), *opts, "--", *workload])
                assert res.returncode == 0, res.stderr
                times[name].append(elapsed(res.stdout))
                n, gone = our_stats(out)
                samples[name].append(n)
                lost[name].append(gone)
                sizes[name].append(out.stat().st_size)
                if name == "ours --off-cpu -g":
                    report_times["report --wall"].append(
                        timed([*PROFILER, "report", "-i", str(out), "--wall", "--no-children", "-g", "none"]))
                    report_times["report --thread-states"].append(
                        timed([*PROFILER, "report", "-i", str(out), "--thread-states"]))
            if perf:
                name = "perf -e sched:sched_switch -g"
                data = tmp / f"perf{i}.data"
                res = run_tree([perf, "record", "-q", "-o", str(data), "-e", "sched:sched_switch", "-g", "--",
                                *workload])
                assert res.returncode == 0, res.stderr
                times[name].append(elapsed(res.stdout))
                samples[name].append(perf_stats(perf, data)["samples"])
                lost[name].append(perf_lost_samples(perf, data))
                sizes[name].append(data.stat().st_size)
    base_t = median(times["unprofiled"])
    print(f"workload: pingpong {args.rounds} (a context switch per message), {args.runs} alternating runs")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (1 min); perf: {perf or 'not installed'}\n")
    print(f"{'':<42}{'elapsed s':>10}{'slowdown':>10}{'samples':>10}{'lost':>7}{'MB':>8}")
    for name, values in times.items():
        if not values:
            continue
        t = median(values)
        cols = (f"{median(samples[name]):>10.0f}{max(lost[name]):>7}{median(sizes[name]) / 1e6:>8.1f}"
                if samples[name] else "")
        print(f"{name:<42}{t:>10.3f}{t / base_t:>9.2f}x{cols}")
    perf_t = times["perf -e sched:sched_switch -g"]
    if perf_t:
        ours = median(times["ours --off-cpu -g"]) / base_t
        theirs = median(perf_t) / base_t
        verdict = "ok" if ours <= theirs else "SLOWER THAN PERF"
        print(f"\nslowdown ours / perf's: {ours / theirs:.2f} ({verdict}: the goal is at most 1)")
    for name, values in report_times.items():
        print(f"{name} on the capture: median {median(values):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
