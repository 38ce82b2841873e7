"""Where a DSO's unwind rule table comes from, in order:

1. the capture itself (``unwind`` metadata written by ``profiler archive``), by build-id;
2. the on-disk cache, ``<cache>/cfi/<build-id>-<arch>-v<N>.rules`` (``<cache>``:
   ``$PROFILER_CACHE_DIR``, else ``$XDG_CACHE_HOME/profiler``, else ``~/.cache/profiler``),
   written the first time a DSO is compiled;
3. the binary: under ``--symfs``, else at its recorded path — only when its build-id is the
   recorded one (a different binary's CFI would unwind wrongly) — with its separate debug file
   (``/usr/lib/debug/.build-id/..``) for ``.debug_frame`` when it has no ``.eh_frame``;
   the ``[vdso]`` from the image the recorder saved.

A table that cannot be found or read is None: unwinding stops in that DSO ("no CFI").
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from profiler.cache import cache_dir as report_cache_dir
from profiler.format.fileident import content_identity
from profiler.format.localfile import contained
from profiler.symbols.debugfile import DEFAULT_DEBUG_DIRS, build_id_path
from profiler.symbols.elf import ElfError, ElfFile
from profiler.unwind.arch import ArchColumns
from profiler.unwind.table import TABLE_VERSION, RuleTable
from profiler.names import VDSO

META_KIND = "unwind"  # metadata kind of packed tables


def cache_dir() -> Path:
    return report_cache_dir() / "cfi"


def _safe_id(build_id: str) -> bool:
    if build_id.startswith("vdso"):  # TableSources._vdso_key
        build_id = build_id[4:]
    return 0 < len(build_id) <= 128 and all(c in "0123456789abcdef" for c in build_id)


class TableSources:
    """Finds (and caches) rule tables for the DSOs of one capture."""

    def __init__(self, cols: ArchColumns, packed: Iterable[dict[str, Any]] = (),
                 symfs: str | None = None, debug_dirs: Iterable[str] = DEFAULT_DEBUG_DIRS,
                 vdso_image: bytes | None = None, use_cache: bool = True) -> None:
        self.cols = cols
        self.symfs = None if symfs is None else Path(symfs)
        self.debug_dirs = tuple(debug_dirs)
        self.vdso_image = vdso_image
        self.use_cache = use_cache
        self.warnings: list[str] = []
        self.origin: dict[tuple[str, str | None], str] = {}
        self.loaded: dict[tuple[str, str | None], RuleTable] = {}  # what table() returned
        self._packed: dict[str, bytes] = {}
        self._packed_paths: dict[str, bytes] = {}
        for entry in packed:
            data = entry.get("table")
            if not isinstance(data, (bytes, bytearray)):
                continue
            if entry.get("arch") != cols.arch:
                continue
            bid, path = entry.get("build_id"), entry.get("path")
            if isinstance(bid, str) and bid:
                self._packed[bid.lower()] = bytes(data)
            if isinstance(path, str):
                self._packed_paths[path] = bytes(data)

    def table(self, path: str, build_id: str | None, content: str | None = None) -> RuleTable | None:
        """``content``: what a file recorded without a build-id must match (``Dso.content``)."""
        bid = build_id.lower() if build_id else None
        if (path, bid) in self.loaded:
            return self.loaded[(path, bid)]
        found, origin = self._find(path, bid, None if bid else content)
        self.origin[(path, bid)] = origin
        if found is not None:
            self.loaded[(path, bid)] = found
        return found

    def _find(self, path: str, bid: str | None, content: str | None = None) -> tuple[RuleTable | None, str]:
        packed = self._packed.get(bid) if bid else self._packed_paths.get(path)
        if packed is None and path == VDSO:
            packed = self._packed_paths.get(path)
        if packed is not None:
            try:
                return RuleTable.from_bytes(packed), "packed"
            except ValueError as exc:
                self.warnings.append(f"the packed unwind table of {path} is damaged ({exc}); ignored.")
        key = bid or self._vdso_key(path)
        if key and self.use_cache:
            cached = self._cached(key)
            if cached is not None:
                return cached, "cache"
        table = self._compile(path, bid, content)
        if table is None:
            return None, "missing"
        if key and self.use_cache:
            self._store(key, table)
        return table, "file"

    def _vdso_key(self, path: str) -> str | None:
        """The cache key of the vdso's table when it has no recorded build-id: a hash of the
        image the recorder saved (the same kernel gives the same image)."""
        if path != VDSO or self.vdso_image is None:
            return None
        return "vdso" + hashlib.sha256(self.vdso_image).hexdigest()[:40]

    def _cache_path(self, bid: str) -> Path | None:
        if not _safe_id(bid):
            return None
        return cache_dir() / f"{bid}-{self.cols.arch}-v{TABLE_VERSION}.rules"

    def _cached(self, bid: str) -> RuleTable | None:
        p = self._cache_path(bid)
        if p is None:
            return None
        try:
            return RuleTable.from_cache_bytes(p.read_bytes())
        except (OSError, ValueError):
            return None

    def _store(self, bid: str, table: RuleTable) -> None:
        p = self._cache_path(bid)
        if p is None:
            return
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=p.parent, delete=False, suffix=".tmp") as fh:
                fh.write(table.to_cache_bytes())
            os.replace(fh.name, p)
        except OSError:
            pass  # a cache that cannot be written only costs time

    def _compile(self, path: str, bid: str | None, content: str | None = None) -> RuleTable | None:
        # pyelftools (the CFI parser) is imported only when a table is compiled: a report
        # whose tables are all cached does without it
        from elftools.common.exceptions import ELFError, ELFParseError
        from elftools.elf.elffile import ELFFile

        from profiler.unwind.cfi import CfiError, compile_elf, compile_path

        if path == VDSO:
            if self.vdso_image is None:
                return None
            try:
                return compile_elf(ELFFile(io.BytesIO(self.vdso_image)), self.cols)
            except (CfiError, ELFError, ELFParseError) as exc:
                self.warnings.append(f"the vdso image's CFI is unreadable ({exc}).")
                return None
        if not path.startswith("/"):
            return None
        for candidate in self._candidates(path):
            try:
                elf = ElfFile(candidate)
            except ElfError:
                continue
            if bid and elf.build_id and not _same_id(elf.build_id, bid):
                continue
            if content is not None and not _content_is(candidate, content):
                continue  # not the file recorded without a build-id: its CFI would unwind wrongly
            debug = self._debug_file(bid)
            try:
                return compile_path(str(candidate), self.cols, debug)
            except (CfiError, OSError) as exc:
                self.warnings.append(f"cannot read the CFI of {candidate}: {exc}.")
                return None
        return None

    def _candidates(self, path: str) -> list[Path]:
        inside = None if self.symfs is None else contained(self.symfs, path)  # never outside --symfs
        return [*([] if inside is None else [Path(inside)]), Path(path)]

    def _debug_file(self, bid: str | None) -> str | None:
        if not bid or not _safe_id(bid):
            return None
        for d in self.debug_dirs:
            p = build_id_path(d, bid)
            if p.is_file():
                return str(p)
        return None


def _content_is(path: Path, content: str) -> bool:
    found = content_identity(path)
    return found is not None and f"{found['size']}:{found['digest']}" == content


def _same_id(a: str, b: str) -> bool:
    """Build-ids match, tolerating the kernel's zero padding of MMAP2 build-ids to 20 bytes."""
    a, b = a.lower(), b.lower()
    return a == b or a.rstrip("0") == b.rstrip("0") and (a.startswith(b) or b.startswith(a))
