"""Benchmark: start-up of the everyday commands (issue #28, item 5).

For each command line, prints

* the import time of the ``profiler`` package's own modules, of numpy, of click and of the rest
  (``python -X importtime``: sums of the self times, each module's smallest over the runs; the
  flag itself inflates them a little), and the number of modules each loads;
* the wall time of the whole command, best of N runs (``OPENBLAS_NUM_THREADS=1``, bytecode
  cache on, output discarded).

The captures: ``--capture`` for the report commands (default: fixtures/workloads/shares
recorded now at 20 kHz, about 60K samples; ``make bench-report``'s 1M-sample capture is the
lead's reference) and ``--small`` for the commands whose time grows with every sample (script,
flamegraph; default: recorded now, about 1K samples). Recording needs perf events; without
them pass both captures.

Usage: python benchmarks/bench_startup.py [--capture CAP] [--small CAP] [--runs 5]
       [--top 15] (the top modules by self time of the flat report)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf import fixtures_dir  # noqa: E402

# (label, arguments after `python -m profiler`; {big}/{small}/{out} filled in)
COMMANDS: list[tuple[str, list[str]]] = [
    ("report flat", ["report", "-i", "{big}", "--no-children", "-g", "none"]),
    ("report default", ["report", "-i", "{big}"]),
    ("report --sort dso", ["report", "-i", "{big}", "--no-children", "--sort", "dso"]),
    ("report -g caller", ["report", "-i", "{small}", "-g", "caller", "--percent-limit", "5"]),
    ("script", ["script", "-i", "{small}"]),
    ("flamegraph", ["flamegraph", "-i", "{small}", "-o", "{out}/flame.html"]),
    ("record -- true", ["record", "-q", "-o", "{out}/true.prof", "--", "true"]),
    ("--help", ["--help"]),
]


def environment() -> dict[str, str]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def import_times(argv: list[str], runs: int) -> tuple[dict[str, float], int, list[tuple[float, str]]]:
    """Self import time in ms per group (profiler, numpy, click, other), module count, and
    every module's (self ms, name): each module's smallest self time over ``runs`` runs, so
    that a garbage collection or another process's burst in one run does not count."""
    best: dict[str, float] = {}
    for _ in range(runs):
        res = subprocess.run([PY, "-X", "importtime", "-m", "profiler", *argv], env=environment(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if res.returncode != 0:
            sys.exit(f"failed: {' '.join(argv)}\n{res.stderr[-2000:]}")
        for line in res.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            self_us, _, name = line.split(":", 1)[1].split("|")
            name = name.strip()
            best[name] = min(best.get(name, float("inf")), int(self_us) / 1000)
    groups: Counter[str] = Counter()
    for name, ms in best.items():
        top = name.split(".")[0]
        groups[top if top in ("profiler", "numpy", "click") else "other"] += ms
    return dict(groups), len(best), [(ms, name) for name, ms in best.items()]


def wall(argv: list[str], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([PY, "-m", "profiler", *argv], env=environment(), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
    return best


def record(out: Path, scale: str, freq: str) -> Path:
    path = out / f"shares-{scale}.prof"
    shares = str(fixtures_dir() / "workloads" / "shares")
    subprocess.run([PY, "-m", "profiler", "record", "-q", "-g", "-F", freq, "-o", str(path), "--", shares, scale],
                   env=environment(), check=True, stdout=subprocess.DEVNULL)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capture", type=Path, help="the large capture for the report commands")
    ap.add_argument("--small", type=Path, help="a small capture for script, flamegraph and -g caller")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        out = Path(tmp)
        small = args.small or record(out, "0.2", "4000")
        big = args.capture or record(out, "2", "20000")
        print(f"load average: {os.getloadavg()[0]:.2f} (2 cores here: above ~0.5 the numbers are noisy)")
        print(f"{'command':28} {'ours ms':>8} {'numpy':>6} {'click':>6} {'other':>6} {'modules':>8} {'wall s':>7}")
        flat_modules: list[tuple[float, str]] = []
        for label, template in COMMANDS:
            argv = [a.format(big=big, small=small, out=out) for a in template]
            groups, count, modules = import_times(argv, args.runs)
            if label == "report flat":
                flat_modules = modules
            best = wall(argv, args.runs)
            print(f"{label:28} {groups.get('profiler', 0):8.1f} {groups.get('numpy', 0):6.1f} "
                  f"{groups.get('click', 0):6.1f} {groups.get('other', 0):6.1f} {count:8d} {best:7.3f}", flush=True)
        print(f"\nflat report, the {args.top} profiler modules with the largest self import time (ms):")
        ours = sorted((m for m in flat_modules if m[1].startswith("profiler")), reverse=True)
        for ms, name in ours[: args.top]:
            print(f"  {ms:6.2f}  {name}")


if __name__ == "__main__":
    main()
