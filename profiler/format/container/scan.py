"""The frame walk: every complete frame whose checksum matches, in sequence. A damaged
stretch is skipped and the walk resumes at the next valid frame; a file cut inside its last
raw or synth frame keeps that frame's whole records; every skip is a warning."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

from profiler.errors import FormatError
from profiler.format.bounded import Budget, inflate, unpack
from profiler.format.container.layout import (
    FLAG_ZLIB,
    FRAME_HEAD,
    FRAME_HEADER_SIZE,
    FRAME_NAMES,
    FRAME_RAW,
    FRAME_RAW_ZSTD,
    FRAME_SYNTH,
    FRAME_TRAILER,
    MAX_FRAME_SIZE,
    NO_CPU,
    pad8,
)
from profiler.format.validate import check_trailer
from profiler.value import Frozen, Value

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

_RELEASE_EVERY = 8 << 20


class FileFrame(Frozen):
    """One frame of the file as read: its header fields and a zero-copy view of its payload."""

    __slots__ = _fields = ("kind", "cpu", "seq", "offset", "payload", "flags", "cut")

    def __init__(
        self,
        kind: int,
        cpu: int,
        seq: int,
        offset: int,  # file offset of the frame header
        payload: memoryview,
        flags: int = 0,
        cut: bool = False,  # the file ends inside this frame: its whole records kept, checksum unverified
    ) -> None:
        self.kind = kind
        self.cpu = cpu
        self.seq = seq
        self.offset = offset
        self.payload = payload
        self.flags = flags
        self.cut = cut

    @property
    def kind_name(self) -> str:
        return FRAME_NAMES.get(self.kind, f"kind{self.kind}")

    def meta(self, budget: Budget | None = None) -> tuple[str, dict[str, Any]]:
        """(kind, data) of a META frame, inflating and decoding within ``budget``."""
        payload: bytes | memoryview = self.payload
        if self.flags & FLAG_ZLIB:
            payload = inflate(self.payload, "compressed metadata frame", budget)
        obj = unpack(payload, "metadata frame", budget)
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
            raise FormatError("a metadata frame lacks its kind.")
        data = obj.get("data")
        return obj["kind"], data if isinstance(data, dict) else {}


class ScanResult(Value):
    __slots__ = _fields = ("frames", "clean_end", "trailer", "warnings", "data_end", "frames_end")

    def __init__(
        self,
        frames: list[FileFrame] | None = None,
        clean_end: bool = False,
        trailer: dict[str, Any] | None = None,
        warnings: list[str] | None = None,
        data_end: int = 0,  # offset just past the last good frame
        frames_end: int = 0,  # file offset just past the last good frame before the trailer
    ) -> None:
        self.frames: list[FileFrame] = [] if frames is None else frames
        self.clean_end = clean_end
        self.trailer: dict[str, Any] = {} if trailer is None else trailer
        self.warnings: list[str] = [] if warnings is None else warnings
        self.data_end = data_end
        self.frames_end = frames_end


def scan_frames(view: memoryview, pos: int, release: Callable[[int, int], None] | None = None,
                 byte_order: str = "little") -> ScanResult:
    """Every valid frame from ``pos``: checksummed, in sequence. A damaged stretch is skipped
    and the walk resumes at the next valid frame (searched at 8-byte boundaries with numpy,
    with bounded checksum work); a file cut inside its last raw or synth frame keeps that
    frame's whole records. Every skip is a warning saying where and how many bytes."""
    return _FrameWalk(view, pos, release, byte_order).run()


_RESYNC_CRC_PER_BYTE = 4  # checksummed bytes a resync may spend per byte of the file
_SEARCH_WINDOW = 16 << 20  # bytes looked at with numpy at a time
_MAX_CPU = 1 << 12


class _FrameWalk:
    def __init__(self, view: memoryview, pos: int, release: Callable[[int, int], None] | None,
                 byte_order: str) -> None:
        self.view, self.end, self.pos = view, len(view), pos
        self.release, self.released = release, 0
        self.size_of = struct.Struct("<H" if byte_order != "big" else ">H").unpack_from
        self.last_seq = -1
        self.crc_budget = _RESYNC_CRC_PER_BYTE * self.end + (1 << 20)
        self.result = ScanResult(data_end=pos, frames_end=pos)

    def frame_at(self, pos: int) -> tuple[FileFrame | None, str]:
        """The valid frame at ``pos``, or None and why not."""
        if pos + FRAME_HEADER_SIZE > self.end:
            return None, "an incomplete frame header"
        kind, flags, cpu, length, seq, crc = FRAME_HEAD.unpack_from(self.view, pos)
        body = pos + FRAME_HEADER_SIZE
        if length > MAX_FRAME_SIZE or body + length > self.end:
            return None, "an incomplete frame"
        payload = self.view[body:body + length]
        if zlib.crc32(payload, zlib.crc32(self.view[pos:pos + 12])) != crc:
            return None, "a damaged frame (checksum mismatch)"
        if seq <= self.last_seq:
            return None, "a frame out of sequence"
        return FileFrame(kind, cpu, seq, pos, payload, flags), ""

    def run(self) -> ScanResult:
        result = self.result
        while self.pos < self.end:
            frame, why = self.frame_at(self.pos)
            if frame is None:
                if not self.skip_damage(why):
                    break
                continue
            if frame.seq != self.last_seq + 1:
                result.warnings.append(f"{frame.seq - self.last_seq - 1} frames are missing before byte "
                                       f"{frame.offset} (sequence number {frame.seq} after {self.last_seq}).")
            self.accept(frame)
            if frame.kind == FRAME_TRAILER:
                self.trailer(frame)
                break
        if not result.clean_end and not result.warnings:
            result.warnings.append("the capture has no trailer (recording did not finish cleanly); "
                                   "every complete frame was read.")
        if self.release is not None and self.pos > self.released:  # the last few MB checksummed
            self.release(self.released, min(self.pos, self.end) - self.released)
        return result

    def accept(self, frame: FileFrame) -> None:
        self.last_seq = frame.seq
        if self.release is not None and frame.offset - self.released >= _RELEASE_EVERY:
            self.release(self.released, frame.offset - self.released)  # checksummed: not needed resident
            self.released = frame.offset
        length = len(frame.payload)
        self.pos = frame.offset + FRAME_HEADER_SIZE + length + pad8(length)
        self.result.data_end = min(self.pos, self.end)
        if frame.kind != FRAME_TRAILER:
            self.result.frames.append(frame)
            self.result.frames_end = self.result.data_end

    def trailer(self, frame: FileFrame) -> None:
        self.result.clean_end = True
        try:
            self.result.trailer = check_trailer(unpack(frame.payload, "trailer"))
        except FormatError:
            self.result.trailer = {}
        if self.pos < self.end:
            self.result.warnings.append(f"{self.end - self.pos} bytes after the trailer were ignored.")

    def skip_damage(self, why: str) -> bool:
        """Resume after damage at ``self.pos``; False when nothing valid follows."""
        pos, result = self.pos, self.result
        nxt = self.next_valid(pos + 8)
        if nxt is not None:
            result.warnings.append(f"skipped {why} at byte {pos}: {nxt - pos} bytes; reading resumed at byte {nxt}.")
            self.pos = nxt
            return True
        cut = self.cut_frame(pos)
        if cut is not None:
            kept = len(cut.payload)
            result.frames.append(cut)
            self.last_seq = cut.seq
            result.data_end = pos + FRAME_HEADER_SIZE + kept
            result.warnings.append(
                f"the capture is cut inside a {cut.kind_name} frame at byte {pos}: its complete records "
                f"({kept} bytes) were kept; skipped the last {self.end - pos - FRAME_HEADER_SIZE - kept} bytes.")
            return False
        result.warnings.append(_damage_note(why, pos, self.end))
        return False

    def next_valid(self, start: int) -> int | None:
        """The next 8-aligned offset >= ``start`` where a valid frame starts, or None."""
        start += pad8(start)
        while start + FRAME_HEADER_SIZE <= self.end:
            stop = min(self.end, start + _SEARCH_WINDOW)
            found = self._in_window(start, stop)
            if found is not None or self.crc_budget < 0:
                return found
            start = stop - FRAME_HEADER_SIZE + 8  # a header straddling the window's end
            start += pad8(start)
        return None

    def _in_window(self, start: int, stop: int) -> int | None:
        import numpy as np  # here only: the recorder writes captures without importing numpy

        words = (stop - start) // 4
        if words < 4:
            return None
        w = np.frombuffer(self.view, dtype="<u4", count=words, offset=start)
        n = (words - 2) // 2  # 8-byte slots with a whole 16-byte header
        first, length, seq = w[0:2 * n:2], w[1:2 * n:2], w[2:2 * n + 1:2][:n]
        kind, flags, cpu = first & 0xFF, (first >> 8) & 0xFF, first >> 16
        offsets = start + 8 * np.arange(n, dtype=np.int64)
        ok = ((kind >= FRAME_RAW) & (kind <= FRAME_RAW_ZSTD) & ((flags & np.uint32(0xFC)) == 0)
              & ((cpu < _MAX_CPU) | (cpu == NO_CPU))
              & (offsets + FRAME_HEADER_SIZE + length.astype(np.int64) <= self.end)
              & (seq.astype(np.int64) > self.last_seq))
        for at in offsets[ok].tolist():
            self.crc_budget -= int(FRAME_HEAD.unpack_from(self.view, at)[3]) + 12
            if self.crc_budget < 0:
                return None
            if self.frame_at(at)[0] is not None:
                return int(at)
        return None

    def cut_frame(self, pos: int) -> FileFrame | None:
        """A raw or synth frame the file ends inside: its complete records, unverified."""
        if pos + FRAME_HEADER_SIZE > self.end:
            return None
        kind, flags, cpu, length, seq, _ = FRAME_HEAD.unpack_from(self.view, pos)
        body = pos + FRAME_HEADER_SIZE
        if (kind not in (FRAME_RAW, FRAME_SYNTH) or flags or seq != self.last_seq + 1
                or length > MAX_FRAME_SIZE or body + length <= self.end or not (cpu < _MAX_CPU or cpu == NO_CPU)):
            return None
        at = body
        while at + 8 <= self.end:
            size = self.size_of(self.view, at + 6)[0]
            if size < 8 or size % 8 or at + size > self.end:
                break
            at += size
        if at == body:
            return None
        return FileFrame(kind, cpu, seq, pos, self.view[body:at], flags, cut=True)


def _damage_note(what: str, pos: int, end: int) -> str:
    return (f"the capture stops at {what} at byte {pos}: skipped the last {end - pos} bytes; "
            f"everything before was read.")
