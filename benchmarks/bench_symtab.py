"""Symbol table loading and lookup speed on the largest ELF symbol table found here.

    python benchmarks/bench_symtab.py [ELF] [--pyelftools-limit N]

Without ELF, scans the usual library directories for the file with the largest
``.symtab``/``.dynsym``. Prints: headers + table load time (best of 5, target <= 0.1 s),
vectorised lookup throughput, and pyelftools' own per-symbol iteration for context.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from profiler.symbols.elf import ElfError, ElfFile
from profiler.symbols.table import SymbolTable

SCAN_DIRS = ("/usr/lib", "/usr/local/lib", "/usr/libexec", "/opt", "/root/.rustup", sys.prefix)
MIN_SIZE = 20 << 20


def symbol_bytes(path: Path) -> int:
    """Size of the symbol table section that ElfFile would read."""
    try:
        elf = ElfFile(path)
    except ElfError:
        return 0
    sec = elf.section_by_type("SHT_SYMTAB") or elf.section_by_type("SHT_DYNSYM")
    return 0 if sec is None else sec.sh_size


def largest_elf() -> Path | None:
    best: tuple[int, Path] | None = None
    for root in SCAN_DIRS:
        for dirpath, _, files in os.walk(root):
            for name in files:
                path = Path(dirpath) / name
                try:
                    if path.is_symlink() or path.stat().st_size < MIN_SIZE:
                        continue
                    with open(path, "rb") as f:
                        if f.read(4) != b"\x7fELF":
                            continue
                except OSError:
                    continue
                size = symbol_bytes(path)
                if best is None or size > best[0]:
                    best = (size, path)
    return None if best is None else best[1]


def time_load(path: Path, repeat: int = 5) -> tuple[float, SymbolTable]:
    best = float("inf")
    table = SymbolTable.empty()
    for _ in range(repeat):
        start = time.perf_counter()
        table = ElfFile(path).symbol_table()
        best = min(best, time.perf_counter() - start)
    return best, table


def time_lookup(table: SymbolTable, count: int = 1_000_000) -> float:
    rng = np.random.default_rng(1)
    lo, hi = int(table.starts[0]), int(table.ends.max())
    addrs = rng.integers(lo, hi, size=count, dtype=np.uint64)
    start = time.perf_counter()
    table.lookup_many(addrs)
    return time.perf_counter() - start


def time_pyelftools(path: Path, limit: int | None) -> tuple[float, int]:
    start = time.perf_counter()
    seen = 0
    with open(path, "rb") as f:
        elf = ELFFile(f)
        sec = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
        if not isinstance(sec, SymbolTableSection):
            return 0.0, 0
        for sym in sec.iter_symbols():
            _ = (sym.name, sym["st_value"], sym["st_size"], sym["st_info"]["type"])
            seen += 1
            if limit is not None and seen >= limit:
                break
    return time.perf_counter() - start, seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("elf", nargs="?", type=Path)
    parser.add_argument("--pyelftools-limit", type=int, default=None, help="iterate only N symbols (extrapolated)")
    args = parser.parse_args()
    path = args.elf or largest_elf()
    if path is None:
        print("no ELF file larger than 20 MiB found; pass one as an argument")
        return 1
    elf = ElfFile(path)
    sec = elf.section_by_type("SHT_SYMTAB") or elf.section_by_type("SHT_DYNSYM")
    entries = 0 if sec is None else sec.sh_size // max(sec.sh_entsize, 1)
    print(f"file: {path} ({path.stat().st_size / 2**20:.0f} MiB, {entries} symbol entries)")
    load, table = time_load(path)
    verdict = "within" if load <= 0.1 else "OVER"
    print(f"profiler: headers + function table ({len(table)} symbols): {load:.3f} s ({verdict} the 0.1 s target)")
    lookup = time_lookup(table)
    print(f"profiler: lookup_many of 1,000,000 addresses: {lookup:.3f} s ({1e6 / lookup / 1e6:.1f} M lookups/s)")
    spent, seen = time_pyelftools(path, args.pyelftools_limit)
    full = spent * entries / max(seen, 1)
    note = "" if seen >= entries else f" (extrapolated from {seen})"
    print(f"pyelftools: iterate {entries} symbols: {full:.2f} s{note}")
    print(f"ratio: pyelftools / profiler = {full / load:.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
