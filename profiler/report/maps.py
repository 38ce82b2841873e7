"""Process address-space maps, as immutable snapshots.

A process's maps change only at MMAP/MMAP2, COMM-with-exec and FORK records, which are few;
samples are many. So the maps of a process are kept as a sequence of immutable
:class:`MapSnapshot` objects ("generations"): every change makes a new snapshot, a forked
child starts with its parent's snapshot (the same object: nothing is copied), and a sample
is resolved against the snapshot that was current for its pid at its time.

An MMAP that overlaps existing maps replaces the overlapped part: older maps are trimmed or
split around it, as the kernel's own VMA list would be after ``mmap(MAP_FIXED)``.
"""

from __future__ import annotations

from dataclasses import field

import numpy as np
import numpy.typing as npt
from profiler.dataclass import dataclass
from profiler.names import KERNEL_DSO

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

#: perf's pseudo file names for kernel text (pid -1 maps).
KERNEL_MAP_PREFIX = KERNEL_DSO


@dataclass(frozen=True)
class Dso:
    """A mapped object: a file (by path and build-id) or a pseudo object ([vdso], //anon ...)."""

    path: str
    build_id: str | None = None
    #: for a file recorded without a build-id: ``"<size>:<digest>"`` its content identity, or
    #: ``"unverified"`` (profiler/format/recorded.py): a local file must match it to be used
    content: str | None = None

    @property
    def short_name(self) -> str:
        """What perf prints in its Shared Object column: the base name of a file."""
        if self.path.startswith("/"):
            return self.path.rsplit("/", 1)[-1]
        return self.path

    @property
    def is_file(self) -> bool:
        """A mapped file. The kernel names files by absolute path; a copy made by ``archive
        --strip-paths`` keeps their base names. Pseudo names (``[vdso]``, ``[heap]``,
        ``//anon``, ``/memfd:...``, empty) are not files."""
        path = self.path
        return bool(path) and not path.startswith(("[", "//")) and not self.is_anon

    @property
    def is_anon(self) -> bool:
        """Anonymous executable memory: where JITs put code (see ``/tmp/perf-PID.map``)."""
        return self.path in ("//anon", "[anon]", "") or self.path.startswith(("[anon:", "/memfd:"))


class DsoTable:
    """Interns :class:`Dso` objects: small integer ids for numpy columns."""

    def __init__(self) -> None:
        self.dsos: list[Dso] = []
        self._ids: dict[Dso, int] = {}

    def intern(self, dso: Dso) -> int:
        found = self._ids.get(dso)
        if found is None:
            found = len(self.dsos)
            self.dsos.append(dso)
            self._ids[dso] = found
        return found

    def __getitem__(self, dso_id: int) -> Dso:
        return self.dsos[dso_id]

    def __len__(self) -> int:
        return len(self.dsos)


@dataclass(frozen=True)
class Map:
    """One executable mapping: ``[start, end)`` of the address space shows ``dso`` from ``pgoff``."""

    start: int
    end: int
    pgoff: int
    dso: int  # id in the DsoTable

    def file_offset(self, addr: int) -> int:
        return addr - self.start + self.pgoff


@dataclass(frozen=True)
class MapSnapshot:
    """The maps of one process at one time, sorted by start, non-overlapping."""

    maps: tuple[Map, ...] = ()
    _arrays: dict[str, npt.NDArray[np.uint64] | I64] = field(default_factory=dict, compare=False,
                                                              repr=False)

    def with_map(self, new: Map) -> MapSnapshot:
        """A snapshot where ``new`` replaces whatever it overlaps (older maps are split)."""
        kept: list[Map] = []
        for m in self.maps:
            if m.end <= new.start or m.start >= new.end:
                kept.append(m)
                continue
            if m.start < new.start:  # the part before the new map survives
                kept.append(Map(m.start, new.start, m.pgoff, m.dso))
            if m.end > new.end:  # the part after survives, its pgoff moved along
                kept.append(Map(new.end, m.end, min(m.pgoff + (new.end - m.start), (1 << 64) - 1), m.dso))
        kept.append(new)
        kept.sort(key=lambda m: m.start)
        return MapSnapshot(tuple(kept))

    def find(self, addr: int) -> Map | None:
        """The map containing ``addr`` (scalar; tests and slow paths)."""
        for m in self.maps:
            if m.start <= addr < m.end:
                return m
        return None

    def arrays(self) -> tuple[U64, U64, U64, I64]:
        """(starts, ends, pgoffs, dso ids) as numpy arrays, built once."""
        if not self._arrays:
            self._arrays["start"] = np.array([m.start for m in self.maps], dtype=np.uint64)
            self._arrays["end"] = np.array([m.end for m in self.maps], dtype=np.uint64)
            self._arrays["pgoff"] = np.array([m.pgoff for m in self.maps], dtype=np.uint64)
            self._arrays["dso"] = np.array([m.dso for m in self.maps], dtype=np.int64)
        a = self._arrays
        return a["start"], a["end"], a["pgoff"], a["dso"]  # type: ignore[return-value]

    def lookup_many(self, addrs: U64) -> tuple[I64, U64]:
        """Vectorised: (dso id or -1, file offset) for each address."""
        starts, ends, pgoffs, dsos = self.arrays()
        if len(starts) == 0:
            return np.full(len(addrs), -1, dtype=np.int64), np.zeros(len(addrs), dtype=np.uint64)
        idx = np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1
        safe = np.maximum(idx, 0)
        hit = (idx >= 0) & (addrs < ends[safe])
        dso = np.where(hit, dsos[safe], -1)
        with np.errstate(over="ignore"):
            offset = np.where(hit, addrs - starts[safe] + pgoffs[safe], addrs)
        return dso.astype(np.int64), offset.astype(np.uint64)

    def __len__(self) -> int:
        return len(self.maps)


EMPTY = MapSnapshot()
