"""``profiler import``: a perf.data file rewritten as a capture (docs/format.md).

The capture gets the header the reader built (events with their attrs and ids, machine
facts, and a ``perf_data`` map of what the perf.data header said), one ``raw`` frame per run
of kernel records (byte for byte as perf stored them, decompressed when perf compressed
them), the ``buildids`` and ``kernel`` metadata from perf's BUILD_ID section, and a trailer
when the perf.data file was whole. Every command then reads the capture as it read the
perf.data file: the same records give the same report.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from profiler.dataclass import dataclass
from profiler.format.container.layout import FRAME_RAW, FRAME_ROUND, FRAME_SYNTH
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter


@dataclass
class ImportResult:
    frames: int = 0
    record_bytes: int = 0
    metadata: int = 0
    clean: bool = True
    bytes_written: int = 0


def write_capture(reader: CaptureReader, out: str | os.PathLike[str],
                  extra_meta: list[tuple[str, dict[str, Any]]] | None = None) -> ImportResult:
    """Write ``reader``'s header, record frames and metadata as a new capture at ``out``."""
    result = ImportResult(clean=reader.clean_end)
    header = dict(reader.header)
    header["imported_from"] = {"format": getattr(reader, "source_format", "capture"),
                               "path": Path(str(reader.path)).name}
    writer = CaptureWriter.create(out, header)
    try:
        for frame in reader.iter_frames():
            if frame.kind == FRAME_RAW:
                writer.write_raw(frame.cpu, frame.payload)
            elif frame.kind == FRAME_SYNTH:
                writer.write_synth(bytes(frame.payload))
            elif frame.kind == FRAME_ROUND:
                writer.write_round()
            else:
                continue
            result.frames += 1
            result.record_bytes += len(frame.payload)
        for kind, data in [*reader.iter_metadata(), *(extra_meta or [])]:
            writer.write_meta(kind, data)
            result.metadata += 1
        if reader.clean_end:
            writer.close({"imported": True, **reader.trailer})
        result.bytes_written = writer.bytes_written
    finally:
        writer.abort()
    return result
