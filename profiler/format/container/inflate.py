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
from collections.abc import Callable

from profiler.errors import FormatError
from profiler.format.container.codec import raw_zstd_parts, split_sizes, zstd_decompress, zstd_decompress_into
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


Join = Callable[[memoryview, memoryview], bytes | memoryview]  # lean records, stack fields -> records


class StackFrame:
    """A FLAG_STACKS frame read lean (``expand_raw_frames(stacks=...)``, which lists them in file
    order): where its lean records are in the image (``start``, ``length``), and its stack
    fields still compressed (``fields``, which inflate to ``size`` bytes), for an unwinder that
    takes them frame by frame."""

    __slots__ = ("seq", "start", "length", "fields", "size")

    def __init__(self, seq: int, start: int, length: int, fields: bytes | memoryview, size: int) -> None:
        self.seq, self.start, self.length, self.fields, self.size = seq, start, length, fields, size


def expand_raw_frames(view: memoryview, frames_start: int, frames: list[FileFrame], inflated: Inflated,
                      warnings: list[str], join: Callable[[], Join] | None = None,
                      stacks: list[StackFrame] | None = None) -> tuple[mmap.mmap | bytes, list[FileFrame]]:
    """Inflate the RAW_ZSTD frames of ``view`` (a whole capture whose frames start at
    ``frames_start``) into an unlinked temporary file laid out like the capture, with RAW
    frames in their place: the file mapped, and its frames (views into the map). Record file
    offsets (what the columnar decoder and the unwinder address) then work the same for both.
    Frames past the budget (:func:`raw_budget`) are left out, with one warning. A frame with
    its stack copies apart (FLAG_STACKS) is put back together by what ``join()`` gives; one
    whose parts do not fit is left out with a warning of its own. With ``stacks`` (a list to
    fill), such a frame's lean records go into the image instead, and its stack fields, still
    compressed, into ``stacks``: nothing is joined, and the image holds no stack copy."""
    import tempfile

    budget = total = raw_budget(len(view))
    skipped: list[int] = []
    parts_room = (_Room(), _Room())  # a FLAG_STACKS frame's two parts, inflated into reused buffers
    tmp = tempfile.TemporaryFile(prefix="profiler-capture-")
    try:
        tmp.write(view[:frames_start])
        pos = frames_start
        spans: list[tuple[int, int, int, int, int, int]] = []  # kind, cpu, seq, off, len, flags
        for frame in frames:
            if frame.kind == FRAME_RAW_ZSTD:
                try:
                    parts = raw_zstd_parts(frame.payload, frame.flags)
                    out: bytes | memoryview | None
                    if len(parts) == 2 and stacks is not None:
                        out, size = _lean(parts, budget)
                        if out is not None:
                            stacks.append(StackFrame(frame.seq, pos + FRAME_HEADER_SIZE, len(out), bytes(parts[1]),
                                                     size - len(out)))
                    else:
                        out, size = _joined(parts, budget, join, parts_room) if len(parts) == 2 else (None, -1)
                except FormatError as exc:
                    warnings.append(damaged_note(frame.seq, exc))
                    continue
                if size < 0:
                    out = zstd_decompress(frame.payload, budget)
                    size = 0 if out is None else len(out)
                if out is None:
                    skipped.append(frame.seq)
                    continue
                payload: bytes | memoryview = out
                kind, flags = FRAME_RAW, 0
                budget -= size
                inflated.add(frame.seq, len(frame.payload), size)
            else:
                payload, kind, flags = frame.payload, frame.kind, frame.flags
            head = FRAME_HEAD.pack(kind, flags, frame.cpu, len(payload), frame.seq, 0)
            tmp.write(head)
            tmp.write(payload)
            tmp.write(b"\0" * pad8(len(payload)))
            spans.append((kind, frame.cpu, frame.seq, pos, len(payload), flags))
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


def _lean(parts: list[memoryview], budget: int) -> tuple[bytes | None, int]:
    """A FLAG_STACKS frame's lean records, and the bytes its two parts inflate to (what counts
    against the budget, as when they are joined); (None, 0) past the budget."""
    sizes = split_sizes(parts)
    if sum(sizes) > budget:
        return None, 0
    lean = zstd_decompress(parts[0], sizes[0])
    if lean is None:
        raise FormatError("its parts inflate past the sizes they declare")
    return lean, sum(sizes)


class _Room:
    """A buffer reused frame after frame (no fresh pages for each)."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def __call__(self, n: int) -> memoryview:
        if len(self.buffer) < n:
            self.buffer = bytearray(max(n, 2 * len(self.buffer)))
        return memoryview(self.buffer)[:n]


def _joined(parts: list[memoryview], budget: int, join: Callable[[], Join] | None,
            rooms: tuple[_Room, _Room]) -> tuple[bytes | memoryview | None, int]:
    """A FLAG_STACKS frame's records put back together (a view valid until the next frame's),
    and the bytes its two parts inflate to (what counts against the budget); (None, 0) past
    the budget."""
    if join is None:
        raise FormatError("nothing joins its parts")
    sizes = split_sizes(parts)
    total = sum(sizes)
    if total > budget:
        return None, 0
    lean, fields = (zstd_decompress_into(p, room, s) for p, room, s in zip(parts, rooms, sizes))
    if lean is None or fields is None:
        raise FormatError("its parts inflate past the sizes they declare")
    return join()(rooms[0](lean), rooms[1](fields)), total


def damaged_note(seq: int, why: FormatError) -> str:
    """The warning for a compressed raw frame with its stack copies apart that cannot be read."""
    return f"compressed raw frame number {seq} is damaged ({why}): skipped; the other frames were read."


def skipped_note(seqs: list[int], budget: int, file_size: int) -> str:
    shown = ", ".join(str(seq) for seq in seqs[:5]) + (f" and {len(seqs) - 5} more" if len(seqs) > 5 else "")
    what = f"compressed raw frame number {shown} was" if len(seqs) == 1 else \
        f"{len(seqs)} compressed raw frames (numbers {shown}) were"
    return (f"{what} skipped: the capture's raw frames would inflate past what the reader allows for "
            f"a file of {file_size} bytes ({budget} bytes); their records are missing.")
