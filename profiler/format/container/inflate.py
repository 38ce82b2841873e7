"""RAW_ZSTD frames inflated into RAW frames, in a temporary file laid out like the capture,
within a budget tied to the file's size.

A zstd frame of a few kilobytes may claim a gibibyte: the raw frames of a capture of N bytes
together inflate to at most ``RAW_INFLATE_BASE + RAW_INFLATE_PER_BYTE * N`` bytes, one frame
at a time (each frame is inflated, written to the temporary file and dropped before the next).
The budget admits every real capture with margin: ``--call-graph dwarf`` captures (the only
ones with RAW_ZSTD frames) measured 4-186 times their file's size inflated, 256 times for
the most compressible single frame (a tight loop whose stack copies are all alike); see
docs/format.md. A frame past what is left of the budget is skipped, and one warning names
the skipped frames: the records of the other frames are read as usual.
"""

from __future__ import annotations

import mmap

from profiler.format.container.codec import zstd_decompress
from profiler.format.container.layout import FRAME_HEAD, FRAME_HEADER_SIZE, FRAME_RAW, FRAME_RAW_ZSTD, pad8
from profiler.format.container.scan import FileFrame
from profiler.value import Value

RAW_INFLATE_BASE = 4 << 20  # inflated raw-frame bytes any capture may have
RAW_INFLATE_PER_BYTE = 512  # and per byte of the file: 2.8 x the most compressible capture measured


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


def raw_budget(file_size: int) -> int:
    """The bytes the RAW_ZSTD frames of a file of ``file_size`` bytes may inflate to, together."""
    return RAW_INFLATE_BASE + RAW_INFLATE_PER_BYTE * file_size


def expand_raw_frames(view: memoryview, frames_start: int, frames: list[FileFrame], inflated: Inflated,
                      warnings: list[str]) -> tuple[mmap.mmap | bytes, list[FileFrame]]:
    """Inflate the RAW_ZSTD frames of ``view`` (a whole capture whose frames start at
    ``frames_start``) into an unlinked temporary file laid out like the capture, with RAW
    frames in their place: the file mapped, and its frames (views into the map). Record file
    offsets (what the columnar decoder and the unwinder address) then work the same for both.
    Frames past the budget (:func:`raw_budget`) are left out, with one warning."""
    import tempfile

    budget = total = raw_budget(len(view))
    skipped: list[int] = []
    tmp = tempfile.TemporaryFile(prefix="profiler-capture-")
    try:
        tmp.write(view[:frames_start])
        pos = frames_start
        spans: list[tuple[int, int, int, int, int, int]] = []  # kind, cpu, seq, off, len, flags
        for frame in frames:
            if frame.kind == FRAME_RAW_ZSTD:
                out = zstd_decompress(frame.payload, budget)
                if out is None:
                    skipped.append(frame.seq)
                    continue
                payload: bytes | memoryview = out
                kind = FRAME_RAW
                budget -= len(out)
                inflated.add(frame.seq, len(frame.payload), len(payload))
            else:
                payload, kind = frame.payload, frame.kind
            head = FRAME_HEAD.pack(kind, frame.flags, frame.cpu, len(payload), frame.seq, 0)
            tmp.write(head)
            tmp.write(payload)
            tmp.write(b"\0" * pad8(len(payload)))
            spans.append((kind, frame.cpu, frame.seq, pos, len(payload), frame.flags))
            pos += FRAME_HEADER_SIZE + len(payload) + pad8(len(payload))
            del payload
        tmp.flush()
        data = mmap.mmap(tmp.fileno(), 0, access=mmap.ACCESS_READ) if pos else b""
    finally:
        tmp.close()  # the map keeps the (unlinked) file alive
    if skipped:
        warnings.append(skipped_note(skipped, total, len(view)))
    whole = memoryview(data)
    out_frames = [FileFrame(kind, cpu, seq, off, whole[off + FRAME_HEADER_SIZE:off + FRAME_HEADER_SIZE + length], flags)
                  for kind, cpu, seq, off, length, flags in spans]
    return data, out_frames


def skipped_note(seqs: list[int], budget: int, file_size: int) -> str:
    shown = ", ".join(str(seq) for seq in seqs[:5]) + (f" and {len(seqs) - 5} more" if len(seqs) > 5 else "")
    what = f"compressed raw frame number {shown} was" if len(seqs) == 1 else \
        f"{len(seqs)} compressed raw frames (numbers {shown}) were"
    return (f"{what} skipped: the capture's raw frames would inflate past what the reader allows for "
            f"a file of {file_size} bytes ({budget} bytes); their records are missing.")
