"""Benchmark ``profiler record --off-cpu`` against ``perf record -e sched:sched_switch -g`` on a
switch-heavy workload, measured in the same run (issue 24; docs/offcpu.md).

The workload is fixtures/offcpu/pingpong: two threads passing a byte through a pair of pipes,
a context switch per message; it reports its own elapsed and CPU time. Runs alternate unprofiled /
ours / perf's (the issue's ``-e sched:sched_switch -g``, and the same events as our default:
``-e cpu-clock,sched:sched_switch -g --switch-events``; with ``--variants``, ours with the
switch-outs' kernel frames (``--off-cpu-kernel``), without the cpu-clock event, with wake-ups, or
without -g), and medians are compared:

* target slowdown: the workload's elapsed time profiled / unprofiled, ours against perf's;
* CPU added: the workload's CPU time profiled minus unprofiled. The kernel charges what the
  events cost at each context switch to the switching threads, so this is steadier than elapsed
  time on a busy machine (where a pipe ping-pong's elapsed time varies 5x with placement);
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


def elapsed(stdout: str) -> tuple[float, float]:
    """The workload's elapsed time and its CPU time (both threads), in seconds."""
    m = re.search(r"elapsed_ns (\d+) cpu_ns (\d+)", stdout)
    assert m, stdout
    return int(m.group(1)) / 1e9, int(m.group(2)) / 1e9


def our_stats(path: Path) -> tuple[int, int]:
    with CaptureReader.open(path) as reader:
        stats = reader.trailer or {}
    return int(stats.get("samples", 0)), int(stats.get("lost", 0))


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    res = run_tree(argv)
    assert res.returncode == 0, res.stderr
    return time.perf_counter() - start


PERF_GOAL = "perf -e sched:sched_switch -g"  # the reference


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", default="100000")
    parser.add_argument("--spread", action="store_true",
                        help="let the two threads run on any CPU (default: both on CPU 0, by taskset: "
                             "every message is then a direct switch between them, and the time a "
                             "sleeping CPU takes to wake, which varies 5x in a VM, is out of the measure)")
    parser.add_argument("--variants", action="store_true",
                        help="also ours with --off-cpu-kernel, with -e sched:sched_switch only, with wake-ups, "
                             "and without -g")
    args = parser.parse_args()
    perf = perf_binary()
    workload = [str(fixtures_dir() / "offcpu" / "pingpong"), args.rounds]
    if not args.spread:
        workload = ["taskset", "-c", "0", *workload]
    ours: dict[str, list[str]] = {"ours --off-cpu -g": ["--off-cpu", "-g"]}
    if args.variants:
        ours["ours --off-cpu-kernel -g"] = ["--off-cpu-kernel", "-g"]
        ours["ours --off-cpu -g -e sched:sched_switch"] = ["--off-cpu", "-g", "-e", "sched:sched_switch"]
        ours["ours --off-cpu -g -e sched:sched_switch,sched:sched_waking"] = [
            "--off-cpu", "-g", "-e", "sched:sched_switch,sched:sched_waking"]
        ours["ours --off-cpu"] = ["--off-cpu"]
    # perf's with the events, and with the same events as our default (on-CPU samples
    # and switch records too)
    theirs: dict[str, list[str]] = {PERF_GOAL: ["-e", "sched:sched_switch", "-g"],
                                    "perf -e cpu-clock,sched:sched_switch -g --switch-events":
                                        ["-e", "cpu-clock,sched:sched_switch", "-g", "--switch-events"]} if perf else {}
    names = ["unprofiled", *ours, *theirs]
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in names}
    lost: dict[str, list[int]] = {k: [] for k in names}
    samples: dict[str, list[int]] = {k: [] for k in names}
    sizes: dict[str, list[int]] = {k: [] for k in names}
    report_times: dict[str, list[float]] = {"report --wall": [], "report --thread-states": []}
    with tempfile.TemporaryDirectory(prefix="bench-offcpu-") as tmpdir:
        tmp = Path(tmpdir)
        for i in range(args.runs):
            times["unprofiled"].append(elapsed(run_tree(workload).stdout))
            for name, opts in ours.items():
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
            for name, opts in theirs.items():
                data = tmp / f"perf{i}.data"
                res = run_tree([perf, "record", "-q", "-o", str(data), *opts, "--", *workload])
                assert res.returncode == 0, res.stderr
                times[name].append(elapsed(res.stdout))
                samples[name].append(perf_stats(perf, data)["samples"])
                lost[name].append(perf_lost_samples(perf, data))
                sizes[name].append(data.stat().st_size)
    base_t = median([t for t, _ in times["unprofiled"]])
    base_c = median([c for _, c in times["unprofiled"]])
    print(f"workload: pingpong {args.rounds} (a context switch per message), {args.runs} alternating runs, "
          f"{'threads on any CPU' if args.spread else 'both threads on CPU 0'}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (1 min); perf: {perf or 'not installed'}")
    print("slowdown: median elapsed time / unprofiled; CPU added: the workload's CPU time (both threads,\n"
          "user + kernel, where the events' work at each switch is charged) over unprofiled, median\n")
    print(f"{'':<60}{'elapsed s':>10}{'slowdown':>10}{'CPU s':>8}{'added':>8}{'samples':>10}{'lost':>7}{'MB':>8}")
    for name in names:
        values = times[name]
        t, c = median([v[0] for v in values]), median([v[1] for v in values])
        cols = (f"{median(samples[name]):>10.0f}{max(lost[name]):>7}{median(sizes[name]) / 1e6:>8.1f}"
                if samples[name] else "")
        print(f"{name:<60}{t:>10.3f}{t / base_t:>9.2f}x{c:>8.3f}{c - base_c:>8.3f}{cols}")
    if theirs:
        def added(name: str) -> float:
            return median([c for _, c in times[name]]) - base_c

        ours_t = median([t for t, _ in times["ours --off-cpu -g"]]) / base_t
        perf_t = median([t for t, _ in times[PERF_GOAL]]) / base_t
        verdict = "ok" if ours_t <= perf_t else "SLOWER THAN PERF"
        print(f"\nslowdown ours / perf's ({PERF_GOAL}): {ours_t / perf_t:.2f} ({verdict}: the goal is at most 1)")
        for name in theirs:
            print(f"CPU added per switch-heavy run, ours --off-cpu -g / {name}: "
                  f"{added('ours --off-cpu -g') / added(name):.2f}")
    for name, values in report_times.items():
        print(f"{name} on the capture: median {median(values):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
