"""Finding the separate debug file of a stripped ELF.

Two ways, in the order GDB documents them ("Debugging Information in Separate Files"):

1. by build-id: ``<debug-dir>/.build-id/<first 2 hex digits>/<remaining hex>.debug``;
   accepted when the candidate's own build-id is the same;
2. by ``.gnu_debuglink`` (a file name and the CRC-32 of the debug file's contents):
   ``<dir of the binary>/<name>``, ``<dir of the binary>/.debug/<name>``, then
   ``<debug-dir>/<dir of the binary>/<name>`` for each debug directory; accepted when the
   candidate's CRC-32 matches.

Symbols come from the debug file; program headers always from the runtime file.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from pathlib import Path

from profiler.format.buildid import is_build_id
from profiler.format.localfile import open_regular
from profiler.symbols.elf import ElfError, ElfFile

DEFAULT_DEBUG_DIRS: tuple[str, ...] = ("/usr/lib/debug",)
_CRC_CHUNK = 1 << 20


def build_id_path(debug_dir: str | os.PathLike[str], build_id: str) -> Path:
    """``<debug_dir>/.build-id/xx/rest.debug`` for a hex build-id (anything else, which a
    hostile capture could make ``../..``, gives a name that cannot exist: ``.build-id/invalid``)."""
    if not is_build_id(build_id):
        return Path(debug_dir) / ".build-id" / "invalid" / "not-a-build-id"
    return Path(debug_dir) / ".build-id" / build_id[:2].lower() / f"{build_id[2:].lower()}.debug"


def debuglink_candidates(binary: Path, name: str, debug_dirs: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Where a ``.gnu_debuglink`` name is looked for, in order."""
    parent = binary.resolve().parent
    found = [parent / name, parent / ".debug" / name]
    found += [Path(d) / parent.relative_to(parent.anchor) / name for d in debug_dirs]
    return found


def file_crc32(path: Path) -> int | None:
    """CRC-32 of the file's contents (the ``.gnu_debuglink`` checksum), None if unreadable."""
    crc = 0
    try:
        with open_regular(path) as stream:
            while chunk := stream.read(_CRC_CHUNK):
                crc = zlib.crc32(chunk, crc)
    except OSError:
        return None
    return crc & 0xFFFFFFFF


def find_debug_file(elf: ElfFile, debug_dirs: Sequence[str | os.PathLike[str]] = DEFAULT_DEBUG_DIRS) -> Path | None:
    """The debug file of ``elf`` found by build-id, else by debuglink; None when none."""
    if elf.build_id:
        for debug_dir in debug_dirs:
            candidate = build_id_path(debug_dir, elf.build_id)
            if _same_build_id(candidate, elf.build_id):
                return candidate
    if elf.debuglink is not None:
        name, crc = elf.debuglink
        if "/" in name or name in ("", ".", ".."):
            return None
        own = elf.path.resolve()
        for candidate in debuglink_candidates(elf.path, name, debug_dirs):
            if candidate.is_file() and candidate.resolve() != own and file_crc32(candidate) == crc:
                return candidate
    return None


def _same_build_id(candidate: Path, build_id: str) -> bool:
    if not candidate.is_file():
        return False
    try:
        return ElfFile(candidate).build_id == build_id
    except ElfError:
        return False
