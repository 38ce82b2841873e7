"""Build-ids of the files the recorded processes map, read from the files themselves.

The recorder does not ask the kernel for build-ids in MMAP2 records (``attr.build_id``) by
default: the kernel sets ``PERF_RECORD_MISC_MMAP_BUILD_ID`` on the MMAP2 header it shares
across every event of that mmap and never clears it, so another tool's events on the same
process get the flag over bytes that are really maj/min/ino (a concurrent ``perf record``
aborts on them, measured). perf does not set it either.

Instead each mapped file is read when the recorder first sees it — an MMAP2 record in a ring
buffer or a line of /proc/PID/maps — and again at the end for those that could not be read
then. MMAP2 keeps maj/min/ino/ino_generation, the identity of the mapped inode; the file at
the path is trusted only when ``stat`` shows that same inode, so a binary replaced since it
was mapped (a rebuild, a package upgrade) never lends its build-id to the recorded one. On a
stacking file system (overlayfs: ``stat`` shows the overlay's anonymous device, major 0,
while MMAP2 names the real file system) the identity cannot be compared and the file is
trusted as perf would.
"""

from __future__ import annotations

import os

from profiler.format.buildid import read_build_id
from profiler.value import Value

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

Identity = tuple[int, int, int, int]  # maj, min, ino, ino_generation (MMAP2's fields)

MATCH, UNVERIFIABLE, REPLACED, UNREADABLE = "match", "unverifiable", "replaced", "unreadable"


class MappedFile(Value):
    """One (path, inode) the recorded processes mapped, and what its file said."""

    __slots__ = _fields = ("path", "identity", "build_id", "state")

    def __init__(self, path: str, identity: Identity, build_id: str | None = None, state: str = UNREADABLE) -> None:
        self.path = path
        self.identity = identity
        self.build_id = build_id  # hex
        self.state = state  # MATCH / UNVERIFIABLE: build_id is the mapped file's

    @property
    def known(self) -> bool:
        return self.state in (MATCH, UNVERIFIABLE)

    def entry(self) -> dict[str, Any]:
        """The ``buildids`` metadata entry (docs/format.md)."""
        maj, mnr, ino, gen = self.identity
        out: dict[str, Any] = {"path": self.path, "maj": maj, "min": mnr, "ino": ino, "ino_generation": gen}
        if self.known and self.build_id:
            out["build_id"] = self.build_id
            out["source"] = "file"
        if self.state == REPLACED:
            out["replaced"] = True
        return out


def identity_state(path: str, identity: Identity) -> str:
    """Is the file now at ``path`` the inode MMAP2 named?"""
    try:
        st = os.stat(path)
    except OSError:
        return UNREADABLE
    maj, mnr, ino, _ = identity
    if (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) == (maj, mnr, ino):
        return MATCH
    if identity == (0, 0, 0, 0) or (os.major(st.st_dev) == 0
                                    and (os.major(st.st_dev), os.minor(st.st_dev)) != (maj, mnr)):
        return UNVERIFIABLE  # no identity recorded, or a stacking file system
    return REPLACED


class MappedFiles:
    """Every mapped file of a recording, keyed by (path, identity); read on first sight."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, Identity], MappedFile] = {}
        self.from_kernel: dict[str, str] = {}  # path -> hex, from MMAP2's build-id form

    def seen(self, path: str, identity: Identity) -> None:
        """An MMAP2 (or /proc maps line) of ``path``: read the file if this inode is new."""
        key = (path, identity)
        if key in self.files or not path.startswith("/"):
            return
        found = MappedFile(path, identity)
        self._read(found)
        self.files[key] = found

    def seen_with_build_id(self, path: str, build_id: bytes) -> None:
        """A validated kernel build-id (``--buildid-mmap``): no need to read the file."""
        if path.startswith("/") and build_id:
            self.from_kernel.setdefault(path, build_id.hex())

    @staticmethod
    def _read(found: MappedFile) -> None:
        state = identity_state(found.path, found.identity)
        if state in (MATCH, UNVERIFIABLE):
            found.build_id = read_build_id(found.path)
            # The file might have been swapped between stat and read: look once more.
            if identity_state(found.path, found.identity) != state:
                found.build_id, state = None, REPLACED
        found.state = state

    def finish(self) -> None:
        """At the end: try again the files that could not be read or were not the mapped one
        (a file put back, or made readable, since)."""
        for found in self.files.values():
            if not found.known:
                self._read(found)

    @property
    def replaced(self) -> list[str]:
        return sorted({f.path for f in self.files.values() if f.state == REPLACED})

    def entries(self) -> list[dict[str, Any]]:
        """The ``buildids`` metadata entries: the kernel's where it gave one, then one per
        (path, inode) read from the files (those without a build-id too: their identity tells
        a report whether the file it finds is the recorded one)."""
        out: list[dict[str, Any]] = [
            {"path": path, "build_id": bid, "source": "mmap2"} for path, bid in sorted(self.from_kernel.items())
        ]
        for (path, _), found in sorted(self.files.items()):
            if path in self.from_kernel:
                continue
            out.append(found.entry())
        return out
