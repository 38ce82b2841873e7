"""The kernel's record format without record objects: perf_event.h's constants, the SAMPLE
field table, an event's :class:`SampleLayout`, the record names and fixed body layouts, and the
byte writer that encodes them.

:mod:`profiler.format.records` builds one dataclass per record type on this (and re-exports
all of it). The recorder needs only this module: it copies kernel records without decoding
them, and its few synthesized records (COMM, FORK, MMAP, MMAP2 from /proc) are encoded from
their fields with :func:`encode_fields`. Importing the record dataclasses would cost it about
14 ms of CPU at every start (dataclasses generates and compiles each class's methods); this
module's two classes are plain :mod:`profiler.value` classes for the same reason.
"""

from __future__ import annotations

import struct
from functools import cached_property

from profiler.value import Frozen

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

# --- enum perf_event_type -----------------------------------------------------------------
PERF_RECORD_MMAP = 1
PERF_RECORD_LOST = 2
PERF_RECORD_COMM = 3
PERF_RECORD_EXIT = 4
PERF_RECORD_THROTTLE = 5
PERF_RECORD_UNTHROTTLE = 6
PERF_RECORD_FORK = 7
PERF_RECORD_READ = 8
PERF_RECORD_SAMPLE = 9
PERF_RECORD_MMAP2 = 10
PERF_RECORD_AUX = 11
PERF_RECORD_ITRACE_START = 12
PERF_RECORD_LOST_SAMPLES = 13
PERF_RECORD_SWITCH = 14
PERF_RECORD_SWITCH_CPU_WIDE = 15
PERF_RECORD_NAMESPACES = 16
PERF_RECORD_KSYMBOL = 17
PERF_RECORD_BPF_EVENT = 18
PERF_RECORD_CGROUP = 19
PERF_RECORD_TEXT_POKE = 20
PERF_RECORD_AUX_OUTPUT_HW_ID = 21

# PERF_RECORD_NAMESPACES: one {dev, inode} per index of perf_event.h's namespace enum
# (NET_NS_INDEX = 0 ... CGROUP_NS_INDEX = 6, NR_NAMESPACES = 7), named as in /proc/PID/ns/
# (and as perf script prints them).
NAMESPACE_NAMES: tuple[str, ...] = ("net", "uts", "ipc", "pid", "user", "mnt", "cgroup")
CGROUP_NS_INDEX = 6
NR_NAMESPACES = len(NAMESPACE_NAMES)

# --- enum perf_event_sample_format ----------------------------------------------------------
PERF_SAMPLE_IP = 1 << 0
PERF_SAMPLE_TID = 1 << 1
PERF_SAMPLE_TIME = 1 << 2
PERF_SAMPLE_ADDR = 1 << 3
PERF_SAMPLE_READ = 1 << 4
PERF_SAMPLE_CALLCHAIN = 1 << 5
PERF_SAMPLE_ID = 1 << 6
PERF_SAMPLE_CPU = 1 << 7
PERF_SAMPLE_PERIOD = 1 << 8
PERF_SAMPLE_STREAM_ID = 1 << 9
PERF_SAMPLE_RAW = 1 << 10
PERF_SAMPLE_BRANCH_STACK = 1 << 11
PERF_SAMPLE_REGS_USER = 1 << 12
PERF_SAMPLE_STACK_USER = 1 << 13
PERF_SAMPLE_WEIGHT = 1 << 14
PERF_SAMPLE_DATA_SRC = 1 << 15
PERF_SAMPLE_IDENTIFIER = 1 << 16
PERF_SAMPLE_TRANSACTION = 1 << 17
PERF_SAMPLE_REGS_INTR = 1 << 18
PERF_SAMPLE_PHYS_ADDR = 1 << 19
PERF_SAMPLE_AUX = 1 << 20
PERF_SAMPLE_CGROUP = 1 << 21
PERF_SAMPLE_DATA_PAGE_SIZE = 1 << 22
PERF_SAMPLE_CODE_PAGE_SIZE = 1 << 23
PERF_SAMPLE_WEIGHT_STRUCT = 1 << 24
PERF_SAMPLE_MAX = 1 << 25

PERF_SAMPLE_BRANCH_HW_INDEX = 1 << 17

# --- enum perf_event_read_format --------------------------------------------------------------
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_FORMAT_ID = 1 << 2
PERF_FORMAT_GROUP = 1 << 3
PERF_FORMAT_LOST = 1 << 4

# --- header.misc --------------------------------------------------------------------------------
PERF_RECORD_MISC_CPUMODE_MASK = 7
PERF_RECORD_MISC_CPUMODE_UNKNOWN = 0
PERF_RECORD_MISC_KERNEL = 1
PERF_RECORD_MISC_USER = 2
PERF_RECORD_MISC_HYPERVISOR = 3
PERF_RECORD_MISC_GUEST_KERNEL = 4
PERF_RECORD_MISC_GUEST_USER = 5
PERF_RECORD_MISC_PROC_MAP_PARSE_TIMEOUT = 1 << 12
PERF_RECORD_MISC_MMAP_DATA = 1 << 13
PERF_RECORD_MISC_COMM_EXEC = 1 << 13
PERF_RECORD_MISC_FORK_EXEC = 1 << 13
PERF_RECORD_MISC_SWITCH_OUT = 1 << 13
PERF_RECORD_MISC_EXACT_IP = 1 << 14
PERF_RECORD_MISC_SWITCH_OUT_PREEMPT = 1 << 14
PERF_RECORD_MISC_MMAP_BUILD_ID = 1 << 14
PERF_RECORD_MISC_EXT_RESERVED = 1 << 15

CPUMODE_NAMES = {
    PERF_RECORD_MISC_CPUMODE_UNKNOWN: "unknown",
    PERF_RECORD_MISC_KERNEL: "kernel",
    PERF_RECORD_MISC_USER: "user",
    PERF_RECORD_MISC_HYPERVISOR: "hypervisor",
    PERF_RECORD_MISC_GUEST_KERNEL: "guest-kernel",
    PERF_RECORD_MISC_GUEST_USER: "guest-user",
}

# enum perf_callchain_context: markers inside a callchain, not addresses.
PERF_CONTEXT_HV = (1 << 64) - 32
PERF_CONTEXT_KERNEL = (1 << 64) - 128
PERF_CONTEXT_USER = (1 << 64) - 512
PERF_CONTEXT_GUEST = (1 << 64) - 2048
PERF_CONTEXT_GUEST_KERNEL = (1 << 64) - 2176
PERF_CONTEXT_GUEST_USER = (1 << 64) - 2560
PERF_CONTEXT_MAX = (1 << 64) - 4095

# --- the SAMPLE record's fields: one table -------------------------------------------------
#
# The order is the kernel's (perf_output_sample() in kernel/events/core.c, which writes CGROUP,
# then the page sizes, then AUX; the header's comment lists AUX earlier and omits CGROUP). This
# table drives the exact decoder and encoder below and the columnar decoder's offsets
# (profiler.format.decode.samples): the order is written once.

KIND_U64 = "u64"  # one u64
KIND_U32_PAIR = "u32x2"  # two u32 in one word: (pid, tid), (cpu, res)
KIND_READ = "read"  # struct read_format, shaped by attr.read_format
KIND_CALLCHAIN = "callchain"  # u64 nr; u64 ips[nr]
KIND_RAW = "raw"  # u32 size; char data[size] (size counts the padding to 8)
KIND_BRANCH = "branch_stack"  # u64 nr; u64 hw_idx (BRANCH_HW_INDEX only); {from, to, flags}[nr]
KIND_REGS = "regs"  # u64 abi; u64 regs[popcount(mask)] unless abi is 0 (NONE)
KIND_STACK = "stack"  # u64 size; char data[size]; u64 dyn_size (only when size is not 0)
KIND_AUX = "aux"  # u64 size; char data[size]

FIXED_KINDS = (KIND_U64, KIND_U32_PAIR)  # one word each


class SampleField(Frozen):
    """One ``PERF_SAMPLE_*`` field: the bit(s) that select it, its name in perf_event.h, how
    it is laid out, the attributes of :class:`Sample` (or :class:`SampleId`) it fills, and
    the attr field that shapes it (``read_format``, ``sample_regs_user``, ...), if any."""

    __slots__ = _fields = ("bit", "name", "kind", "attrs", "shaped_by")

    def __init__(self, bit: int, name: str, kind: str, attrs: tuple[str, ...], shaped_by: str = "") -> None:
        self.bit = bit
        self.name = name
        self.kind = kind
        self.attrs = attrs
        self.shaped_by = shaped_by


def _u64(bit: int, name: str) -> SampleField:
    return SampleField(bit, name, KIND_U64, (name,))


F_IDENTIFIER = _u64(PERF_SAMPLE_IDENTIFIER, "identifier")
F_TID = SampleField(PERF_SAMPLE_TID, "tid", KIND_U32_PAIR, ("pid", "tid"))
F_TIME = _u64(PERF_SAMPLE_TIME, "time")
F_ID = _u64(PERF_SAMPLE_ID, "id")
F_STREAM_ID = _u64(PERF_SAMPLE_STREAM_ID, "stream_id")
F_CPU = SampleField(PERF_SAMPLE_CPU, "cpu", KIND_U32_PAIR, ("cpu", "res"))

SAMPLE_FIELDS: tuple[SampleField, ...] = (
    F_IDENTIFIER,
    _u64(PERF_SAMPLE_IP, "ip"),
    F_TID,
    F_TIME,
    _u64(PERF_SAMPLE_ADDR, "addr"),
    F_ID,
    F_STREAM_ID,
    F_CPU,
    _u64(PERF_SAMPLE_PERIOD, "period"),
    SampleField(PERF_SAMPLE_READ, "read", KIND_READ, ("read",), "read_format"),
    SampleField(PERF_SAMPLE_CALLCHAIN, "callchain", KIND_CALLCHAIN, ("callchain",)),
    SampleField(PERF_SAMPLE_RAW, "raw", KIND_RAW, ("raw",)),
    SampleField(PERF_SAMPLE_BRANCH_STACK, "branch_stack", KIND_BRANCH, ("branch_hw_idx", "branch_stack"),
                "branch_sample_type"),
    SampleField(PERF_SAMPLE_REGS_USER, "regs_user", KIND_REGS, ("regs_user_abi", "regs_user"), "sample_regs_user"),
    SampleField(PERF_SAMPLE_STACK_USER, "stack_user", KIND_STACK, ("stack_user", "stack_user_dyn_size")),
    SampleField(PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT, "weight", KIND_U64, ("weight",)),
    _u64(PERF_SAMPLE_DATA_SRC, "data_src"),
    _u64(PERF_SAMPLE_TRANSACTION, "transaction"),
    SampleField(PERF_SAMPLE_REGS_INTR, "regs_intr", KIND_REGS, ("regs_intr_abi", "regs_intr"), "sample_regs_intr"),
    _u64(PERF_SAMPLE_PHYS_ADDR, "phys_addr"),
    _u64(PERF_SAMPLE_CGROUP, "cgroup"),
    _u64(PERF_SAMPLE_DATA_PAGE_SIZE, "data_page_size"),
    _u64(PERF_SAMPLE_CODE_PAGE_SIZE, "code_page_size"),
    SampleField(PERF_SAMPLE_AUX, "aux", KIND_AUX, ("aux",)),
)

#: ``struct sample_id``, the trailer of non-sample records with ``sample_id_all``.
SAMPLE_ID_FIELDS: tuple[SampleField, ...] = (F_TID, F_TIME, F_ID, F_STREAM_ID, F_CPU, F_IDENTIFIER)

HEADER_SIZE = 8
MAX_RECORD_SIZE = 0xFFFF  # header.size is a u16


# --- the sample layout of an event ----------------------------------------------------------


def popcount(value: int) -> int:
    return bin(value).count("1")


class SampleLayout(Frozen):
    """What an event's attr says about the shape of its records."""

    _fields = ("sample_type", "read_format", "sample_id_all", "sample_regs_user", "sample_regs_intr",
               "branch_sample_type", "byte_order", "build_id")

    def __init__(
        self,
        sample_type: int,
        read_format: int = 0,
        sample_id_all: bool = False,
        sample_regs_user: int = 0,
        sample_regs_intr: int = 0,
        branch_sample_type: int = 0,
        byte_order: str = "<",  # struct prefix: "<" little endian, ">" big endian
        build_id: bool = False,  # attr.build_id: this event asked for MMAP2's build-id form
    ) -> None:
        self.sample_type = sample_type
        self.read_format = read_format
        self.sample_id_all = sample_id_all
        self.sample_regs_user = sample_regs_user
        self.sample_regs_intr = sample_regs_intr
        self.branch_sample_type = branch_sample_type
        self.byte_order = byte_order
        self.build_id = build_id

    @classmethod
    def from_attr(cls, attr: dict[str, Any], byte_order: str = "little") -> SampleLayout:
        return cls(
            sample_type=int(attr.get("sample_type", 0)),
            read_format=int(attr.get("read_format", 0)),
            sample_id_all=bool(attr.get("sample_id_all", 0)),
            sample_regs_user=int(attr.get("sample_regs_user", 0)),
            sample_regs_intr=int(attr.get("sample_regs_intr", 0)),
            branch_sample_type=int(attr.get("branch_sample_type", 0)),
            byte_order="<" if byte_order == "little" else ">",
            build_id=bool(attr.get("build_id", 0)),
        )

    @cached_property
    def sample_fields(self) -> tuple[SampleField, ...]:
        """The fields of this event's SAMPLE records, in the order they are written."""
        return tuple(f for f in SAMPLE_FIELDS if self.sample_type & f.bit)

    @cached_property
    def sample_id_fields(self) -> tuple[SampleField, ...]:
        """The fields of the ``struct sample_id`` trailer (none without ``sample_id_all``)."""
        if not self.sample_id_all:
            return ()
        return tuple(f for f in SAMPLE_ID_FIELDS if self.sample_type & f.bit)

    @cached_property
    def fixed_words(self) -> int:
        """Words of a SAMPLE before its first variable-size field: the header and the one-word
        fields that precede it (SAMPLE_FIELDS is the order)."""
        words = 1
        for f in self.sample_fields:
            if f.kind not in FIXED_KINDS:
                break
            words += 1
        return words

    @property
    def trailer_size(self) -> int:
        """Bytes of ``struct sample_id`` at the end of non-sample records."""
        return 8 * len(self.sample_id_fields)

    def shape(self, field: SampleField) -> int:
        """The attr value that shapes ``field`` (its register mask, read_format, ...), or 0."""
        return int(getattr(self, field.shaped_by)) if field.shaped_by else 0


# --- record names and fixed body layouts ------------------------------------------------------

RECORD_NAMES: dict[int, str] = {
    PERF_RECORD_MMAP: "MMAP", PERF_RECORD_LOST: "LOST", PERF_RECORD_COMM: "COMM",
    PERF_RECORD_EXIT: "EXIT", PERF_RECORD_THROTTLE: "THROTTLE",
    PERF_RECORD_UNTHROTTLE: "UNTHROTTLE", PERF_RECORD_FORK: "FORK", PERF_RECORD_READ: "READ",
    PERF_RECORD_SAMPLE: "SAMPLE", PERF_RECORD_MMAP2: "MMAP2", PERF_RECORD_AUX: "AUX",
    PERF_RECORD_ITRACE_START: "ITRACE_START", PERF_RECORD_LOST_SAMPLES: "LOST_SAMPLES",
    PERF_RECORD_SWITCH: "SWITCH", PERF_RECORD_SWITCH_CPU_WIDE: "SWITCH_CPU_WIDE",
    PERF_RECORD_NAMESPACES: "NAMESPACES", PERF_RECORD_KSYMBOL: "KSYMBOL",
    PERF_RECORD_BPF_EVENT: "BPF_EVENT", PERF_RECORD_CGROUP: "CGROUP",
    PERF_RECORD_TEXT_POKE: "TEXT_POKE", PERF_RECORD_AUX_OUTPUT_HW_ID: "AUX_OUTPUT_HW_ID",
}


def record_name(rtype: int) -> str:
    return RECORD_NAMES.get(rtype, f"TYPE_{rtype}")


# Fixed-layout bodies: (field, struct code). "str" = NUL-terminated, padded to 8 bytes. MMAP2's
# is its inode form (the decoder also reads the build-id form of its union; records.py).
BODY_SPECS: dict[int, tuple[tuple[str, str], ...]] = {
    PERF_RECORD_MMAP: (("pid", "I"), ("tid", "I"), ("addr", "Q"), ("len", "Q"), ("pgoff", "Q"),
                       ("filename", "str")),
    PERF_RECORD_LOST: (("id", "Q"), ("lost", "Q")),
    PERF_RECORD_COMM: (("pid", "I"), ("tid", "I"), ("comm", "str")),
    PERF_RECORD_EXIT: (("pid", "I"), ("ppid", "I"), ("tid", "I"), ("ptid", "I"), ("time", "Q")),
    PERF_RECORD_THROTTLE: (("time", "Q"), ("id", "Q"), ("stream_id", "Q")),
    PERF_RECORD_UNTHROTTLE: (("time", "Q"), ("id", "Q"), ("stream_id", "Q")),
    PERF_RECORD_FORK: (("pid", "I"), ("ppid", "I"), ("tid", "I"), ("ptid", "I"), ("time", "Q")),
    PERF_RECORD_MMAP2: (("pid", "I"), ("tid", "I"), ("addr", "Q"), ("len", "Q"), ("pgoff", "Q"),
                        ("maj", "I"), ("min", "I"), ("ino", "Q"), ("ino_generation", "Q"),
                        ("prot", "I"), ("flags", "I"), ("filename", "str")),
    PERF_RECORD_AUX: (("aux_offset", "Q"), ("aux_size", "Q"), ("flags", "Q")),
    PERF_RECORD_ITRACE_START: (("pid", "I"), ("tid", "I")),
    PERF_RECORD_LOST_SAMPLES: (("lost", "Q"),),
    PERF_RECORD_SWITCH: (),
    PERF_RECORD_SWITCH_CPU_WIDE: (("next_prev_pid", "I"), ("next_prev_tid", "I")),
    PERF_RECORD_KSYMBOL: (("addr", "Q"), ("len", "I"), ("ksym_type", "H"), ("flags", "H"),
                          ("name", "str")),
    PERF_RECORD_BPF_EVENT: (("type", "H"), ("flags", "H"), ("id", "I"), ("tag", "8s")),
    PERF_RECORD_CGROUP: (("id", "Q"), ("path", "str")),
    PERF_RECORD_AUX_OUTPUT_HW_ID: (("hw_id", "Q"),),
}


# --- encoding --------------------------------------------------------------------------------


class Writer:
    """Collects a record's body, field by field, in the byte order ``bo``."""

    __slots__ = ("parts", "bo")

    def __init__(self, bo: str) -> None:
        self.parts: list[bytes] = []
        self.bo = bo

    def u64(self, *vals: int) -> None:
        self.parts.append(struct.pack(f"{self.bo}{len(vals)}Q", *vals))

    def u32(self, *vals: int) -> None:
        self.parts.append(struct.pack(f"{self.bo}{len(vals)}I", *vals))

    def u16(self, *vals: int) -> None:
        self.parts.append(struct.pack(f"{self.bo}{len(vals)}H", *vals))

    def raw(self, data: bytes) -> None:
        self.parts.append(bytes(data))

    def cstr(self, text: str) -> None:
        data = text.encode("utf-8", "surrogateescape") + b"\0"
        self.parts.append(data + b"\0" * (-len(data) % 8))

    def pad8(self) -> None:
        n = sum(len(p) for p in self.parts)
        self.parts.append(b"\0" * (-n % 8))

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def opt(value: int | None) -> int:
    """An optional field's value as written: 0 when absent."""
    return 0 if value is None else value


def write_fixed(w: Writer, source: Any, field: SampleField) -> None:
    """A one-word SAMPLE or ``struct sample_id`` field from ``source``'s attributes (0 for
    None or a missing attribute)."""
    if field.kind == KIND_U64:
        w.u64(opt(getattr(source, field.attrs[0], None)))
    else:
        w.u32(opt(getattr(source, field.attrs[0], None)), opt(getattr(source, field.attrs[1], None)))


def write_sample_id(w: Writer, sample_id: Any, layout: SampleLayout) -> None:
    """The ``struct sample_id`` trailer of a non-sample record, when ``layout.sample_id_all``
    is set (fields missing from ``sample_id``, or all of them when it is None, are zero)."""
    for f in layout.sample_id_fields:
        write_fixed(w, sample_id, f)


def write_fields(w: Writer, rtype: int, source: Any) -> None:
    """The body of a record of a fixed layout (:data:`BODY_SPECS`), from ``source``'s
    attributes of the same names."""
    for name, code in BODY_SPECS[rtype]:
        value = getattr(source, name)
        if code == "str":
            w.cstr(value)
        elif code == "Q":
            w.u64(value)
        elif code == "I":
            w.u32(value)
        elif code == "H":
            w.u16(value)
        else:
            w.raw(bytes(value).ljust(8, b"\0")[:8])
    w.pad8()


def finish(w: Writer, rtype: int, misc: int, layout: SampleLayout) -> bytes:
    """The record: ``struct perf_event_header`` and the body written to ``w``."""
    body = w.getvalue()
    size = HEADER_SIZE + len(body)
    if size > MAX_RECORD_SIZE:
        raise ValueError(f"{record_name(rtype)} record of {size} bytes exceeds the u16 size field")
    return struct.pack(layout.byte_order + "IHH", rtype, misc, size) + body


def write_namespaces(w: Writer, source: Any) -> None:
    """PERF_RECORD_NAMESPACES' body: ``u32 pid, tid; u64 nr_namespaces;`` then
    ``struct perf_ns_link_info { u64 dev; u64 ino; }`` per namespace, from ``source.pid``,
    ``source.tid`` and ``source.namespaces`` ((dev, ino) pairs in the enum's order)."""
    w.u32(source.pid, source.tid)
    w.u64(len(source.namespaces))
    for dev, ino in source.namespaces:
        w.u64(dev, ino)


def encode_fields(rtype: int, misc: int, source: Any, layout: SampleLayout) -> bytes:
    """A record of a fixed layout (:data:`BODY_SPECS`, and NAMESPACES) as the kernel writes it
    for an event with ``layout``: its body from ``source``'s attributes, its trailer from
    ``source.sample_id``. ``source`` may be a :mod:`profiler.format.records` record or any
    object with those attributes (the recorder's synthesized records)."""
    w = Writer(layout.byte_order)
    if rtype == PERF_RECORD_NAMESPACES:
        write_namespaces(w, source)
    else:
        write_fields(w, rtype, source)
    write_sample_id(w, source.sample_id, layout)
    return finish(w, rtype, misc, layout)
