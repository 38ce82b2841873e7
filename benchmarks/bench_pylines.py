"""``record --python-lines``: what the Python reader costs the recorder (docs/python.md).

fixtures/python/lines.py (main → mid → leaf, one thread) under pyenv's CPython 3.12 with ``-X
perf``, recorded with ``-g`` at the default rate, alternately without and with
``--python-lines``; per run the recorder's own CPU time (the recorder and its child's CPU,
less what the child measured of itself) and, with the reader, its read passes, threads read
and the CPU it spent reading (from the capture's ``python_lines`` statistics). Medians.

Usage: python benchmarks/bench_pylines.py [--runs N] [--seconds S] [--python PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "python" / "lines.py"
PYTHON = "/root/.pyenv/versions/3.12.1/bin/python3"


def children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def one_run(tmp: Path, python: str, seconds: float, lines: bool) -> dict[str, float]:
    out, truth = tmp / "b.prof", tmp / "truth.json"
    before = children_cpu()
    subprocess.run([sys.executable, "-m", "profiler", "record", "-q", "-g", *(["--python-lines"] if lines else []),
                    "-o", str(out), "--", python, "-X", "perf", str(FIXTURE), str(seconds), str(truth)],
                   check=True, cwd=ROOT)
    total = children_cpu() - before
    target = json.loads(truth.read_text())["process_cpu"]
    res = {"recorder_cpu": total - target}
    if lines:
        res.update(reader_stats(out))
    return res


def reader_stats(path: Path) -> dict[str, float]:
    from profiler.report.capture import Capture, metadata_of

    payloads = metadata_of(Capture(str(path)).reader, ("python_lines",))["python_lines"]
    stats = payloads[-1]["stats"]
    threads = max(stats["threads_read"], 1)
    return {"passes": stats["passes"], "threads_read": stats["threads_read"], "read_cpu": stats["cpu_s"],
            "us_per_thread": 1e6 * stats["cpu_s"] / threads}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--python", default=PYTHON)
    args = ap.parse_args()
    if not Path(args.python).exists():
        print(f"no {args.python}: nothing to measure")
        return 0
    without: list[dict[str, float]] = []
    with_: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            without.append(one_run(Path(tmp), args.python, args.seconds, False))
            with_.append(one_run(Path(tmp), args.python, args.seconds, True))

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    base, read = med(without, "recorder_cpu"), med(with_, "recorder_cpu")
    print(f"workload: {FIXTURE.name} {args.seconds} s under {args.python} -X perf, record -g (default rate), "
          f"{args.runs} alternating runs, medians; load {os.getloadavg()[0]:.2f}")
    print(f"recorder CPU without the reader   {base:.3f} s")
    print(f"recorder CPU with --python-lines  {read:.3f} s   ratio {read / base:.2f} (goal <= 1.5)")
    print(f"read passes {med(with_, 'passes'):.0f}, threads read {med(with_, 'threads_read'):.0f}, "
          f"reading CPU {med(with_, 'read_cpu'):.3f} s, {med(with_, 'us_per_thread'):.0f} us per thread read")
    return 0


if __name__ == "__main__":
    sys.exit(main())
