"""The container identity step's cost: recorder CPU, lost samples and capture size on a busy
containerised workload, this tree against a tree without the step (``--base DIR``: e.g. a
``git archive`` of the commit before it, run from another directory) and perf, alternating
runs; ``no-pack`` is this tree with ``--no-namespace-symbols`` (the identity step alone).

The workload runs in a mount namespace (``unshare -m``) with the fixture ``spin_container``
bind-mounted over ``spin_host`` at one path: NCPU ``spin`` processes, and a shell loop starting
a short process (``cat``) over and over, so that new mappings keep arriving. It is started
first; each recorder then records the whole system (``-a -F HZ --duration S``, the processes of
the machine synthesized at the start: every mapped file of every process is read once), so
the recorder's own CPU is what ``/usr/bin/time`` reports for it. The digest of the content
identity is timed alone on a few of the machine's large ELF files.

Usage: python benchmarks/bench_containers.py [--runs N] [--freq HZ] [--seconds S] [--base DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _perf import fixtures_dir, median, perf_binary, perf_lost_samples, perf_stats  # noqa: E402

from profiler.format.container.reader import CaptureReader  # noqa: E402
from profiler.format.fileident import content_identity  # noqa: E402


def start_workload(tmp: Path, ncpu: int) -> subprocess.Popen[bytes]:
    host = tmp / "app" / "spin"
    host.parent.mkdir()
    shutil.copy(fixtures_dir() / "containers" / "spin_host", host)
    image = tmp / "spin_container"
    shutil.copy(fixtures_dir() / "containers" / "spin_container", image)
    spins = " ".join(f"{host} 3600 &" for _ in range(ncpu))
    script = f"mount --bind {image} {host} && {spins} while :; do cat /dev/null; done"
    return subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                            start_new_session=True)


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    """CPU seconds (user + system) of the command and its waited children."""
    out = subprocess.run(["/usr/bin/time", "-f", "%U %S", *argv], capture_output=True, text=True, env=env,
                         timeout=600, cwd="/")  # not the repository: -m would import this tree first
    assert out.returncode == 0, out.stderr
    user, system = out.stderr.strip().splitlines()[-1].split()
    return float(user) + float(system)


def ours(path: Path) -> tuple[int, int, int, int]:
    """(samples, lost, packed namespace entries, capture bytes)."""
    with CaptureReader.open(path) as reader:
        stats = reader.trailer or {}
        lost = sum(int(n) for meta in reader.metadata("lost") for n in (meta.get("per_cpu") or {}).values())
        packed = sum(1 for m in reader.metadata("symbols") if m.get("source") == "namespace")
    return int(stats.get("samples", 0)), lost, packed, path.stat().st_size


def digest_costs() -> list[tuple[str, float, float]]:
    out = []
    for name in ("/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/perf", sys.executable,
                 "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"):
        path = os.path.realpath(name)
        if not os.path.exists(path):
            continue
        content_identity(path)  # warm the page cache
        t = time.perf_counter()
        content_identity(path)
        out.append((path, os.path.getsize(path) / 2**20, (time.perf_counter() - t) * 1000))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--freq", default="20000")
    parser.add_argument("--seconds", default="4")
    parser.add_argument("--base", help="a tree of the profiler without the identity step")
    args = parser.parse_args()
    perf = perf_binary()
    ncpu = os.cpu_count() or 1
    rec = ["-a", "-F", args.freq, "--duration", args.seconds, "-q"]
    results: dict[str, list[tuple[float, int, int, int, int]]] = {"this tree": [], "no-pack": [], "base": [],
                                                                  "perf": []}
    with tempfile.TemporaryDirectory(prefix="bench-containers-") as tmpdir:
        tmp = Path(tmpdir)
        work = start_workload(tmp, ncpu)
        try:
            time.sleep(0.5)
            for i in range(args.runs):
                out = tmp / f"ours{i}.prof"
                cpu = timed([sys.executable, "-m", "profiler", "record", "-o", str(out), *rec])
                results["this tree"].append((cpu, *ours(out)))
                out = tmp / f"nopack{i}.prof"  # the identity step without the packing at the end
                cpu = timed([sys.executable, "-m", "profiler", "record", "-o", str(out), *rec,
                             "--no-namespace-symbols"])
                results["no-pack"].append((cpu, *ours(out)))
                if args.base:
                    out = tmp / f"base{i}.prof"
                    env = dict(os.environ, PYTHONPATH=args.base)
                    cpu = timed([sys.executable, "-m", "profiler", "record", "-o", str(out), *rec], env)
                    results["base"].append((cpu, *ours(out)))
                if perf:
                    data = tmp / f"perf{i}.data"
                    cpu = timed([perf, "record", "-q", "-o", str(data), "-a", "-F", args.freq, "--",
                                 "sleep", args.seconds])
                    results["perf"].append((cpu, perf_stats(perf, data)["samples"], perf_lost_samples(perf, data),
                                            0, data.stat().st_size))
        finally:
            os.killpg(work.pid, signal.SIGKILL)
            work.wait()
    print(f"workload: {ncpu} spin in unshare -m + a cat loop; record -a -F {args.freq} for {args.seconds} s, "
          f"{args.runs} alternating runs; load average at the end {os.getloadavg()[0]:.2f}")
    print(f"{'recorder':<10}{'cpu s':>8}{'samples':>9}{'lost':>7}{'lost %':>8}{'packed':>7}{'bytes':>10}")
    med: dict[str, float] = {}
    for name, rows in results.items():
        for cpu, samples, lost, packed, size in rows:
            share = 100.0 * lost / max(samples + lost, 1)
            print(f"{name:<10}{cpu:>8.2f}{samples:>9}{lost:>7}{share:>8.2f}{packed:>7}{size:>10}")
        if rows:
            med[name] = median([r[0] for r in rows])
    if "base" in med and med["base"]:
        print(f"recorder CPU, median: this tree / base = {med['this tree'] / med['base']:.2f}, "
              f"--no-namespace-symbols / base = {med['no-pack'] / med['base']:.2f}")
    if "perf" in med and med["perf"]:
        print(f"recorder CPU, median: this tree / perf = {med['this tree'] / med['perf']:.2f}")
    print("\ncontent identity digest (warm page cache):")
    for path, mib, ms in digest_costs():
        print(f"  {path}: {mib:.1f} MiB, {ms:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
