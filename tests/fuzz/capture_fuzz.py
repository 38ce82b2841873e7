"""Structure-aware fuzzing of the capture reader: mutated captures against the real CLI.

A capture is parsed into its parts (file header map, frames, the records of raw and synth
frames, the maps of metadata frames); a mutation changes one part the way a damaged or
hostile file would — a header or attr field of the wrong type or out of range, a metadata
payload of the wrong shape or a decompression bomb, a record field (sizes, callchain ``nr``,
MMAP2 ``len``, ids, paths), a frame's kind, flags, sequence or length, a cut, garbage
between frames — and re-seals checksums where that gets the damage past the container's
CRCs, so the decoders behind them see it.

The committed perf.data files (``perf-6.1-*.data``: perf record's file mode, its pipe mode,
zstd-compressed records of two events) are read by the same commands and mutated too, on their
own structure: a word of the file header (section offsets and sizes, the feature bitmap), a
field of one record of the data section (type, misc, size, any word of the body), a word among
the feature sections at the end, random bytes, a cut.

Each mutated file is run through one reading command of the CLI, every output of each
(``COMMANDS``: ``report`` as a table, ``--format json``/``csv``, ``-g caller``, ``--sort srcline``,
``--stats``; ``script`` plain, ``--json``, ``-F``; ``annotate``; ``flamegraph``; ``export -f``
folded, speedscope, pprof, firefox; ``buildids`` plain and ``--json``; ``info``; ``dump``;
``import``; ``archive``; ``diff``) in a forked child of a warmed-up parent (imports done once), with an
address-space limit (RLIMIT_AS) and a timeout (SIGALRM then SIGKILL). A run fails on a Python
traceback, a crash, a hang or running out of memory; a clean refusal (one ``profiler:``
sentence, non-zero exit) is a pass. The peak RSS of every child is recorded (``wait4``'s
``ru_maxrss``). A traceback that ``KNOWN_BUGS`` describes is counted apart, not as a failure,
until the bug is fixed (each has a strict xfail test that says so).

Seeds: the committed captures (among them ``nonutf8-name.prof``, whose program path and comm
are not UTF-8, so every output meets such names, and ``offcpu-small.prof``, a real ``--off-cpu``
recording for the ``offcpu`` and ``wall`` events and ``--thread-states``), one built here with several events and every
metadata kind, and the committed perf.data files.

Usage: python tests/fuzz/capture_fuzz.py [--count N] [--seed S] [--jobs J] [--save DIR] [--seeds GLOB]
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import os
import random
import resource
import signal
import struct
import sys
import tempfile
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "fixtures" / "captures"
MAGIC = b"\x7fPROFCAP"
FILE_HEAD = struct.Struct("<8sHHII")
FRAME_HEAD = struct.Struct("<BBHIII")
TIMEOUT_S = 20
MEMORY_MARGIN = 768 << 20  # address space a child may add to the warmed parent's


# --- the parts of a capture ------------------------------------------------------------------


@dataclass
class FrameParts:
    kind: int
    flags: int
    cpu: int
    seq: int
    payload: bytes


@dataclass
class CaptureParts:
    major: int
    minor: int
    header: dict[str, Any]
    frames: list[FrameParts] = field(default_factory=list)


def parse(data: bytes) -> CaptureParts:
    _, major, minor, hlen, _ = FILE_HEAD.unpack_from(data, 0)
    header = msgpack.unpackb(data[20:20 + hlen], raw=False, strict_map_key=False)
    pos = 20 + hlen
    pos += -pos % 8
    parts = CaptureParts(major, minor, header)
    while pos + 16 <= len(data):
        kind, flags, cpu, length, seq, _ = FRAME_HEAD.unpack_from(data, pos)
        payload = data[pos + 16:pos + 16 + length]
        parts.frames.append(FrameParts(kind, flags, cpu, seq, payload))
        pos += 16 + length + (-length % 8)
    return parts


def frame_bytes(f: FrameParts, crc: bool = True) -> bytes:
    prefix = struct.pack("<BBHII", f.kind, f.flags, f.cpu, len(f.payload), f.seq)
    check = zlib.crc32(f.payload, zlib.crc32(prefix)) if crc else 0xDEADBEEF
    return prefix + struct.pack("<I", check) + f.payload + b"\0" * (-len(f.payload) % 8)


def header_bytes(parts: CaptureParts, raw_header: bytes | None = None) -> bytes:
    body = raw_header if raw_header is not None else msgpack.packb(parts.header, use_bin_type=True)
    head = FILE_HEAD.pack(MAGIC, parts.major, parts.minor, len(body), zlib.crc32(body))
    return head + body + b"\0" * (-(len(head) + len(body)) % 8)


def build(parts: CaptureParts, raw_header: bytes | None = None) -> bytes:
    return header_bytes(parts, raw_header) + b"".join(frame_bytes(f) for f in parts.frames)


def meta_of(f: FrameParts) -> dict[str, Any]:
    payload = zlib.decompress(f.payload) if f.flags & 1 else f.payload
    obj = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    assert isinstance(obj, dict)
    return obj


def set_meta(f: FrameParts, obj: Any, compress: bool | None = None) -> None:
    body = msgpack.packb(obj, use_bin_type=True)
    if compress if compress is not None else f.flags & 1:
        f.payload, f.flags = zlib.compress(body, 1), f.flags | 1
    else:
        f.payload, f.flags = body, f.flags & ~1


def record_spans(payload: bytes) -> list[tuple[int, int]]:
    """(offset, size) of each whole kernel record in a raw/synth payload (little endian)."""
    out, pos = [], 0
    while pos + 8 <= len(payload):
        size = struct.unpack_from("<H", payload, pos + 6)[0]
        if size < 8 or pos + size > len(payload):
            break
        out.append((pos, size))
        pos += size
    return out


# --- hostile values ------------------------------------------------------------------------


def hostile_value(rng: random.Random) -> Any:
    choices: list[Callable[[], Any]] = [
        lambda: None, lambda: -1, lambda: 0, lambda: 2**64 - 1, lambda: 2**63, lambda: -(2**63),
        lambda: 2**40, lambda: float("nan"), lambda: float("inf"), lambda: -float("inf"), lambda: 1.5,
        lambda: True, lambda: "x", lambda: "../" * 8 + "etc/passwd", lambda: b"\xff" * 9, lambda: [],
        lambda: {}, lambda: [None] * 1000, lambda: {"a": [1, {"b": None}]}, lambda: [[[[[]]]]] * 50,
        lambda: "\u0000/\u202e", lambda: 2**31, lambda: -(2**31) - 1, lambda: 65536, lambda: "0" * 5000,
        lambda: {1: 2, None: 3}, lambda: [-1] * 20, lambda: rng.randrange(-(2**63), 2**64),
        lambda: msgpack.ExtType(5, b"ext"),
    ]
    return rng.choice(choices)()


def paths_in(obj: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> Iterator[tuple[Any, ...]]:
    """Every key path of nested maps/lists (lists: a few indices)."""
    if depth > 6:
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*prefix, k)
            yield from paths_in(v, (*prefix, k), depth + 1)
    elif isinstance(obj, list) and obj:
        for i in {0, len(obj) - 1, len(obj) // 2}:
            yield (*prefix, i)
            yield from paths_in(obj[i], (*prefix, i), depth + 1)


def mutate_tree(obj: Any, rng: random.Random) -> None:
    """Replace, delete or add one value somewhere inside ``obj`` (a map)."""
    paths = list(paths_in(obj))
    if not paths:
        return
    path = rng.choice(paths)
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    roll = rng.random()
    if roll < 0.75:
        parent[last] = hostile_value(rng)
    elif roll < 0.9 and isinstance(parent, dict):
        del parent[last]
    elif isinstance(parent, list):
        parent.extend([parent[last]] * rng.choice([1, 10, 1000]))
    else:
        parent[rng.choice(["zz_new", 7, "events", "entries", "text"])] = hostile_value(rng)


# --- mutations -------------------------------------------------------------------------------

Mutation = Callable[[CaptureParts, random.Random], bytes]


def m_header_field(parts: CaptureParts, rng: random.Random) -> bytes:
    mutate_tree(parts.header, rng)
    return build(parts)


def m_attr_field(parts: CaptureParts, rng: random.Random) -> bytes:
    events = parts.header.get("events") or []
    if not events:
        return m_header_field(parts, rng)
    ev = rng.choice(events)
    attr = ev.get("attr") or {}
    key = rng.choice(sorted(attr) + ["ids", "name"]) if attr else "ids"
    target = ev if key in ("ids", "name") else attr
    target[key] = rng.choice([hostile_value(rng), rng.getrandbits(64), 1 << rng.randrange(64)])
    if rng.random() < 0.3:  # a second event, same layout, unknown or clashing ids
        parts.header["events"].append({"name": "page-faults", "attr": dict(attr), "ids": [rng.getrandbits(64)]})
    return build(parts)


def m_raw_header(parts: CaptureParts, rng: random.Random) -> bytes:
    """The header map itself damaged: not a map, a nil bomb, deep nesting, truncated."""
    bombs = [
        msgpack.packb([None] * rng.choice([10, 100000])),
        b"\xdd\xff\xff\xff\xff",  # array32 claiming 2^32-1 items
        b"\xdf\xff\xff\xff\xff",  # map32 claiming 2^32-1 entries
        b"\x91" * 5000 + b"\xc0",  # deeply nested arrays
        msgpack.packb({"events": [{"attr": {}}] * 200000}),
        msgpack.packb(parts.header)[:-3],
        msgpack.packb(parts.header) + b"\xc0",
    ]
    return build(parts, rng.choice(bombs))


def _meta_frames(parts: CaptureParts) -> list[FrameParts]:
    return [f for f in parts.frames if f.kind == 4]


def m_meta_field(parts: CaptureParts, rng: random.Random) -> bytes:
    metas = _meta_frames(parts)
    if not metas:
        return m_header_field(parts, rng)
    f = rng.choice(metas)
    obj = meta_of(f)
    mutate_tree(obj, rng)
    set_meta(f, obj)
    return build(parts)


def m_meta_bomb(parts: CaptureParts, rng: random.Random) -> bytes:
    """Metadata that is small in the file and huge once inflated or unpacked."""
    kind = rng.choice(["kallsyms", "buildids", "symbols", "vdso", "kernel", "no-such-kind", "lost", "stats"])
    n = rng.choice([1 << 20, 16 << 20, 64 << 20])
    choice = rng.randrange(6)
    if choice == 0:  # a long string of zeros
        body = msgpack.packb({"kind": kind, "data": {"text": "0" * n}})
    elif choice == 1:  # an array of nils
        body = (b"\x82\xa4kind" + msgpack.packb(kind) + b"\xa4data\x81\xa7entries\xdd" + struct.pack(">I", n)
                + b"\xc0" * n)
    elif choice == 2:  # an array of empty maps
        body = (b"\x82\xa4kind" + msgpack.packb(kind) + b"\xa4data\x81\xa7entries\xdd" + struct.pack(">I", n // 4)
                + b"\x80" * (n // 4))
    elif choice == 3:  # many frames of the same, each below the per-frame limit
        body = msgpack.packb({"kind": kind, "data": {"text": "1" * (n // 8)}})
        frames = [FrameParts(4, 1, 0xFFFF, 0, zlib.compress(body, 9)) for _ in range(16)]
        parts.frames[1:1] = frames
        _renumber(parts)
        return build(parts)
    elif choice == 4:  # a zlib stream that never ends cleanly
        body = zlib.compress(b"\0" * n, 9)[:-8]
        parts.frames.insert(1, FrameParts(4, 1, 0xFFFF, 0, body))
        _renumber(parts)
        return build(parts)
    else:  # many small maps nested in lists
        body = msgpack.packb({"kind": kind, "data": {"entries": [[{}] * 1000] * (n // 4000)}})
    parts.frames.insert(rng.randrange(len(parts.frames) + 1), FrameParts(4, 1, 0xFFFF, 0, zlib.compress(body, 9)))
    _renumber(parts)
    return build(parts)


def _renumber(parts: CaptureParts) -> None:
    for i, f in enumerate(parts.frames):
        f.seq = i


def _record_frames(parts: CaptureParts) -> list[FrameParts]:
    return [f for f in parts.frames if f.kind in (1, 2) and len(f.payload) >= 8]


U64_HOSTILE = [0, 1, 7, 8, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 2**63, 2**64 - 1, 2**64 - 8, 2**32, 0x10000]


def m_record_field(parts: CaptureParts, rng: random.Random) -> bytes:
    frames = _record_frames(parts)
    if not frames:
        return m_frame(parts, rng)
    f = rng.choice(frames)
    spans = record_spans(f.payload)
    if not spans:
        return m_frame(parts, rng)
    off, size = rng.choice(spans)
    data = bytearray(f.payload)
    roll = rng.random()
    if roll < 0.15:  # the record's type or size
        if rng.random() < 0.5:
            struct.pack_into("<I", data, off, rng.choice([0, 1, 9, 10, 11, 15, 20, 64, 68, 99, 0xFFFFFFFF]))
        else:
            struct.pack_into("<H", data, off + 6, rng.choice([0, 8, 9, 16, size + 8, size - 8 if size > 8 else 8,
                                                              0xFFF8, 0xFFFF]))
    elif roll < 0.25:  # misc flags (the MMAP2 build-id flag among them)
        struct.pack_into("<H", data, off + 4, rng.choice([0, 1 << 14, 0xFFFF, 1 << 13, 1 << 15]))
    else:  # a u64/u32 field inside the body
        field_off = off + 8 + 8 * rng.randrange(max((size - 8) // 8, 1))
        if field_off + 8 <= off + size:
            if rng.random() < 0.7:
                struct.pack_into("<Q", data, field_off, rng.choice(U64_HOSTILE))
            else:
                struct.pack_into("<I", data, field_off + 4 * rng.randrange(2),
                                 rng.choice([0, 0xFFFFFFFF, 0x80000000, 20, 21]))
    f.payload = bytes(data)
    return build(parts)


def m_record_path(parts: CaptureParts, rng: random.Random) -> bytes:
    """An MMAP/MMAP2/COMM string replaced: traversal, device files, a FIFO, long, no NUL."""
    frames = _record_frames(parts)
    for f in rng.sample(frames, len(frames)):
        data = bytearray(f.payload)
        for off, size in record_spans(f.payload):
            rtype = struct.unpack_from("<I", data, off)[0]
            start = {1: 8 + 32, 10: 8 + 64, 3: 8 + 8}.get(rtype)
            if start is None or start >= size:
                continue
            name = rng.choice([b"/../../../../etc/passwd", b"/dev/zero", b"/proc/self/fd/0", b"/dev/stdin",
                               b"//../outside", b"/proc/kcore", b"/\xff\xfe", b"x" * 64, b"/tmp/fuzz-fifo"])
            room = size - start
            data[off + start:off + size] = (name + b"\0" * room)[:room]
            f.payload = bytes(data)
            return build(parts)
    return m_record_field(parts, rng)


def m_cut_payload(parts: CaptureParts, rng: random.Random) -> bytes:
    """A raw frame whose payload stops mid-record (odd length, or a multiple of 8)."""
    frames = _record_frames(parts)
    if not frames:
        return m_frame(parts, rng)
    f = rng.choice(frames)
    f.payload = f.payload[:rng.randrange(1, len(f.payload))]
    return build(parts)


def m_frame(parts: CaptureParts, rng: random.Random) -> bytes:
    """Frame-level damage: kind, flags, cpu, sequence, duplication, deletion."""
    if not parts.frames:
        return build(parts)
    f = rng.choice(parts.frames)
    roll = rng.randrange(6)
    if roll == 0:
        f.kind = rng.choice([0, 6, 99, 255, 1, 2, 4, 5])
    elif roll == 1:
        f.flags = rng.choice([1, 2, 0xFF, 0])
    elif roll == 2:
        f.cpu = rng.choice([0xFFFF, 4096, 0xFFFE, 3])
    elif roll == 3:
        f.seq = rng.choice([0, f.seq + 1, 2**32 - 1, f.seq - 1 if f.seq else 5])
    elif roll == 4:
        parts.frames.insert(rng.randrange(len(parts.frames) + 1), FrameParts(**vars(rng.choice(parts.frames))))
    else:
        parts.frames.remove(f)
    return build(parts)


def m_bytes(parts: CaptureParts, rng: random.Random) -> bytes:
    """Raw damage anywhere: flipped bytes (checksums left wrong), a cut, inserted garbage."""
    data = bytearray(build(parts))
    roll = rng.randrange(4)
    if roll == 0:
        for _ in range(rng.choice([1, 4, 32])):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif roll == 1:
        data = data[:rng.randrange(len(data))]
    elif roll == 2:
        at = rng.randrange(20, len(data))
        at -= at % 8
        data[at:at] = bytes(rng.getrandbits(8) for _ in range(rng.choice([8, 16, 24, 100])))
    else:  # a frame header in the middle of nowhere, claiming a huge length
        at = rng.randrange(20, len(data))
        at -= at % 8
        data[at:at + 16] = struct.pack("<BBHIII", 1, 0, 0, rng.choice([2**30, 2**32 - 1, 64]), 3, 0)
    return bytes(data)


def m_resealed_bytes(parts: CaptureParts, rng: random.Random) -> bytes:
    """Random bytes of one frame's payload changed, checksum resealed."""
    if not parts.frames:
        return build(parts)
    f = rng.choice([fr for fr in parts.frames if fr.payload] or parts.frames)
    data = bytearray(f.payload)
    for _ in range(rng.choice([1, 2, 8, 64])):
        if data:
            data[rng.randrange(len(data))] = rng.getrandbits(8)
    f.payload = bytes(data)
    return build(parts)


MUTATIONS: list[tuple[Mutation, int]] = [
    (m_header_field, 10), (m_attr_field, 12), (m_raw_header, 3), (m_meta_field, 14), (m_meta_bomb, 4),
    (m_record_field, 18), (m_record_path, 6), (m_cut_payload, 6), (m_frame, 8), (m_bytes, 8),
    (m_resealed_bytes, 11),
]


# --- perf.data mutations ------------------------------------------------------------------------

PERF_MAGIC = b"PERFILE2"
PERF_FILE_HEADER = 104  # magic, size, attr_size, attrs/data/event_types sections, feature bitmap
PERF_WORDS = [0, 1, 7, 8, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 2**63 - 1, 2**63, 2**64 - 1,
              0x1000, 0x10000000]


def perf_records(data: bytes) -> list[tuple[int, int]]:
    """(offset, size) of each record of a perf.data file's data section (file or pipe mode)."""
    if struct.unpack_from("<Q", data, 8)[0] == PERF_FILE_HEADER and len(data) >= PERF_FILE_HEADER:
        start, size = struct.unpack_from("<QQ", data, 40)
        end = min(len(data), start + size)
    else:  # pipe mode: a 16-byte header, then records to the end
        start, end = 16, len(data)
    out, pos = [], start
    while pos + 8 <= end:
        rsize = struct.unpack_from("<H", data, pos + 6)[0]
        if rsize < 8 or pos + rsize > end:
            break
        out.append((pos, rsize))
        pos += rsize
    return out


def _put_word(data: bytearray, at: int, rng: random.Random, width: int = 8) -> None:
    fmt = {2: "<H", 4: "<I", 8: "<Q"}[width]
    value = rng.choice(PERF_WORDS + [len(data), len(data) + 8]) if rng.random() < 0.8 else rng.getrandbits(64)
    if 0 <= at <= len(data) - width:
        struct.pack_into(fmt, data, at, value & ((1 << (8 * width)) - 1))


def pd_header_word(data: bytearray, rng: random.Random) -> None:
    """A word of the file header: its size, a section's offset or size, the feature bitmap."""
    _put_word(data, rng.randrange(8, min(len(data), PERF_FILE_HEADER) - 7) & ~7, rng)


def pd_record_field(data: bytearray, rng: random.Random) -> None:
    """One field of one record: type, misc, size, or a word of its body."""
    spans = perf_records(bytes(data))
    if not spans:
        return pd_bytes(data, rng)
    pos, size = rng.choice(spans)
    roll = rng.random()
    if roll < 0.15:
        _put_word(data, pos, rng, 4)  # type
    elif roll < 0.3:
        _put_word(data, pos + 6, rng, 2)  # size
    elif roll < 0.4:
        _put_word(data, pos + 4, rng, 2)  # misc
    elif size > 8:
        _put_word(data, pos + 8 + rng.randrange(0, size - 8) // 8 * 8, rng)
    return None


def pd_tail_word(data: bytearray, rng: random.Random) -> None:
    """A word among the feature sections after the data (their table, build-ids, strings)."""
    _put_word(data, max(0, len(data) - rng.randrange(8, 4096)) & ~7, rng)


def pd_bytes(data: bytearray, rng: random.Random) -> None:
    for _ in range(rng.choice([1, 2, 8, 64])):
        data[rng.randrange(8, len(data))] = rng.getrandbits(8)


def pd_cut(data: bytearray, rng: random.Random) -> None:
    del data[rng.randrange(16, len(data)):]


PerfMutation = Callable[[bytearray, random.Random], None]
PERF_MUTATIONS: list[tuple[PerfMutation, int]] = [
    (pd_header_word, 6), (pd_record_field, 14), (pd_tail_word, 6), (pd_bytes, 4), (pd_cut, 2),
]


def mutate_perf_data(seed_data: bytes, rng: random.Random) -> tuple[str, bytes]:
    ops, weights = zip(*PERF_MUTATIONS)
    data = bytearray(seed_data)
    names = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        op = rng.choices(ops, weights)[0]
        op(data, rng)
        names.append(op.__name__)
    return names[0], bytes(data)


def mutate(seed_data: bytes, rng: random.Random) -> tuple[str, bytes]:
    if seed_data.startswith(PERF_MAGIC):
        return mutate_perf_data(seed_data, rng)
    ops, weights = zip(*MUTATIONS)
    op = rng.choices(ops, weights)[0]
    parts = parse(seed_data)
    data = op(parts, rng)
    if rng.random() < 0.15:  # a second mutation on top
        try:
            op2 = rng.choices(ops, weights)[0]
            data = op2(parse(data), rng)
        except Exception:
            pass  # the first mutation left nothing the parser can take apart: keep it
    return op.__name__, data


# --- seeds --------------------------------------------------------------------------------------


def seed_captures(only: str | None = None) -> list[bytes]:
    """The committed captures plus one built here with several events and every metadata kind,
    then the committed perf.data files (recorded by perf 6.1); ``only``: those whose file name
    matches this pattern (``offcpu-*``; the one built here is ``multi-event``)."""
    named = {p.name: p.read_bytes() for p in sorted(SEEDS.glob("*.prof"))}
    named["multi-event"] = multi_event_seed(named[min(named)])
    named.update((p.name, p.read_bytes()) for p in sorted(SEEDS.glob("perf-*.data")))
    seeds = [data for name, data in named.items() if only is None or fnmatch.fnmatch(name, only)]
    if not seeds:
        raise SystemExit(f"no seed matches {only!r}: {', '.join(named)}")
    return seeds


def multi_event_seed(base: bytes) -> bytes:
    parts = parse(base)
    events = parts.header["events"]
    attr = dict(events[0]["attr"])
    attr["sample_type"] = int(attr["sample_type"]) | (1 << 16)  # PERF_SAMPLE_IDENTIFIER
    parts.header["events"] = [{"name": "cpu-clock", "attr": attr, "ids": [7, 8]},
                              {"name": "page-faults", "attr": dict(attr), "ids": [9]}]
    samples = []
    for i in range(40):
        ident = (7, 9, 8)[i % 3]
        ip = 0xFFFFFFFF81000100 + i
        body = struct.pack("<QQIIQIIQQQ", ident, ip, 100, 100, 1000 + i, i % 2, 0, 250 + ident, 1, ip)
        samples.append(struct.pack("<IHH", 9, 1, 8 + len(body)) + body)
    parts.frames.insert(len(parts.frames) - 1 if parts.frames else 0, FrameParts(1, 0, 0, 0, b"".join(samples)))
    for kind, data in (("kallsyms", {"text": "ffffffff81000000 T _text\nffffffff81000100 T k_one\n",
                                     "kptr_restrict": 0, "hidden": False}),
                       ("kernel", {"build_id": "ab" * 20, "release": "6.0"}),
                       ("lost", {"per_cpu": {0: 3}}), ("stats", {"samples": 40}),
                       ("modules", {"text": "mod 4096 0 - Live 0xffffffffc0000000\n"}),
                       ("buildids", {"entries": [{"path": "/usr/bin/demo", "build_id": "cd" * 20, "source": "file",
                                                  "maj": 8, "min": 1, "ino": 1234, "ino_generation": 0}]})):
        parts.frames.insert(1, FrameParts(4, 0, 0xFFFF, 0, msgpack.packb({"kind": kind, "data": data})))
    _renumber(parts)
    return build(parts)


# --- running one input -------------------------------------------------------------------------

COMMANDS = [
    ["info"], ["report", "--stdio"], ["report", "-g", "caller"], ["report", "--no-children", "--sort", "dso,sym"],
    ["script"], ["buildids"], ["export", "-f", "speedscope"], ["export", "-f", "folded"], ["flamegraph"],
    ["dump"], ["report", "--format", "json"], ["report", "--stats"], ["export", "-f", "pprof"],
    ["export", "-f", "firefox"], ["import"], ["archive"],
    ["report", "--format", "csv"], ["report", "--sort", "srcline", "-g", "none"], ["script", "--json"],
    ["diff"],
    ["script", "-F", "comm,pid,tid,cpu,time,period,event,ip,sym,symoff,dso"], ["annotate"], ["buildids", "--json"],
    ["export", "-f", "otlp"], ["export", "-f", "otlp", "--json"],
    # the off-CPU pseudo-events (offcpu-small.prof has them; other seeds refuse in one sentence)
    ["report", "--event", "offcpu"], ["report", "--wall", "--no-children"], ["report", "--thread-states"],
    ["flamegraph", "--wall"], ["export", "--event", "offcpu", "-f", "pprof"], ["script", "--event", "offcpu"],
]
# functions of the seeds (and one that none has) for annotate
ANNOTATE = ["work_a", "work_b", "leaf", "lib_mix", "main", "k_one", "no_such_function"]

# Tracebacks of known bugs, each with a strict xfail test: (name, command words that lead to it,
# text in the traceback). Counted in Report.known, not as failures; remove the entry with the fix.
KNOWN_BUGS: list[tuple[str, list[str], str]] = []  # (name, the command's first words, text of its traceback)


def known_bug(argv: list[str], detail: str) -> str:
    """The name of the known bug an outcome is, or ''."""
    for name, words, text in KNOWN_BUGS:
        if argv[:len(words)] == words and text in detail:
            return name
    return ""


def command_for(rng: random.Random, path: Path, out_dir: Path) -> list[str]:
    cmd = list(rng.choice(COMMANDS))
    if cmd[0] == "import":  # a perf.data file (a capture is one sentence)
        return ["import", "-o", str(out_dir / "out"), str(path)]
    if cmd[0] == "diff":  # the mutated capture against itself
        return ["diff", "-p", str(path), str(path)]
    if cmd[0] == "annotate":
        cmd.append(rng.choice(ANNOTATE))
    if cmd[0] == "archive":  # a copy, so the input is never changed in place
        cmd += ["-o", str(out_dir / "out")]
    if cmd == ["report", "--stdio"]:
        cmd = ["report"]
    if cmd[0] == "flamegraph" or cmd[-1] in ("pprof", "firefox") or "otlp" in cmd:
        cmd += ["-o", str(out_dir / "out")]
    if cmd[0] in ("report", "script", "export", "flamegraph", "buildids", "annotate") and rng.random() < 0.3:
        cmd += ["--symfs", str(out_dir / "symfs"), "--debug-dir", str(out_dir / "debug")]
    return [*cmd, "-i", str(path)]


def command_key(argv: list[str]) -> str:
    """The command and its output options, without the paths: ``export -f pprof``."""
    words = []
    for w in argv:
        if w in ("-i", "-o", "--symfs", "--debug-dir") or w.startswith("/"):
            break
        words.append(w)
    if words and words[0] == "annotate":
        words = words[:1]
    return " ".join(words)


@dataclass
class Outcome:
    ok: bool
    why: str  # "" when ok; "traceback", "signal N", "timeout", "memory"
    detail: str
    maxrss_kb: int


def run_child(argv: list[str], mem_limit: int, timeout: int) -> Outcome:
    """Run the CLI on ``argv`` in a forked child with limits; classify how it ended."""
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.close(err_r)
            resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.alarm(timeout)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(err_w, 2)
            sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)
            sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
            from profiler.cli import main

            main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except MemoryError:
            os.write(err_w, b"\nFUZZ-MEMORY\n")
            code = 97
        except BaseException:
            os.write(err_w, b"\nFUZZ-TRACEBACK\n" + traceback.format_exc().encode(errors="replace")[-6000:])
            code = 98
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:
                pass
        os._exit(code if 0 <= code < 256 else 1)
    os.close(err_w)
    chunks = []
    while True:
        try:
            chunk = os.read(err_r, 65536)
        except InterruptedError:
            continue
        if not chunk:
            break
        if sum(len(c) for c in chunks) < 1 << 20:
            chunks.append(chunk)
    os.close(err_r)
    _, status, usage = os.wait4(pid, 0)
    stderr = b"".join(chunks).decode(errors="replace")
    rss = int(usage.ru_maxrss)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        why = "timeout" if sig == signal.SIGALRM else f"signal {sig}"
        return Outcome(False, why, stderr[-3000:], rss)
    code = os.WEXITSTATUS(status)
    if "FUZZ-MEMORY" in stderr or "MemoryError" in stderr:
        return Outcome(False, "memory", stderr[-3000:], rss)
    if "FUZZ-TRACEBACK" in stderr or "Traceback (most recent call last)" in stderr:
        return Outcome(False, "traceback", stderr[-6000:], rss)
    if code not in (0, 1, 2):
        return Outcome(False, f"exit {code}", stderr[-3000:], rss)
    if code and not any(line.startswith("profiler: ") for line in stderr.splitlines()):
        return Outcome(False, "no sentence", stderr[-3000:], rss)
    return Outcome(True, "", "", rss)


def warm_up(seed: Path, out_dir: Path) -> None:
    """Import every command's modules in the parent, so each child starts warm."""
    import contextlib

    from profiler.cli import main

    for cmd in COMMANDS:
        writes = cmd[0] in ("flamegraph", "archive") or cmd[-1] in ("pprof", "firefox") or "otlp" in cmd
        argv = [*cmd, *(["-o", str(out_dir / "out")] if writes else []), "-i", str(seed)]
        if cmd[0] == "import":
            argv = ["import", "-o", str(out_dir / "out"), str(seed)]
        if cmd[0] == "annotate":
            argv = ["annotate", ANNOTATE[0], "-i", str(seed)]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                main(argv)
            except SystemExit:
                pass


def vm_size() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 1 << 30


@dataclass
class Report:
    runs: int = 0
    failures: list[tuple[str, str, list[str], str, str]] = field(default_factory=list)  # op, why, argv, saved, detail
    worst_rss_kb: int = 0
    worst_rss_op: str = ""
    by_op: dict[str, int] = field(default_factory=dict)
    by_command: dict[str, int] = field(default_factory=dict)
    known: dict[str, int] = field(default_factory=dict)  # KNOWN_BUGS met: name -> runs
    seconds: float = 0.0


def campaign(count: int, seed: int, save: Path | None = None, worker: int = 0, jobs: int = 1,
             timeout: int = TIMEOUT_S, only: str | None = None) -> Report:
    """Run ``count`` mutations (this worker's share: every ``jobs``-th, from ``worker``) of the
    seeds (``only``: see :func:`seed_captures`)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    seeds = seed_captures(only)
    report = Report()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="capture-fuzz-") as tmp:
        work = Path(tmp)
        (work / "symfs").mkdir()
        (work / "debug").mkdir()
        os.mkfifo(work / "symfs" / "fifo")
        seed_path = work / "seed.prof"
        seed_path.write_bytes(seeds[0])
        warm_up(seed_path, work)
        mem_limit = vm_size() + MEMORY_MARGIN
        path = work / "input.prof"
        for i in range(worker, count, jobs):
            rng = random.Random(f"{seed}:{i}")
            op, data = mutate(rng.choice(seeds), rng)
            path.write_bytes(data)
            argv = command_for(rng, path, work)
            outcome = run_child(argv, mem_limit, timeout)
            report.runs += 1
            report.by_op[op] = report.by_op.get(op, 0) + 1
            key = command_key(argv)
            report.by_command[key] = report.by_command.get(key, 0) + 1
            if outcome.maxrss_kb > report.worst_rss_kb:
                report.worst_rss_kb, report.worst_rss_op = outcome.maxrss_kb, f"{op} #{i} {' '.join(argv[:-2])}"
            bug = known_bug(argv, outcome.detail) if outcome.why == "traceback" else ""
            if bug:
                report.known[bug] = report.known.get(bug, 0) + 1
            elif not outcome.ok:
                saved = ""
                if save is not None:
                    save.mkdir(parents=True, exist_ok=True)
                    target = save / f"fuzz-{seed}-{i}-{op}.prof"
                    target.write_bytes(data)
                    saved = str(target)
                report.failures.append((op, outcome.why, argv[:-2], saved, outcome.detail))
    report.seconds = time.monotonic() - started
    return report


def parallel_campaign(count: int, seed: int, jobs: int, save: Path | None = None,
                      timeout: int = TIMEOUT_S, only: str | None = None) -> Report:
    """``jobs`` worker processes, each a campaign over its share; their reports merged."""
    import pickle

    pipes = []
    for w in range(jobs):
        r, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - a worker
            os.close(r)
            try:
                rep = campaign(count, seed, save, w, jobs, timeout, only)
                data = pickle.dumps(rep)
            except BaseException:
                data = pickle.dumps(Report(failures=[("worker", "traceback", [], "", traceback.format_exc())]))
            with os.fdopen(wfd, "wb") as fh:
                fh.write(data)
            os._exit(0)
        os.close(wfd)
        pipes.append((pid, r))
    total = Report()
    for pid, r in pipes:
        with os.fdopen(r, "rb") as fh:
            data = fh.read()
        os.waitpid(pid, 0)
        rep: Report = pickle.loads(data) if data else Report(failures=[("worker", "died", [], "", "")])
        total.runs += rep.runs
        total.failures.extend(rep.failures)
        total.seconds = max(total.seconds, rep.seconds)
        for k, v in rep.by_op.items():
            total.by_op[k] = total.by_op.get(k, 0) + v
        for k, v in rep.by_command.items():
            total.by_command[k] = total.by_command.get(k, 0) + v
        for k, v in rep.known.items():
            total.known[k] = total.known.get(k, 0) + v
        if rep.worst_rss_kb > total.worst_rss_kb:
            total.worst_rss_kb, total.worst_rss_op = rep.worst_rss_kb, rep.worst_rss_op
    return total


def summary(rep: Report) -> str:
    lines = [f"{rep.runs} mutations in {rep.seconds:.0f} s, {len(rep.failures)} failures; "
             f"peak RSS of a child {rep.worst_rss_kb / 1024:.0f} MB ({rep.worst_rss_op})",
             "by mutation: " + ", ".join(f"{k} {v}" for k, v in sorted(rep.by_op.items())),
             "by command: " + ", ".join(f"{k} {v}" for k, v in sorted(rep.by_command.items()))]
    for name, runs in sorted(rep.known.items()):
        lines.append(f"known bug, not counted as a failure: {name}: {runs} runs")
    for op, why, argv, saved, detail in rep.failures[:20]:
        lines.append(f"--- {why} after {op}: profiler {' '.join(argv)} {saved}\n{detail.strip()[-1500:]}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--save", type=Path, default=ROOT / "out" / "fuzz-failures")
    parser.add_argument("--timeout", type=int, default=TIMEOUT_S)
    parser.add_argument("--seeds", default=None, help="only the seeds whose file name matches this pattern")
    args = parser.parse_args()
    print(f"fuzzing with seed {args.seed}, {args.count} mutations, {args.jobs} jobs", flush=True)
    rep = parallel_campaign(args.count, args.seed, args.jobs, args.save, args.timeout, args.seeds)
    print(summary(rep))
    return 1 if rep.failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
