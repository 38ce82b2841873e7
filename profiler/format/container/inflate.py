"""RAW_ZSTD frames inflated into RAW frames, in a temporary file laid out like the capture."""

from __future__ import annotations

import mmap

from profiler.format.container.codec import zstd_decompress
from profiler.format.container.layout import FRAME_HEAD, FRAME_HEADER_SIZE, FRAME_RAW, FRAME_RAW_ZSTD, pad8
from profiler.format.container.scan import FileFrame
from profiler.value import Value


class Inflated(Value):
    """The RAW_ZSTD frames a reader inflated into RAW frames: their sequence numbers, stored
    (compressed) and inflated payload bytes."""

    __slots__ = _fields = ("seqs", "stored", "inflated")

    def __init__(self, seqs: set[int] | None = None, stored: int = 0, inflated: int = 0) -> None:
        self.seqs: set[int] = set() if seqs is None else seqs
        self.stored = stored
        self.inflated = inflated

    def add(self, seq: int, stored: int, inflated: int) -> None:
        self.seqs.add(seq)
        self.stored += stored
        self.inflated += inflated


def expand_raw_frames(view: memoryview, frames_start: int, frames: list[FileFrame],
                      inflated: Inflated) -> tuple[mmap.mmap | bytes, list[FileFrame]]:
    """Inflate the RAW_ZSTD frames of ``view`` (a capture whose frames start at
    ``frames_start``) into an unlinked temporary file laid out like the capture, with RAW
    frames in their place: the file mapped, and its frames (views into the map). Record file
    offsets (what the columnar decoder and the unwinder address) then work the same for both."""
    import tempfile

    tmp = tempfile.TemporaryFile(prefix="profiler-capture-")
    try:
        tmp.write(view[:frames_start])
        pos = frames_start
        spans: list[tuple[int, int, int, int, int, int]] = []  # kind, cpu, seq, off, len, flags
        for frame in frames:
            if frame.kind == FRAME_RAW_ZSTD:
                payload: bytes | memoryview = zstd_decompress(frame.payload)
                kind = FRAME_RAW
                inflated.add(frame.seq, len(frame.payload), len(payload))
            else:
                payload, kind = frame.payload, frame.kind
            head = FRAME_HEAD.pack(kind, frame.flags, frame.cpu, len(payload), frame.seq, 0)
            tmp.write(head)
            tmp.write(payload)
            tmp.write(b"\0" * pad8(len(payload)))
            spans.append((kind, frame.cpu, frame.seq, pos, len(payload), frame.flags))
            pos += FRAME_HEADER_SIZE + len(payload) + pad8(len(payload))
        tmp.flush()
        data = mmap.mmap(tmp.fileno(), 0, access=mmap.ACCESS_READ) if pos else b""
    finally:
        tmp.close()  # the map keeps the (unlinked) file alive
    whole = memoryview(data)
    out = [FileFrame(kind, cpu, seq, off, whole[off + FRAME_HEADER_SIZE:off + FRAME_HEADER_SIZE + length], flags)
           for kind, cpu, seq, off, length, flags in spans]
    return data, out
