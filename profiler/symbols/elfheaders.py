"""The plain header data of an ELF file: ``PT_LOAD`` segments, section headers, and the
layout address translation needs (packable into a capture by ``profiler archive``).

Field names are the ELF specification's (``p_vaddr``, ``sh_addr``); :mod:`.elf` fills these
from a file, :mod:`.plt` reads sections through them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.errors import FormatError

PF_X, PF_W, PF_R = 1, 2, 4
U64 = np.uint64


@dataclass(frozen=True)
class LoadSegment:
    """One ``PT_LOAD`` program header (field names from the ELF specification)."""

    p_vaddr: int
    p_offset: int
    p_filesz: int
    p_memsz: int
    p_flags: int

    @property
    def executable(self) -> bool:
        return bool(self.p_flags & PF_X)


@dataclass(frozen=True)
class SectionHeader:
    """The fields of one section header this module uses."""

    index: int
    name: str
    sh_type: str
    sh_flags: int
    sh_addr: int
    sh_offset: int
    sh_size: int
    sh_link: int
    sh_entsize: int
    sh_addralign: int

    @property
    def has_file_data(self) -> bool:
        return self.sh_type != "SHT_NOBITS" and self.sh_size > 0


@dataclass(frozen=True)
class ElfLayout:
    """What address translation needs from a runtime ELF, packable for the archive."""

    build_id: str | None
    e_type: str
    machine: str
    load_segments: tuple[LoadSegment, ...]

    def file_offset_to_vaddr(self, offset: int) -> int | None:
        """The virtual address of file ``offset``, or None when no ``PT_LOAD`` maps it."""
        for seg in self.load_segments:
            if seg.p_offset <= offset < seg.p_offset + seg.p_filesz:
                return offset - seg.p_offset + seg.p_vaddr
        return None

    def file_offsets_to_vaddrs(self, offsets: npt.ArrayLike) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        """Vectorised :meth:`file_offset_to_vaddr`: (vaddrs, found mask); 0 where not found."""
        offs = np.asarray(offsets).astype(np.uint64)
        out = np.zeros(offs.shape, U64)
        found = np.zeros(offs.shape, np.bool_)
        with np.errstate(over="ignore"):
            for seg in self.load_segments:
                lo = np.uint64(seg.p_offset)
                inside = ~found & (offs >= lo) & (offs < lo + np.uint64(seg.p_filesz))
                out[inside] = offs[inside] - lo + np.uint64(seg.p_vaddr)
                found |= inside
        return out, found

    def to_packed(self) -> dict[str, Any]:
        """Plain data for msgpack."""
        return {
            "build_id": self.build_id,
            "e_type": self.e_type,
            "machine": self.machine,
            "segments": [[s.p_vaddr, s.p_offset, s.p_filesz, s.p_memsz, s.p_flags] for s in self.load_segments],
        }

    @classmethod
    def from_packed(cls, packed: Mapping[str, Any]) -> ElfLayout:
        """Inverse of :meth:`to_packed`; damaged data raises :class:`FormatError`."""
        try:
            segments = tuple(LoadSegment(*(_u64(v) for v in row)) for row in packed["segments"])
            build_id = packed["build_id"]
            return cls(
                build_id=None if build_id is None else str(build_id),
                e_type=str(packed["e_type"]),
                machine=str(packed["machine"]),
                load_segments=segments,
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise FormatError(f"packed ELF layout is damaged ({exc})") from exc


def _u64(value: Any) -> int:
    """An unsigned 64-bit integer from packed (untrusted) data; ValueError otherwise."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 64:
        raise ValueError(f"{value!r} is not a 64-bit unsigned integer")
    return value
