"""perf.data header pieces: ``struct perf_event_attr`` from its bytes, and the feature sections.

Facts from tools/perf/Documentation/perf.data-file-format.txt (and perf 6.1's output, which
this reader is tested against). Every feature section is untrusted: each length, count and
string is checked against the bytes really there; a section that contradicts itself is
skipped with a warning, never trusted and never an allocation of its claimed size.

Sections read (``HEADER_*`` bit numbers):

* 2 BUILD_ID: records ``{perf_event_header; pid_t pid; u8 build_id[24]; char filename[]}``;
  with ``misc & PERF_RECORD_MISC_BUILD_ID_SIZE`` byte 20 of ``build_id`` is its length,
  otherwise 20; ``misc & 7`` is the cpumode (kernel entries name ``[kernel.kallsyms]`` and
  modules);
* 3 HOSTNAME, 4 OSRELEASE, 5 VERSION, 6 ARCH, 8 CPUDESC, 9 CPUID: a ``perf_header_string``
  (``u32 len`` then ``len`` bytes, NUL-padded);
* 7 NRCPUS: ``u32 nr_cpus_available, u32 nr_cpus_online`` (perf writes them in this order;
  the v4.7 document swaps them);
* 10 TOTAL_MEM: ``u64`` kB;  11 CMDLINE: a ``perf_header_string_list``;
* 12 EVENT_DESC: ``u32 nr, u32 attr_size`` then per event ``attr, u32 nr_ids, string name,
  u64 ids[nr_ids]``;
* 13 CPU_TOPOLOGY: two string lists (core and thread siblings), then ``u32 core_id,
  socket_id`` per CPU, then (newer perf) a die list and ``u32 die_id`` per CPU;
* 21 SAMPLE_TIME: ``u64 first, last``;  23 CLOCKID: ``u64`` resolution in ns;
* 27 COMPRESSED: ``u32 version, type (1 = zstd), level, ratio, mmap_len``;
* 29 CLOCK_DATA: ``u32 version, u32 clockid, u64 wall_clock_ns, u64 clockid_time_ns``.
"""

from __future__ import annotations

import struct
from dataclasses import field
from typing import Any

from profiler.dataclass import dataclass
from profiler.format.attr import FLAG_BITS
from profiler.format.perfdata.tracing import TracingDataError, parse_tracing_data

HEADER_TRACING_DATA = 1
HEADER_BUILD_ID = 2
HEADER_HOSTNAME = 3
HEADER_OSRELEASE = 4
HEADER_VERSION = 5
HEADER_ARCH = 6
HEADER_NRCPUS = 7
HEADER_CPUDESC = 8
HEADER_CPUID = 9
HEADER_TOTAL_MEM = 10
HEADER_CMDLINE = 11
HEADER_EVENT_DESC = 12
HEADER_CPU_TOPOLOGY = 13
HEADER_SAMPLE_TIME = 21
HEADER_CLOCKID = 23
HEADER_COMPRESSED = 27
HEADER_CLOCK_DATA = 29
HEADER_FEAT_BITS = 256

FEATURE_NAMES = {
    1: "tracing_data", 2: "build_id", 3: "hostname", 4: "osrelease", 5: "version", 6: "arch",
    7: "nrcpus", 8: "cpudesc", 9: "cpuid", 10: "total_mem", 11: "cmdline", 12: "event_desc",
    13: "cpu_topology", 14: "numa_topology", 15: "branch_stack", 16: "pmu_mappings",
    17: "group_desc", 18: "auxtrace", 19: "stat", 20: "cache", 21: "sample_time",
    22: "mem_topology", 23: "clockid", 24: "dir_format", 25: "bpf_prog_info", 26: "bpf_btf",
    27: "compressed", 28: "cpu_pmu_caps", 29: "clock_data", 30: "hybrid_topology", 31: "pmu_caps",
}

PERF_RECORD_MISC_BUILD_ID_SIZE = 1 << 15
BUILD_ID_FIELD = 24
ATTR_SIZE_VER0 = 64  # the first published struct perf_event_attr
MAX_ATTR_SIZE = 4096  # far above any kernel's; a larger claim is damage
MAX_STRING = 1 << 20
COMPRESSION_ZSTD = 1


class FeatureError(ValueError):
    """A feature section (or attr) whose bytes contradict its sizes."""


class Cursor:
    """Reads integers and perf strings from a bounded window; every read is checked."""

    def __init__(self, buf: bytes | memoryview, bo: str, start: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.bo = bo
        self.pos = start
        self.end = len(buf) if end is None else end

    @property
    def left(self) -> int:
        return self.end - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.left:
            raise FeatureError(f"needs {n} bytes, {self.left} left")
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        st = struct.Struct(self.bo + fmt)
        return st.unpack(self.take(st.size))

    def u32(self) -> int:
        return int(self.unpack("I")[0])

    def u64(self) -> int:
        return int(self.unpack("Q")[0])

    def string(self) -> str:
        """A ``perf_header_string``: u32 length, then that many bytes, NUL-terminated."""
        n = self.u32()
        if n > min(self.left, MAX_STRING):
            raise FeatureError(f"a string of {n} bytes runs past its section")
        return cstr(self.take(n))

    def string_list(self) -> list[str]:
        nr = self.u32()
        if nr > self.left // 4:
            raise FeatureError(f"a list of {nr} strings cannot fit in {self.left} bytes")
        return [self.string() for _ in range(nr)]


def cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


# --- struct perf_event_attr ---------------------------------------------------------------------

# (name, offset, struct code) of every non-flag field, as in /usr/include/linux/perf_event.h;
# a field past the attr's own ``size`` is zero (an older writer's shorter struct).
_ATTR_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("type", 0, "I"), ("size", 4, "I"), ("config", 8, "Q"), ("sample_period", 16, "Q"),
    ("sample_type", 24, "Q"), ("read_format", 32, "Q"), ("wakeup_events", 48, "I"),
    ("bp_type", 52, "I"), ("bp_addr", 56, "Q"), ("bp_len", 64, "Q"), ("branch_sample_type", 72, "Q"),
    ("sample_regs_user", 80, "Q"), ("sample_stack_user", 88, "I"), ("clockid", 92, "i"),
    ("sample_regs_intr", 96, "Q"), ("aux_watermark", 104, "I"), ("sample_max_stack", 108, "H"),
    ("aux_sample_size", 112, "I"), ("sig_data", 120, "Q"), ("config3", 128, "Q"),
)
_FLAGS_AT = 40


def decode_attr(raw: bytes, bo: str) -> dict[str, int]:
    """An attr's bytes (any published size) as the capture header's ``{field: int}`` map.

    The flag bits are a C bitfield: on a big-endian writer bit 0 is the top bit of the first
    byte, so the bits are read per byte in the writer's bit order."""
    if len(raw) < ATTR_SIZE_VER0:
        raise FeatureError(f"an attr of {len(raw)} bytes is shorter than any perf_event_attr")
    padded = raw + bytes(max(0, 136 - len(raw)))
    out: dict[str, int] = {}
    for name, offset, code in _ATTR_FIELDS:
        out[name] = int(struct.unpack_from(bo + code, padded, offset)[0])
    flags = padded[_FLAGS_AT:_FLAGS_AT + 8]
    bit = 0
    for name, width in FLAG_BITS:
        value = 0
        for k in range(width):
            i = bit + k
            byte = flags[i // 8]
            on = (byte >> (i % 8)) & 1 if bo == "<" else (byte >> (7 - i % 8)) & 1
            value |= on << k
        bit += width
        if not name.startswith("__"):
            out[name] = value
    if not out["config3"]:
        del out["config3"]
    return out


# --- the feature sections ----------------------------------------------------------------------


@dataclass
class BuildIdEntry:
    pid: int
    cpumode: int
    build_id: str  # hex
    filename: str


@dataclass
class EventDesc:
    attr: dict[str, int]
    name: str
    ids: list[int]


@dataclass
class Features:
    """What the feature sections (or pipe-mode FEATURE records) said."""

    present: list[str] = field(default_factory=list)
    hostname: str | None = None
    osrelease: str | None = None
    version: str | None = None
    arch: str | None = None
    cpudesc: str | None = None
    cpuid: str | None = None
    nr_cpus_available: int | None = None
    nr_cpus_online: int | None = None
    total_mem_kb: int | None = None
    cmdline: list[str] = field(default_factory=list)
    event_desc: list[EventDesc] = field(default_factory=list)
    cpu_topology: dict[str, Any] = field(default_factory=dict)
    sample_time: tuple[int, int] | None = None
    clockid_res_ns: int | None = None
    compressed: dict[str, int] = field(default_factory=dict)
    clock_data: dict[str, int] = field(default_factory=dict)
    build_ids: list[BuildIdEntry] = field(default_factory=list)
    tracepoint_formats: list[dict[str, str]] = field(default_factory=list)  # TRACING_DATA's formats
    warnings: list[str] = field(default_factory=list)


def parse_build_ids(buf: bytes | memoryview, bo: str, start: int, end: int) -> list[BuildIdEntry]:
    """A sequence of build_id records (the BUILD_ID section, or pipe-mode BUILD_ID records)."""
    out = []
    pos = start
    while pos + 8 <= end:
        _, misc, size = struct.unpack_from(bo + "IHH", buf, pos)
        if size < 8 + 4 + BUILD_ID_FIELD or pos + size > end:
            raise FeatureError(f"a build-id record of {size} bytes at byte {pos} is damaged")
        out.append(build_id_record(buf, bo, pos, size, misc))
        pos += size
    return out


def build_id_record(buf: bytes | memoryview, bo: str, pos: int, size: int, misc: int) -> BuildIdEntry:
    (pid,) = struct.unpack_from(bo + "i", buf, pos + 8)
    raw = bytes(buf[pos + 12:pos + 12 + BUILD_ID_FIELD])
    length = raw[20] if misc & PERF_RECORD_MISC_BUILD_ID_SIZE and 0 < raw[20] <= 20 else 20
    filename = cstr(bytes(buf[pos + 12 + BUILD_ID_FIELD:pos + size]))
    return BuildIdEntry(pid, misc & 7, raw[:length].hex(), filename)


def _event_desc(cur: Cursor) -> list[EventDesc]:
    nr, attr_size = cur.u32(), cur.u32()
    if not ATTR_SIZE_VER0 <= attr_size <= MAX_ATTR_SIZE or nr > cur.left // (attr_size + 8):
        raise FeatureError(f"{nr} event descriptions of {attr_size} bytes do not fit")
    out = []
    for _ in range(nr):
        attr = decode_attr(cur.take(attr_size), cur.bo)
        nr_ids = cur.u32()
        name = cur.string()
        if nr_ids > cur.left // 8:
            raise FeatureError(f"an event claims {nr_ids} ids")
        ids = list(cur.unpack(f"{nr_ids}Q")) if nr_ids else []
        out.append(EventDesc(attr, name, [int(i) for i in ids]))
    return out


def _cpu_topology(cur: Cursor, nr_cpus: int | None) -> dict[str, Any]:
    topo: dict[str, Any] = {"core_siblings": cur.string_list(), "thread_siblings": cur.string_list()}
    n = nr_cpus if nr_cpus is not None else cur.left // 8
    if n and cur.left >= 8 * n:
        pairs = cur.unpack(f"{2 * n}I")
        topo["core_id"] = list(pairs[0::2])
        topo["socket_id"] = list(pairs[1::2])
        if cur.left >= 4:
            topo["die_siblings"] = cur.string_list()
            if cur.left >= 4 * n:
                topo["die_id"] = list(cur.unpack(f"{n}I"))
    return topo


def parse_feature(feat: Features, bit: int, buf: bytes | memoryview, bo: str, start: int, end: int) -> None:
    """Fold one feature section's bytes ``buf[start:end]`` into ``feat`` (damage: a warning)."""
    name = FEATURE_NAMES.get(bit)
    if name is None:
        return  # a feature this reader does not know (perf's pipe mode ends with bit 32)
    cur = Cursor(buf, bo, start, end)
    try:
        if bit == HEADER_TRACING_DATA:
            feat.tracepoint_formats = parse_tracing_data(buf, start, end)
        else:
            _parse(feat, bit, cur)
    except (FeatureError, TracingDataError, struct.error, UnicodeError) as exc:
        feat.warnings.append(f"the perf.data {name.upper()} section is damaged ({exc}); it was ignored.")
        return
    feat.present.append(name)


_STRINGS = {HEADER_HOSTNAME: "hostname", HEADER_OSRELEASE: "osrelease", HEADER_VERSION: "version",
            HEADER_ARCH: "arch", HEADER_CPUDESC: "cpudesc", HEADER_CPUID: "cpuid"}


def _parse(feat: Features, bit: int, cur: Cursor) -> None:
    if bit in _STRINGS:
        setattr(feat, _STRINGS[bit], cur.string())
    elif bit == HEADER_BUILD_ID:
        feat.build_ids.extend(parse_build_ids(cur.buf, cur.bo, cur.pos, cur.end))
    elif bit == HEADER_NRCPUS:
        feat.nr_cpus_available, feat.nr_cpus_online = cur.u32(), cur.u32()
    elif bit == HEADER_TOTAL_MEM:
        feat.total_mem_kb = cur.u64()
    elif bit == HEADER_CMDLINE:
        feat.cmdline = cur.string_list()
    elif bit == HEADER_EVENT_DESC:
        feat.event_desc = _event_desc(cur)
    elif bit == HEADER_CPU_TOPOLOGY:
        feat.cpu_topology = _cpu_topology(cur, feat.nr_cpus_available)
    elif bit == HEADER_SAMPLE_TIME:
        first, last = cur.u64(), cur.u64()
        feat.sample_time = (first, last)
    elif bit == HEADER_CLOCKID:
        feat.clockid_res_ns = cur.u64()
    elif bit == HEADER_COMPRESSED:
        version, ctype, level, ratio, mmap_len = cur.unpack("5I")
        feat.compressed = {"version": version, "type": ctype, "level": level, "ratio": ratio,
                           "mmap_len": mmap_len}
    elif bit == HEADER_CLOCK_DATA:
        version, clockid = cur.u32(), cur.u32()
        wall, clock = cur.u64(), cur.u64()
        feat.clock_data = {"version": version, "clockid": clockid, "wall_clock_ns": wall,
                           "clockid_time_ns": clock}
