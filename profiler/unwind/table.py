"""Flat unwind rule tables: one row per address range of a DSO, as numpy arrays.

A row says, for every pc from ``start[i]`` up to the next row's start, how to find the
caller's frame (DWARF CFI, DWARF5 §6.4.1, already interpreted):

* the CFA (canonical frame address): ``cfa_kind`` —
  ``CFA_REG`` (value of tracked column ``cfa_reg`` + ``cfa_off``),
  ``CFA_DEREF`` (the word stored at that address: ``DW_OP_bregN off; DW_OP_deref``, the
  expression signal trampolines and realigned ``main`` functions use),
  ``CFA_PLT`` (x86_64 PLT entries' expression: ``rsp + cfa_off``, plus 8 when
  ``(rip & 15) >= plt_threshold``), ``CFA_NONE`` (a gap: no FDE covers these addresses) or
  ``CFA_UNSUPPORTED`` (any other expression: unwinding stops there, with that reason);
* per tracked column (``arch.ArchColumns``: return address, stack pointer, callee-saved
  registers), ``rule_kind`` / ``rule_arg`` / ``rule_reg``: ``SAME`` (unchanged), ``UNDEF``
  (undefined: for the return address, the end of the stack), ``AT_CFA`` (saved at CFA + arg),
  ``VAL_CFA`` (is CFA + arg), ``AT_REG`` (saved at the value of column ``rule_reg`` + arg:
  ``DW_CFA_expression`` with one ``DW_OP_bregN``), ``UNSUPPORTED``;
* ``flags``: ``FLAG_SIGNAL`` for FDEs of signal trampolines (augmentation ``S``): the pc of
  the frame they return to is the interrupted instruction itself, not a return address.

Addresses are the DSO's own virtual addresses (``p_vaddr`` space, as in the ELF file).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from dataclasses import field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
I8 = npt.NDArray[np.int8]

CFA_NONE, CFA_REG, CFA_DEREF, CFA_PLT, CFA_UNSUPPORTED = 0, 1, 2, 3, 4
SAME, UNDEF, AT_CFA, VAL_CFA, AT_REG, UNSUPPORTED = 0, 1, 2, 3, 4, 5
FLAG_SIGNAL = 1

TABLE_VERSION = 1  # of the arrays below; a cache or archive entry of another version is rebuilt

MAX_INFLATION = 64  # an untrusted table may inflate to this many times its stored bytes (libc, python3.11: ~30)


@dataclass
class RuleTable:
    """The compiled CFI of one DSO. Rows sorted by ``start``; T tracked columns."""

    arch: str
    start: U64
    cfa_kind: U8
    cfa_reg: I8
    cfa_off: I64
    plt_threshold: U8
    rule_kind: U8  # (rows, T)
    rule_arg: I64  # (rows, T)
    rule_reg: I8  # (rows, T)
    flags: U8
    source: str = ""  # ".eh_frame", ".debug_frame", "none"
    # the file's PT_LOAD segments: file offset -> virtual address (p_offset, p_vaddr, p_filesz)
    seg_offset: U64 = field(default_factory=lambda: np.zeros(0, np.uint64))
    seg_vaddr: U64 = field(default_factory=lambda: np.zeros(0, np.uint64))
    seg_filesz: U64 = field(default_factory=lambda: np.zeros(0, np.uint64))

    def __len__(self) -> int:
        return int(self.start.shape[0])

    @classmethod
    def empty(cls, arch: str, columns: int, source: str = "none") -> RuleTable:
        return cls(
            arch=arch, start=np.zeros(0, np.uint64), cfa_kind=np.zeros(0, np.uint8),
            cfa_reg=np.zeros(0, np.int8), cfa_off=np.zeros(0, np.int64),
            plt_threshold=np.zeros(0, np.uint8), rule_kind=np.zeros((0, columns), np.uint8),
            rule_arg=np.zeros((0, columns), np.int64), rule_reg=np.zeros((0, columns), np.int8),
            flags=np.zeros(0, np.uint8), source=source,
        )

    @property
    def columns(self) -> int:
        return int(self.rule_kind.shape[1])

    def vaddr_of(self, offset: U64) -> tuple[U64, npt.NDArray[np.bool_]]:
        """File offsets -> virtual addresses through the PT_LOAD segments (and which hit one)."""
        k = np.searchsorted(self.seg_offset, offset, side="right").astype(np.int64) - 1
        safe = np.maximum(k, 0)
        if not len(self.seg_offset):
            return offset, np.zeros(len(offset), dtype=bool)
        hit = (k >= 0) & (offset < self.seg_offset[safe] + self.seg_filesz[safe])
        with np.errstate(over="ignore"):
            vaddr = offset - self.seg_offset[safe] + self.seg_vaddr[safe]
        return vaddr, hit

    def row_at(self, pc: int) -> int | None:
        """Index of the row covering ``pc`` (scalar; tests)."""
        i = int(np.searchsorted(self.start, np.uint64(pc), side="right")) - 1
        if i < 0 or self.cfa_kind[i] == CFA_NONE:
            return None
        return i

    # --- serialisation: the on-disk cache and the archive's ``unwind`` metadata ----------

    _ARRAYS = ("start", "cfa_kind", "cfa_reg", "cfa_off", "plt_threshold", "rule_kind",
               "rule_arg", "rule_reg", "flags", "seg_offset", "seg_vaddr", "seg_filesz")

    def to_bytes(self) -> bytes:
        """The table as an uncompressed ``.npz`` image (numpy's own format, no pickles)."""
        buf = io.BytesIO()
        meta = np.frombuffer(f"{TABLE_VERSION}|{self.arch}|{self.source}".encode(), dtype=np.uint8)
        np.savez_compressed(buf, meta=meta, **{k: getattr(self, k) for k in self._ARRAYS})
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> RuleTable:
        """Parse ``to_bytes`` output; ValueError when it is not one (or of another version)."""
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:  # an .npz: bound what it inflates to
                inflated = sum(info.file_size for info in archive.infolist())
            if inflated > MAX_INFLATION * len(data) + (1 << 20):
                raise ValueError(f"it would inflate to {inflated} bytes")
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays: dict[str, Any] = {k: npz[k] for k in ("meta", *cls._ARRAYS)}
        except (OSError, KeyError, EOFError, ValueError, TypeError, zlib.error, zipfile.BadZipFile,
                NotImplementedError, RuntimeError) as exc:  # zipfile: a version or method it lacks, encryption
            raise ValueError(f"not an unwind table ({exc})") from None
        version, arch, source = bytes(arrays.pop("meta")).decode("ascii", "replace").split("|", 2)
        if version != str(TABLE_VERSION):
            raise ValueError(f"unwind table version {version}, not {TABLE_VERSION}")
        table = cls(arch=arch, source=source, **arrays)
        table.check()
        return table

    # --- the on-disk cache's own layout: read without inflating or unzipping -------------

    _CACHE_MAGIC = b"PRFRULES"
    _CACHE_HEAD = struct.Struct("<8sIIII")  # magic, rows, columns, segments, meta bytes
    _WIDE: ClassVar[tuple[tuple[str, Any, int], ...]] = (("start", np.uint64, 1), ("cfa_off", np.int64, 1),
                                               ("rule_arg", np.int64, 2))
    _SEGS = ("seg_offset", "seg_vaddr", "seg_filesz")
    _NARROW: ClassVar[tuple[tuple[str, Any, int], ...]] = (
        ("cfa_kind", np.uint8, 1), ("cfa_reg", np.int8, 1), ("plt_threshold", np.uint8, 1),
        ("flags", np.uint8, 1), ("rule_kind", np.uint8, 2), ("rule_reg", np.int8, 2))

    def to_cache_bytes(self) -> bytes:
        """The table as the cache stores it: a small header, then each array's bytes (u64
        arrays first, so every array is aligned when the image is). Loading it is a few
        ``frombuffer`` views: the ``.npz`` of :meth:`to_bytes` took ~4 ms per table to unzip."""
        meta = f"{TABLE_VERSION}|{self.arch}|{self.source}".encode()
        meta += b"\0" * (-len(meta) % 8)
        parts = [self._CACHE_HEAD.pack(self._CACHE_MAGIC, len(self), self.columns, len(self.seg_offset), len(meta)),
                 meta]
        for name, dtype, _ in self._WIDE:
            parts.append(np.ascontiguousarray(getattr(self, name), dtype=dtype).tobytes())
        for name in self._SEGS:
            parts.append(np.ascontiguousarray(getattr(self, name), dtype=np.uint64).tobytes())
        for name, dtype, _ in self._NARROW:
            parts.append(np.ascontiguousarray(getattr(self, name), dtype=dtype).tobytes())
        return b"".join(parts)

    @classmethod
    def from_cache_bytes(cls, data: bytes) -> RuleTable:
        """Parse :meth:`to_cache_bytes` output (checked like any untrusted table); ValueError
        when it is not one, or of another version."""
        head = cls._CACHE_HEAD
        if len(data) < head.size:
            raise ValueError("not a cached unwind table (too short)")
        magic, n, t, nseg, meta_len = head.unpack_from(data)
        if magic != cls._CACHE_MAGIC:
            raise ValueError("not a cached unwind table")
        want = head.size + meta_len + 8 * (n * (2 + t) + 3 * nseg) + n * (4 + 2 * t)
        if len(data) != want or t == 0 or t > 64:
            raise ValueError("a cached unwind table of the wrong size")
        meta = data[head.size:head.size + meta_len].rstrip(b"\0").decode("ascii", "replace").split("|", 2)
        if len(meta) != 3 or meta[0] != str(TABLE_VERSION):
            raise ValueError(f"unwind table version {meta[0]}, not {TABLE_VERSION}")
        pos = head.size + meta_len
        arrays: dict[str, Any] = {}

        def take(dtype: Any, count: int, shape: tuple[int, ...]) -> Any:
            nonlocal pos
            arr = np.frombuffer(data, dtype=dtype, count=count, offset=pos).reshape(shape)
            pos += arr.nbytes
            return arr

        for name, dtype, dims in cls._WIDE:
            arrays[name] = take(dtype, n * (t if dims == 2 else 1), (n, t) if dims == 2 else (n,))
        for name in cls._SEGS:
            arrays[name] = take(np.uint64, nseg, (nseg,))
        for name, dtype, dims in cls._NARROW:
            arrays[name] = take(dtype, n * (t if dims == 2 else 1), (n, t) if dims == 2 else (n,))
        table = cls(arch=meta[1], source=meta[2], **arrays)
        table.check()
        return table

    def check(self) -> None:
        """Shapes and dtypes agree (a table from a cache or an archive is untrusted)."""
        n = len(self.start)
        want = {"start": np.uint64, "cfa_kind": np.uint8, "cfa_reg": np.int8, "cfa_off": np.int64,
                "plt_threshold": np.uint8, "rule_kind": np.uint8, "rule_arg": np.int64,
                "rule_reg": np.int8, "flags": np.uint8}
        for name, dtype in want.items():
            arr = getattr(self, name)
            if arr.dtype != dtype or arr.shape[0] != n:
                raise ValueError(f"unwind table field {name} has the wrong shape or type")
        segs = (self.seg_offset, self.seg_vaddr, self.seg_filesz)
        if any(a.dtype != np.uint64 or a.shape != segs[0].shape for a in segs):
            raise ValueError("unwind table segments have the wrong shape or type")
        t = self.rule_kind.shape[1] if self.rule_kind.ndim == 2 else -1
        if t < 0 or self.rule_arg.shape != (n, t) or self.rule_reg.shape != (n, t):
            raise ValueError("unwind table rules have the wrong shape")
        if n > 1 and not (self.start[1:] >= self.start[:-1]).all():
            raise ValueError("unwind table rows are not sorted")
        if ((self.cfa_reg < -1) | (self.cfa_reg >= t)).any() or ((self.rule_reg < -1) | (self.rule_reg >= t)).any():
            raise ValueError("unwind table names a column it does not have")
