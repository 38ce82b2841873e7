"""Benchmark: `profiler diff` against `perf diff` on two recordings of the same workload.

Records fixtures/workloads/shares twice with `profiler record -g` and twice with `perf record -g`
(about 1M samples each at the default scale), then times `perf diff` of perf's pair against
`profiler diff` of ours, and against `profiler diff` of perf's own pair (the same files), best of
N runs:

    diff of two ~1M-sample captures    target <= 1.0 x perf diff (issue 26)

Usage: python benchmarks/bench_diff.py [--scale 11] [--freq 20000] [--runs 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import PY, perf_sample_count, record, sample_count, timed  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="11")
    ap.add_argument("--freq", default="20000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", help="directory to keep (and reuse) the captures in")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        sys.exit("perf is not installed: nothing to compare against")
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-diff-"))
    pairs = []
    for side in ("base", "new"):
        d = workdir / side
        d.mkdir(parents=True, exist_ok=True)
        pairs.append(record(d, args.scale, args.freq))
    (ours_a, perf_a), (ours_b, perf_b) = pairs
    print(f"samples: profiler {sample_count(ours_a)} / {sample_count(ours_b)}, "
          f"perf {perf_sample_count(perf_a)} / {perf_sample_count(perf_b)}")
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as users run it: bytecode cache on
    env.setdefault("PROFILER_CACHE_DIR", str(workdir / "cache"))
    subprocess.run([PY, "-m", "profiler", "diff", str(ours_a), str(ours_b)], stdout=subprocess.DEVNULL, env=env)
    p_wall, p_rss, _ = timed(["perf", "diff", str(perf_a), str(perf_b)], args.runs)
    o_wall, o_rss, _ = timed([PY, "-m", "profiler", "diff", str(ours_a), str(ours_b)], args.runs, env)
    x_wall, x_rss, _ = timed([PY, "-m", "profiler", "diff", str(perf_a), str(perf_b)], args.runs, env)
    print(f"\n{'case':<34} {'seconds':>8} {'ratio':>6} {'MB':>6}")
    print(f"{'perf diff (perf.data pair)':<34} {p_wall:8.2f} {1.0:6.2f} {p_rss / 1024:6.0f}")
    print(f"{'profiler diff (our captures)':<34} {o_wall:8.2f} {o_wall / p_wall:6.2f} {o_rss / 1024:6.0f}")
    print(f"{'profiler diff (the perf.data pair)':<34} {x_wall:8.2f} {x_wall / p_wall:6.2f} {x_rss / 1024:6.0f}")
    print(f"\n(ratio = / perf diff's wall time, best of {args.runs}; load average {os.getloadavg()[0]:.1f})")
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
