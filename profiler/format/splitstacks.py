"""Stack copies kept apart from their samples (format 4.0, issue 28): a report that does not
unwind never inflates them.

A ``--call-graph dwarf`` sample is mostly its copy of the user stack (``PERF_SAMPLE_STACK_USER``:
``u64 size; char data[size]; u64 dyn_size``, several KiB). The recorder writes such a ring
buffer's records as a RAW_ZSTD frame with ``FLAG_STACKS``, whose payload is two zstd frames
(``u64`` length of the first, then the first, then the second):

* the *lean* records: every record as the kernel wrote it (compacted: compact.py), except that
  each SAMPLE's stack field is one ``u64 0`` (a sample with no stack copy: still a valid kernel
  record, which every decoder reads as it is) and its header's size shrinks to match;
* the *fields*: the stack field each SAMPLE had, whole (``size``, and with ``size`` > 0 the
  data and ``dyn_size``), one per SAMPLE record, in record order.

A flat report, a flame graph without unwinding or ``--call-graph`` of frame-pointer chains read
the lean records alone (report/tally_native.FrameStream); everything else reads the records
:func:`join_stacks` puts back together, byte for byte what compact.py wrote.

Every SAMPLE must share one layout (the capture's first event's): the recorder splits only
then, and only layouts :func:`profiler.format.compact.can_compact` finds the stack field of.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from functools import partial

import numpy as np
import numpy.typing as npt

from profiler.errors import FormatError
from profiler.format import records as R
from profiler.format.compact import can_compact, compact_stacks, record_offsets

_U64 = struct.Struct("=Q")
_SIZE = struct.Struct("=H")
_HDR = struct.Struct("=IHH")
MAX_RECORD = 0xFFFF  # a record's size is a u16
_NATIVE = "<" if sys.byteorder == "little" else ">"


def stack_words(layout: R.SampleLayout) -> tuple[int, int, int]:
    """What finds a SAMPLE's stack field: (words before the callchain or the registers, whether
    a callchain precedes, registers of REGS_USER or -1 without it)."""
    st = layout.sample_type
    nregs = bin(layout.sample_regs_user).count("1") if st & R.PERF_SAMPLE_REGS_USER else -1
    return layout.fixed_words, int(bool(st & R.PERF_SAMPLE_CALLCHAIN)), nregs


def _stack_word(buf: bytes | memoryview, pos: int, size: int, words: tuple[int, int, int],
                u64: struct.Struct = _U64) -> int | None:
    """The word (from ``pos``) of the SAMPLE record at ``pos``'s stack field, or None when its
    record does not hold one."""
    fixed, callchain, nregs = words
    end = size // 8
    cur = fixed
    if callchain:
        if cur >= end:
            return None
        cur += 1 + u64.unpack_from(buf, pos + 8 * cur)[0]
    if nregs >= 0:
        if cur >= end:
            return None
        cur += 1 + (nregs if u64.unpack_from(buf, pos + 8 * cur)[0] else 0)
    return cur if cur < end else None


def split_stacks(buf: bytes | memoryview, layout: R.SampleLayout) -> tuple[bytes, bytes] | None:
    """``buf`` (whole native-order kernel records) compacted and split into (lean records,
    stack fields) — by the compiled ``split_stacks`` when it is built, else
    :func:`split_stacks_python` —; None when it cannot be (a layout whose stack field
    compact.py cannot find, or a record that does not parse): the caller writes it whole."""
    from profiler.native import kernels

    if not can_compact(layout):
        return None
    data = compact_stacks(buf, layout)
    module = kernels()
    if module is None:
        return split_stacks_python(data, layout)
    parts: tuple[bytes, bytes] | None = module.split_stacks(data, *stack_words(layout))
    return parts


def split_stacks_python(data: bytes, layout: R.SampleLayout) -> tuple[bytes, bytes] | None:
    """:func:`split_stacks` of compacted records in Python: the reference the compiled one is
    tested against (and the recorder's without the extension: 2.4 us a sample against 0.8)."""
    if len(data) % 8:
        return None
    words = stack_words(layout)
    lean: list[bytes | bytearray | memoryview] = []
    fields: list[bytes | memoryview] = []
    view = memoryview(data)
    end = 0
    for pos in record_offsets(data):
        rtype, _, size = _HDR.unpack_from(data, pos)
        end = pos + size
        if rtype != R.PERF_RECORD_SAMPLE:
            lean.append(view[pos:end])
            continue
        cur = _stack_word(data, pos, size, words)
        if cur is None:
            return None
        at = pos + 8 * cur
        stack = _U64.unpack_from(data, at)[0]
        length = 8 if stack == 0 else 16 + stack
        if at + length > end:
            return None
        head = bytearray(view[pos:at + 8])
        head[6:8] = _SIZE.pack(size - length + 8)
        head[-8:] = bytes(8)
        lean += [head, view[at + length:end]]
        fields.append(view[at:at + length])
    if end != len(data):
        return None
    return b"".join(lean), b"".join(fields)


class Joiner:
    """:func:`join_stacks` for one capture's frames one after another, into one output buffer
    it reuses (a reader writes each joined frame out before it joins the next): no fresh pages
    for every frame of a few hundred MB of stack copies."""

    def __init__(self, layout: R.SampleLayout, bo: str) -> None:
        self.layout, self.bo = layout, bo
        self.out = bytearray()

    def __call__(self, lean: bytes | memoryview, fields: bytes | memoryview) -> bytes | memoryview:
        """The frame's records joined: a view of the buffer, valid until the next call."""
        from profiler.native import kernels

        module = kernels()
        if module is None or self.bo != _NATIVE:
            return join_stacks_python(lean, fields, self.layout, self.bo)
        need = len(lean) + len(fields)
        if len(self.out) < need:
            self.out = bytearray(max(need, 2 * len(self.out)))
        n = module.join_stacks(lean, fields, *stack_words(self.layout), self.out)
        if n is None:
            raise FormatError(_MISFIT)
        return memoryview(self.out)[:n]


def join_stacks(lean: bytes | memoryview, fields: bytes | memoryview, layout: R.SampleLayout,
                bo: str = _NATIVE) -> bytes:
    """The records :func:`split_stacks` split, put back together (the compiled kernel's
    ``join_stacks`` when it is built and the records are in this machine's byte order ``bo``,
    else :func:`join_stacks_python`); a frame whose parts do not fit together is a FormatError."""
    return bytes(Joiner(layout, bo)(lean, fields))


_MISFIT = "its samples and their stack copies do not fit together"


def join_stacks_python(lean: bytes | memoryview, fields: bytes | memoryview, layout: R.SampleLayout,
                       bo: str = _NATIVE) -> bytes:
    """:func:`join_stacks` in Python: the reference the compiled one is tested against."""
    words = stack_words(layout)
    u64, u16, hdr = struct.Struct(bo + "Q"), struct.Struct(bo + "H"), struct.Struct(bo + "IHH")
    view, fview = memoryview(lean), memoryview(fields)
    if len(view) % 8 or len(fview) % 8:
        raise FormatError(_MISFIT)
    out: list[bytes | bytearray | memoryview] = []
    q = 0
    pos, end = 0, len(view)
    while pos + 8 <= end:
        rtype, _, size = hdr.unpack_from(view, pos)
        if size < 8 or size % 8 or pos + size > end:
            break
        if rtype != R.PERF_RECORD_SAMPLE:
            out.append(view[pos:pos + size])
            pos += size
            continue
        cur = _stack_word(view, pos, size, words, u64)
        if cur is None or q + 8 > len(fview) or u64.unpack_from(view, pos + 8 * cur)[0] != 0:
            raise FormatError(_MISFIT)
        stack = u64.unpack_from(fview, q)[0]
        length = 8 if stack == 0 else 16 + stack
        if stack % 8 or q + length > len(fview) or size - 8 + length > MAX_RECORD:
            raise FormatError(_MISFIT)
        head = bytearray(view[pos:pos + 8 * cur])
        head[6:8] = u16.pack(size - 8 + length)
        out += [head, fview[q:q + length], view[pos + 8 * cur + 8:pos + size]]
        q += length
        pos += size
    if pos != end or q != len(fview):
        raise FormatError(_MISFIT)
    return b"".join(out)


def stack_split_ok(layouts: list[R.SampleLayout]) -> bool:
    """Whether samples of these events (a capture's) may be split: one layout, with a stack
    field compact.py finds."""
    return bool(layouts) and can_compact(layouts[0]) and all(
        (lay.sample_type, lay.sample_regs_user) == (layouts[0].sample_type, layouts[0].sample_regs_user)
        for lay in layouts)



def dwarf_compaction(layouts: list[R.SampleLayout], compress: bool
                     ) -> tuple[Callable[[bytes], bytes | tuple[bytes, bytes]], bool]:
    """What the recorder's drain does to a ``--call-graph dwarf`` ring buffer's records before
    it writes them, and whether that splits them (format 4.0): split when they are compressed
    and every event shares one layout with a stack field compact.py finds, else compacted."""
    if compress and stack_split_ok(layouts):
        return partial(_split_or_compact, layout=layouts[0]), True
    return partial(compact_stacks, layout=layouts[0]), False


def _split_or_compact(buf: bytes, layout: R.SampleLayout) -> bytes | tuple[bytes, bytes]:
    parts = split_stacks(buf, layout)
    return compact_stacks(buf, layout) if parts is None else parts


def field_spans(fields: bytes | memoryview) -> npt.NDArray[np.int64]:
    """Each stack field of a FLAG_STACKS frame's second part as a row (where its data starts,
    its ``size``, its ``dyn_size``), in SAMPLE order (the compiled ``field_spans`` when it is
    built); a part that is not whole fields is a FormatError."""
    from profiler.native import kernels

    module = kernels()
    if module is None:
        return field_spans_python(fields)
    out = module.field_spans(fields)
    if out is None:
        raise FormatError(_MISFIT)
    return np.frombuffer(out, dtype=np.int64).reshape(-1, 3)


def field_spans_python(fields: bytes | memoryview) -> npt.NDArray[np.int64]:
    """:func:`field_spans` in Python: the reference the compiled one is tested against."""
    view = memoryview(fields)
    out: list[tuple[int, int, int]] = []
    q = 0
    if len(view) % 8:
        raise FormatError(_MISFIT)
    while q + 8 <= len(view):
        size = _U64.unpack_from(view, q)[0]
        length = 8 if size == 0 else 16 + size
        if size % 8 or q + length > len(view):
            raise FormatError(_MISFIT)
        out.append((q + 8, size, _U64.unpack_from(view, q + 8 + size)[0] if size else 0))
        q += length
    return np.asarray(out, dtype=np.int64).reshape(-1, 3)


def sample_offsets(records: bytes | memoryview) -> npt.NDArray[np.int64]:
    """Where each SAMPLE record of ``records`` (whole native-order kernel records) starts."""
    from profiler.native import kernels

    module = kernels()
    if module is not None:
        return np.frombuffer(module.sample_offsets(records), dtype=np.int64)
    return np.asarray([pos for pos in record_offsets(records)
                       if _HDR.unpack_from(records, pos)[0] == R.PERF_RECORD_SAMPLE], dtype=np.int64)
