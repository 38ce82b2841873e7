"""Reading a capture: ``CaptureReader`` maps the file, parses and checks its header, walks
its frames (:mod:`.scan`), inflates its RAW_ZSTD frames (:mod:`.inflate`) and its metadata
within a budget set by the file's size, and gives records one by one (the slow path; the
reporter decodes with :mod:`profiler.format.decode`). It reads every complete frame up to
damage and says what it skipped. Another tool's file (perf.data) opens with its registered
reader (``FOREIGN_READERS``)."""

from __future__ import annotations

import mmap
import os
import zlib
from collections.abc import Callable, Iterator

from profiler import __version__
from profiler.errors import FormatError, NotACaptureError, ProfilerError, VersionError
from profiler.format.bounded import Budget, peek_kind, unpack
from profiler.format.recorded import RecordedBuildIds
from profiler.format.container.inflate import Inflated, StackFrame, expand_raw_frames
from profiler.format.container.layout import (
    FILE_HEAD,
    FLAG_ZLIB,
    FORMAT_MAJOR,
    FORMAT_MINOR,
    FRAME_META,
    FRAME_RAW,
    FRAME_RAW_ZSTD,
    FRAME_SYNTH,
    KNOWN_META_KINDS,
    MAGIC,
    MAX_HEADER_SIZE,
    PERF_DATA_MAGICS,
    pad8,
)
from profiler.format.container.scan import FileFrame, ScanResult, scan_frames
from profiler.format.typed_header import CaptureHeader
from profiler.format.validate import MetaError, check_header, check_meta

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

# Readers of other tools' files, chosen by their first 8 bytes: (magics, factory). The
# perf.data reader is registered by profiler.format.perf_data_opener, which imports it only
# when a perf.data file is opened (the CLI and profiler.report.capture import the opener).
ForeignReader = Callable[["Path", "bytes | mmap.mmap"], "CaptureReader"]
FOREIGN_READERS: list[tuple[tuple[bytes, ...], ForeignReader]] = []


def describe_foreign(head: bytes) -> str:
    """A few words on what a non-capture file looks like."""
    if not head:
        return "it is empty"
    if head[:8] in PERF_DATA_MAGICS:
        return "it is a perf.data file from `perf record` (import profiler.format.perfdata to read it)"
    if head[:4] == b"\x7fELF":
        return "it is an ELF binary"
    if head[:2] == b"\x1f\x8b":
        return "it is gzip-compressed"
    if head[:7] == MAGIC[:7]:
        return "its magic is damaged"
    try:
        head.decode("utf-8")
        return "it looks like a text file"
    except UnicodeDecodeError:
        return "its first bytes are not a profiler capture's magic"


class CaptureReader:
    """Reads a capture: ``header``, then frames up to the first damage.

    Open with ``CaptureReader.open(path)``; the file is memory-mapped, and frame payloads are
    zero-copy views into it.
    """

    def __init__(self, path: Path, data: bytes | mmap.mmap, header: dict[str, Any],
                 frames_start: int, version: tuple[int, int]) -> None:
        self.path = path
        self._data = data
        self._view = memoryview(data)
        self._file_size = len(self._view)
        self.header = header  # the map as the file holds it
        self.info = CaptureHeader.from_map(header)  # its typed view: what readers use
        self.version = version
        self._frames_start = frames_start
        self._scan: ScanResult | None = None
        self._meta: list[tuple[str, dict[str, Any]]] | None = None
        self.inflated = Inflated()  # what the RAW_ZSTD frames were before they were inflated
        self._expanded = False  # the RAW_ZSTD frames inflated into a temporary file (scan)
        self._joiner: Callable[[memoryview, memoryview], bytes | memoryview] | None = None  # stack_joiner
        self.stack_frames: list[StackFrame] | None = None  # keep_stacks_apart: the stack fields

    # -- opening --
    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> CaptureReader:
        """Open a capture; another tool's file opens with its registered reader (a perf.data
        file as a :class:`~profiler.format.perfdata.PerfDataReader`); ``-`` reads standard input."""
        from pathlib import Path  # not at the top: the recorder, which imports this module, needs no pathlib

        target = Path(path)
        data = _spool_stdin() if str(path) == "-" else _map_file(target)
        for magics, make in FOREIGN_READERS:
            if bytes(data[:8]) in magics:
                return make(target, data)
        header, frames_start, version = _parse_file_header(target, data)
        return cls(target, data, header, frames_start, version)

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<memory>") -> CaptureReader:
        from pathlib import Path

        header, frames_start, version = _parse_file_header(Path(name), data)
        return cls(Path(name), data, header, frames_start, version)

    # -- frames --
    def scan(self) -> ScanResult:
        """Walk every frame once (cached): checks checksums, finds the trailer and damage; the
        RAW_ZSTD frames are then inflated (:meth:`_expand`)."""
        scan = self._stored_scan()
        if not self._expanded:
            self._expanded = True
            if any(f.kind == FRAME_RAW_ZSTD for f in scan.frames):
                self._expand(scan)
        return scan

    def _stored_scan(self) -> ScanResult:
        """The frames as the file stores them (RAW_ZSTD frames not inflated yet)."""
        if self._scan is None:
            self._scan = scan_frames(self._view, self._frames_start, self.release, self.info.byte_order)
        return self._scan

    def stored_frames(self) -> list[FileFrame] | None:
        """Every frame as stored — RAW_ZSTD frames compressed — for a reader that inflates
        them one by one into its own buffer (``report/tally_native.FrameStream``; it keeps
        within :func:`~profiler.format.container.inflate.raw_budget` as :meth:`_expand` does);
        None once :meth:`raw_view` or :meth:`iter_frames` inflated them into a temporary file."""
        if self._expanded:
            return None
        return list(self._stored_scan().frames)

    def _expand(self, scan: ScanResult) -> None:
        """Read everything from an image of the capture whose RAW_ZSTD frames are inflated
        (:func:`~profiler.format.container.inflate.expand_raw_frames`)."""
        data, frames = expand_raw_frames(self._view, self._frames_start, scan.frames, self.inflated, scan.warnings,
                                         self.stack_joiner, self.stack_frames)
        self._view.release()
        if isinstance(self._data, mmap.mmap):
            try:
                self._data.close()
            except BufferError:
                pass
        self._data = data
        self._view = memoryview(data)
        scan.frames = frames

    def keep_stacks_apart(self) -> None:
        """Read FLAG_STACKS frames (format 4.0) lean from now on: their samples without stack
        copies in the image, and each frame's stack fields kept compressed in
        ``stack_frames`` for an unwinder that takes them frame by frame (report/unwind_samples.py):
        no stack copy is ever written out whole. For readers that only report; what copies
        the capture (``archive``, ``dump``) reads it joined. No effect once inflated."""
        if not self._expanded and self.stack_frames is None:
            self.stack_frames = []

    def stack_joiner(self) -> Callable[[memoryview, memoryview], bytes | memoryview]:
        """What puts a FLAG_STACKS frame's two parts back together (profiler/format/splitstacks.py):
        the samples' one layout is the first event's; a capture whose events do not share one
        such layout cannot have written those frames (a FormatError: each is skipped)."""
        if self._joiner is not None:
            return self._joiner
        from profiler.format.events import EventTable
        from profiler.format.splitstacks import Joiner, stack_split_ok

        events = EventTable.from_header(self.header)
        layouts = [e.layout for e in events.events]
        if not stack_split_ok(layouts):
            raise FormatError("its events do not share one sample layout with a user stack")
        self._joiner = Joiner(layouts[0], events.bo)
        return self._joiner

    def iter_frames(self) -> Iterator[FileFrame]:
        yield from self.scan().frames

    @property
    def warnings(self) -> list[str]:
        """What the reader skipped: damaged frames, and damaged metadata (read first)."""
        if self._meta is None:
            self._meta = self._read_metadata()
        return self._stored_scan().warnings

    @property
    def clean_end(self) -> bool:
        return self._stored_scan().clean_end

    @property
    def trailer(self) -> dict[str, Any]:
        return self._stored_scan().trailer

    @property
    def size(self) -> int:
        """Bytes of the capture file (not of its inflated RAW_ZSTD frames)."""
        return self._file_size

    def metadata(self, kind: str) -> list[dict[str, Any]]:
        """Payloads of every META frame of ``kind``, in file order."""
        return [data for k, data in self.iter_metadata() if k == kind]

    def build_ids(self) -> RecordedBuildIds:
        """path -> build-id (hex) from the capture's ``buildids`` metadata; its ``by_inode``
        holds what was recorded of each (path, maj, min, ino) (:mod:`profiler.format.recorded`)."""
        out = RecordedBuildIds()
        for meta in self.metadata("buildids"):
            entries = meta.get("entries")
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and isinstance(entry.get("path"), str) and entry["path"]:
                    out.add(entry)
        return out

    def iter_metadata(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(kind, payload) of every META frame, in file order. Decoded (and inflated) once:
        readers ask for several kinds, and a kallsyms snapshot is megabytes of zlib."""
        if self._meta is None:
            self._meta = self._read_metadata()
        yield from self._meta

    def _read_metadata(self) -> list[tuple[str, dict[str, Any]]]:
        """Every META frame of a kind this reader knows, checked (:mod:`validate`); a frame of
        another kind (a newer writer's) is skipped without inflating it, a damaged one with a
        warning; all of them together inflate within a budget set by the file's size."""
        out: list[tuple[str, dict[str, Any]]] = []
        budget = Budget(self._file_size)
        scan = self._stored_scan()  # metadata frames are never RAW_ZSTD: no need to inflate those
        warnings = scan.warnings
        for frame in list(scan.frames):
            if frame.kind != FRAME_META:
                continue
            if peek_kind(frame.payload, bool(frame.flags & FLAG_ZLIB)) not in KNOWN_META_KINDS:
                continue
            try:
                kind, data = frame.meta(budget)
                warnings.extend(check_meta(kind, data))
            except (FormatError, MetaError) as exc:
                warnings.append(f"a damaged metadata frame (number {frame.seq}) was skipped: {exc}")
                continue
            out.append((kind, data))
        return out

    # -- records --
    def iter_records(self) -> Iterator[Any]:
        """Every kernel or synthesized record, decoded one by one (slow path), in file order.

        Each record gets an extra attribute-free pairing: use ``iter_records_with_frames`` to
        know the frame (and so the CPU) a record came from."""
        for _, rec in self.iter_records_with_frames():
            yield rec

    def iter_records_with_frames(self) -> Iterator[tuple[FileFrame, Any]]:
        from profiler.format.events import EventTable

        events = EventTable.from_header(self.header)
        for frame in self.iter_frames():
            if frame.kind not in (FRAME_RAW, FRAME_SYNTH):
                continue
            for rec in events.decode_stream(frame.payload, self):
                yield frame, rec

    def release(self, offset: int, length: int) -> None:
        """Tell the kernel we are done with these bytes for now: their pages leave our resident
        set (they stay in the page cache, and come back on the next access). Keeps the memory of
        a one-pass decode independent of the file's size."""
        if isinstance(self._data, mmap.mmap) and length > 0 and hasattr(mmap, "MADV_DONTNEED"):
            start = offset - offset % mmap.PAGESIZE
            try:
                self._data.madvise(mmap.MADV_DONTNEED, start, offset + length - start)
            except (OSError, ValueError):
                pass

    def raw_view(self) -> memoryview:
        """The whole file as bytes (zero-copy); RAW_ZSTD frames appear inflated, as RAW frames."""
        self.scan()
        return self._view

    def warn(self, message: str) -> None:
        self._stored_scan().warnings.append(message)

    def close(self) -> None:
        self._view.release()
        if isinstance(self._data, mmap.mmap):
            try:
                self._data.close()
            except BufferError:
                pass  # views handed out are still alive; the map goes with them

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _spool_stdin() -> bytes | mmap.mmap:
    """Standard input (``perf record -o - | profiler report -i -``) copied into an unlinked
    temporary file and memory-mapped, so memory does not grow with the stream."""
    import sys
    import tempfile

    with tempfile.TemporaryFile(prefix="profiler-stdin-") as spool:
        stdin = sys.stdin.buffer
        while chunk := stdin.read(1 << 20):
            spool.write(chunk)
        spool.flush()
        if spool.tell() == 0:
            return b""
        return mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ)


def _map_file(path: Path) -> bytes | mmap.mmap:
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return b""
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise ProfilerError(f"{path}: no such file.") from None
    except IsADirectoryError:
        raise ProfilerError(f"{path} is a directory, not a capture file.") from None
    except PermissionError:
        raise ProfilerError(f"{path}: permission denied (cannot read it).") from None
    except OSError as exc:
        raise ProfilerError(f"cannot read {path}: {exc.strerror}.") from None


def _parse_file_header(path: Path, data: bytes | mmap.mmap) -> tuple[dict[str, Any], int, tuple[int, int]]:
    head = bytes(data[:FILE_HEAD.size])
    if len(head) < 8 or head[:8] != MAGIC:
        raise NotACaptureError(f"{path} is not a profiler capture: {describe_foreign(head)}.")
    if len(head) < FILE_HEAD.size:
        raise FormatError(f"{path} is truncated inside its file header.")
    _, major, minor, hlen, crc = FILE_HEAD.unpack(head)
    if major > FORMAT_MAJOR:
        raise VersionError(
            f"{path} uses capture format {major}.{minor}, newer than the {FORMAT_MAJOR}.{FORMAT_MINOR} "
            f"this profiler {__version__} reads; upgrade profiler to read it."
        )
    if major < 1:
        raise VersionError(f"{path} uses capture format {major}.{minor}, which no release ever wrote.")
    start = FILE_HEAD.size
    if hlen > MAX_HEADER_SIZE or start + hlen > len(data):
        raise FormatError(f"{path} is truncated inside its header ({hlen} bytes announced).")
    body = bytes(data[start:start + hlen])
    if zlib.crc32(body) != crc:
        raise FormatError(f"{path} has a damaged header (checksum mismatch).")
    header = unpack(body, "capture header")
    if not isinstance(header, dict):
        raise FormatError(f"{path} has a header that is not a map.")
    _check_header(path, header)
    frames_start = start + hlen + pad8(start + hlen)
    return header, frames_start, (major, minor)


def _check_header(path: Path, header: dict[str, Any]) -> None:
    check_header(str(path), header)
