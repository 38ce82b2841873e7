"""Source lines and inlined frames from DWARF: ``address -> inline chain of (function, file, line)``.

The DWARF work is done by ``symbolic`` (Sentry's native library, a manylinux wheel): its
SymCache is built once per debug file from ``.debug_info``/``.debug_line`` and answers a
look-up with the whole inline chain, innermost first — the inlined functions, each with the
file and line of the address inside it, then the function that contains them all with the
line of the call site. A SymCache is kept on disk (``<cache>/symcache/<build-id>.symc``,
written atomically), so a DSO's DWARF is parsed once per machine, not once per report.

SymCache addresses are relative to the object's image base: the lowest ``PT_LOAD``
``p_vaddr`` (0 for PIE executables and shared libraries, 0x400000 for a classic non-PIE
x86_64 executable). :class:`LineTable` takes ELF virtual addresses and converts.

For ``profiler archive`` a table can be reduced to the addresses a capture samples
(:meth:`LineTable.to_packed`) and rebuilt from that on any machine
(:meth:`LineTable.from_packed`), without the debug file.

A source line is shown as perf shows it: ``file.c:123`` (the file's base name).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from profiler.dataclass import dataclass
from profiler.errors import FormatError
from profiler.format.buildid import is_build_id
from profiler.symbols.elf import ElfError, ElfFile
from profiler.symbols.dso import DsoSymbols

PACKED_VERSION = 1


@dataclass(frozen=True)
class SourceFrame:
    """One level of an inline chain: the function, and where the address is inside it."""

    function: str
    file: str  # full path as DWARF names it ("" when unknown)
    line: int  # 0 when unknown

    @property
    def srcline(self) -> str | None:
        """``base-name:line`` as perf prints it, or None without a line."""
        if not self.file or self.line <= 0:
            return None
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"


Chain = tuple[SourceFrame, ...]


class _Cache(Protocol):
    def lookup(self, addr: int) -> Any: ...


class LineTable:
    """Inline chains by ELF virtual address, from a SymCache or from packed look-ups."""

    def __init__(self, cache: _Cache | None, base: int, packed: dict[int, Chain] | None = None) -> None:
        self._cache = cache
        self._base = base
        self._packed = packed
        self._memo: dict[int, Chain] = {}

    def lookup(self, vaddr: int) -> Chain:
        """The inline chain at ``vaddr``, innermost first; ``()`` when DWARF has no line."""
        found = self._memo.get(vaddr)
        if found is None:
            found = self._lookup(vaddr)
            self._memo[vaddr] = found
        return found

    def _lookup(self, vaddr: int) -> Chain:
        if self._packed is not None:
            return self._packed.get(vaddr, ())
        if self._cache is None or vaddr < self._base:
            return ()
        try:
            locations = self._cache.lookup(vaddr - self._base)
        except Exception:  # symbolic raises its own error types for bad addresses
            return ()
        chain = tuple(SourceFrame(str(loc.symbol), str(loc.full_path or ""), int(loc.line or 0))
                      for loc in locations)
        if not chain or chain[0].srcline is None:
            return ()  # a symbol-table hit without DWARF lines: nothing to add
        return chain

    # --- archive -----------------------------------------------------------------------------

    def to_packed(self, vaddrs: Iterable[int]) -> dict[str, Any]:
        """The chains of ``vaddrs`` as plain data for msgpack (addresses without a line left out)."""
        functions: dict[str, int] = {}
        files: dict[str, int] = {}
        addrs: list[int] = []
        start = [0]
        entries: list[int] = []
        for a in sorted(set(int(v) for v in vaddrs)):
            chain = self.lookup(a)
            if not chain:
                continue
            addrs.append(a)
            for fr in chain:
                entries.extend((functions.setdefault(fr.function, len(functions)),
                                files.setdefault(fr.file, len(files)), fr.line))
            start.append(len(entries) // 3)
        return {"version": PACKED_VERSION, "addrs": np.array(addrs, "<u8").tobytes(),
                "start": np.array(start, "<u4").tobytes(), "entries": np.array(entries, "<u4").tobytes(),
                "functions": list(functions), "files": list(files)}

    @classmethod
    def from_packed(cls, packed: Mapping[str, Any]) -> LineTable:
        """Inverse of :meth:`to_packed`; damaged data raises :class:`FormatError`."""
        try:
            if int(packed["version"]) != PACKED_VERSION:
                raise FormatError(f"packed line table version {packed['version']} is not supported")
            if not all(isinstance(packed[k], (bytes, bytearray)) for k in ("addrs", "start", "entries")):
                raise ValueError("a column is not bytes")  # bytes(10**9) would allocate it
            addrs = np.frombuffer(bytes(packed["addrs"]), "<u8").tolist()
            start = np.frombuffer(bytes(packed["start"]), "<u4").tolist()
            entries = np.frombuffer(bytes(packed["entries"]), "<u4").reshape(-1, 3).tolist()
            functions = [str(s) for s in packed["functions"]]
            files = [str(s) for s in packed["files"]]
            table: dict[int, Chain] = {}
            if len(start) != len(addrs) + 1 or (start and start[-1] != len(entries)):
                raise ValueError("counts disagree")
            for i, a in enumerate(addrs):
                rows = entries[start[i]:start[i + 1]]
                table[int(a)] = tuple(SourceFrame(functions[f], files[p], int(n)) for f, p, n in rows)
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
            raise FormatError(f"packed line table is damaged ({exc})") from exc
        return cls(None, 0, table)


def image_base(elf: ElfFile) -> int:
    """The lowest ``PT_LOAD`` virtual address, page-aligned: what SymCache addresses count from."""
    if not elf.load_segments:
        return 0
    return min(s.p_vaddr for s in elf.load_segments) & ~0xFFF


def has_dwarf_lines(elf: ElfFile) -> bool:
    sec = elf.section(".debug_line")
    return sec is not None and sec.has_file_data


_TABLES: dict[tuple[str, str | None], LineTable | None] = {}


def load_line_table(path: str | os.PathLike[str], build_id: str | None, cache_dir: Path | None) -> LineTable | None:
    """The line table of the ELF file at ``path`` (a debug file or an unstripped binary), or
    None when it has no DWARF line information or cannot be read. Cached in memory and,
    keyed by build-id, on disk under ``cache_dir``."""
    key = (str(path), build_id)
    if key not in _TABLES:
        _TABLES[key] = _load(Path(path), build_id, cache_dir)
    return _TABLES[key]


def line_table_of(syms: DsoSymbols, build_id: str | None, cache_dir: Path | None) -> LineTable | None:
    """The line table of a DSO's symbols: the one packed by the archive, else its DWARF file's.
    A damaged packed table raises :class:`FormatError`."""
    if syms.packed_lines is not None:
        return LineTable.from_packed(syms.packed_lines)
    if syms.dwarf_file is None:
        return None
    return load_line_table(syms.dwarf_file, syms.build_id or build_id, cache_dir)


def clear_line_tables() -> None:
    _TABLES.clear()


def _load(path: Path, build_id: str | None, cache_dir: Path | None) -> LineTable | None:
    try:
        elf = ElfFile(path)
    except ElfError:
        return None
    if not has_dwarf_lines(elf):
        return None
    try:
        symbolic: Any = importlib.import_module("symbolic")
    except ImportError:
        return None
    base = image_base(elf)
    stored = None if cache_dir is None or not is_build_id(build_id) else cache_dir / "symcache" / f"{build_id}.symc"
    cache = _read_stored(symbolic, stored)
    if cache is None:
        try:
            archive = symbolic.Archive.open(str(path))
            obj = next(iter(archive.iter_objects()))
            cache = obj.make_symcache()
        except Exception:  # symbolic's errors: a damaged or unsupported debug file
            return None
        _store(cache, stored)
    return LineTable(cache, base)


def _read_stored(symbolic: Any, stored: Path | None) -> _Cache | None:
    if stored is None or not stored.is_file():
        return None
    try:
        cache: _Cache = symbolic.SymCache.from_bytes(stored.read_bytes())
        return cache
    except Exception:  # an old or damaged cache file: rebuild it
        return None


def _store(cache: Any, stored: Path | None) -> None:
    if stored is None:
        return
    import tempfile  # only when a cache file is written: tempfile costs every report ~6 ms

    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".part-", dir=stored.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as out:
            cache.dump_into(out)
        os.replace(tmp, stored)
    except Exception:  # disk full, or symbolic refusing: the cache is only an optimisation
        Path(tmp).unlink(missing_ok=True)

