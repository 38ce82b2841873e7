"""Bytes added by `profiler archive` next to what `perf archive` writes, same workload.

Records ``shares`` with ``profiler record -g`` and archives it (sampled symbols, then whole
tables), records it with ``perf record -g`` and runs ``perf archive`` (perf.data.tar.bz2),
each in a temporary directory. Prints the sizes and their ratio; asserts nothing.
    python benchmarks/bench_archive.py [FIXTURES_OUT]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from profiler.report.offline.archive import archive_capture  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-archive-") as tmp:
        work = Path(tmp)
        out = Path(sys.argv[1]) if len(sys.argv) > 1 else work / "fx"
        if len(sys.argv) <= 1:
            subprocess.run(["make", "-s", "-C", str(ROOT / "fixtures"), f"OUT={out}"], check=True,
                           stdout=subprocess.DEVNULL)
        shares = out / "workloads" / "shares"
        ours = work / "ours.prof"
        subprocess.run([sys.executable, "-m", "profiler", "record", "-q", "-g", "-o", str(ours), "--", str(shares)],
                       check=True, stdout=subprocess.DEVNULL)
        full = work / "full.prof"
        shutil.copyfile(ours, full)
        sampled = archive_capture(ours).bytes_added
        whole = archive_capture(full, all_symbols=True).bytes_added
        print(f"profiler archive (sampled symbols): +{sampled} bytes")
        print(f"profiler archive --all-symbols:     +{whole} bytes")
        if shutil.which("perf") is None:
            print("perf archive: perf not installed")
            return
        subprocess.run(["perf", "record", "-q", "-g", "-o", "perf.data", "--", str(shares)], cwd=work, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["perf", "archive", "perf.data"], cwd=work, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        perf_size = (work / "perf.data.tar.bz2").stat().st_size
        print(f"perf archive (perf.data.tar.bz2):   {perf_size} bytes")
        print(f"ratio perf / ours: sampled {perf_size / max(sampled, 1):.0f}x, "
              f"all symbols {perf_size / max(whole, 1):.1f}x")


if __name__ == "__main__":
    main()
