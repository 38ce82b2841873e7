"""A copy of a capture meant for sharing: directory parts of file paths removed.

``profiler archive --strip-paths -o OUT`` writes every frame of the capture again, with:

* the file name of every ``MMAP``/``MMAP2`` record (and the path of every ``CGROUP``
  record) cut to its base name — in place, the record keeping its size, so its
  ``sample_id`` trailer stays where the kernel put it;
* the ``path`` of each ``buildids`` entry and of each packed-symbols frame cut likewise, and
  the source file names of its packed line table;
* the recorder's command line and the profiled command in the header cut likewise,
  word by word (``/home/me/bin/app --out=/home/me/x`` becomes ``app x``).

Pseudo names are not paths and stay (``[vdso]``, ``[kernel.kallsyms]_text``, ``//anon``,
``/memfd:...``). Metadata kinds this version does not know are dropped, since they could
hold anything. docs/format.md ("What a capture contains") lists what stays: the host name,
kernel release, thread names, addresses, build-ids, the kallsyms snapshot, the vdso image.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from profiler.dataclass import dataclass
from profiler.format import records as R
from profiler.format.container.layout import (
    FRAME_META,
    FRAME_RAW,
    FRAME_ROUND,
    FRAME_SYNTH,
    VERSION_FRAME_CPU,
    VERSION_PLAIN,
    VERSION_ZSTD,
)
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter

#: Byte offset of the file name in each record type that carries a path (perf_event.h):
#: MMAP: header, pid, tid, addr, len, pgoff; MMAP2: the same plus maj/min/ino/ino_generation
#: (or build_id_size, reserved, build_id[20]) and prot, flags; CGROUP: header, id.
NAME_OFFSETS = {R.PERF_RECORD_MMAP: 40, R.PERF_RECORD_MMAP2: 72, R.PERF_RECORD_CGROUP: 16}
KNOWN_META = frozenset({"buildids", "kernel", "kallsyms", "modules", "vdso", "lost", "stats", "symbols",
                        "unwind"})


def strip_path(path: str) -> str:
    """The base name of an absolute path with a directory; anything else unchanged."""
    if not path.startswith("/") or path.startswith("//") or "/" not in path[1:]:
        return path
    return path.rsplit("/", 1)[1] or path


def strip_word(word: str) -> str:
    """A command-line word with every path in it cut to its base name."""
    if "/" not in word:
        return word
    head, sep, tail = word.partition("=")
    if sep and "/" not in head:
        return f"{head}={tail.rstrip('/').rsplit('/', 1)[-1]}"
    return word.rstrip("/").rsplit("/", 1)[-1] or word


def strip_header(header: dict[str, Any]) -> dict[str, Any]:
    out = dict(header)
    if isinstance(out.get("cmdline"), list):
        out["cmdline"] = [strip_word(str(w)) for w in out["cmdline"]]
    target = out.get("target")
    if isinstance(target, dict):
        target = dict(target)
        if isinstance(target.get("command"), list):
            target["command"] = [strip_word(str(w)) for w in target["command"]]
        out["target"] = target
    return out


def strip_meta(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    out = dict(data)
    if kind == "buildids" and isinstance(out.get("entries"), list):
        out["entries"] = [
            {**e, "path": strip_path(str(e.get("path", "")))} if isinstance(e, dict) else e for e in out["entries"]
        ]
    if kind in ("symbols", "unwind") and isinstance(out.get("path"), str):
        out["path"] = strip_path(out["path"])
    lines = out.get("lines") if kind == "symbols" else None
    if isinstance(lines, dict) and isinstance(lines.get("files"), list):
        out["lines"] = {**lines, "files": [strip_path(f) if isinstance(f, str) else f for f in lines["files"]]}
    return out


def strip_records(payload: bytes | memoryview, byte_order: str) -> bytes:
    """Kernel records with the paths in MMAP/MMAP2/CGROUP records cut, sizes unchanged."""
    buf = bytearray(payload)
    head = struct.Struct(("<" if byte_order == "little" else ">") + "IHH")
    pos = 0
    while pos + head.size <= len(buf):
        rtype, _, size = head.unpack_from(buf, pos)
        if size < head.size or pos + size > len(buf):
            break
        at = NAME_OFFSETS.get(rtype)
        if at is not None and at < size:
            _strip_name(buf, pos + at, pos + size)
        pos += size
    return bytes(buf)


def _strip_name(buf: bytearray, start: int, end: int) -> None:
    nul = buf.find(b"\0", start, end)
    stop = end if nul < 0 else nul
    old = bytes(buf[start:stop]).decode("utf-8", "surrogateescape")
    new = strip_path(old).encode("utf-8", "surrogateescape")
    if len(new) < len(old.encode("utf-8", "surrogateescape")):
        buf[start:stop] = new + b"\0" * (stop - start - len(new))


@dataclass
class StripResult:
    frames: int = 0
    dropped_meta: list[str] = field(default_factory=list)


def write_stripped_copy(reader: CaptureReader, out: Path, extra_meta: Sequence[tuple[str, dict[str, Any]]] = ()
                        ) -> StripResult:
    """Write ``reader``'s capture to ``out`` with paths stripped, plus ``extra_meta`` frames."""
    order = reader.info.byte_order
    result = StripResult()
    zstd = reader.version >= VERSION_ZSTD  # DWARF samples: raw frames compressed again
    # 3.0: samples take their CPU from their frame, whose cpu is copied
    version = reader.version if reader.version >= VERSION_FRAME_CPU else VERSION_ZSTD if zstd else VERSION_PLAIN
    writer = CaptureWriter.create(out, strip_header(reader.header), version)
    try:
        for frame in reader.iter_frames():
            if frame.kind == FRAME_RAW and zstd:
                writer.write_raw_zstd(frame.cpu, strip_records(frame.payload, order))
            elif frame.kind == FRAME_RAW:
                writer.write_raw(frame.cpu, strip_records(frame.payload, order))
            elif frame.kind == FRAME_SYNTH:
                writer.write_synth(strip_records(frame.payload, order))
            elif frame.kind == FRAME_ROUND:
                writer.write_round()
            elif frame.kind == FRAME_META:
                kind, data = frame.meta()
                if kind in KNOWN_META:
                    writer.write_meta(kind, strip_meta(kind, data))
                else:
                    result.dropped_meta.append(kind)
            result.frames += 1
        for kind, data in extra_meta:
            writer.write_meta(kind, strip_meta(kind, data))
        if reader.clean_end:
            writer.close(reader.trailer)
    finally:
        writer.abort()
    return result
