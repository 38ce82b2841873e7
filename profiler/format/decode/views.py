"""Where the records are: typed views over the whole capture and the record offsets of a
frame, found with whole-array operations (``RecordViews.record_offsets``), falling back to a
tight sequential walk only when a frame holds something odd."""

from __future__ import annotations

import sys

import numpy as np
import numpy.typing as npt

from profiler.format.container.layout import FRAME_HEADER_SIZE
from profiler.format.container.reader import CaptureReader
from profiler.format.container.scan import FileFrame

I64 = npt.NDArray[np.int64]


def _walk_record_offsets(sizes16: memoryview, end: int, limit: int = -1) -> tuple[list[int], int]:
    """Offsets of the records in a frame payload, walked one by one; and where the good part
    stops. ``sizes16`` is the payload as native u16: a record's size is u16 number 3 of its
    header. With ``limit`` >= 0, the walk gives up after that many records (it then stops
    short of ``end`` with no damage found)."""
    offsets: list[int] = []
    append = offsets.append
    pos = 0
    last = end - 8
    while pos <= last and limit != 0:
        size = sizes16[(pos >> 1) + 3]
        if size < 8 or size & 7 or pos + size > end:
            break
        append(pos)
        pos += size
        limit -= 1
    return offsets, pos


WALK_BYTES_PER_RECORD = 256  # frames whose records average at least this walk them one by one
PROBE_RECORDS = 8  # records walked to tell a frame of big records from one of small ones


class RecordViews:
    """Typed views over the whole (memory-mapped) capture; record offsets are file offsets.

    Frames start 8-aligned and raw payloads are whole records, so every record (and every u64
    field in it) is 8-aligned in the file.
    """

    def __init__(self, reader: CaptureReader | None, bo: str, buffer: memoryview | None = None) -> None:
        """Views over ``reader.raw_view()``, or over ``buffer`` (frames inflated into a buffer
        of their own: its offsets are then the buffer's)."""
        view = buffer if buffer is not None else reader.raw_view() if reader is not None else memoryview(b"")
        size = len(view) - len(view) % 8
        self.native = (bo == "<") == (sys.byteorder == "little")
        self.view = view
        self.w64 = np.frombuffer(view, dtype=bo + "u8", count=size // 8)
        self.w32 = np.frombuffer(view, dtype=bo + "u4", count=size // 4)
        self.w16 = np.frombuffer(view, dtype=bo + "u2", count=size // 2)
        from profiler.native import kernels

        self.walk = kernels()  # the compiled record walk, or None

    def record_offsets(self, frame: FileFrame, warnings: list[str]) -> I64:
        """File offsets of the records of one frame.

        Fast path: every word whose header ``size`` field could be a record size is a candidate
        start; if following the sizes from the first candidate visits exactly the candidates and
        ends at the frame's end, they are the records (a proof by induction, checked with
        whole-array operations). Otherwise — a record body that looks like a header, or damage —
        the exact sequential walk decides.
        """
        start = frame.offset + FRAME_HEADER_SIZE
        end = len(frame.payload)
        if self.native and self.walk is not None:  # the walk below, in C
            found, stop = self.walk.record_offsets(frame.payload[:end - end % 8])
            if stop != end:
                warnings.append(f"a damaged record in frame {frame.seq}: skipped its last {end - stop} bytes.")
            offsets: I64 = np.frombuffer(found, dtype=np.int64) + start
            return offsets
        if end % 8 == 0 and self.native and end >= 64 * WALK_BYTES_PER_RECORD:
            # Big records (DWARF samples: kilobytes of stack each): following the sizes visits
            # a few records, where the candidate scan below reads every word of the frame. The
            # first few records tell which kind of frame this is, so a frame of small records
            # does not walk a share of its records for nothing.
            sizes16 = memoryview(frame.payload).cast("B").cast("H")
            _, probe = _walk_record_offsets(sizes16, end, PROBE_RECORDS)
            if probe == end or probe >= PROBE_RECORDS * WALK_BYTES_PER_RECORD:
                offs, stop = _walk_record_offsets(sizes16, end, end // WALK_BYTES_PER_RECORD)
                if stop == end:
                    return np.asarray(offs, dtype=np.int64) + start
        first, nwords = start >> 3, end >> 3
        sizes = self.w16[(first * 4 + 3):((first + nwords) * 4):4]  # a strided view, no copy
        cand = np.flatnonzero((sizes >= 8) & ((sizes & 7) == 0))
        if end % 8 == 0 and len(cand) and cand[0] == 0:
            nxt = cand + (sizes[cand] >> 3).astype(np.int64)
            if nxt[-1] == nwords and np.array_equal(nxt[:-1], cand[1:]):
                out: I64 = (cand << 3) + start
                return out
        whole = end - end % 8  # records are 8-byte aligned: a ragged tail is damage
        offs, stop = _walk_record_offsets(self._sizes16(frame.payload[:whole]), whole)
        if stop != end:
            warnings.append(f"a damaged record in frame {frame.seq}: skipped its last "
                            f"{end - stop} bytes.")
        return np.asarray(offs, dtype=np.int64) + start

    def _sizes16(self, payload: memoryview) -> memoryview:
        if self.native:
            return payload.cast("H")
        swapped: bytes = np.frombuffer(payload, dtype=np.uint16).byteswap().tobytes()
        return memoryview(swapped).cast("H")
