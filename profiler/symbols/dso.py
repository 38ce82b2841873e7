"""One call from a DSO path to its symbols: :func:`load_dso_symbols`.

It opens the runtime ELF (program headers, build-id, PLT), checks the build-id recorded
in the capture, looks for a separate debug file (by build-id, then ``.gnu_debuglink``)
and builds the symbol table from the best source: the debug file's ``.symtab``, else the
runtime file's ``.symtab``, else its ``.dynsym``; synthesized ``@plt`` entries always come
from the runtime file. Failures are statuses, not exceptions, so the reporter can show
``[unknown]`` and warn once per DSO with :attr:`DsoSymbols.message`.

Results are cached in memory, keyed by (path, build-id, debug directories, file stamp).
"""

from __future__ import annotations

import enum
import errno
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.format.buildid import is_build_id
from profiler.format.fileident import content_identity, short
from profiler.format.recorded import UNVERIFIED
from profiler.symbols.debugfile import DEFAULT_DEBUG_DIRS, find_debug_file
from profiler.symbols.elf import ElfError, ElfFile
from profiler.symbols.elfheaders import ElfLayout
from profiler.symbols.minidebuginfo import read_gnu_debugdata
from profiler.symbols.table import IntArray, SymbolCandidates, SymbolTable, UIntArray
from profiler.symbols.unnamed import fde_bounds, gap_candidates


class SymbolStatus(enum.Enum):
    """Outcome of :func:`load_dso_symbols`."""

    OK = "ok"  # symbols loaded (table may still lack an address: that is [unknown])
    NO_SYMBOLS = "no symbols"  # a valid ELF without any function symbols
    BUILD_ID_MISMATCH = "build-id mismatch"  # the file on disk is not the one recorded
    MISSING = "missing"  # no such file
    UNREADABLE = "unreadable"  # permission denied or another I/O error
    NOT_ELF = "not ELF"  # not an ELF file, or truncated / damaged


@dataclass(frozen=True)
class DsoSymbols:
    """Symbols of one DSO and how they were found.

    ``table`` is empty unless ``status`` is OK; ``layout`` (load segments, build-id,
    e_type) is there whenever the runtime ELF could be read, even on a mismatch, so the
    caller can tell the user which build-id it found. ``source`` says where the symbols
    came from: ``"debug file"``, ``".symtab"``, ``".dynsym"`` or ``""``.
    """

    path: Path
    status: SymbolStatus
    message: str
    table: SymbolTable
    layout: ElfLayout | None = None
    debug_file: Path | None = None
    source: str = ""
    packed_lines: Mapping[str, Any] | None = None  # a line table packed by ``profiler archive``

    @property
    def ok(self) -> bool:
        return self.status is SymbolStatus.OK

    @property
    def dwarf_file(self) -> Path | None:
        """The file whose DWARF has this DSO's lines: its debug file, else the binary itself
        when it kept its ``.symtab`` (an unstripped build); None otherwise."""
        if self.debug_file is not None:
            return self.debug_file
        return self.path if self.source.startswith(".symtab") else None

    @property
    def build_id(self) -> str | None:
        """The build-id of the file on disk."""
        return None if self.layout is None else self.layout.build_id

    def lookup(self, vaddr: int) -> tuple[str, int] | None:
        """``(mangled name, offset)`` for an ELF virtual address, or None."""
        return self.table.lookup(vaddr)

    def lookup_many(self, vaddrs: npt.ArrayLike) -> tuple[IntArray, UIntArray]:
        """See :meth:`SymbolTable.lookup_many`."""
        return self.table.lookup_many(vaddrs)


_CacheKey = tuple[str, str | None, tuple[str, ...], bool, int, int, str | None]
_CACHE: dict[_CacheKey, DsoSymbols] = {}


def clear_symbol_cache() -> None:
    """Forget every loaded table (tests, long-running callers)."""
    _CACHE.clear()


def normalize_build_id(build_id: str | bytes | None) -> str | None:
    """Lowercase hex without the zero padding a 20-byte kernel field may add; None if empty."""
    if build_id is None:
        return None
    text = build_id.hex() if isinstance(build_id, bytes) else build_id.strip().lower()
    return text if is_build_id(text) else None  # never a path part that is not hex


def build_ids_match(found: str | None, expected: str | None) -> bool:
    """True when ``expected`` is None, or both name the same build-id.

    The kernel's ``MMAP2`` build-id field is 20 bytes; a shorter id is zero-padded, so a
    difference made only of trailing zeros is not a mismatch.
    """
    want = normalize_build_id(expected)
    if want is None:
        return True
    have = normalize_build_id(found)
    if have is None:
        return False
    short, long_ = sorted((have, want), key=len)
    return long_.startswith(short) and set(long_[len(short) :]) <= {"0"}


def load_dso_symbols(
    path: str | os.PathLike[str],
    expected_build_id: str | bytes | None = None,
    debug_dirs: Sequence[str | os.PathLike[str]] = DEFAULT_DEBUG_DIRS,
    *,
    search_debug_files: bool = True,
    expected_content: str | None = None,
) -> DsoSymbols:
    """Load the symbols of the DSO at ``path`` (cached); never raises for a bad file.

    ``expected_content`` (``Dso.content``: a file recorded without a build-id) must match the
    file's content identity (profiler/format/fileident.py), else the file is refused like a
    build-id mismatch; ``"unverified"`` refuses every file."""
    file = Path(path)
    want = normalize_build_id(expected_build_id)
    try:
        st = os.stat(file)
    except OSError as exc:
        return _failure(file, exc)
    dirs = tuple(str(d) for d in debug_dirs)
    key = (str(file), want, dirs, search_debug_files, st.st_mtime_ns, st.st_size, expected_content)
    cached = _CACHE.get(key)
    if cached is None:
        refused = None if want else _content_refusal(file, expected_content)
        cached = refused or _load(file, want, dirs, search_debug_files)
        _CACHE[key] = cached
    return cached


def _content_refusal(file: Path, expected: str | None) -> DsoSymbols | None:
    """The refusal of a file that is not the one recorded without a build-id, or None."""
    if expected is None:
        return None
    if expected == UNVERIFIED:
        message = (f"{file} is not the recorded file: when recording, the file at that path was another one "
                   f"and the mapped one could not be read, so nothing vouches for it")
        return DsoSymbols(file, SymbolStatus.BUILD_ID_MISMATCH, message, SymbolTable.empty())
    found = content_identity(file)
    size, _, digest = expected.partition(":")
    if found is not None and f"{found['size']}:{found['digest']}" == expected:
        return None
    have = "not an ELF file" if found is None else short(found)
    message = (f"{file} is not the recorded file: it was recorded without a build-id as {size} bytes, "
               f"digest {digest[:12]}, and is now {have} (rebuilt since the capture?)")
    return DsoSymbols(file, SymbolStatus.BUILD_ID_MISMATCH, message, SymbolTable.empty())


def _failure(file: Path, exc: OSError) -> DsoSymbols:
    if exc.errno == errno.ENOENT:
        return DsoSymbols(file, SymbolStatus.MISSING, f"{file} does not exist", SymbolTable.empty())
    reason = exc.strerror or str(exc)
    return DsoSymbols(file, SymbolStatus.UNREADABLE, f"cannot read {file}: {reason}", SymbolTable.empty())


def _load(file: Path, want: str | None, debug_dirs: Sequence[str], search: bool) -> DsoSymbols:
    try:
        runtime = ElfFile(file)
    except ElfError as exc:
        return DsoSymbols(file, SymbolStatus.NOT_ELF, str(exc), SymbolTable.empty())
    if not build_ids_match(runtime.build_id, want):
        found = runtime.build_id or "none"
        message = f"{file} has build-id {found}, not {want} as recorded: it changed since the capture"
        return DsoSymbols(file, SymbolStatus.BUILD_ID_MISMATCH, message, SymbolTable.empty(), runtime.layout)
    try:
        return _with_symbols(runtime, debug_dirs, search)
    except ElfError as exc:
        return DsoSymbols(file, SymbolStatus.NOT_ELF, str(exc), SymbolTable.empty(), runtime.layout)


def _with_symbols(runtime: ElfFile, debug_dirs: Sequence[str], search: bool) -> DsoSymbols:
    debug = _open_debug_file(runtime, debug_dirs) if search else None
    if debug is not None:
        cand = SymbolCandidates.concat([debug.symbol_candidates(include_plt=False), runtime.plt_candidates()])
        table = SymbolTable.build(cand).shifted(_prelink_delta(runtime, debug))
        source = "debug file"
    else:
        table, source = _runtime_symbols(runtime)
    if len(table) == 0:
        message = f"{runtime.path} has no function symbols"
        return DsoSymbols(runtime.path, SymbolStatus.NO_SYMBOLS, message, table, runtime.layout)
    debug_path = None if debug is None else debug.path
    return DsoSymbols(runtime.path, SymbolStatus.OK, "", table, runtime.layout, debug_path, source)


def _runtime_symbols(runtime: ElfFile) -> tuple[SymbolTable, str]:
    """The runtime file's own symbols: ``.symtab``, else ``.dynsym`` plus MiniDebugInfo;
    then unnamed functions from ``.eh_frame`` wherever those leave a gap."""
    cand = runtime.symbol_candidates()
    sources = [".symtab" if runtime.has_symtab else ".dynsym"]
    if not runtime.has_symtab:
        mini = _minidebuginfo(runtime)
        if mini is not None:
            cand = SymbolCandidates.concat([cand, mini.symbol_candidates(include_plt=False)])
            sources.append(".gnu_debugdata")
    table = SymbolTable.build(cand)
    try:
        fill = gap_candidates(table, fde_bounds(runtime), runtime.path.name)
    except ElfError:
        fill = SymbolCandidates.from_names([], [], [])
    if len(fill):
        table = SymbolTable.build(SymbolCandidates.concat([cand, fill]))
        sources.append(".eh_frame")
    return table, "+".join(sources)


def _minidebuginfo(runtime: ElfFile) -> ElfFile | None:
    """The MiniDebugInfo ELF when it is there, readable and has a ``.symtab``."""
    try:
        mini = read_gnu_debugdata(runtime)
    except ElfError:
        return None
    return mini if mini is not None and mini.has_symtab else None


def _open_debug_file(runtime: ElfFile, debug_dirs: Sequence[str]) -> ElfFile | None:
    """The debug file when it exists, reads cleanly and has a ``.symtab``."""
    path = find_debug_file(runtime, debug_dirs)
    if path is None:
        return None
    try:
        debug = ElfFile(path)
    except ElfError:
        return None
    return debug if debug.has_symtab else None


def _prelink_delta(runtime: ElfFile, debug: ElfFile) -> int:
    """How far prelink moved ``.text`` after the debug file was split off (usually 0)."""
    ours, theirs = runtime.section(".text"), debug.section(".text")
    if ours is None or theirs is None:
        return 0
    return ours.sh_addr - theirs.sh_addr
