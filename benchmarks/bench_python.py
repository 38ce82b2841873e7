"""Python stacks: what CPython's perf support costs the program, what recording its stacks costs,
and the report against perf's (docs/python.md).

A fixed amount of Python work (``main -> mid -> leaf`` calls, ``--calls`` of them, with a
recursion) is timed:

* unprofiled: without perf support, with ``-X perf`` (the perf map, what ``--python=auto`` sets)
  and, on 3.13, with ``-X perf_jit`` (the jitdump): the slowdown perf support itself brings;
* recorded: ``profiler record -g`` (perf support and DWARF stacks of 32 KiB) against ``perf record
  -k 1 --call-graph dwarf,32768`` of ``-X perf`` (3.12) or ``-X perf_jit`` (3.13): the program's
  CPU time, the recorder's, the capture's size;
* reported: ``profiler report`` against ``perf report`` (after ``perf inject --jit`` for 3.13,
  which perf needs to name and unwind the trampolines; 3.12's stacks end at the first Python
  frame in perf).

Runs alternate; medians are printed. Usage: python benchmarks/bench_python.py [--runs N]
[--calls N] [--versions 3.12.1,3.13.0]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _perf import median, perf_binary  # noqa: E402

WORK = """
import sys
def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
        s ^= i
    return s
def mid(n):
    return leaf(n)
def recurse(d, n):
    return leaf(n) if d == 0 else recurse(d - 1, n)
def main(calls):
    for k in range(calls):
        mid(300)
        recurse(6, 300)
main(int(sys.argv[1]))
"""


def interpreter(version: str) -> Path | None:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    path = root / "versions" / version / "bin" / f"python{'.'.join(version.split('.')[:2])}"
    return path if path.exists() else None


def run_timed(argv: list[str], env: dict[str, str] | None = None, cwd: str = "/") -> tuple[float, float]:
    """(wall seconds, CPU seconds of it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=900)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr[-2000:]
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def target_cpu(capture_args: list[str], python: Path, script: Path, calls: int, env: dict[str, str]) -> float:
    """CPU seconds of the workload alone, read back from its own clock (printed to a file)."""
    out = script.with_suffix(".cpu")
    wrapper = script.with_name("timed" + ".py")  # written here, run once
    wrapper.write_text(f"import time, runpy, sys\nt = time.process_time()\nsys.argv = [{str(script)!r}, "
                       f"'{calls}']\nrunpy.run_path({str(script)!r}, run_name='__main__')\n"
                       f"open({str(out)!r}, 'w').write(str(time.process_time() - t))\n")
    run_timed([*capture_args, str(python), str(wrapper)], env=env)
    return float(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--versions", default="3.12.1,3.13.0")
    args = ap.parse_args()
    perf = perf_binary()
    me = [sys.executable, "-m", "profiler"]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        script = tmp / ("work" + ".py")  # WORK, written here
        script.write_text(WORK)
        for version in args.versions.split(","):
            python = interpreter(version)
            if python is None:
                print(f"{version}: not installed, skipped")
                continue
            modes = [("none", {}), ("-X perf", {"PYTHONPERFSUPPORT": "1"})]
            if version >= "3.13":
                modes.append(("-X perf_jit", {"PYTHON_PERF_JIT_SUPPORT": "1"}))
            cpu: dict[str, list[float]] = {m: [] for m, _ in modes}
            rec: dict[str, list[float]] = {k: [] for k in ("ours target", "ours recorder", "perf target",
                                                           "perf recorder", "ours report", "perf report",
                                                           "ours MB", "perf MB")}
            jit = version >= "3.13"
            for _ in range(args.runs):
                for name, extra in modes:
                    cpu[name].append(target_cpu([], python, script, args.calls, {**env, **extra}))
                ours_cap = tmp / "ours.prof"
                t = target_cpu([*me, "record", "-q", "-g", "-o", str(ours_cap), "--"], python, script, args.calls, env)
                _, total = run_timed([*me, "record", "-q", "-g", "-o", str(ours_cap), "--", str(python), str(script),
                                      str(args.calls)], env=env)
                rec["ours target"].append(t)
                rec["ours recorder"].append(max(total - t, 0.0))
                rec["ours MB"].append(ours_cap.stat().st_size / 1e6)
                wall, _ = run_timed([*me, "report", "-i", str(ours_cap), "--no-children"], env=env)
                rec["ours report"].append(wall)
                if perf is None:
                    continue
                data = tmp / "perf.data"
                penv = {**env, ("PYTHON_PERF_JIT_SUPPORT" if jit else "PYTHONPERFSUPPORT"): "1"}
                pargs = [perf, "record", "-q", "-k", "1", "--call-graph", "dwarf,32768", "-o", str(data), "--"]
                t = target_cpu(pargs, python, script, args.calls, penv)
                _, total = run_timed([*pargs, str(python), str(script), str(args.calls)], env=penv)
                rec["perf target"].append(t)
                rec["perf recorder"].append(max(total - t, 0.0))
                rec["perf MB"].append(data.stat().st_size / 1e6)
                start = time.perf_counter()
                report_input = data
                if jit:
                    before = set(Path("/tmp").glob("jitted-*.so"))
                    run_timed([perf, "inject", "--jit", "-i", str(data), "-o", str(tmp / "jit.data")])
                    report_input = tmp / "jit.data"
                run_timed([perf, "report", "-i", str(report_input), "--stdio", "--no-children"])
                rec["perf report"].append(time.perf_counter() - start)
                if jit:
                    for so in set(Path("/tmp").glob("jitted-*.so")) - before:
                        so.unlink(missing_ok=True)
            base = median(cpu["none"])
            print(f"\nCPython {version}, {args.calls} calls, {args.runs} runs (medians)")
            for name, values in cpu.items():
                print(f"  unprofiled {name:12s} CPU {median(values):6.3f} s  ({median(values) / base:.2f}x)")
            for key, values in rec.items():
                if values:
                    print(f"  {key:14s} {median(values):8.3f}")
            if rec["perf target"]:
                print(f"  slowdown of the program while recorded: ours {median(rec['ours target']) / base:.2f}x, "
                      f"perf {median(rec['perf target']) / base:.2f}x")
            shutil.rmtree(tmp / "unused", ignore_errors=True)


if __name__ == "__main__":
    main()
