"""Function bounds from ``.eh_frame``: the start and size of every FDE.

Every function compiled with unwind tables (the default on x86_64 and aarch64) has a Frame
Description Entry whose ``pc_begin``/``pc_range`` give its exact extent, even in a stripped
binary. This module reads only those bounds (not the CFI rules), fast:

* With ``.eh_frame_hdr`` (what the linker writes for ``PT_GNU_EH_FRAME``) the binary
  search table lists every FDE's initial location and address as fixed-size encoded pairs:
  one ``numpy.frombuffer``. Each FDE's ``pc_range`` then sits at a fixed offset in its
  header once its CIE's pointer encoding is known; the few distinct CIEs are parsed in
  Python and the ranges gathered with numpy.
* Without it, :func:`walk_eh_frame` steps through the section entry by entry.

Layouts (LSB, "Exception Frames" and "Exception Frame Header"): an entry is ``length``
(u32; ``0xffffffff`` then u64), then ``CIE_id`` (0 for a CIE) or ``CIE_pointer`` (the
distance back from this field to its CIE), then for an FDE ``pc_begin`` and ``pc_range``
in the CIE's ``R`` augmentation encoding (``DW_EH_PE_*``; absolute pointer when absent).

Reused by anything that needs FDE positions (for instance a CFI unwinder): the result
keeps each FDE's offset in the section. Damaged data raises :class:`EhFrameError`.
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from profiler.arrays import distinct
from profiler.dataclass import dataclass
from profiler.errors import ReportError

UIntArray = npt.NDArray[np.uint64]

# DW_EH_PE_* pointer encodings: low nibble = value format, high nibble = application.
DW_EH_PE_absptr = 0x00
DW_EH_PE_uleb128 = 0x01
DW_EH_PE_udata2 = 0x02
DW_EH_PE_udata4 = 0x03
DW_EH_PE_udata8 = 0x04
DW_EH_PE_sleb128 = 0x09
DW_EH_PE_sdata2 = 0x0A
DW_EH_PE_sdata4 = 0x0B
DW_EH_PE_sdata8 = 0x0C
DW_EH_PE_pcrel = 0x10
DW_EH_PE_textrel = 0x20
DW_EH_PE_datarel = 0x30
DW_EH_PE_funcrel = 0x40
DW_EH_PE_aligned = 0x50
DW_EH_PE_indirect = 0x80
DW_EH_PE_omit = 0xFF

_FIXED = {DW_EH_PE_udata2: "u2", DW_EH_PE_udata4: "u4", DW_EH_PE_udata8: "u8",
          DW_EH_PE_sdata2: "i2", DW_EH_PE_sdata4: "i4", DW_EH_PE_sdata8: "i8"}


class EhFrameError(ReportError):
    """``.eh_frame`` or ``.eh_frame_hdr`` data that cannot be decoded."""


@dataclass(frozen=True)
class FdeBounds:
    """One row per FDE, sorted by ``starts``: virtual address, size in bytes, and the
    FDE's offset in ``.eh_frame`` (FDEs with an empty range are left out)."""

    starts: UIntArray
    sizes: UIntArray
    offsets: UIntArray

    def __len__(self) -> int:
        return int(self.starts.shape[0])

    @classmethod
    def empty(cls) -> FdeBounds:
        z = np.zeros(0, np.uint64)
        return cls(z, z.copy(), z.copy())

    @classmethod
    def from_rows(cls, starts: npt.ArrayLike, sizes: npt.ArrayLike, offsets: npt.ArrayLike) -> FdeBounds:
        s = np.asarray(starts, dtype=np.uint64)
        z = np.asarray(sizes, dtype=np.uint64)
        o = np.asarray(offsets, dtype=np.uint64)
        keep = z > 0
        s, z, o = s[keep], z[keep], o[keep]
        order = np.argsort(s, kind="stable")
        return cls(s[order], z[order], o[order])


@dataclass(frozen=True)
class Cie:
    """What reading an FDE needs from its CIE."""

    offset: int
    version: int
    augmentation: str
    fde_encoding: int  # DW_EH_PE_* of pc_begin (pc_range uses its format only)
    has_augmentation_data: bool  # 'z': FDEs carry an augmentation length


def read_fde_bounds(
    eh_frame: bytes, eh_frame_addr: int, hdr: bytes | None = None, hdr_addr: int = 0,
    *, address_size: int = 8, little_endian: bool = True,
) -> FdeBounds:
    """The bounds of every FDE in ``eh_frame`` (loaded at ``eh_frame_addr``).

    ``hdr`` is ``.eh_frame_hdr`` (at ``hdr_addr``) when the file has one: its sorted table
    is used; otherwise, or when its table has an encoding this reader does not take, the
    section is walked.
    """
    try:
        if hdr:
            locations = _hdr_table(hdr, hdr_addr, address_size, little_endian)
            if locations is not None:
                reader = _Reader(eh_frame, eh_frame_addr, address_size, little_endian)
                return reader.bounds_from_table(*locations)
        return walk_eh_frame(eh_frame, eh_frame_addr, address_size=address_size, little_endian=little_endian)
    except (IndexError, ValueError, struct.error, OverflowError) as exc:
        raise EhFrameError(f".eh_frame is damaged ({exc})") from exc


def walk_eh_frame(
    eh_frame: bytes, eh_frame_addr: int, *, address_size: int = 8, little_endian: bool = True,
) -> FdeBounds:
    """Step through every entry of ``.eh_frame`` (no header table needed)."""
    reader = _Reader(eh_frame, eh_frame_addr, address_size, little_endian)
    starts: list[int] = []
    sizes: list[int] = []
    offsets: list[int] = []
    for off, is_cie in reader.iter_entries():
        if is_cie:
            continue
        begin, size = reader.fde_range(off)
        starts.append(begin)
        sizes.append(size)
        offsets.append(off)
    return FdeBounds.from_rows(starts, sizes, offsets)


def _hdr_table(
    hdr: bytes, hdr_addr: int, address_size: int, little_endian: bool,
) -> tuple[UIntArray, UIntArray] | None:
    """(initial locations, FDE addresses) from the binary search table, or None when the
    header has no table or an encoding that is not fixed-size datarel/absolute."""
    if len(hdr) < 4 or hdr[0] != 1:
        return None
    _, ptr_enc, count_enc, table_enc = hdr[:4]
    try:
        pos = 4
        pos = skip_pointer(hdr, pos, ptr_enc, address_size)
        count, pos = decode_pointer(hdr, pos, count_enc, hdr_addr, address_size, little_endian,
                                    section_addr=hdr_addr)
    except EhFrameError:
        return None
    fmt = _FIXED.get(table_enc & 0x0F) or (f"u{address_size}" if table_enc & 0x0F == DW_EH_PE_absptr else None)
    app = table_enc & 0x70
    if table_enc == DW_EH_PE_omit or fmt is None or app not in (DW_EH_PE_absptr, DW_EH_PE_datarel):
        return None
    dtype = np.dtype(("<" if little_endian else ">") + fmt)
    if count < 0 or pos + 2 * count * dtype.itemsize > len(hdr):
        raise EhFrameError(f".eh_frame_hdr claims {count} entries but is only {len(hdr)} bytes")
    pairs = np.frombuffer(hdr, dtype=dtype, count=2 * count, offset=pos).astype(np.int64)
    base = np.int64(hdr_addr if app == DW_EH_PE_datarel else 0)
    with np.errstate(over="ignore"):
        values = (pairs + base).astype(np.uint64)
    return values[0::2], values[1::2]


class _Reader:
    """Random access to one ``.eh_frame`` section's entries."""

    def __init__(self, data: bytes, addr: int, address_size: int, little_endian: bool) -> None:
        self.data = data
        self.addr = addr
        self.address_size = address_size
        self.little_endian = little_endian
        self.order = "<" if little_endian else ">"
        self._cies: dict[int, Cie] = {}

    # --- entries ----------------------------------------------------------------------------

    def header(self, off: int) -> tuple[int, int, int]:
        """(offset of the CIE id / pointer field, its value, offset past the entry)."""
        if off + 4 > len(self.data):
            raise EhFrameError(f".eh_frame entry at {off:#x} runs past the section")
        (length,) = struct.unpack_from(self.order + "I", self.data, off)
        body = off + 4
        if length == 0xFFFFFFFF:
            if off + 12 > len(self.data):
                raise EhFrameError(f".eh_frame entry at {off:#x} runs past the section")
            (length,) = struct.unpack_from(self.order + "Q", self.data, body)
            body += 8
        end = body + length
        if length < 4 or end > len(self.data):
            raise EhFrameError(f".eh_frame entry at {off:#x} has a bad length {length}")
        (ident,) = struct.unpack_from(self.order + "I", self.data, body)
        return body, ident, end

    def iter_entries(self) -> list[tuple[int, bool]]:
        """(offset, is CIE) of every entry up to the zero terminator."""
        out: list[tuple[int, bool]] = []
        off = 0
        while off + 4 <= len(self.data):
            (length,) = struct.unpack_from(self.order + "I", self.data, off)
            if length == 0:
                break
            _, ident, end = self.header(off)
            out.append((off, ident == 0))
            off = end
        return out

    def cie_of(self, off: int) -> Cie:
        """The CIE of the FDE at ``off``."""
        id_at, pointer, _ = self.header(off)
        if pointer == 0:
            raise EhFrameError(f".eh_frame entry at {off:#x} is a CIE, not an FDE")
        return self.cie(id_at - pointer)

    def cie(self, off: int) -> Cie:
        """Parse (once) the CIE at ``off``: version, augmentation, FDE pointer encoding."""
        found = self._cies.get(off)
        if found is None:
            found = self._parse_cie(off)
            self._cies[off] = found
        return found

    def _parse_cie(self, off: int) -> Cie:
        if off < 0:
            raise EhFrameError(f".eh_frame has an FDE pointing before the section ({off})")
        id_at, ident, end = self.header(off)
        if ident != 0:
            raise EhFrameError(f".eh_frame entry at {off:#x} is not a CIE")
        data = self.data[:end]
        pos = id_at + 4
        version = data[pos]
        nul = data.find(b"\0", pos + 1)
        if nul < 0:
            raise EhFrameError(f".eh_frame CIE at {off:#x} has an unterminated augmentation")
        aug = data[pos + 1 : nul].decode("ascii", "replace")
        pos = nul + 1
        if "eh" in aug:
            pos += self.address_size
        _, pos = read_uleb128(data, pos)  # code alignment
        _, pos = read_sleb128(data, pos)  # data alignment
        if version == 1:
            pos += 1
        else:
            _, pos = read_uleb128(data, pos)
        encoding = DW_EH_PE_absptr
        if aug.startswith("z"):
            _, pos = read_uleb128(data, pos)
            for ch in aug[1:]:
                if ch == "R":
                    encoding = data[pos]
                    pos += 1
                elif ch == "L":
                    pos += 1
                elif ch == "P":
                    pos = skip_pointer(data, pos + 1, data[pos], self.address_size)
                elif ch not in "SBG":
                    break  # an unknown letter: the rest cannot be read, R was before it if any
        return Cie(off, version, aug, encoding, aug.startswith("z"))

    def fde_range(self, off: int) -> tuple[int, int]:
        """(pc_begin as a virtual address, pc_range) of the FDE at ``off``."""
        cie = self.cie_of(off)
        id_at, _, _ = self.header(off)
        begin, pos = decode_pointer(self.data, id_at + 4, cie.fde_encoding, self.addr,
                                    self.address_size, self.little_endian, section_addr=self.addr)
        size, _ = decode_pointer(self.data, pos, cie.fde_encoding & 0x0F, self.addr,
                                 self.address_size, self.little_endian)
        return begin, size

    # --- the vectorised path ----------------------------------------------------------------

    def bounds_from_table(self, locations: UIntArray, fde_addrs: UIntArray) -> FdeBounds:
        """Sizes for the FDEs the header table lists (initial locations taken from it)."""
        n = locations.shape[0]
        if n == 0:
            return FdeBounds.empty()
        with np.errstate(over="ignore"):
            offs = (fde_addrs - np.uint64(self.addr)).astype(np.int64)
        if offs.min() < 0 or offs.max() + 12 > len(self.data):
            raise EhFrameError(".eh_frame_hdr points outside .eh_frame")
        raw = np.frombuffer(self.data, np.uint8)
        u32 = np.dtype(self.order + "u4")
        length = _gather(raw, offs, u32)
        extended = length == 0xFFFFFFFF
        id_at = offs + 4 + np.where(extended, 8, 0)
        pointer = _gather(raw, np.where(id_at + 4 <= len(self.data), id_at, 0), u32).astype(np.int64)
        cie_off = id_at - pointer
        sizes = np.zeros(n, np.uint64)
        for c in distinct(cie_off).tolist():
            sel = np.flatnonzero(cie_off == c)
            sizes[sel] = self._ranges(raw, id_at[sel] + 4, offs[sel], self.cie(int(c)))
        return FdeBounds.from_rows(locations, sizes, offs.astype(np.uint64))

    def _ranges(self, raw: npt.NDArray[np.uint8], begin_at: npt.NDArray[np.int64],
                offs: npt.NDArray[np.int64], cie: Cie) -> UIntArray:
        """pc_range of FDEs sharing ``cie``: gathered when its encoding has a fixed size."""
        fmt = cie.fde_encoding & 0x0F
        code = _FIXED.get(fmt) or (f"u{self.address_size}" if fmt == DW_EH_PE_absptr else None)
        if code is None:
            return np.array([self.fde_range(int(o))[1] for o in offs.tolist()], dtype=np.uint64)
        dtype = np.dtype(self.order + code)
        at = begin_at + dtype.itemsize
        if at.size and at.max() + dtype.itemsize > len(self.data):
            raise EhFrameError(".eh_frame FDE runs past the section")
        return _gather(raw, at, dtype).astype(np.int64).astype(np.uint64)


def _gather(raw: npt.NDArray[np.uint8], at: npt.NDArray[np.int64],
            dtype: np.dtype[np.generic]) -> npt.NDArray[np.generic]:
    """``dtype`` values at byte offsets ``at`` of ``raw`` (any alignment)."""
    width = dtype.itemsize
    idx = at[:, None] + np.arange(width, dtype=np.int64)[None, :]
    return np.ascontiguousarray(raw[idx]).view(dtype).reshape(-1)


def decode_pointer(
    data: bytes, pos: int, enc: int, pc_base: int, address_size: int, little_endian: bool,
    *, section_addr: int = 0,
) -> tuple[int, int]:
    """One ``DW_EH_PE_*`` encoded value at ``pos``: (value, position after it).

    ``pcrel`` values are relative to their own address (``section_addr + pos``);
    ``datarel`` to ``pc_base`` (the header's address in ``.eh_frame_hdr``). ``textrel``,
    ``funcrel``, ``aligned`` and ``indirect`` are not used for FDE bounds and are refused.
    """
    if enc == DW_EH_PE_omit:
        return 0, pos
    fmt, app = enc & 0x0F, enc & 0x70
    if enc & DW_EH_PE_indirect or app not in (DW_EH_PE_absptr, DW_EH_PE_pcrel, DW_EH_PE_datarel):
        raise EhFrameError(f"pointer encoding {enc:#x} is not supported")
    order = "<" if little_endian else ">"
    start = pos
    if fmt == DW_EH_PE_uleb128:
        value, pos = read_uleb128(data, pos)
    elif fmt == DW_EH_PE_sleb128:
        value, pos = read_sleb128(data, pos)
    else:
        code = _FIXED.get(fmt) or (f"u{address_size}" if fmt == DW_EH_PE_absptr else None)
        if code is None:
            raise EhFrameError(f"pointer encoding {enc:#x} is not supported")
        width = int(code[1])
        if pos + width > len(data):
            raise EhFrameError("encoded pointer runs past its section")
        (value,) = struct.unpack_from(order + {"u": "BHIQ", "i": "bhiq"}[code[0]]["1248".index(code[1])], data, pos)
        pos += width
    if app == DW_EH_PE_pcrel:
        value += section_addr + start
    elif app == DW_EH_PE_datarel:
        value += pc_base
    return value & 0xFFFF_FFFF_FFFF_FFFF, pos


def skip_pointer(data: bytes, pos: int, enc: int, address_size: int) -> int:
    """The position after an encoded value at ``pos`` (any application, indirect too)."""
    if enc == DW_EH_PE_omit:
        return pos
    fmt = enc & 0x0F
    if fmt in (DW_EH_PE_uleb128, DW_EH_PE_sleb128):
        return read_uleb128(data, pos)[1]
    code = _FIXED.get(fmt) or (f"u{address_size}" if fmt == DW_EH_PE_absptr else None)
    if code is None:
        raise EhFrameError(f"pointer encoding {enc:#x} is not supported")
    return pos + int(code[1])


def read_uleb128(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise EhFrameError("LEB128 value runs past its section")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def read_sleb128(data: bytes, pos: int) -> tuple[int, int]:
    value, end = read_uleb128(data, pos)
    bits = 7 * (end - pos)
    if value & (1 << (bits - 1)):
        value -= 1 << bits
    return value, end
