"""JIT symbol maps: ``/tmp/perf-<pid>.map``.

The convention (perf's ``jit-interface.txt``): one symbol per line,
``START SIZE symbolname``, START and SIZE in hex without ``0x`` (a ``0x`` prefix is
accepted too); the name is the rest of the line and may contain spaces. When a JIT
reuses an address, the entry written last wins. A zero-size entry covers up to the next
entry, at most one page. Malformed lines are skipped and counted.
"""

from __future__ import annotations

import os
from pathlib import Path

from profiler.errors import ReportError
from profiler.symbols.table import SymbolTable

ZERO_SIZE_REACH = 4096


def perf_map_path(pid: int, tmpdir: str | os.PathLike[str] = "/tmp") -> Path:
    """Where a process's JIT writes its map."""
    return Path(tmpdir) / f"perf-{pid}.map"


def parse_perf_map(text: str) -> tuple[SymbolTable, int]:
    """The map's symbols and the number of malformed lines skipped."""
    latest: dict[int, tuple[int, str]] = {}
    bad = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.strip().split(None, 2)
        try:
            start, size, name = int(parts[0], 16), int(parts[1], 16), parts[2]
        except (IndexError, ValueError):
            bad += 1
            continue
        if start < 0 or size < 0 or start >= 1 << 64:
            bad += 1
            continue
        latest[start] = (size, name)
    starts = list(latest)
    sizes = [latest[s][0] for s in starts]
    names = [latest[s][1] for s in starts]
    limits = [min(s + ZERO_SIZE_REACH, (1 << 64) - 1) for s in starts]
    table = SymbolTable.from_symbols(starts, sizes, names, limits)
    return table, bad


def load_perf_map(path: str | os.PathLike[str]) -> SymbolTable:
    """Read a perf map file; ReportError when it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise ReportError(f"cannot read JIT symbol map {path}: {exc.strerror or exc}") from exc
    return parse_perf_map(text)[0]
