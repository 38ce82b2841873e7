"""The capture container: file header, self-delimiting checksummed frames, trailer.

Layout (all container integers little endian; docs/format.md is the prose spec)::

    file header   magic "\\x7fPROFCAP" (8) | u16 major | u16 minor | u32 header_len | u32 crc32
                  | msgpack header (header_len bytes) | zero padding to a multiple of 8
    frame         u8 kind | u8 flags | u16 cpu | u32 length | u32 seq | u32 crc32
                  | payload (length bytes) | zero padding to a multiple of 8
    ...
    trailer       a frame of kind TRAILER: the clean end

The writer writes each frame with one ``writev`` so that a reader sees a valid file at every
frame boundary, whatever happens to the writer afterwards (SIGKILL, power loss of the process).
The reader yields every complete frame whose checksum matches and stops at the first damaged
or incomplete one, recording a warning that says how many bytes it skipped.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence

import msgpack

from profiler import __version__
from profiler.errors import (
    DiskFullError,
    FormatError,
    NotACaptureError,
    ProfilerError,
    VersionError,
)
from profiler.format.bounded import Budget, inflate, peek_kind, unpack
from profiler.format.buildid import is_build_id
from profiler.format.localfile import written_in_place
from profiler.format.validate import MetaError, check_header, check_meta, check_trailer
from profiler.value import Frozen, Value

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

# The metadata kinds this reader uses (docs/format.md); a frame of another kind is skipped.
KNOWN_META_KINDS = frozenset({"buildids", "kallsyms", "kernel", "lost", "modules", "stats", "tracepoint_formats",
                              "vdso", "unwind", "symbols"})

MAGIC = b"\x7fPROFCAP"
STDOUT = "-"  # the output path that means standard output, as in perf record -o -
DEFAULT_CAPTURE = "profile.prof"  # what `profiler record` writes and every reader opens by default
FORMAT_MAJOR = 3  # the newest version this reader reads
FORMAT_MINOR = 0
# What the writer puts in the file header: 1.1 for every capture that 1.x readers read
# correctly, 2.0 for captures with RAW_ZSTD frames (a 1.x reader would skip them: samples
# silently missing), which ``profiler record --call-graph dwarf`` writes; 3.0 for captures
# whose samples take their CPU from their frame (no PERF_SAMPLE_CPU: a 2.0 reader would give
# them all CPU 0), which ``profiler record`` writes for a command or process target.
VERSION_PLAIN = (1, 1)
VERSION_ZSTD = (2, 0)
VERSION_FRAME_CPU = (3, 0)

_FILE_HEAD = struct.Struct("<8sHHII")  # magic, major, minor, header_len, crc32
_FRAME_HEAD = struct.Struct("<BBHIII")  # kind, flags, cpu, length, seq, crc32
FRAME_HEADER_SIZE = _FRAME_HEAD.size  # 16
_FRAME_PREFIX = struct.Struct("<BBHII")  # _FRAME_HEAD without its crc32, which covers this and the payload
_CRC = struct.Struct("<I")
_PADDING = [b"\0" * n for n in range(8)]
_IOV_MAX = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 1024

# Frame kinds.
FRAME_RAW = 1  # raw ring-buffer bytes exactly as the kernel wrote them; ``cpu`` says whose
FRAME_SYNTH = 2  # records synthesized by the recorder (same encoding as the kernel's)
FRAME_ROUND = 3  # round marker: the recorder finished one pass over every ring buffer
FRAME_META = 4  # msgpack {"kind": str, "data": {...}}
FRAME_TRAILER = 5  # msgpack statistics; marks a clean end
FRAME_RAW_ZSTD = 6  # format 2.0: a RAW frame's records, compacted (see compact.py), zstd-compressed
FRAME_NAMES = {
    FRAME_RAW_ZSTD: "raw_zstd",
    FRAME_RAW: "raw",
    FRAME_SYNTH: "synth",
    FRAME_ROUND: "round",
    FRAME_META: "meta",
    FRAME_TRAILER: "trailer",
}
NO_CPU = 0xFFFF
_ROUND_FRAME: tuple[int, int, tuple[bytes | memoryview, ...], int] = (FRAME_ROUND, NO_CPU, (), 0)

# Frame flags.
FLAG_ZLIB = 0x01  # the payload is zlib-compressed (META frames only, in format 1.0)
COMPRESS_ABOVE = 4096  # META payloads larger than this are compressed

MAX_HEADER_SIZE = 64 << 20
MAX_FRAME_SIZE = 1 << 30  # a frame claiming more is damage, never an allocation

_RELEASE_EVERY = 8 << 20

PERF_DATA_MAGICS = (b"PERFILE2", b"2ELIFREP", b"PERFFILE")

# Readers of other tools' files, chosen by their first 8 bytes: (magics, factory). The
# perf.data reader is registered by profiler.format.perf_data_opener, which imports it only
# when a perf.data file is opened (the CLI and profiler.report.capture import the opener).
ForeignReader = Callable[["Path", "bytes | mmap.mmap"], "CaptureReader"]
FOREIGN_READERS: list[tuple[tuple[bytes, ...], ForeignReader]] = []


def _pad8(n: int) -> int:
    return -n % 8


def _packb(obj: Any) -> bytes:
    """``obj`` as msgpack, whose strings are UTF-8: a name read with ``surrogateescape`` (a
    command line, a mapped path or a perf.data string whose bytes are not UTF-8) is written with
    U+FFFD for those bytes (only such an object is walked)."""
    try:
        data: bytes = msgpack.packb(obj, use_bin_type=True)
    except UnicodeEncodeError:
        data = msgpack.packb(as_utf8(obj), use_bin_type=True)
    return data


def as_utf8(obj: Any) -> Any:
    """``obj`` with every string valid UTF-8: the bytes ``surrogateescape`` kept become U+FFFD."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            try:
                return obj.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            except UnicodeEncodeError:  # a surrogate surrogateescape did not make
                return obj.encode("utf-8", "replace").decode("utf-8")
        return obj
    if isinstance(obj, dict):
        return {as_utf8(k): as_utf8(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [as_utf8(v) for v in obj]
    return obj


def _unpackb(data: bytes | memoryview, what: str, budget: Budget | None = None) -> Any:
    """Untrusted msgpack, within the reader's limits (see :mod:`profiler.format.bounded`)."""
    return unpack(data, what, budget)


# --- writer -----------------------------------------------------------------------------------


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
        body = _packb(full)
        head = _FILE_HEAD.pack(MAGIC, version[0], version[1], len(body), zlib.crc32(body))
        self._write_all([head, body, b"\0" * _pad8(len(head) + len(body))])

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
            prefix = _FRAME_PREFIX.pack(kind, flags, cpu, length, seq)
            crc = zlib.crc32(prefix)
            for chunk in chunks:
                crc = zlib.crc32(chunk, crc)
            parts.append(prefix + _CRC.pack(crc))
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

    def write_pass(self, raws: Sequence[tuple[int, bytes | memoryview]], *, compressed: bool = False) -> None:
        """One pass of the recorder: a RAW frame per ``(cpu, data)`` (RAW_ZSTD frames of
        compacted records with ``compressed``), then a ROUND marker, all with one ``writev``.

        The bytes are exactly those of ``write_raw`` (or ``write_raw_zstd``) for each and then
        ``write_round``; one system call instead of one per frame. If the disk fills up, the
        whole pass is cut back."""
        kind = FRAME_RAW_ZSTD if compressed else FRAME_RAW
        frames: list[tuple[int, int, tuple[bytes | memoryview, ...], int]] = [
            (kind, cpu, (zstd_compress(data) if compressed else data,), 0) for cpu, data in raws
        ]
        frames.append(_ROUND_FRAME)
        self._frames(frames)

    def write_meta(self, kind: str, payload: dict[str, Any], level: int = 1) -> None:
        """One metadata frame; large ones (a kallsyms snapshot, symbol tables) are compressed
        with zlib ``level`` (1 by default: a 5 MB kallsyms in ~40 ms rather than ~110 ms at 6)."""
        body = _packb({"kind": kind, "data": payload})
        if len(body) > COMPRESS_ABOVE and level > 0:
            self._frame(FRAME_META, NO_CPU, (zlib.compress(body, level),), FLAG_ZLIB)
        else:
            self._frame(FRAME_META, NO_CPU, (body,))

    def close(self, stats: dict[str, Any] | None = None) -> None:
        """Write the trailer (the clean-end mark) and close the file."""
        if self.closed:
            return
        try:
            self._frame(FRAME_TRAILER, NO_CPU, (_packb(stats or {}),))
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


# --- reader -----------------------------------------------------------------------------------


class Frame(Frozen):
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
        obj = _unpackb(payload, "metadata frame", budget)
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
            raise FormatError("a metadata frame lacks its kind.")
        data = obj.get("data")
        return obj["kind"], data if isinstance(data, dict) else {}


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


def zstd_compress(data: bytes | memoryview) -> bytes:
    """zstd level 3: on compacted DWARF samples 70x smaller at ~1 GB/s (zlib -1: 26x at
    170 MB/s; docs/format.md has the measurements). One compressor serves every frame: making
    one costs more than compressing a small frame."""
    global _COMPRESSOR
    if _COMPRESSOR is None:
        _COMPRESSOR = _zstd_backend().ZstdCompressor(level=3)
    out: bytes = _COMPRESSOR.compress(data)
    return out


_COMPRESSOR: Any = None


def zstd_decompress(data: memoryview) -> bytes:
    """One compressed raw frame inflated (at most ``MAX_FRAME_SIZE``). One decompressor serves
    every frame, as one compressor does: a capture has hundreds of frames."""
    global _DECOMPRESSOR
    zstandard = _zstd()
    try:
        params = zstandard.get_frame_parameters(data)
        if params.content_size > MAX_FRAME_SIZE:
            raise FormatError("a compressed raw frame inflates past the format's limit.")
        if _DECOMPRESSOR is None:
            _DECOMPRESSOR = zstandard.ZstdDecompressor()
        out: bytes = _DECOMPRESSOR.decompress(data, max_output_size=MAX_FRAME_SIZE)
    except zstandard.ZstdError as exc:
        raise FormatError(f"a compressed raw frame is damaged ({exc}).") from None
    return out


_DECOMPRESSOR: Any = None


def _zstd_backend() -> Any:
    """zstandard's C backend for the recorder's compressor, loaded without running the
    package's ``__init__``: that imports ``platform`` (to choose a backend) and, on Python
    < 3.12, ``typing``, which cost every recording ~9 ms of CPU against ~1.5 ms for the
    extension alone. The package itself when it is already imported, when another backend is
    asked for (``PYTHON_ZSTANDARD_IMPORT_POLICY``), or when the extension is not found."""
    import sys

    if "zstandard" in sys.modules or sys.implementation.name != "cpython":
        return _zstd()
    if os.environ.get("PYTHON_ZSTANDARD_IMPORT_POLICY", "default").strip() != "default":
        return _zstd()
    try:
        from importlib.machinery import PathFinder
        from importlib.util import module_from_spec

        package = PathFinder.find_spec("zstandard")
        locations = package.submodule_search_locations if package is not None else None
        spec = PathFinder.find_spec("zstandard.backend_c", locations) if locations else None
        if spec is None or spec.loader is None:
            return _zstd()
        backend = module_from_spec(spec)
        spec.loader.exec_module(backend)
    except (ImportError, OSError):
        return _zstd()
    return backend


def _zstd() -> Any:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a main dependency
        raise ProfilerError("reading or writing compressed captures needs the 'zstandard' package.") from None
    return zstandard


class ScanResult(Value):
    __slots__ = _fields = ("frames", "clean_end", "trailer", "warnings", "data_end", "frames_end")

    def __init__(
        self,
        frames: list[Frame] | None = None,
        clean_end: bool = False,
        trailer: dict[str, Any] | None = None,
        warnings: list[str] | None = None,
        data_end: int = 0,  # offset just past the last good frame
        frames_end: int = 0,  # file offset just past the last good frame before the trailer
    ) -> None:
        self.frames: list[Frame] = [] if frames is None else frames
        self.clean_end = clean_end
        self.trailer: dict[str, Any] = {} if trailer is None else trailer
        self.warnings: list[str] = [] if warnings is None else warnings
        self.data_end = data_end
        self.frames_end = frames_end


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
        self.header = header
        self.version = version
        self._frames_start = frames_start
        self._scan: ScanResult | None = None
        self._meta: list[tuple[str, dict[str, Any]]] | None = None
        self.inflated = Inflated()  # what the RAW_ZSTD frames were before they were inflated

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
        """Walk every frame once (cached): checks checksums, finds the trailer and damage."""
        if self._scan is None:
            self._scan = _scan_frames(self._view, self._frames_start, self.release,
                                      str(self.header.get("byte_order", "little")))
            if any(f.kind == FRAME_RAW_ZSTD for f in self._scan.frames):
                self._expand(self._scan)
        return self._scan

    def _expand(self, scan: ScanResult) -> None:
        """Inflate RAW_ZSTD frames into an unlinked temporary file laid out like the capture,
        with RAW frames in their place, and read everything from there: record file offsets
        (what the columnar decoder and the unwinder address) then work the same for both."""
        import tempfile

        tmp = tempfile.TemporaryFile(prefix="profiler-capture-")
        try:
            out: list[Frame] = []
            tmp.write(self._view[:self._frames_start])
            pos = self._frames_start
            spans: list[tuple[int, int, int, int, int, int]] = []  # kind, cpu, seq, off, len, flags
            for frame in scan.frames:
                if frame.kind == FRAME_RAW_ZSTD:
                    payload: bytes | memoryview = zstd_decompress(frame.payload)
                    kind = FRAME_RAW
                    self.inflated.add(frame.seq, len(frame.payload), len(payload))
                else:
                    payload, kind = frame.payload, frame.kind
                head = _FRAME_HEAD.pack(kind, frame.flags, frame.cpu, len(payload), frame.seq, 0)
                tmp.write(head)
                tmp.write(payload)
                tmp.write(b"\0" * _pad8(len(payload)))
                spans.append((kind, frame.cpu, frame.seq, pos, len(payload), frame.flags))
                pos += FRAME_HEADER_SIZE + len(payload) + _pad8(len(payload))
            tmp.flush()
            data = mmap.mmap(tmp.fileno(), 0, access=mmap.ACCESS_READ) if pos else b""
        finally:
            tmp.close()  # the map keeps the (unlinked) file alive
        self._view.release()
        if isinstance(self._data, mmap.mmap):
            try:
                self._data.close()
            except BufferError:
                pass
        self._data = data
        self._view = memoryview(data)
        for kind, cpu, seq, off, length, flags in spans:
            body = off + FRAME_HEADER_SIZE
            out.append(Frame(kind, cpu, seq, off, self._view[body:body + length], flags))
        scan.frames = out

    def iter_frames(self) -> Iterator[Frame]:
        yield from self.scan().frames

    @property
    def warnings(self) -> list[str]:
        """What the reader skipped: damaged frames, and damaged metadata (read first)."""
        if self._meta is None:
            self._meta = self._read_metadata()
        return self.scan().warnings

    @property
    def clean_end(self) -> bool:
        return self.scan().clean_end

    @property
    def trailer(self) -> dict[str, Any]:
        return self.scan().trailer

    @property
    def size(self) -> int:
        """Bytes of the capture file (not of its inflated RAW_ZSTD frames)."""
        return self._file_size

    def metadata(self, kind: str) -> list[dict[str, Any]]:
        """Payloads of every META frame of ``kind``, in file order."""
        return [data for k, data in self.iter_metadata() if k == kind]

    def build_ids(self) -> dict[str, str]:
        """path -> build-id (hex) from the capture's ``buildids`` metadata."""
        out: dict[str, str] = {}
        for meta in self.metadata("buildids"):
            entries = meta.get("entries")
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and isinstance(entry.get("path"), str) and entry["path"] \
                        and is_build_id(entry.get("build_id")):
                    out[entry["path"]] = entry["build_id"].lower()
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
        warnings = self.scan().warnings
        for frame in self.scan().frames:
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

    def iter_records_with_frames(self) -> Iterator[tuple[Frame, Any]]:
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
        self.scan().warnings.append(message)

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
    head = bytes(data[:_FILE_HEAD.size])
    if len(head) < 8 or head[:8] != MAGIC:
        raise NotACaptureError(f"{path} is not a profiler capture: {describe_foreign(head)}.")
    if len(head) < _FILE_HEAD.size:
        raise FormatError(f"{path} is truncated inside its file header.")
    _, major, minor, hlen, crc = _FILE_HEAD.unpack(head)
    if major > FORMAT_MAJOR:
        raise VersionError(
            f"{path} uses capture format {major}.{minor}, newer than the {FORMAT_MAJOR}.{FORMAT_MINOR} "
            f"this profiler {__version__} reads; upgrade profiler to read it."
        )
    if major < 1:
        raise VersionError(f"{path} uses capture format {major}.{minor}, which no release ever wrote.")
    start = _FILE_HEAD.size
    if hlen > MAX_HEADER_SIZE or start + hlen > len(data):
        raise FormatError(f"{path} is truncated inside its header ({hlen} bytes announced).")
    body = bytes(data[start:start + hlen])
    if zlib.crc32(body) != crc:
        raise FormatError(f"{path} has a damaged header (checksum mismatch).")
    header = _unpackb(body, "capture header")
    if not isinstance(header, dict):
        raise FormatError(f"{path} has a header that is not a map.")
    _check_header(path, header)
    frames_start = start + hlen + _pad8(start + hlen)
    return header, frames_start, (major, minor)


def _check_header(path: Path, header: dict[str, Any]) -> None:
    check_header(str(path), header)


def _scan_frames(view: memoryview, pos: int, release: Callable[[int, int], None] | None = None,
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

    def frame_at(self, pos: int) -> tuple[Frame | None, str]:
        """The valid frame at ``pos``, or None and why not."""
        if pos + FRAME_HEADER_SIZE > self.end:
            return None, "an incomplete frame header"
        kind, flags, cpu, length, seq, crc = _FRAME_HEAD.unpack_from(self.view, pos)
        body = pos + FRAME_HEADER_SIZE
        if length > MAX_FRAME_SIZE or body + length > self.end:
            return None, "an incomplete frame"
        payload = self.view[body:body + length]
        if zlib.crc32(payload, zlib.crc32(self.view[pos:pos + 12])) != crc:
            return None, "a damaged frame (checksum mismatch)"
        if seq <= self.last_seq:
            return None, "a frame out of sequence"
        return Frame(kind, cpu, seq, pos, payload, flags), ""

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

    def accept(self, frame: Frame) -> None:
        self.last_seq = frame.seq
        if self.release is not None and frame.offset - self.released >= _RELEASE_EVERY:
            self.release(self.released, frame.offset - self.released)  # checksummed: not needed resident
            self.released = frame.offset
        length = len(frame.payload)
        self.pos = frame.offset + FRAME_HEADER_SIZE + length + _pad8(length)
        self.result.data_end = min(self.pos, self.end)
        if frame.kind != FRAME_TRAILER:
            self.result.frames.append(frame)
            self.result.frames_end = self.result.data_end

    def trailer(self, frame: Frame) -> None:
        self.result.clean_end = True
        try:
            self.result.trailer = check_trailer(_unpackb(frame.payload, "trailer"))
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
        start += _pad8(start)
        while start + FRAME_HEADER_SIZE <= self.end:
            stop = min(self.end, start + _SEARCH_WINDOW)
            found = self._in_window(start, stop)
            if found is not None or self.crc_budget < 0:
                return found
            start = stop - FRAME_HEADER_SIZE + 8  # a header straddling the window's end
            start += _pad8(start)
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
        ok = ((kind >= FRAME_RAW) & (kind <= FRAME_RAW_ZSTD) & ((flags & np.uint32(0xFE)) == 0)
              & ((cpu < _MAX_CPU) | (cpu == NO_CPU))
              & (offsets + FRAME_HEADER_SIZE + length.astype(np.int64) <= self.end)
              & (seq.astype(np.int64) > self.last_seq))
        for at in offsets[ok].tolist():
            self.crc_budget -= int(_FRAME_HEAD.unpack_from(self.view, at)[3]) + 12
            if self.crc_budget < 0:
                return None
            if self.frame_at(at)[0] is not None:
                return int(at)
        return None

    def cut_frame(self, pos: int) -> Frame | None:
        """A raw or synth frame the file ends inside: its complete records, unverified."""
        if pos + FRAME_HEADER_SIZE > self.end:
            return None
        kind, flags, cpu, length, seq, _ = _FRAME_HEAD.unpack_from(self.view, pos)
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
        return Frame(kind, cpu, seq, pos, self.view[body:at], flags, cut=True)


def _damage_note(what: str, pos: int, end: int) -> str:
    return (f"the capture stops at {what} at byte {pos}: skipped the last {end - pos} bytes; "
            f"everything before was read.")
