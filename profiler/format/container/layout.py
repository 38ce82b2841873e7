"""The capture's on-disk layout: magic, versions, frame kinds and flags, the structs of the
file header and the frame header, and the reader's limits.

Layout (all container integers little endian; docs/format.md is the prose spec)::

    file header   magic "\\x7fPROFCAP" (8) | u16 major | u16 minor | u32 header_len | u32 crc32
                  | msgpack header (header_len bytes) | zero padding to a multiple of 8
    frame         u8 kind | u8 flags | u16 cpu | u32 length | u32 seq | u32 crc32
                  | payload (length bytes) | zero padding to a multiple of 8
    ...
    trailer       a frame of kind TRAILER: the clean end
"""

from __future__ import annotations

import struct

# The metadata kinds this reader uses (docs/format.md); a frame of another kind is skipped.
KNOWN_META_KINDS = frozenset({"buildids", "kallsyms", "kernel", "lost", "modules", "stats", "tracepoint_formats",
                              "vdso", "unwind", "symbols", "python_lines"})

MAGIC = b"\x7fPROFCAP"
STDOUT = "-"  # the output path that means standard output, as in perf record -o -
DEFAULT_CAPTURE = "profile.prof"  # what `profiler record` writes and every reader opens by default
FORMAT_MAJOR = 4  # the newest version this reader reads
FORMAT_MINOR = 0
# What the writer puts in the file header: 1.1 for every capture that 1.x readers read
# correctly, 2.0 for captures with RAW_ZSTD frames (a 1.x reader would skip them: samples
# silently missing), which ``profiler record --call-graph dwarf`` writes; 3.0 for captures
# whose samples take their CPU from their frame (no PERF_SAMPLE_CPU: a 2.0 reader would give
# them all CPU 0), which ``profiler record`` writes for a command or process target.
VERSION_PLAIN = (1, 1)
VERSION_ZSTD = (2, 0)
VERSION_FRAME_CPU = (3, 0)
# 4.0: RAW_ZSTD frames with FLAG_STACKS (samples' stack copies apart: profiler/format/splitstacks.py;
# a 3.x reader would read the two parts as one zstd frame), which ``profiler record
# --call-graph dwarf`` writes. 4.0 includes everything 3.1 added.
VERSION_STACKS = (4, 0)
# Minor version 1 of 2.x and 3.x: INDEX frames (older readers skip them), which
# ``profiler record`` writes with its RAW_ZSTD frames.
INDEX_MINOR = 1


def with_index(version: tuple[int, int]) -> tuple[int, int]:
    """The version of a capture that carries INDEX frames, given the one it would have without."""
    return (version[0], max(version[1], INDEX_MINOR)) if version in (VERSION_ZSTD, VERSION_FRAME_CPU) else version


FILE_HEAD = struct.Struct("<8sHHII")  # magic, major, minor, header_len, crc32
FRAME_HEAD = struct.Struct("<BBHIII")  # kind, flags, cpu, length, seq, crc32
FRAME_HEADER_SIZE = FRAME_HEAD.size  # 16
FRAME_PREFIX = struct.Struct("<BBHII")  # FRAME_HEAD without its crc32, which covers this and the payload
CRC = struct.Struct("<I")

# FileFrame kinds.
FRAME_RAW = 1  # raw ring-buffer bytes exactly as the kernel wrote them; ``cpu`` says whose
FRAME_SYNTH = 2  # records synthesized by the recorder (same encoding as the kernel's)
FRAME_ROUND = 3  # round marker: the recorder finished one pass over every ring buffer
FRAME_META = 4  # msgpack {"kind": str, "data": {...}}
FRAME_TRAILER = 5  # msgpack statistics; marks a clean end
FRAME_RAW_ZSTD = 6  # format 2.0: a RAW frame's records, compacted (see compact.py), zstd-compressed
# format x.1: after a recorder pass, one INDEX_ENTRY per RAW_ZSTD frame of the pass whose records
# are all samples: a report's first pass counts them without inflating the frame
FRAME_INDEX = 7
FRAME_NAMES = {
    FRAME_RAW_ZSTD: "raw_zstd",
    FRAME_RAW: "raw",
    FRAME_SYNTH: "synth",
    FRAME_ROUND: "round",
    FRAME_META: "meta",
    FRAME_TRAILER: "trailer",
    FRAME_INDEX: "index",
}
INDEX_ENTRY = struct.Struct("<II")  # the frame's seq, its records (all of them samples)
STACKS_HEAD = struct.Struct("<Q")  # a FLAG_STACKS payload: the length of its first zstd frame
NO_CPU = 0xFFFF

# FileFrame flags.
FLAG_ZLIB = 0x01  # the payload is zlib-compressed (META frames only, in format 1.0)
FLAG_STACKS = 0x02  # RAW_ZSTD frames (4.0): u64 length, zstd(lean records), zstd(stack fields)
COMPRESS_ABOVE = 4096  # META payloads larger than this are compressed

MAX_HEADER_SIZE = 64 << 20
MAX_FRAME_SIZE = 1 << 30  # a frame claiming more is damage, never an allocation

PERF_DATA_MAGICS = (b"PERFILE2", b"2ELIFREP", b"PERFFILE")


def pad8(n: int) -> int:
    """The zero bytes that follow ``n`` bytes to the next multiple of 8."""
    return -n % 8
