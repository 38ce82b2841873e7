"""Hand-built perf.data files (file and pipe mode, compressed or not) for reader tests.

The layout follows tools/perf/Documentation/perf.data-file-format.txt; kernel records are
encoded with the format's own encoder. The e2e tests check the reader against real perf
output; these files cover what perf on this machine does not write (big endian, damage,
AUXTRACE payloads, COMPRESSED2, zstd bombs).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from profiler.format import records as R

from profiler.format.encode import encode
from profiler.format.attr import new_attr

MAGIC = b"PERFILE2"
HEADER_SIZE = 104


@dataclass
class PerfEvent:
    attr: dict[str, int]
    ids: list[int]
    name: str


@dataclass
class PerfFile:
    events: list[PerfEvent]
    records: list[bytes]  # encoded records of the data section, in order
    features: dict[int, bytes] = field(default_factory=dict)


def attr_bytes(attr: dict[str, int]) -> bytes:
    return bytes(new_attr(**attr))


def pstring(text: str) -> bytes:
    raw = text.encode() + b"\0"
    raw += b"\0" * (-len(raw) % 8)
    return struct.pack("<I", len(raw)) + raw


def string_list(items: Sequence[str]) -> bytes:
    return struct.pack("<I", len(items)) + b"".join(pstring(s) for s in items)


def build_id_entry(pid: int, cpumode: int, build_id: bytes, filename: str) -> bytes:
    name = filename.encode() + b"\0"
    name += b"\0" * (-len(name) % 8)
    bid = build_id + bytes(20 - len(build_id)) + bytes([len(build_id)]) + bytes(3)
    size = 8 + 4 + 24 + len(name)
    return struct.pack("<IHHi", 67, cpumode | (1 << 15), size, pid) + bid + name


def event_desc(events: Sequence[PerfEvent]) -> bytes:
    out = struct.pack("<II", len(events), 128)
    for ev in events:
        out += attr_bytes(ev.attr) + struct.pack("<I", len(ev.ids)) + pstring(ev.name)
        out += struct.pack(f"<{len(ev.ids)}Q", *ev.ids)
    return out


def standard_features(events: Sequence[PerfEvent], build_ids: bytes = b"") -> dict[int, bytes]:
    feats = {
        3: pstring("testhost"), 4: pstring("6.0.0-test"), 5: pstring("6.1.0"), 6: pstring("x86_64"),
        7: struct.pack("<II", 4, 2), 11: string_list(["/usr/bin/perf", "record", "-g", "./demo"]),
        12: event_desc(events),
        13: string_list(["0-3"]) + string_list(["0-1", "2-3"]) + struct.pack("<8I", 0, 0, 0, 0, 1, 0, 1, 0),
        21: struct.pack("<QQ", 2_000, 9_000),
    }
    if build_ids:
        feats[2] = build_ids
    return feats


def file_mode(pf: PerfFile, data_size: int | None = None) -> bytes:
    """The file layout perf record writes: header, ids, attrs, data, feature table, features."""
    ids_blob = b""
    ids_at = HEADER_SIZE
    attrs = b""
    offsets = []
    for ev in pf.events:
        offsets.append((ids_at + len(ids_blob), 8 * len(ev.ids)))
        ids_blob += struct.pack(f"<{len(ev.ids)}Q", *ev.ids)
    attrs_at = HEADER_SIZE + len(ids_blob)
    for ev, (off, size) in zip(pf.events, offsets):
        attrs += attr_bytes(ev.attr) + struct.pack("<QQ", off, size)
    data_at = attrs_at + len(attrs)
    data = b"".join(pf.records)
    bits = sorted(pf.features)
    feat_table_at = data_at + len(data)
    body_at = feat_table_at + 16 * len(bits)
    table, bodies = b"", b""
    for bit in bits:
        table += struct.pack("<QQ", body_at + len(bodies), len(pf.features[bit]))
        bodies += pf.features[bit]
    flags = sum(1 << b for b in bits).to_bytes(32, "little")
    header = MAGIC + struct.pack("<QQ", HEADER_SIZE, 128 + 16) + struct.pack(
        "<QQQQQQ", attrs_at, len(attrs), data_at, len(data) if data_size is None else data_size, 0, 0) + flags
    assert len(header) == HEADER_SIZE
    return header + ids_blob + attrs + data + table + bodies


def pipe_mode(pf: PerfFile) -> bytes:
    """The pipe layout: a 16-byte header, then ATTR, EVENT_UPDATE and FEATURE records first."""
    out = MAGIC + struct.pack("<Q", 16)
    for ev in pf.events:
        body = attr_bytes(ev.attr) + struct.pack(f"<{len(ev.ids)}Q", *ev.ids)
        out += struct.pack("<IHH", 64, 0, 8 + len(body)) + body
        name = ev.name.encode() + b"\0"
        name += b"\0" * (-len(name) % 8)
        out += struct.pack("<IHHQQ", 78, 0, 24 + len(name), 2, ev.ids[0]) + name
    for bit, blob in sorted(pf.features.items()):
        if bit in (2, 12):
            continue  # perf sends build-ids as records and events as ATTR records in pipe mode
        out += struct.pack("<IHHQ", 80, 0, 16 + len(blob), bit) + blob  # odd sizes, like perf's
    if 2 in pf.features:
        out += pf.features[2]  # BUILD_ID records
    return out + b"".join(pf.records)


def compressed(records: Sequence[bytes], piece: int = 200, compressed2: bool = False) -> list[bytes]:
    """The records as one zstd stream cut into COMPRESSED records of at most ``piece`` bytes
    (perf 6.1 does not pad them; COMPRESSED2 carries its data size and is padded)."""
    import zstandard

    stream = zstandard.ZstdCompressor(level=3).compress(b"".join(records))
    out = []
    for at in range(0, len(stream), piece):
        chunk = stream[at:at + piece]
        if compressed2:
            body = struct.pack("<Q", len(chunk)) + chunk + bytes(-len(chunk) % 8)
            out.append(struct.pack("<IHH", 83, 0, 8 + len(body)) + body)
        else:
            out.append(struct.pack("<IHH", 81, 0, 8 + len(chunk)) + chunk)
    return out


def round_record() -> bytes:
    return struct.pack("<IHH", 68, 0, 8)


def encode_all(recs: Sequence[R.Record], attr: dict[str, int]) -> list[bytes]:
    layout = R.SampleLayout.from_attr(attr)
    return [encode(r, layout) for r in recs]
