"""Kernel perf records: one dataclass per record type, and their exact decoding (their encoding,
the inverse, is :mod:`profiler.format.encode`).

Every record starts with ``struct perf_event_header { u32 type; u16 misc; u16 size; }`` and is
a multiple of 8 bytes long. The body layouts are those documented in
/usr/include/linux/perf_event.h (``enum perf_event_type``). Records other than SAMPLE carry a
``struct sample_id`` trailer at their end when the event has ``sample_id_all`` set.

The constants, the SAMPLE field table and :class:`SampleLayout` live in
:mod:`profiler.format.abi` (which the recorder imports without these classes) and are
re-exported here, so ``records.PERF_RECORD_MMAP2`` and ``records.SampleLayout`` still work.

This module is the slow, exact path: one Python object per record, used for non-sample
records, ``profiler dump`` and tests. The reporter's hot path is ``profiler.format.decode``.

Decoding never trusts a size: any field that would run past the end of its record raises
``RecordDecodeError`` (a ``FormatError``); nothing is allocated from a claimed length before it
is checked against the bytes that are really there.
"""

from __future__ import annotations

import struct
from dataclasses import field, fields
from typing import Any, ClassVar

from profiler.dataclass import dataclass
from profiler.errors import FormatError
from profiler.format.abi import *  # noqa: F403  the constants and layouts, re-exported
from profiler.format.abi import BODY_SPECS, popcount


class RecordDecodeError(FormatError):
    """A record whose bytes contradict its own sizes."""


@dataclass(slots=True)
class SampleId:
    """``struct sample_id``: the trailer of non-sample records (fields present per sample_type)."""

    pid: int | None = None
    tid: int | None = None
    time: int | None = None
    id: int | None = None
    stream_id: int | None = None
    cpu: int | None = None
    res: int | None = None
    identifier: int | None = None


@dataclass(slots=True)
class ReadValues:
    """``struct read_format``: ``values`` holds (value, id, lost) per counter (None when absent)."""

    time_enabled: int | None = None
    time_running: int | None = None
    values: tuple[tuple[int, int | None, int | None], ...] = ()


@dataclass(slots=True)
class BranchEntry:
    """One PERF_SAMPLE_BRANCH_STACK entry."""

    from_ip: int
    to_ip: int
    flags: int


# --- record dataclasses ----------------------------------------------------------------------


@dataclass(slots=True)
class Record:
    """Base of every record: ``misc`` from the header, optional ``sample_id`` trailer."""

    TYPE: ClassVar[int] = 0
    misc: int = field(default=0, kw_only=True)
    sample_id: SampleId | None = field(default=None, kw_only=True)

    @property
    def cpumode(self) -> int:
        return self.misc & PERF_RECORD_MISC_CPUMODE_MASK



def record_time(rec: Record) -> int | None:
    """The perf clock time of a record: a sample's TIME, else its sample_id trailer's."""
    if isinstance(rec, Sample):
        return rec.time
    return rec.sample_id.time if rec.sample_id is not None else None


@dataclass(slots=True)
class Mmap(Record):
    """PERF_RECORD_MMAP."""  # a docstring: dataclass() then skips inspect.signature at import

    TYPE: ClassVar[int] = PERF_RECORD_MMAP
    pid: int
    tid: int
    addr: int
    len: int
    pgoff: int
    filename: str


@dataclass(slots=True)
class Lost(Record):
    """PERF_RECORD_LOST."""

    TYPE: ClassVar[int] = PERF_RECORD_LOST
    id: int
    lost: int


@dataclass(slots=True)
class Comm(Record):
    """COMM; ``exec`` mirrors PERF_RECORD_MISC_COMM_EXEC (the comm changed because of exec)."""

    TYPE: ClassVar[int] = PERF_RECORD_COMM
    pid: int
    tid: int
    comm: str
    exec: bool = False

    def __post_init__(self) -> None:
        if self.exec:
            self.misc |= PERF_RECORD_MISC_COMM_EXEC


@dataclass(slots=True)
class Exit(Record):
    """PERF_RECORD_EXIT."""

    TYPE: ClassVar[int] = PERF_RECORD_EXIT
    pid: int
    ppid: int
    tid: int
    ptid: int
    time: int


@dataclass(slots=True)
class Throttle(Record):
    """PERF_RECORD_THROTTLE."""

    TYPE: ClassVar[int] = PERF_RECORD_THROTTLE
    time: int
    id: int
    stream_id: int


@dataclass(slots=True)
class Unthrottle(Record):
    """PERF_RECORD_UNTHROTTLE."""

    TYPE: ClassVar[int] = PERF_RECORD_UNTHROTTLE
    time: int
    id: int
    stream_id: int


@dataclass(slots=True)
class Fork(Record):
    """PERF_RECORD_FORK."""

    TYPE: ClassVar[int] = PERF_RECORD_FORK
    pid: int
    ppid: int
    tid: int
    ptid: int
    time: int


@dataclass(slots=True)
class Read(Record):
    """PERF_RECORD_READ."""

    TYPE: ClassVar[int] = PERF_RECORD_READ
    pid: int
    tid: int
    values: ReadValues


@dataclass(slots=True)
class Sample(Record):
    """PERF_RECORD_SAMPLE; a field is None when its PERF_SAMPLE_* bit is not set."""

    TYPE: ClassVar[int] = PERF_RECORD_SAMPLE
    identifier: int | None = None
    ip: int | None = None
    pid: int | None = None
    tid: int | None = None
    time: int | None = None
    addr: int | None = None
    id: int | None = None
    stream_id: int | None = None
    cpu: int | None = None
    res: int | None = None
    period: int | None = None
    read: ReadValues | None = None
    callchain: tuple[int, ...] | None = None
    raw: bytes | None = None
    branch_hw_idx: int | None = None
    branch_stack: tuple[BranchEntry, ...] | None = None
    regs_user_abi: int | None = None
    regs_user: tuple[int, ...] | None = None
    stack_user: bytes | None = None
    stack_user_dyn_size: int | None = None
    weight: int | None = None
    data_src: int | None = None
    transaction: int | None = None
    regs_intr_abi: int | None = None
    regs_intr: tuple[int, ...] | None = None
    phys_addr: int | None = None
    cgroup: int | None = None
    data_page_size: int | None = None
    code_page_size: int | None = None
    aux: bytes | None = None


@dataclass(slots=True)
class Mmap2(Record):
    """MMAP2; when ``build_id`` is not None the record used the build-id form of the union
    (PERF_RECORD_MISC_MMAP_BUILD_ID) and maj/min/ino/ino_generation are zero."""

    TYPE: ClassVar[int] = PERF_RECORD_MMAP2
    pid: int
    tid: int
    addr: int
    len: int
    pgoff: int
    maj: int = 0
    min: int = 0
    ino: int = 0
    ino_generation: int = 0
    prot: int = 0
    flags: int = 0
    filename: str = ""
    build_id: bytes | None = None

    def __post_init__(self) -> None:
        if self.build_id is not None:
            self.misc |= PERF_RECORD_MISC_MMAP_BUILD_ID


@dataclass(slots=True)
class Aux(Record):
    """PERF_RECORD_AUX."""

    TYPE: ClassVar[int] = PERF_RECORD_AUX
    aux_offset: int
    aux_size: int
    flags: int


@dataclass(slots=True)
class ItraceStart(Record):
    """PERF_RECORD_ITRACE_START."""

    TYPE: ClassVar[int] = PERF_RECORD_ITRACE_START
    pid: int
    tid: int


@dataclass(slots=True)
class LostSamples(Record):
    """PERF_RECORD_LOST_SAMPLES."""

    TYPE: ClassVar[int] = PERF_RECORD_LOST_SAMPLES
    lost: int


@dataclass(slots=True)
class Switch(Record):
    """SWITCH: in or out is PERF_RECORD_MISC_SWITCH_OUT in ``misc``."""

    TYPE: ClassVar[int] = PERF_RECORD_SWITCH

    @property
    def switch_out(self) -> bool:
        return bool(self.misc & PERF_RECORD_MISC_SWITCH_OUT)


@dataclass(slots=True)
class SwitchCpuWide(Record):
    """PERF_RECORD_SWITCH_CPU_WIDE."""

    TYPE: ClassVar[int] = PERF_RECORD_SWITCH_CPU_WIDE
    next_prev_pid: int
    next_prev_tid: int

    @property
    def switch_out(self) -> bool:
        return bool(self.misc & PERF_RECORD_MISC_SWITCH_OUT)


@dataclass(slots=True)
class Namespaces(Record):
    """PERF_RECORD_NAMESPACES."""

    TYPE: ClassVar[int] = PERF_RECORD_NAMESPACES
    pid: int
    tid: int
    namespaces: tuple[tuple[int, int], ...]  # (dev, inode) per namespace


@dataclass(slots=True)
class Ksymbol(Record):
    """PERF_RECORD_KSYMBOL."""

    TYPE: ClassVar[int] = PERF_RECORD_KSYMBOL
    addr: int
    len: int
    ksym_type: int
    flags: int
    name: str


@dataclass(slots=True)
class BpfEvent(Record):
    """PERF_RECORD_BPF_EVENT."""

    TYPE: ClassVar[int] = PERF_RECORD_BPF_EVENT
    type: int
    flags: int
    id: int
    tag: bytes  # BPF_TAG_SIZE = 8


@dataclass(slots=True)
class Cgroup(Record):
    """PERF_RECORD_CGROUP."""

    TYPE: ClassVar[int] = PERF_RECORD_CGROUP
    id: int
    path: str


@dataclass(slots=True)
class TextPoke(Record):
    """PERF_RECORD_TEXT_POKE."""

    TYPE: ClassVar[int] = PERF_RECORD_TEXT_POKE
    addr: int
    old_len: int
    new_len: int
    bytes: bytes  # old bytes followed by new bytes


@dataclass(slots=True)
class AuxOutputHwId(Record):
    """PERF_RECORD_AUX_OUTPUT_HW_ID."""

    TYPE: ClassVar[int] = PERF_RECORD_AUX_OUTPUT_HW_ID
    hw_id: int


@dataclass(slots=True)
class UnknownRecord(Record):
    """A record type this version does not know: kept as raw body bytes."""

    type: int
    body: bytes


RECORD_CLASSES: dict[int, type[Record]] = {
    cls.TYPE: cls
    for cls in (
        Mmap, Lost, Comm, Exit, Throttle, Unthrottle, Fork, Read, Sample, Mmap2, Aux, ItraceStart,
        LostSamples, Switch, SwitchCpuWide, Namespaces, Ksymbol, BpfEvent, Cgroup, TextPoke,
        AuxOutputHwId,
    )
}



# --- decoding --------------------------------------------------------------------------------


class _Cursor:
    """Reads fields from ``buf[pos:end]``; every read is bounds-checked."""

    __slots__ = ("buf", "pos", "end", "bo")

    def __init__(self, buf: bytes | memoryview, pos: int, end: int, bo: str) -> None:
        self.buf, self.pos, self.end, self.bo = buf, pos, end, bo

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.end:
            raise RecordDecodeError(
                f"record field needs {n} bytes at offset {self.pos} but the record ends at {self.end}"
            )

    def u64(self) -> int:
        self.need(8)
        (v,) = struct.unpack_from(self.bo + "Q", self.buf, self.pos)
        self.pos += 8
        return int(v)

    def u32(self) -> int:
        self.need(4)
        (v,) = struct.unpack_from(self.bo + "I", self.buf, self.pos)
        self.pos += 4
        return int(v)

    def u16(self) -> int:
        self.need(2)
        (v,) = struct.unpack_from(self.bo + "H", self.buf, self.pos)
        self.pos += 2
        return int(v)

    def raw(self, n: int) -> bytes:
        self.need(n)
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def u64s(self, n: int) -> tuple[int, ...]:
        self.need(8 * n)  # checked before anything is allocated
        out = struct.unpack_from(f"{self.bo}{n}Q", self.buf, self.pos)
        self.pos += 8 * n
        return tuple(int(v) for v in out)

    def cstr(self) -> str:
        """A NUL-terminated string padded to 8 bytes (the kernel's u64 alignment)."""
        raw = bytes(self.buf[self.pos:self.end])
        nul = raw.find(b"\0")
        text = raw if nul < 0 else raw[:nul]
        used = len(text) + 1 if nul >= 0 else len(text)
        self.pos += min((used + 7) & ~7, self.end - self.pos)
        return text.decode("utf-8", "surrogateescape")


def decode_header(buf: bytes | memoryview, offset: int, bo: str = "<") -> tuple[int, int, int]:
    """(type, misc, size) of the record at ``offset``."""
    rtype, misc, size = struct.unpack_from(bo + "IHH", buf, offset)
    return int(rtype), int(misc), int(size)


def _decode_read(cur: _Cursor, read_format: int) -> ReadValues:
    out = ReadValues()
    has_id = bool(read_format & PERF_FORMAT_ID)
    has_lost = bool(read_format & PERF_FORMAT_LOST)
    if read_format & PERF_FORMAT_GROUP:
        nr = cur.u64()
        per = 1 + has_id + has_lost
        cur.need(8 * per * nr + 8 * popcount(read_format & 3))  # bound nr before looping
        if read_format & PERF_FORMAT_TOTAL_TIME_ENABLED:
            out.time_enabled = cur.u64()
        if read_format & PERF_FORMAT_TOTAL_TIME_RUNNING:
            out.time_running = cur.u64()
        vals = []
        for _ in range(nr):
            value = cur.u64()
            ident = cur.u64() if has_id else None
            lost = cur.u64() if has_lost else None
            vals.append((value, ident, lost))
        out.values = tuple(vals)
    else:
        value = cur.u64()
        if read_format & PERF_FORMAT_TOTAL_TIME_ENABLED:
            out.time_enabled = cur.u64()
        if read_format & PERF_FORMAT_TOTAL_TIME_RUNNING:
            out.time_running = cur.u64()
        ident = cur.u64() if has_id else None
        lost = cur.u64() if has_lost else None
        out.values = ((value, ident, lost),)
    return out


def decode_read_format(buf: bytes | memoryview, read_format: int, bo: str = "=") -> ReadValues:
    """``struct read_format`` on its own, as read(2) of a counter fd returns it (native byte
    order by default); the same decoder as PERF_SAMPLE_READ and PERF_RECORD_READ use."""
    return _decode_read(_Cursor(buf, 0, len(buf), bo), read_format)


def read_format_size(read_format: int, nr: int = 1) -> int:
    """Bytes of ``struct read_format`` for ``nr`` counters (``nr`` matters with GROUP only)."""
    per = 1 + bool(read_format & PERF_FORMAT_ID) + bool(read_format & PERF_FORMAT_LOST)
    times = popcount(read_format & (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING))
    if read_format & PERF_FORMAT_GROUP:
        return 8 * (1 + times + per * nr)
    return 8 * (times + per)


def _decode_fixed(cur: _Cursor, target: Any, field: SampleField) -> None:
    if field.kind == KIND_U64:
        setattr(target, field.attrs[0], cur.u64())
    else:
        setattr(target, field.attrs[0], cur.u32())
        setattr(target, field.attrs[1], cur.u32())


def _decode_sample_id(cur: _Cursor, layout: SampleLayout) -> SampleId:
    sid = SampleId()
    for f in layout.sample_id_fields:
        _decode_fixed(cur, sid, f)
    return sid


def _decode_branch(cur: _Cursor, s: Sample, branch_sample_type: int) -> None:
    nr = cur.u64()
    if branch_sample_type & PERF_SAMPLE_BRANCH_HW_INDEX:
        s.branch_hw_idx = cur.u64()
    flat = cur.u64s(3 * nr)
    s.branch_stack = tuple(BranchEntry(*flat[i:i + 3]) for i in range(0, len(flat), 3))


def _decode_variable(cur: _Cursor, s: Sample, f: SampleField, shape: int) -> None:
    if f.kind == KIND_READ:
        s.read = _decode_read(cur, shape)
    elif f.kind == KIND_CALLCHAIN:
        s.callchain = cur.u64s(cur.u64())
    elif f.kind == KIND_RAW:
        s.raw = cur.raw(cur.u32())
    elif f.kind == KIND_BRANCH:
        _decode_branch(cur, s, shape)
    elif f.kind == KIND_REGS:
        abi = cur.u64()
        setattr(s, f.attrs[0], abi)
        setattr(s, f.attrs[1], cur.u64s(popcount(shape)) if abi else ())
    elif f.kind == KIND_STACK:
        size = cur.u64()
        s.stack_user = cur.raw(size)
        s.stack_user_dyn_size = cur.u64() if size else 0
    else:  # KIND_AUX
        s.aux = cur.raw(cur.u64())


def _decode_sample(cur: _Cursor, layout: SampleLayout, misc: int) -> Sample:
    s = Sample(misc=misc)
    for f in layout.sample_fields:
        if f.kind in FIXED_KINDS:
            _decode_fixed(cur, s, f)
        else:
            _decode_variable(cur, s, f, layout.shape(f))
    return s


def _mmap2_build_id(union: bytes, misc: int, layout: SampleLayout) -> bytes | None:
    """The build-id of an MMAP2 body's union, or None for the inode form.

    The kernel sets PERF_RECORD_MISC_MMAP_BUILD_ID on an MMAP2 header it shares across every
    event of the mmap and never clears it, so the flag is trusted only for an event that set
    ``attr.build_id``, and only when the form is well made: a size of 1 to 20 bytes and zero
    reserved bytes (``u8 build_id_size; u8 __reserved_1; u16 __reserved_2; u8 build_id[20]``)."""
    if not (misc & PERF_RECORD_MISC_MMAP_BUILD_ID and layout.build_id):
        return None
    size = union[0]
    if not 0 < size <= 20 or union[1:4] != b"\0\0\0":
        return None
    return bytes(union[4:4 + size])


def _decode_body(cur: _Cursor, rtype: int, misc: int, layout: SampleLayout) -> Record:
    if rtype == PERF_RECORD_MMAP2:
        pid, tid, addr, length, pgoff = cur.u32(), cur.u32(), cur.u64(), cur.u64(), cur.u64()
        union = cur.raw(24)
        build_id = _mmap2_build_id(union, misc, layout)
        rec = Mmap2(pid, tid, addr, length, pgoff, misc=misc & ~PERF_RECORD_MISC_MMAP_BUILD_ID)
        if build_id is not None:
            rec.build_id = build_id
            rec.misc |= PERF_RECORD_MISC_MMAP_BUILD_ID
        else:
            rec.maj, rec.min, rec.ino, rec.ino_generation = struct.unpack(layout.byte_order + "IIQQ", union)
        rec.prot, rec.flags = cur.u32(), cur.u32()
        rec.filename = cur.cstr()
        return rec
    if rtype == PERF_RECORD_READ:
        return Read(cur.u32(), cur.u32(), _decode_read(cur, layout.read_format), misc=misc)
    if rtype == PERF_RECORD_NAMESPACES:
        pid, tid, nr = cur.u32(), cur.u32(), cur.u64()
        flat = cur.u64s(2 * nr)
        return Namespaces(pid, tid, tuple(zip(flat[0::2], flat[1::2])), misc=misc)
    if rtype == PERF_RECORD_TEXT_POKE:
        addr, old_len, new_len = cur.u64(), cur.u16(), cur.u16()
        data = cur.raw(old_len + new_len)
        return TextPoke(addr, old_len, new_len, data, misc=misc)
    spec = BODY_SPECS.get(rtype)
    if spec is None:
        return UnknownRecord(rtype, cur.raw(cur.end - cur.pos), misc=misc)
    values: list[Any] = []
    for _, code in spec:
        if code == "str":
            values.append(cur.cstr())
        elif code == "Q":
            values.append(cur.u64())
        elif code == "I":
            values.append(cur.u32())
        elif code == "H":
            values.append(cur.u16())
        else:  # "8s"
            values.append(cur.raw(8))
    fixed: Record = RECORD_CLASSES[rtype](*values, misc=misc)
    if isinstance(fixed, Comm):
        fixed.exec = bool(misc & PERF_RECORD_MISC_COMM_EXEC)
    return fixed


def decode_record(buf: bytes | memoryview, offset: int, layout: SampleLayout) -> Record:
    """Decode the record at ``buf[offset:]`` with ``layout`` (the attr of its event)."""
    bo = layout.byte_order
    if offset + HEADER_SIZE > len(buf):
        raise RecordDecodeError("record header runs past the end of the data")
    rtype, misc, size = decode_header(buf, offset, bo)
    if size < HEADER_SIZE or offset + size > len(buf):
        raise RecordDecodeError(f"record claims {size} bytes, {len(buf) - offset} remain")
    end = offset + size
    if rtype == PERF_RECORD_SAMPLE:
        return _decode_sample(_Cursor(buf, offset + HEADER_SIZE, end, bo), layout, misc)
    tsize = layout.trailer_size if rtype < 64 else 0
    if tsize > size - HEADER_SIZE:
        raise RecordDecodeError(f"{record_name(rtype)} record too short for its sample_id trailer")
    rec = _decode_body(_Cursor(buf, offset + HEADER_SIZE, end - tsize, bo), rtype, misc, layout)
    if tsize:
        rec.sample_id = _decode_sample_id(_Cursor(buf, end - tsize, end, bo), layout)
    return rec


def record_fields(rec: Record) -> dict[str, Any]:
    """The record's fields as a dict (for ``profiler dump`` and tests)."""
    return {f.name: getattr(rec, f.name) for f in fields(rec)}
