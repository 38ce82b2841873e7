"""Writing a capture: ``CaptureWriter`` streams whole frames, each with one ``writev``, so that
a reader sees a valid file at every frame boundary, whatever happens to the writer afterwards
(SIGKILL, power loss of the process). The recorder imports this module: it imports neither
numpy, pathlib, tempfile nor the reader."""

from __future__ import annotations

import errno
import os
import zlib
from collections.abc import Sequence

from profiler import __version__
from profiler.errors import DiskFullError, FormatError, ProfilerError
from profiler.format.container.codec import packb, zstd_compress
from profiler.format.container.layout import (
    COMPRESS_ABOVE,
    CRC,
    FILE_HEAD,
    FLAG_ZLIB,
    FRAME_INDEX,
    FRAME_META,
    FRAME_PREFIX,
    FRAME_RAW,
    FRAME_RAW_ZSTD,
    FRAME_ROUND,
    FRAME_SYNTH,
    FLAG_STACKS,
    FRAME_TRAILER,
    INDEX_ENTRY,
    STACKS_HEAD,
    MAGIC,
    MAX_FRAME_SIZE,
    NO_CPU,
    STDOUT,
    VERSION_PLAIN,
    pad8,
)
from profiler.format.localfile import written_in_place

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

_PADDING = [b"\0" * n for n in range(8)]
_IOV_MAX = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 1024

_ROUND_FRAME: tuple[int, int, tuple[bytes | memoryview, ...], int] = (FRAME_ROUND, NO_CPU, (), 0)


class CaptureWriter:
    """Streams frames into a new capture file (mode 0600).

    Each ``write_*`` call appends exactly one whole frame with a single ``writev``. If the disk
    fills up mid-frame the file is cut back to the last whole frame and ``DiskFullError`` is
    raised: everything written before stays readable.
    """

    def __init__(self, fd: int, path: str) -> None:
        self._fd = fd
        self.path = path
        self.bytes_written = 0
        self.frames_written = 0
        self._seq = 0
        self.closed = False

    @classmethod
    def create(cls, path: str | os.PathLike[str], header: dict[str, Any],
               version: tuple[int, int] = VERSION_PLAIN, *, keep_old: bool = False) -> CaptureWriter:
        """A new capture at ``path``, its header written.

        The file is always a new one: it is written under a temporary name beside ``path``
        and moved over ``path`` once its header is complete, so a reader of the file that was
        there (which may have it memory-mapped) keeps reading it intact, and a symlink at
        ``path`` is replaced rather than followed. ``keep_old`` keeps that previous file as
        ``NAME.old``, as perf keeps ``perf.data.old``. A device or FIFO at ``path``, also
        behind a symlink (``/dev/null``, ``/dev/stdout``), is written in place; ``-`` is
        standard output.
        """
        target = os.fspath(path)  # the writer's paths are strings: pathlib is not imported to record
        try:
            special = target == STDOUT or written_in_place(target)
        except OSError as exc:
            raise ProfilerError(f"cannot write the capture {target}: {exc.strerror}.") from None
        if special:
            return cls._create_in_place(target, header, version)
        try:
            directory, name = os.path.split(target)
            fd, tmp = _mkstemp(directory or ".", f".{name}.", ".tmp")
        except OSError as exc:
            raise ProfilerError(f"cannot write the capture {target}: {exc.strerror}.") from None
        writer = cls(fd, target)
        try:
            writer._write_file_header(header, version)
            _move_into_place(tmp, target, keep_old)
        except BaseException:
            writer.abort()
            _unlink_quietly(tmp)
            raise
        return writer

    @classmethod
    def _create_in_place(cls, target: str, header: dict[str, Any],
                         version: tuple[int, int]) -> CaptureWriter:
        try:
            if target == STDOUT:
                fd = os.dup(1)
            else:
                fd = os.open(target, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
        except OSError as exc:
            raise ProfilerError(f"cannot write the capture {target}: {exc.strerror}.") from None
        writer = cls(fd, target)
        try:
            writer._write_file_header(header, version)
        except BaseException:
            writer.abort()
            raise
        return writer

    @classmethod
    def append_to(cls, path: str | os.PathLike[str]) -> CaptureWriter:
        """Reopen an existing capture to add frames (``profiler archive``).

        The trailer, if any, is cut off (``close`` writes a new one) and so is anything after
        the last good frame; sequence numbers continue. The file must be writable.
        """
        target = os.fspath(path)
        from profiler.format.container.reader import CaptureReader  # not for the recorder

        reader = CaptureReader.open(target)
        if getattr(reader, "source_format", None) == "perf.data":
            reader.close()
            raise ProfilerError(f"{target} is a perf.data file: convert it first "
                                f"(profiler import {target} -o OUT).")
        scan = reader.scan()
        if scan.frames and scan.frames[-1].cut:
            reader.close()
            raise ProfilerError(f"{target} ends inside a frame (its whole records are read, but the frame "
                                f"cannot be extended): write a copy with -o OUT.")
        keep = scan.frames[-1] if scan.frames else None
        end = scan.frames_end  # in the file (frames of an inflated image have other offsets)
        next_seq = keep.seq + 1 if keep is not None else 0
        reader.close()
        if next_seq > 0xFFFFFFFF:
            raise FormatError("the capture cannot be extended: its last frame's sequence number is the largest "
                              "a frame can have (the capture is damaged).")
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise ProfilerError(f"cannot write the capture {target}: {exc.strerror}.") from None
        writer = cls(fd, target)
        writer._cut_back(end)
        writer._seq = next_seq
        return writer

    def _write_file_header(self, header: dict[str, Any], version: tuple[int, int]) -> None:
        full = dict(header)
        full["format_version"] = list(version)
        full.setdefault("tool_version", __version__)
        full.setdefault("hostname", os.uname().nodename)  # what socket.gethostname() returns
        body = packb(full)
        head = FILE_HEAD.pack(MAGIC, version[0], version[1], len(body), zlib.crc32(body))
        self._write_all([head, body, b"\0" * pad8(len(head) + len(body))])

    def _write_all(self, parts: list[bytes | memoryview]) -> None:
        """Write ``parts`` completely or cut the file back to where it was and raise."""
        start = self.bytes_written
        pending: list[bytes | memoryview] = [p for p in parts if len(p)]
        try:
            while pending:
                n = os.writev(self._fd, pending[:_IOV_MAX])
                self.bytes_written += n
                done = 0
                while done < len(pending) and n >= len(pending[done]):
                    n -= len(pending[done])
                    done += 1
                del pending[:done]
                if pending and n:
                    pending[0] = memoryview(pending[0]).cast("B")[n:]
        except OSError as exc:
            self._cut_back(start)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                why = "the file size limit was reached" if exc.errno == errno.EFBIG else "the disk is full"
                raise DiskFullError(
                    f"{why}: stopped writing {self.path}; "
                    f"the {start} bytes written before are intact."
                ) from None
            raise ProfilerError(f"cannot write {self.path}: {exc.strerror}.") from None

    def _cut_back(self, offset: int) -> None:
        try:
            os.ftruncate(self._fd, offset)
            os.lseek(self._fd, offset, os.SEEK_SET)
        except OSError:
            pass
        self.bytes_written = offset

    def _frame(self, kind: int, cpu: int, chunks: tuple[bytes | memoryview, ...],
               flags: int = 0) -> None:
        self._frames([(kind, cpu, chunks, flags)])

    def _frames(self, frames: list[tuple[int, int, tuple[bytes | memoryview, ...], int]]) -> None:
        """Append whole frames ``(kind, cpu, chunks, flags)`` with one ``writev``."""
        if self.closed:
            raise ProfilerError(f"internal error: write to the closed capture {self.path}.")
        parts: list[bytes | memoryview] = []
        seq = self._seq
        for kind, cpu, chunks, flags in frames:
            length = sum(len(c) for c in chunks)
            if length > MAX_FRAME_SIZE:
                raise ValueError(f"frame of {length} bytes exceeds the format's limit")
            prefix = FRAME_PREFIX.pack(kind, flags, cpu, length, seq)
            crc = zlib.crc32(prefix)
            for chunk in chunks:
                crc = zlib.crc32(chunk, crc)
            parts.append(prefix + CRC.pack(crc))
            parts.extend(chunks)
            parts.append(_PADDING[-length % 8])
            seq += 1
        self._write_all(parts)
        self._seq = seq
        self.frames_written += len(frames)

    def write_raw(self, cpu: int, *chunks: bytes | memoryview) -> None:
        """One frame of whole kernel records copied from the ring buffer of ``cpu``."""
        self._frame(FRAME_RAW, cpu, chunks)

    def write_raw_zstd(self, cpu: int, data: bytes) -> None:
        """One RAW_ZSTD frame: ``data`` (compacted kernel records of ``cpu``) compressed."""
        self._frame(FRAME_RAW_ZSTD, cpu, (zstd_compress(data),))

    def write_synth(self, data: bytes) -> None:
        """One frame of records the recorder synthesized (kernel encoding)."""
        self._frame(FRAME_SYNTH, NO_CPU, (data,))

    def write_round(self) -> None:
        self._frame(FRAME_ROUND, NO_CPU, ())

    def write_pass(self, raws: Sequence[tuple[int, bytes | memoryview | tuple[bytes, bytes]]], *,
                   compressed: bool = False, samples: Sequence[int] = ()) -> None:
        """One pass of the recorder: a RAW frame per ``(cpu, data)`` (RAW_ZSTD frames of
        compacted records with ``compressed``), then a ROUND marker, all with one ``writev``.

        The bytes are exactly those of ``write_raw`` (or ``write_raw_zstd``) for each and then
        ``write_round``; one system call instead of one per frame. If the disk fills up, the
        whole pass is cut back. ``samples``, one per raw with ``compressed``: how many records
        it holds when all of them are samples (0 otherwise); those go in an INDEX frame before
        the ROUND marker (the caller gives format version ``with_index``). A raw given as
        (lean records, stack fields) (``splitstacks.split_stacks``, with ``compressed``) is
        written as a RAW_ZSTD frame with FLAG_STACKS (format 4.0)."""
        kind = FRAME_RAW_ZSTD if compressed else FRAME_RAW
        frames: list[tuple[int, int, tuple[bytes | memoryview, ...], int]] = []
        for cpu, data in raws:
            if isinstance(data, tuple):
                lean = zstd_compress(data[0])
                frames.append((FRAME_RAW_ZSTD, cpu, (STACKS_HEAD.pack(len(lean)), lean, zstd_compress(data[1])),
                               FLAG_STACKS))
            else:
                frames.append((kind, cpu, (zstd_compress(data) if compressed else data,), 0))
        if compressed and any(samples):
            entries = b"".join(INDEX_ENTRY.pack(self._seq + k, n) for k, n in enumerate(samples) if n > 0)
            frames.append((FRAME_INDEX, NO_CPU, (entries,), 0))
        frames.append(_ROUND_FRAME)
        self._frames(frames)

    def write_meta(self, kind: str, payload: dict[str, Any], level: int = 1) -> None:
        """One metadata frame; large ones (a kallsyms snapshot, symbol tables) are compressed
        with zlib ``level`` (1 by default: a 5 MB kallsyms in ~40 ms rather than ~110 ms at 6)."""
        body = packb({"kind": kind, "data": payload})
        if len(body) > COMPRESS_ABOVE and level > 0:
            self._frame(FRAME_META, NO_CPU, (zlib.compress(body, level),), FLAG_ZLIB)
        else:
            self._frame(FRAME_META, NO_CPU, (body,))

    def close(self, stats: dict[str, Any] | None = None) -> None:
        """Write the trailer (the clean-end mark) and close the file."""
        if self.closed:
            return
        try:
            self._frame(FRAME_TRAILER, NO_CPU, (packb(stats or {}),))
        finally:
            self.abort()

    def abort(self) -> None:
        """Close without a trailer (the file stays readable up to its last frame)."""
        if not self.closed:
            self.closed = True
            os.close(self._fd)

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()


def _mkstemp(directory: str, prefix: str, suffix: str) -> tuple[int, str]:
    """``tempfile.mkstemp`` (mode 0600, never an existing file), without importing tempfile
    (with shutil and random) into the recorder."""
    for _ in range(100):
        name = os.path.join(directory, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(directory))


def _move_into_place(tmp: str, target: str, keep_old: bool) -> None:
    """``tmp`` becomes ``target``; with ``keep_old`` what was at ``target`` (a file or the
    symlink itself, never what it points to) becomes ``target.old``. ``target`` names a file
    at every moment: the old one is hard-linked as ``.old`` before the new one replaces it."""
    old = target + ".old"
    try:
        if keep_old and os.path.lexists(target):
            if os.path.lexists(old):
                os.unlink(old)
            try:
                os.link(target, old, follow_symlinks=False)
            except OSError:  # a file system without hard links
                os.replace(target, old)
        os.replace(tmp, target)
    except OSError as exc:
        raise ProfilerError(f"cannot write the capture {target}: {exc.strerror}.") from None


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
