"""PERF_RECORD_NAMESPACES: the kernel's layout, the recorder's encoder and damaged records."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from profiler.errors import FormatError
from profiler.format import abi
from profiler.format import records as R
from profiler.format.encode import encode

HEADER = Path("/usr/include/linux/perf_event.h")
LAYOUT = R.SampleLayout(sample_type=R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME, sample_id_all=True)
LINKS = tuple((4, 0xEFFFFFF0 + i) for i in range(7))


def kernel_bytes(pid: int, tid: int, links: tuple[tuple[int, int], ...], trailer: tuple[int, int, int]) -> bytes:
    """As perf_event.h lays it out: header, ``u32 pid, tid; u64 nr_namespaces;``, ``{u64 dev;
    u64 ino;}`` per namespace, then ``struct sample_id`` (here TID and TIME)."""
    body = struct.pack("<IIQ", pid, tid, len(links)) + b"".join(struct.pack("<QQ", d, i) for d, i in links)
    body += struct.pack("<IIQ", *trailer)
    return struct.pack("<IHH", abi.PERF_RECORD_NAMESPACES, 0, 8 + len(body)) + body


def test_the_namespace_indices_are_the_header_s() -> None:
    if not HEADER.exists():
        pytest.skip(f"{HEADER} not installed")
    found = dict(re.findall(r"^\s*([A-Z]+)_NS_INDEX\s*=\s*(\d+)", HEADER.read_text(), re.M))
    assert [name.lower() for name, _ in sorted(found.items(), key=lambda kv: int(kv[1]))] == list(abi.NAMESPACE_NAMES)
    assert int(found["CGROUP"]) == abi.CGROUP_NS_INDEX


def test_decoded_from_the_kernel_s_layout() -> None:
    data = kernel_bytes(10, 11, LINKS, (10, 11, 12345))
    assert len(data) == 8 + 16 + 7 * 16 + 16
    rec = R.decode_record(data, 0, LAYOUT)
    assert isinstance(rec, R.Namespaces)
    assert (rec.pid, rec.tid, rec.namespaces) == (10, 11, LINKS)
    assert rec.namespaces[abi.CGROUP_NS_INDEX] == (4, 0xEFFFFFF6)
    assert rec.sample_id is not None and rec.sample_id.time == 12345


def test_the_recorder_s_encoder_writes_the_kernel_s_bytes() -> None:
    sid = SimpleNamespace(pid=10, tid=11, time=12345)
    synthesized = SimpleNamespace(pid=10, tid=11, namespaces=LINKS, sample_id=sid)
    expected = kernel_bytes(10, 11, LINKS, (10, 11, 12345))
    assert abi.encode_fields(abi.PERF_RECORD_NAMESPACES, 0, synthesized, LAYOUT) == expected
    rec = R.Namespaces(10, 11, LINKS, sample_id=R.SampleId(pid=10, tid=11, time=12345))
    assert encode(rec, LAYOUT) == expected


@pytest.mark.parametrize("damage", ["huge nr", "nr past the body", "cut trailer"])
def test_a_damaged_record_is_refused_not_misread(damage: str) -> None:
    data = bytearray(kernel_bytes(10, 11, LINKS, (10, 11, 12345)))
    if damage == "huge nr":
        data[16:24] = struct.pack("<Q", 1 << 60)  # nothing is allocated from it
    elif damage == "nr past the body":
        data[16:24] = struct.pack("<Q", 8)  # one pair more than the record holds
    else:
        data = data[:24]  # size says 24: the body has no room for its trailer's 16 bytes
        data[6:8] = struct.pack("<H", 24)
    with pytest.raises(FormatError):
        R.decode_record(bytes(data), 0, LAYOUT)


def test_a_record_cut_before_its_declared_end_is_refused() -> None:
    data = kernel_bytes(10, 11, LINKS, (10, 11, 12345))
    with pytest.raises(FormatError):
        R.decode_record(data[:100], 0, LAYOUT)
