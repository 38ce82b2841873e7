"""Walking a perf.data record stream: kernel records in runs, perf's own records handled.

The data section (file mode) or everything after the 16-byte header (pipe mode) is a stream
of ``perf_event_header``-prefixed records. Kernel record types (below 64) are passed on in
*runs* of consecutive records (``RecordSink.kernel_run``), untouched; perf's user-space types
(64 and up) are decoded here:

* 64 HEADER_ATTR (pipe mode): ``attr`` (its own ``size`` long) then the event's ids;
* 66 HEADER_TRACING_DATA and 71 AUXTRACE are followed by a payload their header does not
  count (``u32 size`` / ``u64 size`` after the header): it is skipped;
* 67 HEADER_BUILD_ID (pipe mode): one build-id entry;
* 68 FINISHED_ROUND: a round marker;
* 78 EVENT_UPDATE: ``u64 type, u64 id`` then the payload; type 2 (NAME) names an event;
* 80 HEADER_FEATURE (pipe mode): ``u64 feature bit`` then the feature section's bytes;
* 81 COMPRESSED: zstd data (``size - 8`` bytes); 83 COMPRESSED2 (newer perf): ``u64
  data_size`` then the data, padded. All compressed records of a file form one zstd stream
  (perf keeps one decompression context per session): their output is a stream of kernel
  records, which may straddle two compressed records;
* others (ID_INDEX, THREAD_MAP, CPU_MAP, TIME_CONV, FINISHED_INIT, STAT ...) are counted.

Nothing is trusted: a record shorter than its header, running past the stream, or a kernel
record whose size is not a multiple of 8, ends the stream with a warning saying how many
bytes were skipped; decompression stops at a ratio no perf file reaches (a zstd bomb).
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import field

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.format.perfdata.features import (
    ATTR_SIZE_VER0,
    MAX_ATTR_SIZE,
    FeatureError,
    Features,
    build_id_record,
    cstr,
    decode_attr,
    parse_feature,
)

PERF_RECORD_USER_TYPE_START = 64
PERF_RECORD_HEADER_ATTR = 64
PERF_RECORD_HEADER_TRACING_DATA = 66
PERF_RECORD_HEADER_BUILD_ID = 67
PERF_RECORD_FINISHED_ROUND = 68
PERF_RECORD_AUXTRACE = 71
PERF_RECORD_EVENT_UPDATE = 78
PERF_RECORD_HEADER_FEATURE = 80
PERF_RECORD_COMPRESSED = 81
PERF_RECORD_COMPRESSED2 = 83
PERF_EVENT_UPDATE__NAME = 2

USER_RECORD_NAMES = {
    64: "HEADER_ATTR", 65: "HEADER_EVENT_TYPE", 66: "HEADER_TRACING_DATA", 67: "HEADER_BUILD_ID",
    68: "FINISHED_ROUND", 69: "ID_INDEX", 70: "AUXTRACE_INFO", 71: "AUXTRACE", 72: "AUXTRACE_ERROR",
    73: "THREAD_MAP", 74: "CPU_MAP", 75: "STAT_CONFIG", 76: "STAT", 77: "STAT_ROUND",
    78: "EVENT_UPDATE", 79: "TIME_CONV", 80: "HEADER_FEATURE", 81: "COMPRESSED", 82: "FINISHED_INIT",
    83: "COMPRESSED2",
}

INFLATE_FLOOR = 64 << 20  # decompressed bytes always allowed ...
INFLATE_RATIO = 2000  # ... plus this many per compressed byte (perf files: 5-100)
_FEED = 1024  # compressed bytes fed per call: bounds the output of one call

I64 = npt.NDArray[np.int64]


@dataclass
class PipeEvent:
    attr: dict[str, int]
    ids: list[int]
    name: str | None = None


class RecordSink:
    """Receives the kernel record runs of a stream, in file order."""

    def kernel_run(self, buf: bytes | memoryview, offsets: I64, end: int, in_file: bool) -> None:
        """Records at ``offsets`` (consecutive, the last one ending at ``end``) of ``buf``."""
        raise NotImplementedError


@dataclass
class StreamState:
    """What the perf-specific records of a stream said."""

    bo: str
    features: Features
    sink: RecordSink
    pipe_events: list[PipeEvent] = field(default_factory=list)
    names_by_id: dict[int, str] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    rounds: int = 0
    compressed_in: int = 0
    inflated: int = 0
    _inflater: object | None = None
    _pending: bytearray = field(default_factory=bytearray)
    _inflate_stopped: bool = False


def walk(buf: bytes | memoryview, start: int, end: int, state: StreamState, in_file: bool = True) -> int:
    """Walk the records of ``buf[start:end]``; returns where the readable part stops."""
    offsets, types, stop = record_offsets(buf, start, end, state.bo)
    user = np.flatnonzero(types >= PERF_RECORD_USER_TYPE_START)
    run_from = 0
    for k in user.tolist():
        if k > run_from:
            state.sink.kernel_run(buf, offsets[run_from:k], int(offsets[k]), in_file)
        _user_record(buf, int(offsets[k]), state)
        run_from = k + 1
    if run_from < len(offsets):
        state.sink.kernel_run(buf, offsets[run_from:], stop, in_file)
    return stop


def record_offsets(buf: bytes | memoryview, start: int, end: int, bo: str) -> tuple[I64, I64, int]:
    """(offsets, types, stop): where each whole record of ``buf[start:end]`` starts, its type,
    and where the good part ends. Kernel-only aligned stretches are checked with whole-array
    operations; anything else (perf's own records, payloads after a record) is walked."""
    fast = _aligned_offsets(buf, start, end, bo)
    if fast is not None:
        return fast[0], fast[1], end
    return _walk_offsets(buf, start, end, bo)


_BLOCK_WORDS = 1 << 20  # words looked at a time: bounds the temporaries (8 MB of records)


def _aligned_offsets(buf: bytes | memoryview, start: int, end: int, bo: str) -> tuple[I64, I64] | None:
    """Record offsets of an 8-aligned stretch by whole-array checks, a block at a time: every
    word whose size field could be a record size is a candidate; following the sizes from the
    block's first record must visit exactly the candidates (else None: walk one by one)."""
    if (end - start) % 8 or end <= start:
        return None
    nwords = (end - start) // 8
    words = np.frombuffer(buf, dtype=bo + "u2", count=nwords * 4, offset=start)
    heads = np.frombuffer(buf, dtype=bo + "u4", count=nwords * 2, offset=start)
    parts: list[I64] = []
    type_parts: list[I64] = []
    pos = 0
    while pos < nwords:
        hi = min(pos + _BLOCK_WORDS, nwords)
        sizes = words[4 * pos + 3:4 * hi:4]
        cand = np.flatnonzero((sizes >= 8) & ((sizes & 7) == 0))
        if not len(cand) or cand[0] != 0:
            return None
        nxt = cand + (sizes[cand] >> 3).astype(np.int64)
        last = int(np.searchsorted(cand, hi - pos, side="left"))  # candidates inside the block
        inside = nxt < hi - pos
        k = int(np.argmin(inside)) if not inside.all() else len(nxt)  # first record leaving the block
        if k >= last or k + 1 != last or not np.array_equal(nxt[:k], cand[1:k + 1]):
            return None
        cand = cand[:k + 1] + pos
        parts.append(cand)
        type_parts.append(heads[cand * 2].astype(np.int64))
        pos = int(nxt[k]) + pos
    if pos != nwords:
        return None
    offsets: I64 = np.concatenate(parts) * 8 + start
    types: I64 = np.concatenate(type_parts)
    if np.isin(types, (PERF_RECORD_HEADER_TRACING_DATA, PERF_RECORD_AUXTRACE)).any():
        return None  # their payloads are not records: walk
    return offsets, types


def _walk_offsets(buf: bytes | memoryview, start: int, end: int, bo: str) -> tuple[I64, I64, int]:
    head = struct.Struct(bo + "IHH")
    offs: list[int] = []
    types: list[int] = []
    pos = start
    while pos + 8 <= end:
        rtype, _, size = head.unpack_from(buf, pos)
        if size < 8 or pos + size > end or (rtype < PERF_RECORD_USER_TYPE_START and size % 8):
            break
        extra = _payload_after(buf, pos, size, rtype, bo)
        if extra < 0 or pos + size + extra > end:
            break
        offs.append(pos)
        types.append(rtype)
        pos += size + extra
    return np.asarray(offs, dtype=np.int64), np.asarray(types, dtype=np.int64), pos


def _payload_after(buf: bytes | memoryview, pos: int, size: int, rtype: int, bo: str) -> int:
    """Bytes that follow a record without being counted in its size (-1: damaged)."""
    if rtype == PERF_RECORD_HEADER_TRACING_DATA:
        return int(struct.unpack_from(bo + "I", buf, pos + 8)[0]) if size >= 12 else -1
    if rtype == PERF_RECORD_AUXTRACE:
        return int(struct.unpack_from(bo + "Q", buf, pos + 8)[0]) if size >= 16 else -1
    return 0


# --- perf's own records ---------------------------------------------------------------------


def _user_record(buf: bytes | memoryview, pos: int, state: StreamState) -> None:
    bo = state.bo
    rtype, misc, size = struct.unpack_from(bo + "IHH", buf, pos)
    state.counts[USER_RECORD_NAMES.get(rtype, f"USER_TYPE_{rtype}")] += 1
    handler = _HANDLERS.get(rtype)
    if handler is None:
        return
    try:
        handler(buf, pos, size, misc, state)
    except (FeatureError, struct.error, UnicodeError) as exc:
        name = USER_RECORD_NAMES.get(rtype, str(rtype))
        state.warnings.append(f"a damaged {name} record at byte {pos} was skipped ({exc}).")


def _attr(buf: bytes | memoryview, pos: int, size: int, misc: int, state: StreamState) -> None:
    body = bytes(buf[pos + 8:pos + size])
    if len(body) < 8:
        raise FeatureError("no attr")
    (attr_size,) = struct.unpack_from(state.bo + "I", body, 4)
    if not ATTR_SIZE_VER0 <= attr_size <= min(len(body), MAX_ATTR_SIZE):
        raise FeatureError(f"attr size {attr_size}")
    attr = decode_attr(body[:attr_size], state.bo)
    n = (len(body) - attr_size) // 8
    ids = list(struct.unpack_from(f"{state.bo}{n}Q", body, attr_size)) if n else []
    state.pipe_events.append(PipeEvent(attr, [int(i) for i in ids]))


def _build_id(buf: bytes | memoryview, pos: int, size: int, misc: int, state: StreamState) -> None:
    if size < 36:
        raise FeatureError(f"{size} bytes")
    state.features.build_ids.append(build_id_record(buf, state.bo, pos, size, misc))


def _round(buf: bytes | memoryview, pos: int, size: int, misc: int, state: StreamState) -> None:
    state.rounds += 1


def _event_update(buf: bytes | memoryview, pos: int, size: int, misc: int, state: StreamState) -> None:
    if size < 24:
        raise FeatureError(f"{size} bytes")
    utype, ident = struct.unpack_from(state.bo + "QQ", buf, pos + 8)
    if utype == PERF_EVENT_UPDATE__NAME:
        state.names_by_id[int(ident)] = cstr(bytes(buf[pos + 24:pos + size]))


def _feature(buf: bytes | memoryview, pos: int, size: int, misc: int, state: StreamState) -> None:
    if size < 16:
        raise FeatureError(f"{size} bytes")
    (bit,) = struct.unpack_from(state.bo + "Q", buf, pos + 8)
    if bit < 256:
        parse_feature(state.features, int(bit), buf, state.bo, pos + 16, pos + size)


def _compressed(buf: bytes | memoryview, pos: int, size: int, misc: int, state: StreamState) -> None:
    data = bytes(buf[pos + 8:pos + size])
    _inflate(data, state)


def _compressed2(buf: bytes | memoryview, pos: int, size: int, misc: int, state: StreamState) -> None:
    if size < 16:
        raise FeatureError(f"{size} bytes")
    (n,) = struct.unpack_from(state.bo + "Q", buf, pos + 8)
    if n > size - 16:
        raise FeatureError(f"{n} bytes of data in a {size}-byte record")
    _inflate(bytes(buf[pos + 16:pos + 16 + n]), state)


def _inflate(data: bytes, state: StreamState) -> None:
    """Feed one compressed record to the session's zstd stream; hand on the whole records."""
    if state._inflate_stopped:
        return
    import zstandard

    if state._inflater is None:
        state._inflater = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
    inflater = state._inflater
    state.compressed_in += len(data)
    limit = INFLATE_FLOOR + INFLATE_RATIO * state.compressed_in
    pending = state._pending
    try:
        for at in range(0, len(data), _FEED):
            out = inflater.decompress(data[at:at + _FEED])  # type: ignore[attr-defined]
            state.inflated += len(out)
            if state.inflated > limit:
                state.warnings.append("the compressed records inflate beyond any perf.data's ratio "
                                      f"(more than {INFLATE_RATIO}:1): the rest of them was skipped.")
                state._inflate_stopped = True
                return
            pending += out
    except zstandard.ZstdError as exc:
        state.warnings.append(f"the compressed records are damaged ({exc}): the rest of them was skipped.")
        state._inflate_stopped = True
        return
    _drain(state)


def _drain(state: StreamState) -> None:
    """Pass on the whole records at the start of the decompressed bytes; keep the rest."""
    pending = state._pending
    if len(pending) < 8:
        return
    view = memoryview(pending)
    try:
        stop = walk(view, 0, len(pending), state, in_file=False)
        left = len(pending) - stop
        if left >= 8:
            rtype, _, size = struct.unpack_from(state.bo + "IHH", view, stop)
            incomplete = size >= 8 and size > left and not (rtype < PERF_RECORD_USER_TYPE_START and size % 8)
            if not incomplete:
                state.warnings.append(f"the decompressed records are damaged at a {size}-byte record: "
                                      f"the rest of the compressed records was skipped.")
                state._inflate_stopped = True
                stop = len(pending)
    finally:
        view.release()
    del pending[:stop]


def finish(state: StreamState) -> None:
    """The stream ended: bytes left in the decompressed stream are an incomplete record."""
    if state._pending:
        state.warnings.append(f"the compressed records end inside a record: its {len(state._pending)} "
                              f"bytes were skipped.")
        state._pending.clear()


Handler = Callable[[bytes | memoryview, int, int, int, StreamState], None]
_HANDLERS: dict[int, Handler] = {
    PERF_RECORD_HEADER_ATTR: _attr,
    PERF_RECORD_HEADER_BUILD_ID: _build_id,
    PERF_RECORD_FINISHED_ROUND: _round,
    PERF_RECORD_EVENT_UPDATE: _event_update,
    PERF_RECORD_HEADER_FEATURE: _feature,
    PERF_RECORD_COMPRESSED: _compressed,
    PERF_RECORD_COMPRESSED2: _compressed2,
}
