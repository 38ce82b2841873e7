"""Export benchmark: time and peak memory of ``profiler export`` on a 1M-sample capture.

    make bench-export          (or: python benchmarks/bench_export.py [--samples N])

Writes a synthetic capture (bench_decode's generator: depth-12 callchains, 400 distinct
stacks, 5 threads) and the same records as a perf.data file, then runs, each in its own
process (peak RSS from wait4): ``profiler export -f pprof``, ``-f firefox`` and ``-f
folded`` on the capture, ``profiler export -f pprof`` on the perf.data file, and perf's
nearest equivalents on the perf.data file, ``perf data convert --to-json`` and ``perf
script``. Run at two sizes, so the growth of memory with samples shows.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_decode import write_capture  # noqa: E402

from profiler.format import records as R  # noqa: E402

from profiler.format.encode import encode
from profiler.format.container.layout import FRAME_RAW  # noqa: E402
from profiler.format.container.reader import CaptureReader  # noqa: E402


def write_perf_data(capture: Path, out: Path) -> None:
    """The capture's events and records as a file-mode perf.data (perf.data-file-format.txt),
    with the feature sections perf's tools expect (tests/support/perfdata_factory.py)."""
    from tests.support.perfdata_factory import PerfEvent, PerfFile, file_mode, pstring, standard_features

    reader = CaptureReader.open(capture)
    ev = reader.header["events"][0]
    event = PerfEvent(ev["attr"], list(ev["ids"]), ev["name"])
    layout = R.SampleLayout.from_attr(ev["attr"])
    comms = [encode(R.Comm(pid, tid, "bench", sample_id=R.SampleId(pid=pid, tid=tid, time=0, cpu=0, res=0)),
                      layout) for pid in range(1000, 1003) for tid in range(1000, 1005)]
    records = comms + [bytes(f.payload) for f in reader.iter_frames() if f.kind == FRAME_RAW]
    feats = standard_features([event])
    feats.update({8: pstring("synthetic CPU"), 9: pstring("GenuineIntel,6,1,1"), 10: struct.pack("<Q", 1 << 20)})
    out.write_bytes(file_mode(PerfFile([event], records, feats)))
    reader.close()


def run(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one command, measured by GNU time in its own process
    (a child forked from this big process would inherit its resident size in ru_maxrss)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    res = subprocess.run(["/usr/bin/time", "-f", "%e %M", *cmd], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}: {res.stderr.strip()[-300:]}")
    wall, kb = res.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kb) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    args = parser.parse_args()
    with open("/proc/loadavg") as fh:
        print(f"machine load: {fh.read().split()[:3]} (1, 5, 15 min)")
    prof = [sys.executable, "-m", "profiler"]
    perf = "/usr/bin/perf" if os.path.exists("/usr/bin/perf") else None
    with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
        for n in (args.samples // 4, args.samples):
            cap, pdata = Path(tmp) / f"c{n}.prof", Path(tmp) / f"p{n}.data"
            write_capture(cap, n)
            write_perf_data(cap, pdata)
            print(f"\n{n} samples: capture {cap.stat().st_size / 1e6:.0f} MB, "
                  f"perf.data {pdata.stat().st_size / 1e6:.0f} MB")
            rows = []
            for fmt in ("pprof", "firefox", "folded"):
                out = Path(tmp) / f"out.{fmt}"
                wall, rss = run([*prof, "export", "-i", str(cap), "-f", fmt, "-o", str(out)])
                rows.append((f"profiler export -f {fmt}", wall, rss, out.stat().st_size))
            out = Path(tmp) / "out-perfdata.pprof"
            wall, rss = run([*prof, "export", "-i", str(pdata), "-f", "pprof", "-o", str(out)])
            rows.append(("profiler export -f pprof (perf.data in)", wall, rss, out.stat().st_size))
            if perf:
                out = Path(tmp) / "perf.json"
                wall, rss = run([perf, "data", "convert", "--to-json", str(out), "-i", str(pdata)])
                rows.append(("perf data convert --to-json", wall, rss, out.stat().st_size))
                out.unlink()
                wall, rss = run([perf, "script", "-i", str(pdata)])
                rows.append(("perf script (to /dev/null)", wall, rss, 0))
            ref = next((w for name, w, _, _ in rows if name.startswith("perf data")), None)
            for name, wall, rss, size in rows:
                ratio = f"{wall / ref:5.2f}x perf convert" if ref else ""
                print(f"  {name:42s} {wall:7.2f} s  {rss:7.0f} MB peak RSS  {size / 1e6:9.3f} MB out  {ratio}")


if __name__ == "__main__":
    main()
