"""perf.data files open as captures (``CaptureReader.open``) once this module is imported; the
perf.data reader itself is imported only when such a file is opened, so that reading one of
our captures does not pay for it."""

from __future__ import annotations

import mmap
from pathlib import Path

from profiler.format.container.layout import PERF_DATA_MAGICS
from profiler.format.container.reader import FOREIGN_READERS, CaptureReader


def open_perf_data(path: Path, data: bytes | mmap.mmap) -> CaptureReader:
    from profiler.format.perfdata.reader import PerfDataReader

    return PerfDataReader(path, data)


if not any(magics == PERF_DATA_MAGICS for magics, _ in FOREIGN_READERS):
    FOREIGN_READERS.append((PERF_DATA_MAGICS, open_perf_data))
