"""Benchmark ``profiler stat -- true`` against ``perf stat -- true`` measured in the same run.

Two figures, ours / perf's, medians over alternating runs:

* whole command wall time: what a user waits for ``profiler stat -- true`` (interpreter
  start-up, imports, event set-up, the workload, printing) -- with hyperfine when it is
  installed (Debian package ``hyperfine``), else a loop of alternating runs;
* measured time: the "seconds time elapsed" each tool prints for the workload itself, i.e.
  the cost a counting session adds between releasing the command and reaping it.

Python's bytecode cache is on (the Makefile runs this with PYTHONDONTWRITEBYTECODE unset).

Usage: python benchmarks/bench_stat.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf import median, perf_binary, run_tree  # noqa: E402

PROFILER = [str(Path(sys.executable).with_name("profiler"))]
ELAPSED_RE = re.compile(r"^\s*([\d.]+) seconds time elapsed", re.M)


def ours_cmd(*args: str) -> list[str]:
    return [*PROFILER, "stat", *args]


def elapsed(stderr: str) -> float:
    m = ELAPSED_RE.search(stderr)
    return float(m.group(1)) if m else float("nan")


def loop(perf: str | None, runs: int) -> dict[str, list[float]]:
    res: dict[str, list[float]] = {"ours_wall": [], "perf_wall": [], "ours_elapsed": [], "perf_elapsed": []}
    for _ in range(runs):
        ours = run_tree(ours_cmd("--", "true"))
        assert ours.returncode == 0, ours.stderr
        res["ours_wall"].append(ours.wall)
        res["ours_elapsed"].append(elapsed(ours.stderr))
        if perf:
            theirs = run_tree([perf, "stat", "--", "true"])
            res["perf_wall"].append(theirs.wall)
            res["perf_elapsed"].append(elapsed(theirs.stderr))
    return res


def hyperfine(perf: str, runs: int) -> tuple[float, float] | None:
    """Median wall seconds (ours, perf's) from hyperfine, or None when it is not installed."""
    exe = shutil.which("hyperfine")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "hf.json"
        subprocess.run([exe, "-N", "-w", "3", "-r", str(runs), "--export-json", str(out),
                        " ".join(ours_cmd("--", "true")), f"{perf} stat -- true"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        data = json.loads(out.read_text())["results"]
    return float(data[0]["median"]), float(data[1]["median"])


def ratio(a: float, b: float | None) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    perf = perf_binary()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; "
          f"bytecode cache {'off' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'on'}")
    run_tree(ours_cmd("--", "true"))  # warm the bytecode cache and the page cache
    res = loop(perf, args.runs)
    hf = hyperfine(perf, args.runs) if perf else None
    ours_wall, perf_wall = median(res["ours_wall"]), median(res["perf_wall"]) if perf else None
    rows = [
        ("stat -- true, whole command wall s (loop)", ours_wall, perf_wall),
        ("stat -- true, measured 'seconds time elapsed'", median(res["ours_elapsed"]),
         median(res["perf_elapsed"]) if perf else None),
    ]
    if hf is not None:
        rows.insert(1, ("stat -- true, whole command wall s (hyperfine)", hf[0], hf[1]))
    print(f"{'figure':<50} {'ours':>10} {'perf':>10} {'ours/perf':>10}")
    for name, ours, theirs in rows:
        shown = f"{theirs:10.4f}" if theirs is not None else f"{'n/a':>10}"
        print(f"{name:<50} {ours:10.4f} {shown} {ratio(ours, theirs):>10}")
    if hf is None:
        print("(hyperfine is not installed: 'apt-get install hyperfine' adds its figure)")


if __name__ == "__main__":
    main()
