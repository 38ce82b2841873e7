"""Functions without a symbol: names for the code of stripped binaries.

A stripped executable or library keeps ``.dynsym`` (exported functions only) and its
``.eh_frame`` (unwind tables, one FDE per function). Where no symbol covers an address but
an FDE does, the function is the FDE's range, and it is named after its DSO and start
address: ``liblzma.so.5.4.1+0x15b40`` — stable across captures of the same binary, one row
per function instead of one per sampled address. Such names are *unnamed* functions:
:func:`is_unnamed` recognises them (JSON and script output say so).

:func:`gap_candidates` adds FDE ranges only where the real symbols leave a gap, each cut
at the next real symbol, so a real name always wins.
"""

from __future__ import annotations

import re

import numpy as np

from profiler.symbols.ehframe import EhFrameError, FdeBounds, read_fde_bounds
from profiler.symbols.elf import ElfError, ElfFile
from profiler.symbols.table import RANK_OTHER, U64, U64_MAX, SymbolCandidates, SymbolTable

_UNNAMED = re.compile(r"\+0x[0-9a-f]+")


def unnamed_name(dso_name: str, start: int) -> str:
    """The name of the function at ELF virtual address ``start`` of ``dso_name``."""
    return f"{dso_name}+{start:#x}"


def is_unnamed(symbol: str | None, dso_name: str) -> bool:
    """True when ``symbol`` is a name made by :func:`unnamed_name` for ``dso_name``."""
    return (symbol is not None and symbol.startswith(dso_name)
            and _UNNAMED.fullmatch(symbol, len(dso_name)) is not None)


def fde_bounds(elf: ElfFile) -> FdeBounds:
    """Every FDE's function bounds in ``elf`` (empty when it has no ``.eh_frame``)."""
    eh = elf.section(".eh_frame")
    if eh is None or not eh.has_file_data:
        return FdeBounds.empty()
    hdr = elf.section(".eh_frame_hdr")
    hdr_data = elf.read_section(hdr) if hdr is not None and hdr.has_file_data else None
    try:
        return read_fde_bounds(elf.read_section(eh), eh.sh_addr, hdr_data, 0 if hdr is None else hdr.sh_addr,
                               address_size=elf.elfclass // 8, little_endian=elf.little_endian)
    except EhFrameError as exc:
        raise ElfError(f"{elf.path}: {exc}") from exc


def gap_candidates(real: SymbolTable, bounds: FdeBounds, dso_name: str) -> SymbolCandidates:
    """Unnamed functions for the FDEs whose start no real symbol covers, each ending at
    the FDE's end or the next real symbol's start, whichever comes first."""
    starts = bounds.starts
    idx, _ = real.lookup_many(starts)
    free = (idx < 0) & (starts > 0)
    starts, sizes = starts[free], bounds.sizes[free]
    if starts.shape[0] and len(real):
        nxt = np.searchsorted(real.starts, starts, side="right")
        limit = np.where(nxt < len(real), real.starts[np.minimum(nxt, len(real) - 1)], U64_MAX)
        with np.errstate(over="ignore"):
            sizes = np.minimum(sizes, limit - starts)
    names = [unnamed_name(dso_name, s) for s in starts.tolist()]
    cand = SymbolCandidates.from_names(starts, sizes, names)
    return SymbolCandidates(cand.starts, cand.sizes.astype(U64), cand.name_off, cand.strtab,
                            np.full(len(names), RANK_OTHER, np.uint8), cand.limit)
