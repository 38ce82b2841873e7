"""Benchmark: the debuginfod client's first and second report.

Starts a real ``debuginfod`` server (elfutils, Debian package) on a loopback port over the
unstripped builds of fixtures/debuginfod (a program and 20 shared libraries whose hot
functions are static), records stripped copies with ``profiler record -g`` and times:

* the first ``profiler report`` with an empty debuginfod cache: it fetches the 20 missing
  debug files (in parallel) — the server's own request counter says how many were asked;
* the second report: the cache answers, the counter must not move;
* for reference, elfutils' own client ``debuginfod-find debuginfo BUILD-ID`` for the same
  21 files, one after the other, into an empty cache (perf 6.1 on Debian is built without
  debuginfod support: ``perf version --build-options`` says ``debuginfod: [ OFF ]``).

Usage: python benchmarks/bench_debuginfod.py [--fixtures out/fixtures]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PY = sys.executable
NAMES = ["di_main"] + [f"libdi_{i:02d}.so" for i in range(20)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build_id(path: Path) -> str:
    out = subprocess.run(["readelf", "-n", str(path)], check=True, capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    assert m is not None, path
    return m.group(1)


def requests(url: str) -> int:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
    m = re.search(r'^http_requests_total\{type="debuginfo"\} (\d+)', text, re.M)
    return int(m.group(1)) if m else 0


def start_server(src: Path, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = open(work / "server.log", "wb")
    proc = subprocess.Popen(["debuginfod", "-F", str(src), "-p", str(port), "-d", str(work / "db.sqlite"),
                             "-t0", "-g0"], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "DEBUGINFOD_URLS": ""})
    url = f"http://127.0.0.1:{port}"
    probe = f"{url}/buildid/{build_id(src / NAMES[-1])}/debuginfo"
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"debuginfod exited: {(work / 'server.log').read_text()[-2000:]}")
        try:
            urllib.request.urlopen(probe, timeout=5).read()
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    sys.exit("debuginfod did not index the fixtures within 60 s")


def timed_report(capture: Path, env: dict[str, str], empty: Path) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    done = subprocess.run([PY, "-m", "profiler", "report", "-i", str(capture), "--no-children", "-g", "none",
                           "--format", "json", "--debug-dir", str(empty)],
                          capture_output=True, text=True, env=env, check=True)
    elapsed = time.perf_counter() - t0
    return elapsed, [str(r["symbol"]) for r in json.loads(done.stdout)["rows"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixtures", default="out/fixtures")
    args = ap.parse_args()
    for tool in ("debuginfod", "debuginfod-find"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (make debuginfod-deps)")
    src = Path(args.fixtures).resolve() / "debuginfod"
    work = Path(tempfile.mkdtemp(prefix="bench-debuginfod-"))
    try:
        app, empty = work / "app", work / "empty"
        app.mkdir()
        empty.mkdir()
        for name in NAMES:
            subprocess.run(["strip", "--strip-all", "-o", str(app / name), str(src / name)], check=True)
        capture = work / "cap.prof"
        subprocess.run([PY, "-m", "profiler", "record", "-q", "-g", "-o", str(capture), "--",
                        str(app / "di_main"), "8000000"], check=True, stdout=subprocess.DEVNULL)
        proc, url = start_server(src, work)
        try:
            env = {k: v for k, v in os.environ.items() if k != "PROFILER_CACHE_DIR"}
            env.update(DEBUGINFOD_URLS=url, XDG_CACHE_HOME=str(work / "xdg"))
            print(f"load: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            before = requests(url)
            first, rows = timed_report(capture, env, empty)
            asked = requests(url) - before
            second, rows2 = timed_report(capture, env, empty)
            again = requests(url) - before - asked
            statics = sum(1 for r in rows if r.startswith("di_spin_"))
            print(f"first report (empty cache):   {first:6.2f} s, {asked} debug files requested, "
                  f"{statics}/20 static functions named")
            print(f"second report (cache):        {second:6.2f} s, {again} requests, same rows: {rows2 == rows}")
            t0 = time.perf_counter()
            find_env = {**os.environ, "DEBUGINFOD_URLS": url, "DEBUGINFOD_CACHE_PATH": str(work / "find-cache")}
            for name in NAMES:
                subprocess.run(["debuginfod-find", "debuginfo", build_id(src / name)], env=find_env,
                               stdout=subprocess.DEVNULL, check=True)
            find = time.perf_counter() - t0
            print(f"debuginfod-find, {len(NAMES)} files one by one: {find:6.2f} s (elfutils' client, fetch only)")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
