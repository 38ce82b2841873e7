"""Benchmark ``profiler record`` against ``perf record`` measured in the same run.

The workload is the ``shares`` fixture running on every CPU at once (``shares SCALE NCPU``),
recorded with ``-F 4000 -g``; runs alternate ours / perf's / unprofiled, and medians are
compared:

* target slowdown: the CPU seconds the workload itself reports (CLOCK_PROCESS_CPUTIME_ID,
  which includes the sampling interrupts charged to it), ours / perf's;
* recorder CPU: CPU time of the whole tree (wait4) minus the workload's own, ours / perf's;
* fixed start+stop: wall time of ``record -- true``, ours / perf's;
* lost samples at 20 kHz on every CPU with default buffers (ours must be 0);
* bytes per sample: file size / samples, and the raw sample stream alone / samples.

Usage: python benchmarks/bench_record.py [--runs N] [--scale S]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf import fixtures_dir, median, perf_binary, perf_lost_samples, perf_stats, run_tree, shares_times  # noqa: E402

from profiler.format.container.reader import CaptureReader  # noqa: E402

PROFILER = [sys.executable, "-m", "profiler"]


def ours_record(out: Path, *args: str) -> list[str]:
    return [*PROFILER, "record", "-q", "-o", str(out), *args]


def perf_record(perf: str, out: Path, *args: str) -> list[str]:
    return [perf, "record", "-q", "-o", str(out), *args]


def our_stats(path: Path) -> dict[str, int]:
    with CaptureReader.open(path) as reader:
        stats = reader.trailer or {}
    return {"samples": int(stats.get("samples", 0)), "lost": int(stats.get("lost", 0)),
            "raw_bytes": int(stats.get("raw_bytes", 0))}


def measure_workload(perf: str | None, shares: Path, scale: str, ncpu: str, runs: int,
                     tmp: Path) -> dict[str, list[float]]:
    res: dict[str, list[float]] = {k: [] for k in (
        "base_cpu", "ours_target", "perf_target", "ours_rec", "perf_rec", "ours_bps", "perf_bps",
        "ours_raw_bps", "ours_samples", "perf_samples")}
    workload = [str(shares), scale, ncpu]
    for i in range(runs):
        base = run_tree(workload)
        res["base_cpu"].append(shares_times(base.stdout)[1])
        ours_out = tmp / f"ours{i}.prof"
        ours = run_tree(ours_record(ours_out, "-F", "4000", "-g", "--", *workload))
        assert ours.returncode == 0, ours.stderr
        target = shares_times(ours.stdout)[1]
        st = our_stats(ours_out)
        res["ours_target"].append(target)
        res["ours_rec"].append(ours.cpu - target)
        res["ours_samples"].append(st["samples"])
        res["ours_bps"].append(ours_out.stat().st_size / max(st["samples"], 1))
        res["ours_raw_bps"].append(st["raw_bytes"] / max(st["samples"], 1))
        if perf:
            perf_out = tmp / f"perf{i}.data"
            theirs = run_tree(perf_record(perf, perf_out, "-F", "4000", "-g", "--", *workload))
            assert theirs.returncode == 0, theirs.stderr
            target = shares_times(theirs.stdout)[1]
            pst = perf_stats(perf, perf_out)
            res["perf_target"].append(target)
            res["perf_rec"].append(theirs.cpu - target)
            res["perf_samples"].append(pst["samples"])
            res["perf_bps"].append(perf_out.stat().st_size / max(pst["samples"], 1))
    return res


def measure_start_stop(perf: str | None, runs: int, tmp: Path) -> tuple[list[float], list[float]]:
    ours, theirs = [], []
    for i in range(runs):
        ours.append(run_tree(ours_record(tmp / f"true{i}.prof", "--", "true")).wall)
        if perf:
            theirs.append(run_tree(perf_record(perf, tmp / f"true{i}.data", "--", "true")).wall)
    return ours, theirs


def measure_lost(perf: str | None, shares: Path, ncpu: str, tmp: Path) -> tuple[int, int | None]:
    workload = [str(shares), "0.5", ncpu]
    run_tree(ours_record(tmp / "lost.prof", "-F", "20000", "-g", "--", *workload))
    ours = our_stats(tmp / "lost.prof")["lost"]
    theirs = None
    if perf:
        run_tree(perf_record(perf, tmp / "lost.data", "-F", "20000", "-g", "--", *workload))
        theirs = perf_lost_samples(perf, tmp / "lost.data")
    return ours, theirs


def ratio(a: float, b: float | None) -> str:
    return "-" if not b else f"{a / b:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scale", default="0.6", help="shares work scale (1.0 is about 1.5 s)")
    args = parser.parse_args()
    perf = perf_binary()
    shares = fixtures_dir() / "workloads" / "shares"
    ncpu = str(os.cpu_count() or 1)
    with tempfile.TemporaryDirectory(prefix="bench-record-") as tmpdir:
        tmp = Path(tmpdir)
        w = measure_workload(perf, shares, args.scale, ncpu, args.runs, tmp)
        ss_ours, ss_perf = measure_start_stop(perf, args.runs, tmp)
        lost_ours, lost_perf = measure_lost(perf, shares, ncpu, tmp)

    m = {k: median(v) for k, v in w.items()}
    print(f"workload: shares {args.scale} on {ncpu} CPUs, -F 4000 -g, {args.runs} alternating runs, medians")
    print(f"perf: {perf or 'not installed (ratio columns skipped)'}\n")
    rows = [
        ("target CPU s (unprofiled %.3f)" % m["base_cpu"], m["ours_target"], m["perf_target"] if perf else None,
         "<= 1.00"),
        ("recorder CPU s", m["ours_rec"], m["perf_rec"] if perf else None, "<= 0.50"),
        ("record -- true, wall s", median(ss_ours), median(ss_perf) if perf else None, "<= 0.30"),
        ("lost samples @20 kHz, default -m", float(lost_ours), float(lost_perf) if lost_perf is not None else None,
         "ours 0"),
        ("bytes/sample, whole file", m["ours_bps"], m["perf_bps"] if perf else None, "<= 1.00"),
        ("bytes/sample, sample stream", m["ours_raw_bps"], m["perf_bps"] if perf else None, "<= 1.00"),
        ("samples", m["ours_samples"], m["perf_samples"] if perf else None, ""),
    ]
    print(f"{'measure':<38}{'ours':>12}{'perf':>12}{'ratio':>8}  goal")
    for name, ours, theirs, goal in rows:
        theirs_s = "-" if theirs is None else f"{theirs:.3f}"
        print(f"{name:<38}{ours:>12.3f}{theirs_s:>12}{ratio(ours, theirs):>8}  {goal}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
