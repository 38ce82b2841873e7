"""``PerfDataReader``: a perf.data file (file or pipe mode) read as a capture.

The reporter reads captures through :class:`profiler.format.container.reader.CaptureReader`: a
header map, frames of whole kernel records, metadata. This module builds exactly that from a
perf.data file, so every command (report, script, flamegraph, export, buildids, info, import)
reads perf.data unchanged:

* the header map from the file header's attrs and the feature sections (or, in pipe mode,
  from the HEADER_ATTR, EVENT_UPDATE and HEADER_FEATURE records), with the events' attrs by
  their kernel names and their ids, as docs/format.md specifies;
* metadata ``buildids`` and ``kernel`` from the BUILD_ID section, so DSOs are matched by
  build-id through the same symbol sources as our captures;
* frames of kernel records. When every run of kernel records sits 8-aligned in the file
  (uncompressed file mode), the frames are zero-copy views into the memory-mapped file;
  otherwise (compressed records, pipe mode, whose perf records have odd sizes) the runs are
  copied, in file order, into an unlinked temporary file that is memory-mapped in turn, so
  memory does not grow with the file.

Damage (perf.data is untrusted input): every section offset and size is checked against the
file; records are read up to the first one that contradicts its size, and a warning says how
many bytes were skipped; a damaged feature section is ignored with a warning. A file whose
``perf record`` was killed (data size 0 in its header, which perf report refuses) is read up
to its last whole record.
"""

from __future__ import annotations

import mmap
import struct
import tempfile
from pathlib import Path
from typing import IO, Any

import numpy as np

from profiler.dataclass import dataclass
from profiler.errors import FormatError, VersionError
from profiler.format.container.layout import FRAME_HEADER_SIZE, FRAME_RAW, NO_CPU
from profiler.format.container.reader import CaptureReader
from profiler.format.container.scan import FileFrame, ScanResult
from profiler.format.perfdata.features import (
    ATTR_SIZE_VER0,
    HEADER_FEAT_BITS,
    MAX_ATTR_SIZE,
    FeatureError,
    Features,
    decode_attr,
    parse_feature,
)
from profiler.format.perfdata.walk import I64, RecordSink, StreamState, finish, walk
from profiler.names import GUEST_KERNEL_DSO, KERNEL_DSO

MAGIC_LE = b"PERFILE2"
MAGIC_BE = b"2ELIFREP"
MAGIC_V1 = b"PERFFILE"
PIPE_HEADER_SIZE = 16
FILE_HEADER_SIZE = 104  # magic, size, attr_size, 3 sections, 256-bit feature bitmap
FRAME_TARGET = 4 << 20  # kernel runs are cut into frames of about this size
PERF_COUNT_SW_DUMMY = 9

_SOFTWARE = ("cpu-clock", "task-clock", "page-faults", "context-switches", "cpu-migrations",
             "minor-faults", "major-faults", "alignment-faults", "emulation-faults", "dummy",
             "bpf-output", "cgroup-switches")
_HARDWARE = ("cycles", "instructions", "cache-references", "cache-misses", "branches",
             "branch-misses", "bus-cycles", "stalled-cycles-frontend", "stalled-cycles-backend",
             "ref-cycles")
_WORD4_ARCHES = ("i386", "i486", "i586", "i686", "x86", "arm", "armv7l", "mips", "ppc", "s390")


def is_perf_data(head: bytes) -> bool:
    return head[:8] in (MAGIC_LE, MAGIC_BE, MAGIC_V1)


@dataclass
class _Section:
    offset: int
    size: int

    @property
    def end(self) -> int:
        return self.offset + self.size


class _Collector(RecordSink):
    """Kernel record runs → frames: zero-copy while they are aligned in the file, else spooled."""

    def __init__(self, file_view: memoryview) -> None:
        self.file_view = file_view
        self.runs: list[tuple[int, int]] = []  # (start, end) in the file
        self.spool: IO[bytes] | None = None
        self.spooled: list[tuple[int, int]] = []  # (payload offset, length) in the spool
        self.spool_size = 0

    def kernel_run(self, buf: bytes | memoryview, offsets: I64, end: int, in_file: bool) -> None:
        if not len(offsets):
            return
        for a, b in _cut(offsets, end):
            if self.spool is None and in_file and a % 8 == 0 and a >= FRAME_HEADER_SIZE:
                self.runs.append((a, b))
                continue
            if self.spool is None:
                self._start_spool()
            self._spool(buf, a, b)

    def _start_spool(self) -> None:
        self.spool = tempfile.TemporaryFile(prefix="profiler-perfdata-")
        runs, self.runs = self.runs, []
        for a, b in runs:
            self._spool(self.file_view, a, b)

    def _spool(self, buf: bytes | memoryview, a: int, b: int) -> None:
        assert self.spool is not None
        self.spool.write(bytes(FRAME_HEADER_SIZE))
        self.spool.write(buf[a:b])
        self.spooled.append((self.spool_size + FRAME_HEADER_SIZE, b - a))
        self.spool_size += FRAME_HEADER_SIZE + (b - a)

    def frames(self, file_data: bytes | mmap.mmap) -> tuple[bytes | mmap.mmap, list[FileFrame]]:
        """The buffer the frames live in, and the frames."""
        if self.spool is None:
            view = memoryview(file_data)
            return file_data, [FileFrame(FRAME_RAW, NO_CPU, i, a - FRAME_HEADER_SIZE, view[a:b])
                               for i, (a, b) in enumerate(self.runs)]
        self.spool.flush()
        if self.spool_size == 0:
            return b"", []
        data = mmap.mmap(self.spool.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(data)
        return data, [FileFrame(FRAME_RAW, NO_CPU, i, off - FRAME_HEADER_SIZE, view[off:off + n])
                      for i, (off, n) in enumerate(self.spooled)]


def _cut(offsets: I64, end: int) -> list[tuple[int, int]]:
    """A run of whole records cut at record boundaries into pieces of about FRAME_TARGET."""
    start = int(offsets[0])
    if end - start <= FRAME_TARGET:
        return [(start, end)]
    marks = np.arange(start + FRAME_TARGET, end, FRAME_TARGET, dtype=np.int64)
    cuts = np.unique(offsets[np.searchsorted(offsets, marks, side="right") - 1])
    bounds = [start, *[int(c) for c in cuts if c > start], end]
    return list(zip(bounds[:-1], bounds[1:]))


class PerfDataReader(CaptureReader):
    """A perf.data file presented as a capture (see the module docstring)."""

    source_format = "perf.data"

    def __init__(self, path: Path, file_data: bytes | mmap.mmap) -> None:
        self._file_data = file_data
        try:
            header, frames_data, frames, meta, scan, spool = _read(path, file_data)
        except (struct.error, ValueError, OverflowError) as exc:  # a check this reader lacks
            raise FormatError(f"{path} is a damaged perf.data file ({exc}).") from None
        super().__init__(path, frames_data, header, 0, (0, 0))
        self._scan = scan
        self._meta = meta
        self._spool = spool
        self._scan.frames = frames
        _drop_pages(file_data)  # the walk touched every page: give them back until decoding

    @property
    def size(self) -> int:
        return len(self._file_data)

    def close(self) -> None:
        super().close()
        for obj in (self._file_data, self._spool):
            if isinstance(obj, mmap.mmap):
                try:
                    obj.close()
                except BufferError:
                    pass
            elif obj is not None and hasattr(obj, "close"):
                obj.close()


def _drop_pages(data: bytes | mmap.mmap) -> None:
    if isinstance(data, mmap.mmap) and len(data) and hasattr(mmap, "MADV_DONTNEED"):
        try:
            data.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):
            pass


def _read(path: Path, data: bytes | mmap.mmap) -> tuple[
        dict[str, Any], bytes | mmap.mmap, list[FileFrame], list[tuple[str, dict[str, Any]]], ScanResult, Any]:
    head = bytes(data[:16])
    if head[:8] == MAGIC_V1:
        raise VersionError(f"{path} is a perf.data file of the first version (PERFFILE, before 2010), "
                           f"which profiler does not read.")
    bo = "<" if head[:8] == MAGIC_LE else ">"
    if len(head) < 16:
        raise FormatError(f"{path} is a damaged perf.data file (truncated inside its header).")
    (hsize,) = struct.unpack_from(bo + "Q", head, 8)
    view = memoryview(data)
    features = Features()
    collector = _Collector(view)
    state = StreamState(bo, features, collector)
    warnings: list[str] = []
    if hsize == PIPE_HEADER_SIZE:
        mode = "pipe"
        stop = walk(view, PIPE_HEADER_SIZE, len(view), state)
        clean = stop == len(view)
        if not clean:
            warnings.append(_damage(stop, len(view)))
        events = [(e.attr, e.ids) for e in state.pipe_events]
    elif hsize >= FILE_HEADER_SIZE:
        mode = "file"
        events, clean = _file_mode(path, view, bo, state, warnings)
    else:
        raise FormatError(f"{path} is a damaged perf.data file "
                          f"(its header claims {hsize} bytes, which no perf writes).")
    finish(state)
    if not events:
        raise FormatError(f"{path} is a perf.data file without events (its attrs are missing or damaged).")
    warnings[:0] = features.warnings
    warnings.extend(state.warnings)
    frames_data, frames = collector.frames(data)
    header = _header(path, bo, mode, events, state)
    meta = _metadata(features)
    scan = ScanResult(frames=frames, clean_end=clean, trailer={}, warnings=warnings, data_end=len(view))
    return header, frames_data, frames, meta, scan, collector.spool


def _file_mode(path: Path, view: memoryview, bo: str, state: StreamState,
               warnings: list[str]) -> tuple[list[tuple[dict[str, int], list[int]]], bool]:
    size = len(view)
    if size < FILE_HEADER_SIZE:
        raise FormatError(f"{path} is a damaged perf.data file (truncated inside its header).")
    attr_size, a_off, a_size, d_off, d_size = struct.unpack_from(bo + "5Q", view, 16)
    bits = int.from_bytes(bytes(view[72:104]), "little" if bo == "<" else "big")
    attrs, data = _Section(a_off, a_size), _Section(d_off, d_size)
    if not ATTR_SIZE_VER0 + 16 <= attr_size <= MAX_ATTR_SIZE:
        raise FormatError(f"{path} is a damaged perf.data file (attr size {attr_size}).")
    events = _attrs(path, view, bo, attr_size, attrs)
    clean = True
    if data.offset < FILE_HEADER_SIZE or data.offset > size:
        raise FormatError(f"{path} is a damaged perf.data file (its data section starts at byte {data.offset}).")
    end = data.end
    if data.size == 0 and size > data.offset:
        warnings.append("perf record did not finish writing this perf.data (its header says 0 bytes "
                        "of data): every whole record up to the end of the file was read.")
        end, clean = size, False
    elif end > size:
        warnings.append(f"the perf.data file is truncated: its data section ends at byte {end}, "
                        f"the file at {size}; every whole record before was read.")
        end, clean = size, False
    stop = walk(view, data.offset, end, state)
    if stop < end:
        warnings.append(_damage(stop, end))
        clean = False
    if clean:
        _features(view, bo, bits, data.end, state.features)
    if not events and state.features.event_desc:
        events = [(d.attr, d.ids) for d in state.features.event_desc]
    return events, clean


def _attrs(path: Path, view: memoryview, bo: str, attr_size: int,
           attrs: _Section) -> list[tuple[dict[str, int], list[int]]]:
    entry = attr_size  # struct perf_file_attr: the attr, then the section of its ids
    attr_size -= 16
    if attrs.end > len(view) or attrs.size % entry:
        raise FormatError(f"{path} is a damaged perf.data file (its attrs section does not fit).")
    out = []
    for pos in range(attrs.offset, attrs.end, entry):
        try:
            attr = decode_attr(bytes(view[pos:pos + attr_size]), bo)
        except FeatureError as exc:
            raise FormatError(f"{path} is a damaged perf.data file (an attr: {exc}).") from None
        ids_off, ids_size = struct.unpack_from(bo + "QQ", view, pos + attr_size)
        if ids_size % 8 or ids_off + ids_size > len(view):
            raise FormatError(f"{path} is a damaged perf.data file (an event's ids do not fit).")
        n = ids_size // 8
        ids = [int(i) for i in struct.unpack_from(f"{bo}{n}Q", view, ids_off)] if n else []
        out.append((attr, ids))
    return out


def _features(view: memoryview, bo: str, bits: int, at: int, feat: Features) -> None:
    """The feature sections: one ``perf_file_section`` per set bit, in bit order, at ``at``."""
    present = [b for b in range(1, HEADER_FEAT_BITS) if bits >> b & 1]
    if at + 16 * len(present) > len(view):
        feat.warnings.append("the perf.data feature table runs past the end of the file: "
                             "build-ids and descriptions were ignored.")
        return
    for i, bit in enumerate(present):
        off, size = struct.unpack_from(bo + "QQ", view, at + 16 * i)
        if off + size > len(view):
            feat.warnings.append(f"a perf.data feature section (bit {bit}) runs past the end of the file; "
                                 f"it was ignored.")
            continue
        parse_feature(feat, bit, view, bo, off, off + size)


def _damage(stop: int, end: int) -> str:
    return (f"the perf.data records stop at a damaged record at byte {stop}: skipped the last "
            f"{end - stop} bytes; everything before was read.")


# --- the header map and metadata -------------------------------------------------------------


def _event_name(attr: dict[str, int], ids: list[int], index: int, state: StreamState) -> str:
    for desc in state.features.event_desc:
        if ids and set(ids) & set(desc.ids):
            return desc.name
    if len(state.features.event_desc) > index and not ids:
        return state.features.event_desc[index].name
    for i in ids:
        if i in state.names_by_id:
            return state.names_by_id[i]
    etype, config = attr.get("type", 0), attr.get("config", 0)
    table = _SOFTWARE if etype == 1 else _HARDWARE if etype == 0 else ()
    if config < len(table):
        return table[config]
    return f"type{etype}:{config:#x}"


def _header(path: Path, bo: str, mode: str, events: list[tuple[dict[str, int], list[int]]],
            state: StreamState) -> dict[str, Any]:
    f = state.features
    evs: list[dict[str, Any]] = [{"name": _event_name(attr, ids, i, state), "attr": attr, "ids": ids}
           for i, (attr, ids) in enumerate(events)]
    # perf's tracking-only "dummy" event carries no samples: keep it, but not as the default event
    dummy = [e for e in evs if e["attr"].get("type") == 1 and e["attr"].get("config") == PERF_COUNT_SW_DUMMY]
    if dummy and len(dummy) < len(evs):
        evs = [e for e in evs if e not in dummy] + dummy
    arch = f.arch or ""
    header: dict[str, Any] = {
        "tool_version": f"perf {f.version}" if f.version else "perf",
        "hostname": f.hostname or "",
        "kernel_release": f.osrelease or "",
        "arch": arch,
        "byte_order": "little" if bo == "<" else "big",
        "word_size": 4 if arch in _WORD4_ARCHES else 8,
        "cmdline": f.cmdline,
        "target": {},
        "events": evs,
        "perf_data": _perf_facts(path, mode, state),
    }
    if f.nr_cpus_available is not None:
        header["nr_cpus"] = f.nr_cpus_available
    if f.nr_cpus_online is not None:
        header["online_cpus"] = list(range(min(f.nr_cpus_online, 1 << 16)))
    use_clockid = [e["attr"] for e in evs if e["attr"].get("use_clockid")]
    if use_clockid:
        header["clockid"] = int(use_clockid[0].get("clockid", 0))
    if f.sample_time is not None and f.sample_time[0] > 0:
        header["start_perf_clock_ns"] = f.sample_time[0]
        if f.clock_data:
            header["start_time_ns"] = (f.clock_data["wall_clock_ns"]
                                       + f.sample_time[0] - f.clock_data["clockid_time_ns"])
    return header


def _perf_facts(path: Path, mode: str, state: StreamState) -> dict[str, Any]:
    f = state.features
    facts: dict[str, Any] = {"mode": mode, "features": f.present, "perf_records": dict(state.counts),
                             "rounds": state.rounds}
    for key in ("version", "cpudesc", "cpuid", "total_mem_kb", "clockid_res_ns"):
        value = getattr(f, key)
        if value is not None:
            facts[key] = value
    for key in ("cpu_topology", "compressed", "clock_data"):
        value = getattr(f, key)
        if value:
            facts[key] = value
    if f.sample_time is not None:
        facts["sample_time"] = list(f.sample_time)
    if state.compressed_in:
        facts["compressed_bytes"], facts["inflated_bytes"] = state.compressed_in, state.inflated
    return facts


KERNEL_NAMES = (KERNEL_DSO, GUEST_KERNEL_DSO)


def _metadata(f: Features) -> list[tuple[str, dict[str, Any]]]:
    entries = []
    kernel_bid = None
    for e in f.build_ids:
        if e.filename in KERNEL_NAMES or e.filename.startswith(KERNEL_DSO):
            if e.cpumode == 1 and kernel_bid is None:
                kernel_bid = e.build_id
            continue
        entries.append({"path": e.filename, "build_id": e.build_id, "source": "perf.data"})
    meta: list[tuple[str, dict[str, Any]]] = [("buildids", {"entries": entries})]
    meta.append(("kernel", {"build_id": kernel_bid, "release": f.osrelease or ""}))
    if f.tracepoint_formats:
        meta.append(("tracepoint_formats", {"entries": f.tracepoint_formats}))
    return meta


def open_perf_data(path: Path, data: bytes | mmap.mmap) -> PerfDataReader:
    return PerfDataReader(path, data)
