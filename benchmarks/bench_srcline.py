"""Benchmark: ``profiler report --sort srcline`` against ``perf report --sort srcline``.

Uses bench_report's workload and captures (fixtures/workloads/shares, two processes, about
1M samples each at the default scale, recorded once with ``profiler record -g`` and once with
``perf record -g``) and times the flat source-line report of both tools, best of N runs:

    profiler report --sort srcline --no-children -g none    target <= 0.1 x perf's time
    perf report --stdio --sort srcline --no-children -g none

Ours is timed warm (the SymCache of each DSO's DWARF is built on the first run and kept in
the cache directory; the first, cold run is printed too). perf runs addr2line per address.
Usage: python benchmarks/bench_srcline.py [--scale 11] [--freq 20000] [--runs 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report import PY, perf_sample_count, record, sample_count, timed  # noqa: E402


def top_lines(cmd: list[str]) -> list[str]:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]
    return [f"{r[0]} {r[-1]}" for r in rows[:5]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="11")
    ap.add_argument("--freq", default="20000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", help="directory to keep (and reuse) the captures in")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        sys.exit("perf is not installed: nothing to compare against")
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-srcline-"))
    workdir.mkdir(parents=True, exist_ok=True)
    ours, theirs = record(workdir, args.scale, args.freq)
    n_ours, n_theirs = sample_count(ours), perf_sample_count(theirs)
    print(f"load: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; samples: profiler {n_ours}, perf {n_theirs}")
    cache = workdir / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    os.environ["PROFILER_CACHE_DIR"] = str(cache)
    our_cmd = [PY, "-m", "profiler", "report", "-i", str(ours), "--sort", "srcline", "--no-children", "-g", "none"]
    perf_cmd = ["perf", "report", "-i", str(theirs), "--stdio", "--sort", "srcline", "--no-children", "-g", "none"]
    t0 = time.perf_counter()
    subprocess.run(our_cmd, stdout=subprocess.DEVNULL, check=True)
    cold = time.perf_counter() - t0
    o_wall, o_rss = timed(our_cmd, args.runs)
    p_wall, p_rss = timed(perf_cmd, args.runs)
    o_norm = o_wall * (n_theirs / n_ours) if n_ours and n_theirs else o_wall
    print(f"perf report --sort srcline:     {p_wall:7.2f} s  {p_rss / 1024:6.0f} MB")
    print(f"profiler report --sort srcline: {o_wall:7.2f} s  {o_rss / 1024:6.0f} MB "
          f"(first run, cold cache: {cold:.2f} s)")
    print(f"ratio ours/perf (normalised to perf's sample count): {o_norm / p_wall:.3f}  (goal <= 0.1)")
    print("top rows, perf:    ", "; ".join(top_lines(perf_cmd + ["-q"])))
    print("top rows, profiler:", "; ".join(top_lines(our_cmd)))
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
