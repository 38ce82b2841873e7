"""Encodings inside a capture: msgpack written as UTF-8 (``packb``, ``as_utf8``) and zstd
(``zstd_compress`` for the recorder, ``zstd_decompress`` for one raw frame). Untrusted msgpack
and zlib are read by :mod:`profiler.format.bounded`."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import msgpack

from profiler.errors import FormatError, ProfilerError
from profiler.format.container.layout import MAX_FRAME_SIZE

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any


def packb(obj: Any) -> bytes:
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


def zstd_decompress(data: memoryview, limit: int = MAX_FRAME_SIZE) -> bytes | None:
    """One compressed raw frame inflated, or None when it would inflate past ``limit`` bytes
    (at most ``MAX_FRAME_SIZE``): a frame that declares its size (the writer's always do) is
    never inflated past it, and no more than its size is ever allocated. One decompressor per thread
    serves every frame, as one compressor does: a capture has hundreds of frames."""
    zstandard = _zstd()
    limit = max(0, min(limit, MAX_FRAME_SIZE))
    try:
        declared = zstandard.get_frame_parameters(data).content_size
        decompressor = _decompressor(zstandard)
        if declared != zstandard.CONTENTSIZE_UNKNOWN:
            if declared > limit:
                return None
            out: bytes = decompressor.decompress(data)
            return out
        chunks: list[bytes] = []  # no size declared: inflated a MiB at a time, up to the limit
        total = 0
        for chunk in decompressor.read_to_iter(data, write_size=1 << 20):
            total += len(chunk)
            if total > limit:
                return None
            chunks.append(chunk)
    except zstandard.ZstdError as exc:
        raise FormatError(f"a compressed raw frame is damaged ({exc}).") from None
    return b"".join(chunks)


def raw_zstd_parts(payload: memoryview, flags: int) -> list[memoryview]:
    """The zstd frames of a stored RAW_ZSTD frame's payload: the one, or with FLAG_STACKS
    (format 4.0) the lean records' and the stack fields' (``u64`` length of the first, then
    both); a payload that does not hold what its length says is a FormatError (saying why,
    as the skip warning of :func:`~profiler.format.container.inflate.damaged_note` shows it)."""
    from profiler.format.container.layout import FLAG_STACKS, STACKS_HEAD

    if not flags & FLAG_STACKS:
        return [payload]
    if len(payload) < STACKS_HEAD.size:
        raise FormatError("too short for its two parts")
    first = STACKS_HEAD.unpack_from(payload)[0]
    if first > len(payload) - STACKS_HEAD.size:
        raise FormatError("its first part is longer than the frame")
    return [payload[STACKS_HEAD.size:STACKS_HEAD.size + first], payload[STACKS_HEAD.size + first:]]


def split_sizes(parts: list[memoryview]) -> tuple[int, int]:
    """What the two parts of a FLAG_STACKS frame declare they inflate to; a part that declares
    nothing is a FormatError (the writer's always declare)."""
    lean, fields = (zstd_declared_size(p) for p in parts)
    if lean is None or fields is None:
        raise FormatError("its two parts do not declare their sizes")
    return lean, fields


def zstd_declared_size(data: memoryview) -> int | None:
    """The inflated size a compressed raw frame declares (the writer's always do), read from
    its header without inflating it; None when it declares none or is damaged (inflating it
    then says how)."""
    zstandard = _zstd()
    try:
        declared = int(zstandard.get_frame_parameters(data).content_size)
    except zstandard.ZstdError:
        return None
    return None if declared == zstandard.CONTENTSIZE_UNKNOWN or declared > MAX_FRAME_SIZE else declared


def zstd_decompress_into(data: memoryview, room: Callable[[int], memoryview],
                         limit: int = MAX_FRAME_SIZE) -> int | None:
    """:func:`zstd_decompress` into the memory ``room(n)`` gives for its ``n`` inflated bytes:
    ``n``, or None when the frame would inflate past ``limit``. A frame that declares its size
    is inflated in place, with no bytes object (and no fresh pages) in between; one that does
    not is inflated by :func:`zstd_decompress` and copied."""
    zstandard = _zstd()
    limit = max(0, min(limit, MAX_FRAME_SIZE))
    try:
        declared = zstandard.get_frame_parameters(data).content_size
        if declared == zstandard.CONTENTSIZE_UNKNOWN:
            whole = zstd_decompress(data, limit)
            if whole is None:
                return None
            room(len(whole))[:] = whole
            return len(whole)
        if declared > limit:
            return None
        target = room(declared)
        filled = 0
        with _decompressor(zstandard).stream_reader(data, read_across_frames=False) as reader:
            while filled < declared:
                n = reader.readinto(target[filled:])
                if not n:
                    break
                filled += n
            more = reader.read(1) if filled == declared else b""
    except zstandard.ZstdError as exc:
        raise FormatError(f"a compressed raw frame is damaged ({exc}).") from None
    if filled != declared or more:
        raise FormatError("a compressed raw frame is damaged (its size is not the size it declares).")
    return int(filled)


_DECOMPRESSORS = threading.local()  # one per thread: a decompressor is not to be shared (report/tally._paired)


def _decompressor(zstandard: Any) -> Any:
    """This thread's decompressor: a capture has hundreds of frames, and one serves them all."""
    decompressor = getattr(_DECOMPRESSORS, "one", None)
    if decompressor is None:
        decompressor = _DECOMPRESSORS.one = zstandard.ZstdDecompressor()
    return decompressor


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
