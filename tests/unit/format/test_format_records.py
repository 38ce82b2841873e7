"""Record decoding and encoding: every record type, every PERF_SAMPLE_* field."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.errors import FormatError
from profiler.format import records as R
from profiler.format.encode import encode

HEADER = Path("/usr/include/linux/perf_event.h")

u64 = st.integers(0, 2**64 - 1)
u32 = st.integers(0, 2**32 - 1)
u16 = st.integers(0, 2**16 - 1)
text = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=40)


def header_enum_names(prefix: str) -> set[str]:
    """Names ``PREFIX_X = ...`` in the kernel header, MAX and non-ABI entries left out."""
    if not HEADER.exists():
        pytest.skip(f"{HEADER} not installed")
    names = set(re.findall(rf"^\s*{prefix}([A-Z0-9_]+)\s*=", HEADER.read_text(), re.M))
    return {n for n in names if n != "MAX" and not re.match(r"BRANCH_(?!STACK$)|REGS_ABI|MISC_|KSYMBOL_", n)}


# One field-level decoding test per PERF_SAMPLE_* bit: bit name -> (Sample kwargs, extra layout).
SAMPLE_FIELD_CASES: dict[str, tuple[dict[str, Any], dict[str, int]]] = {
    "IP": ({"ip": 0xFFFF_FFFF_8100_0000}, {}),
    "TID": ({"pid": 12, "tid": 34}, {}),
    "TIME": ({"time": 123456789}, {}),
    "ADDR": ({"addr": 0xDEAD_BEEF}, {}),
    "READ": ({"read": R.ReadValues(time_enabled=5, time_running=4,
                                   values=((100, 7, None), (200, 8, None)))},
             {"read_format": R.PERF_FORMAT_GROUP | R.PERF_FORMAT_ID | 3}),
    "CALLCHAIN": ({"callchain": (R.PERF_CONTEXT_KERNEL, 0xFFFF_FFFF_8100_0010,
                                 R.PERF_CONTEXT_USER, 0x401000)}, {}),
    "ID": ({"id": 99}, {}),
    "CPU": ({"cpu": 3, "res": 0}, {}),
    "PERIOD": ({"period": 250000}, {}),
    "STREAM_ID": ({"stream_id": 77}, {}),
    "RAW": ({"raw": b"tracepoint-data!xyz\0"}, {}),  # 20 bytes: 4 + 20 = 24, aligned
    "BRANCH_STACK": ({"branch_hw_idx": 3, "branch_stack": (R.BranchEntry(1, 2, 3), R.BranchEntry(4, 5, 6))},
                     {"branch_sample_type": R.PERF_SAMPLE_BRANCH_HW_INDEX}),
    "REGS_USER": ({"regs_user_abi": 2, "regs_user": (10, 20, 30)}, {"sample_regs_user": 0b10101}),
    "STACK_USER": ({"stack_user": b"\x11" * 16, "stack_user_dyn_size": 12}, {}),
    "WEIGHT": ({"weight": 42}, {}),
    "DATA_SRC": ({"data_src": 0x1234}, {}),
    "IDENTIFIER": ({"identifier": 555}, {}),
    "TRANSACTION": ({"transaction": 9}, {}),
    "REGS_INTR": ({"regs_intr_abi": 2, "regs_intr": (1, 2)}, {"sample_regs_intr": 0b11}),
    "PHYS_ADDR": ({"phys_addr": 0x1000}, {}),
    "AUX": ({"aux": b"auxdata!"}, {}),
    "CGROUP": ({"cgroup": 4242}, {}),
    "DATA_PAGE_SIZE": ({"data_page_size": 4096}, {}),
    "CODE_PAGE_SIZE": ({"code_page_size": 2 << 20}, {}),
    "WEIGHT_STRUCT": ({"weight": (7 << 48) | (5 << 32) | 300}, {}),
}

# One example per record type (with a sample_id trailer added by the test).
RECORD_CASES: dict[str, R.Record] = {
    "MMAP": R.Mmap(1, 2, 0x400000, 0x1000, 0, "/bin/true"),
    "LOST": R.Lost(7, 1000),
    "COMM": R.Comm(1, 1, "bash", exec=True),
    "EXIT": R.Exit(5, 1, 5, 1, 99),
    "THROTTLE": R.Throttle(10, 7, 7),
    "UNTHROTTLE": R.Unthrottle(11, 7, 7),
    "FORK": R.Fork(6, 5, 6, 5, 100),
    "READ": R.Read(1, 2, R.ReadValues(time_enabled=1, time_running=1, values=((5, 7, None),))),
    "SAMPLE": R.Sample(ip=1, pid=2, tid=3, time=4, cpu=0, res=0, period=1, callchain=(1, 2)),
    "MMAP2": R.Mmap2(1, 1, 0x7F00_0000_0000, 0x21000, 0x1000, maj=8, min=2, ino=77,
                     ino_generation=3, prot=5, flags=2, filename="/lib/libc.so.6"),
    "AUX": R.Aux(0, 4096, 1),
    "ITRACE_START": R.ItraceStart(1, 1),
    "LOST_SAMPLES": R.LostSamples(12),
    "SWITCH": R.Switch(misc=R.PERF_RECORD_MISC_SWITCH_OUT),
    "SWITCH_CPU_WIDE": R.SwitchCpuWide(8, 9, misc=R.PERF_RECORD_MISC_SWITCH_OUT),
    "NAMESPACES": R.Namespaces(1, 1, ((1, 2), (3, 4), (5, 6))),
    "KSYMBOL": R.Ksymbol(0xFFFF_FFFF_C000_0000, 256, 1, 0, "bpf_prog_abc"),
    "BPF_EVENT": R.BpfEvent(1, 0, 42, b"12345678"),
    "CGROUP": R.Cgroup(77, "/sys/fs/cgroup/user.slice"),
    "TEXT_POKE": R.TextPoke(0xFFFF_FFFF_8100_0000, 2, 3, b"\x90\x90\xcc\xcc\xcc"),
    "AUX_OUTPUT_HW_ID": R.AuxOutputHwId(3),
}

SAMPLE_BITS = {name: getattr(R, f"PERF_SAMPLE_{name}") for name in SAMPLE_FIELD_CASES}


def test_every_header_sample_bit_has_a_decoding_case() -> None:
    assert header_enum_names("PERF_SAMPLE_") == set(SAMPLE_FIELD_CASES)


def test_every_header_record_type_has_a_decoding_case() -> None:
    assert header_enum_names("PERF_RECORD_") == set(RECORD_CASES)
    assert set(R.RECORD_NAMES.values()) == set(RECORD_CASES)


@pytest.mark.parametrize("bit", sorted(SAMPLE_FIELD_CASES))
@pytest.mark.parametrize("byte_order", ["<", ">"])
def test_sample_field_round_trip(bit: str, byte_order: str) -> None:
    kwargs, extra = SAMPLE_FIELD_CASES[bit]
    sample_type = SAMPLE_BITS[bit] | R.PERF_SAMPLE_IP | R.PERF_SAMPLE_CALLCHAIN
    layout = R.SampleLayout(sample_type=sample_type, byte_order=byte_order, **extra)
    rec = R.Sample(ip=0x1234, callchain=kwargs.get("callchain", (0x10,)), misc=2, **{
        k: v for k, v in kwargs.items() if k not in ("callchain", "ip")})
    if bit == "IP":
        rec.ip = kwargs["ip"]
    data = encode(rec, layout)
    assert len(data) % 8 == 0
    decoded = R.decode_record(data, 0, layout)
    assert decoded == rec
    for key, value in kwargs.items():
        assert getattr(decoded, key) == value


def test_sample_field_order_is_the_kernels() -> None:
    """IP comes before TID, CALLCHAIN after PERIOD: check raw word positions."""
    layout = R.SampleLayout(sample_type=R.PERF_SAMPLE_IDENTIFIER | R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID
                            | R.PERF_SAMPLE_PERIOD | R.PERF_SAMPLE_CALLCHAIN)
    data = encode(R.Sample(identifier=1, ip=2, pid=3, tid=4, period=5, callchain=(6,)), layout)
    words = [int.from_bytes(data[i:i + 8], "little") for i in range(8, len(data), 8)]
    assert words == [1, 2, 3 | (4 << 32), 5, 1, 6]


@pytest.mark.parametrize("name", sorted(RECORD_CASES))
@pytest.mark.parametrize("byte_order", ["<", ">"])
def test_record_type_round_trip(name: str, byte_order: str) -> None:
    layout = R.SampleLayout(
        sample_type=R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_ID | R.PERF_SAMPLE_CPU
        | R.PERF_SAMPLE_IDENTIFIER | R.PERF_SAMPLE_STREAM_ID | R.PERF_SAMPLE_IP | R.PERF_SAMPLE_PERIOD
        | R.PERF_SAMPLE_CALLCHAIN,
        read_format=R.PERF_FORMAT_ID | 3, sample_id_all=True, byte_order=byte_order,
    )
    rec = RECORD_CASES[name]
    if not isinstance(rec, R.Sample):
        rec.sample_id = R.SampleId(pid=1, tid=2, time=3, id=4, stream_id=5, cpu=1, res=0, identifier=4)
    else:
        rec.identifier, rec.id, rec.stream_id = 4, 4, 5
    data = encode(rec, layout)
    assert len(data) % 8 == 0
    assert R.decode_record(data, 0, layout) == rec


def test_mmap2_build_id_form() -> None:
    layout = R.SampleLayout(sample_type=R.PERF_SAMPLE_TIME, sample_id_all=True, build_id=True)
    rec = R.Mmap2(1, 1, 0x1000, 0x1000, 0, prot=5, flags=2, filename="/x", build_id=bytes(range(20)),
                  sample_id=R.SampleId(time=5))
    data = encode(rec, layout)
    decoded = R.decode_record(data, 0, layout)
    assert isinstance(decoded, R.Mmap2)
    assert decoded.misc & R.PERF_RECORD_MISC_MMAP_BUILD_ID
    assert decoded.build_id == bytes(range(20))
    assert decoded.filename == "/x"


def test_mmap2_build_id_flag_trusted_only_for_an_event_that_asked() -> None:
    """The kernel leaves PERF_RECORD_MISC_MMAP_BUILD_ID set on the MMAP2 header it shares with
    other events (another tool's attr.build_id): for us the union is maj/min/ino."""
    plain = R.SampleLayout(sample_type=R.PERF_SAMPLE_TIME, sample_id_all=True)
    rec = R.Mmap2(1, 1, 0x1000, 0x1000, 0, 254, 3, 123456, 7, 5, 2, "/x", sample_id=R.SampleId(time=5))
    data = bytearray(encode(rec, plain))
    struct.pack_into("<H", data, 4, rec.misc | R.PERF_RECORD_MISC_MMAP_BUILD_ID)
    decoded = R.decode_record(bytes(data), 0, plain)
    assert isinstance(decoded, R.Mmap2) and decoded.build_id is None
    assert (decoded.maj, decoded.min, decoded.ino, decoded.ino_generation) == (254, 3, 123456, 7)
    assert not decoded.misc & R.PERF_RECORD_MISC_MMAP_BUILD_ID


@pytest.mark.parametrize("size, reserved", [(0, b"\0\0\0"), (21, b"\0\0\0"), (20, b"\0\1\0")])
def test_mmap2_malformed_build_id_form_is_not_trusted(size: int, reserved: bytes) -> None:
    asked = R.SampleLayout(sample_type=R.PERF_SAMPLE_TIME, sample_id_all=True, build_id=True)
    rec = R.Mmap2(1, 1, 0x1000, 0x1000, 0, filename="/x", build_id=bytes(range(20)), sample_id=R.SampleId(time=5))
    data = bytearray(encode(rec, asked))
    data[40] = size
    data[41:44] = reserved
    decoded = R.decode_record(bytes(data), 0, asked)
    assert isinstance(decoded, R.Mmap2) and decoded.build_id is None


def test_unknown_record_type_kept_opaque() -> None:
    layout = R.SampleLayout(sample_type=0)
    data = encode(R.UnknownRecord(99, b"12345678"), layout)
    decoded = R.decode_record(data, 0, layout)
    assert decoded == R.UnknownRecord(99, b"12345678")


def test_callchain_longer_than_record_is_damage() -> None:
    layout = R.SampleLayout(sample_type=R.PERF_SAMPLE_IP | R.PERF_SAMPLE_CALLCHAIN)
    data = bytearray(encode(R.Sample(ip=1, callchain=(1, 2, 3)), layout))
    data[16:24] = (10**15).to_bytes(8, "little")  # nr = a petabyte of frames
    with pytest.raises(FormatError):
        R.decode_record(bytes(data), 0, layout)


def test_record_size_past_the_end_is_damage() -> None:
    layout = R.SampleLayout(sample_type=R.PERF_SAMPLE_IP)
    data = bytearray(encode(R.Sample(ip=1), layout))
    data[6:8] = (4096).to_bytes(2, "little")
    with pytest.raises(FormatError):
        R.decode_record(bytes(data), 0, layout)


# --- property-based round trip over random layouts and values -----------------------------

ALL_SAMPLE_BITS = R.PERF_SAMPLE_MAX - 1


@st.composite
def layouts(draw: st.DrawFn) -> R.SampleLayout:
    return R.SampleLayout(
        sample_type=draw(st.integers(0, ALL_SAMPLE_BITS)),
        read_format=draw(st.integers(0, 31)),
        sample_id_all=draw(st.booleans()),
        sample_regs_user=draw(st.integers(0, 2**20 - 1)),
        sample_regs_intr=draw(st.integers(0, 2**20 - 1)),
        branch_sample_type=draw(st.sampled_from([0, R.PERF_SAMPLE_BRANCH_HW_INDEX])),
        byte_order=draw(st.sampled_from(["<", ">"])),
        build_id=draw(st.booleans()),
    )


def opt(draw: st.DrawFn, flag: int, bits: int, strategy: st.SearchStrategy[Any]) -> Any:
    return draw(strategy) if flag & bits else None


@st.composite
def read_values(draw: st.DrawFn, read_format: int) -> R.ReadValues:
    n = draw(st.integers(0, 4)) if read_format & R.PERF_FORMAT_GROUP else 1
    vals = tuple((draw(u64), draw(u64) if read_format & R.PERF_FORMAT_ID else None,
                  draw(u64) if read_format & R.PERF_FORMAT_LOST else None) for _ in range(n))
    return R.ReadValues(
        time_enabled=draw(u64) if read_format & R.PERF_FORMAT_TOTAL_TIME_ENABLED else None,
        time_running=draw(u64) if read_format & R.PERF_FORMAT_TOTAL_TIME_RUNNING else None,
        values=vals)


@st.composite
def samples(draw: st.DrawFn, layout: R.SampleLayout) -> R.Sample:
    t = layout.sample_type
    s = R.Sample(misc=draw(st.integers(0, 7)))
    s.identifier = opt(draw, t, R.PERF_SAMPLE_IDENTIFIER, u64)
    s.ip = opt(draw, t, R.PERF_SAMPLE_IP, u64)
    if t & R.PERF_SAMPLE_TID:
        s.pid, s.tid = draw(u32), draw(u32)
    s.time = opt(draw, t, R.PERF_SAMPLE_TIME, u64)
    s.addr = opt(draw, t, R.PERF_SAMPLE_ADDR, u64)
    s.id = opt(draw, t, R.PERF_SAMPLE_ID, u64)
    s.stream_id = opt(draw, t, R.PERF_SAMPLE_STREAM_ID, u64)
    if t & R.PERF_SAMPLE_CPU:
        s.cpu, s.res = draw(u32), draw(u32)
    s.period = opt(draw, t, R.PERF_SAMPLE_PERIOD, u64)
    if t & R.PERF_SAMPLE_READ:
        s.read = draw(read_values(layout.read_format))
    if t & R.PERF_SAMPLE_CALLCHAIN:
        s.callchain = tuple(draw(st.lists(u64, max_size=20)))
    if t & R.PERF_SAMPLE_RAW:
        n = draw(st.integers(0, 5))
        s.raw = draw(st.binary(min_size=8 * n + 4, max_size=8 * n + 4))
    if t & R.PERF_SAMPLE_BRANCH_STACK:
        if layout.branch_sample_type & R.PERF_SAMPLE_BRANCH_HW_INDEX:
            s.branch_hw_idx = draw(u64)
        s.branch_stack = tuple(R.BranchEntry(draw(u64), draw(u64), draw(u64))
                               for _ in range(draw(st.integers(0, 3))))
    if t & R.PERF_SAMPLE_REGS_USER:
        s.regs_user_abi = draw(st.sampled_from([0, 1, 2]))
        n = bin(layout.sample_regs_user).count("1") if s.regs_user_abi else 0
        s.regs_user = tuple(draw(u64) for _ in range(n))
    if t & R.PERF_SAMPLE_STACK_USER:
        n = draw(st.integers(0, 4)) * 8
        s.stack_user = draw(st.binary(min_size=n, max_size=n))
        s.stack_user_dyn_size = draw(u64) if n else 0
    if t & (R.PERF_SAMPLE_WEIGHT | R.PERF_SAMPLE_WEIGHT_STRUCT):
        s.weight = draw(u64)
    s.data_src = opt(draw, t, R.PERF_SAMPLE_DATA_SRC, u64)
    s.transaction = opt(draw, t, R.PERF_SAMPLE_TRANSACTION, u64)
    if t & R.PERF_SAMPLE_REGS_INTR:
        s.regs_intr_abi = draw(st.sampled_from([0, 2]))
        n = bin(layout.sample_regs_intr).count("1") if s.regs_intr_abi else 0
        s.regs_intr = tuple(draw(u64) for _ in range(n))
    s.phys_addr = opt(draw, t, R.PERF_SAMPLE_PHYS_ADDR, u64)
    s.cgroup = opt(draw, t, R.PERF_SAMPLE_CGROUP, u64)
    s.data_page_size = opt(draw, t, R.PERF_SAMPLE_DATA_PAGE_SIZE, u64)
    s.code_page_size = opt(draw, t, R.PERF_SAMPLE_CODE_PAGE_SIZE, u64)
    if t & R.PERF_SAMPLE_AUX:
        n = draw(st.integers(0, 3)) * 8
        s.aux = draw(st.binary(min_size=n, max_size=n))
    return s


@st.composite
def sample_ids(draw: st.DrawFn, layout: R.SampleLayout) -> R.SampleId:
    t = layout.sample_type
    sid = R.SampleId()
    if t & R.PERF_SAMPLE_TID:
        sid.pid, sid.tid = draw(u32), draw(u32)
    sid.time = opt(draw, t, R.PERF_SAMPLE_TIME, u64)
    sid.id = opt(draw, t, R.PERF_SAMPLE_ID, u64)
    sid.stream_id = opt(draw, t, R.PERF_SAMPLE_STREAM_ID, u64)
    if t & R.PERF_SAMPLE_CPU:
        sid.cpu, sid.res = draw(u32), draw(u32)
    sid.identifier = opt(draw, t, R.PERF_SAMPLE_IDENTIFIER, u64)
    return sid


@st.composite
def other_records(draw: st.DrawFn, layout: R.SampleLayout) -> R.Record:
    misc = draw(st.integers(0, 7))
    choice = draw(st.sampled_from(sorted(n for n in RECORD_CASES if n != "SAMPLE")))
    rec: R.Record
    if choice == "MMAP":
        rec = R.Mmap(draw(u32), draw(u32), draw(u64), draw(u64), draw(u64), draw(text))
    elif choice == "MMAP2":
        if layout.build_id and draw(st.booleans()):
            rec = R.Mmap2(draw(u32), draw(u32), draw(u64), draw(u64), draw(u64), prot=draw(u32),
                          flags=draw(u32), filename=draw(text),
                          build_id=draw(st.binary(min_size=1, max_size=20)))
        else:
            rec = R.Mmap2(draw(u32), draw(u32), draw(u64), draw(u64), draw(u64), draw(u32), draw(u32),
                          draw(u64), draw(u64), draw(u32), draw(u32), draw(text))
    elif choice == "COMM":
        rec = R.Comm(draw(u32), draw(u32), draw(text), exec=draw(st.booleans()))
    elif choice in ("EXIT", "FORK"):
        cls = R.Exit if choice == "EXIT" else R.Fork
        rec = cls(draw(u32), draw(u32), draw(u32), draw(u32), draw(u64))
    elif choice == "READ":
        rec = R.Read(draw(u32), draw(u32), draw(read_values(layout.read_format)))
    elif choice == "NAMESPACES":
        rec = R.Namespaces(draw(u32), draw(u32), tuple((draw(u64), draw(u64)) for _ in range(draw(st.integers(0, 7)))))
    elif choice == "KSYMBOL":
        rec = R.Ksymbol(draw(u64), draw(u32), draw(u16), draw(u16), draw(text))
    elif choice == "CGROUP":
        rec = R.Cgroup(draw(u64), draw(text))
    elif choice == "TEXT_POKE":
        old, new = draw(st.integers(0, 8)), draw(st.integers(0, 8))
        rec = R.TextPoke(draw(u64), old, new, draw(st.binary(min_size=old + new, max_size=old + new)))
    else:
        rec = RECORD_CASES[choice]
        rec = type(rec)(**{k: v for k, v in R.record_fields(rec).items() if k not in ("misc", "sample_id")})
    rec.misc |= misc
    if layout.trailer_size:
        rec.sample_id = draw(sample_ids(layout))
    return rec


@pytest.mark.slow  # make check leaves it out; make test runs it
@settings(max_examples=400, deadline=None)
@given(st.data())
def test_round_trip_property(data: st.DataObject) -> None:
    layout = data.draw(layouts())
    rec = data.draw(st.one_of(samples(layout), other_records(layout)))
    encoded = encode(rec, layout)
    assert len(encoded) % 8 == 0
    assert R.decode_record(encoded, 0, layout) == rec
