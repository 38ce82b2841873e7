"""Lost samples with a tiny ring buffer at a high rate: ``profiler record`` against ``perf record``.

The workload is the ``shares`` fixture on every CPU at once (``shares SCALE NCPU``), recorded
with ``-m PAGES -F HZ`` (default ``-m 1 -F 100000``: one 4 KiB data page per CPU at the
kernel's highest default rate), alternating ours and perf's. For each run the share of samples
lost is lost / (written + lost): written samples from the capture (ours: the trailer; perf:
``perf report --stats``), lost ones from the kernel's PERF_RECORD_LOST records in the file
(ours: the ``lost`` metadata; perf: ``perf report -D``). Medians are compared; the goal is
ours <= perf's. Add ``-g`` with ``--callgraph``.

Usage: python benchmarks/bench_lost.py [--runs N] [--scale S] [--pages P] [--freq HZ] [--callgraph]
                                        [--no-sys-nice]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf import fixtures_dir, median, perf_binary, perf_lost_samples, perf_stats, run_tree  # noqa: E402

from profiler.format.container.reader import CaptureReader  # noqa: E402

PROFILER = [sys.executable, "-m", "profiler"]


def our_counts(path: Path) -> tuple[int, int]:
    """(samples written, samples lost) of one of our captures."""
    with CaptureReader.open(path) as reader:
        stats = reader.trailer or {}
        lost = sum(int(n) for meta in reader.metadata("lost") for n in (meta.get("per_cpu") or {}).values())
    return int(stats.get("samples", 0)), lost


def perf_counts(perf: str, path: Path) -> tuple[int, int]:
    return perf_stats(perf, path)["samples"], perf_lost_samples(perf, path)


def lost_share(written: int, lost: int) -> float:
    return 100.0 * lost / max(written + lost, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scale", default="1.0", help="shares work scale (1.0 is about 1.5 s)")
    parser.add_argument("--pages", default="1")
    parser.add_argument("--freq", default="100000")
    parser.add_argument("--callgraph", action="store_true")
    parser.add_argument("--no-sys-nice", action="store_true",
                        help="both tools without CAP_SYS_NICE (setpriv), as an unprivileged user runs them: "
                             "our drain loop then cannot raise its priority (docs/benchmarks.md)")
    args = parser.parse_args()
    prefix = ["setpriv", "--bounding-set=-sys_nice", "--"] if args.no_sys_nice else []
    perf = perf_binary()
    shares = fixtures_dir() / "workloads" / "shares"
    ncpu = str(os.cpu_count() or 1)
    opts = ["-m", args.pages, "-F", args.freq, *(["-g"] if args.callgraph else [])]
    workload = [str(shares), args.scale, ncpu]
    ours: list[tuple[int, int]] = []
    theirs: list[tuple[int, int]] = []
    with tempfile.TemporaryDirectory(prefix="bench-lost-") as tmpdir:
        tmp = Path(tmpdir)
        for i in range(args.runs):
            out = tmp / f"ours{i}.prof"
            run = run_tree([*prefix, *PROFILER, "record", "-q", "-o", str(out), *opts, "--", *workload])
            assert run.returncode == 0, run.stderr
            ours.append(our_counts(out))
            if perf:
                data = tmp / f"perf{i}.data"
                run = run_tree([*prefix, perf, "record", "-q", "-o", str(data), *opts, "--", *workload])
                assert run.returncode == 0, run.stderr
                theirs.append(perf_counts(perf, data))
    print(f"workload: shares {args.scale} on {ncpu} CPUs, record {' '.join(opts)}, {args.runs} alternating runs"
          f"{', without CAP_SYS_NICE' if args.no_sys_nice else ''}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (1 min)")
    print(f"perf: {perf or 'not installed'}\n")
    print(f"{'run':<6}{'ours written':>14}{'ours lost':>11}{'ours %':>9}"
          f"{'perf written':>15}{'perf lost':>11}{'perf %':>9}")
    for i, (w, lost) in enumerate(ours):
        pw, pl = theirs[i] if theirs else (0, 0)
        perf_cols = f"{pw:>15}{pl:>11}{lost_share(pw, pl):>9.1f}" if theirs else f"{'-':>15}{'-':>11}{'-':>9}"
        print(f"{i:<6}{w:>14}{lost:>11}{lost_share(w, lost):>9.1f}{perf_cols}")
    ours_pct = median([lost_share(w, lost) for w, lost in ours])
    line = f"\nmedian lost: ours {ours_pct:.1f} %"
    if theirs:
        perf_pct = median([lost_share(w, lost) for w, lost in theirs])
        verdict = "ok" if ours_pct <= perf_pct + 0.5 else "MORE THAN PERF"
        line += f", perf {perf_pct:.1f} %  (goal: ours <= perf's: {verdict})"
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
