"""perf.data (``perf record``'s file, file and pipe mode) read as a capture.

* ``features``: ``struct perf_event_attr`` from bytes and the header's feature sections;
* ``walk``: the record stream — kernel records in runs, perf's own records decoded,
  compressed (zstd) records inflated;
* ``reader``: :class:`PerfDataReader`, a :class:`~profiler.format.container.reader.CaptureReader`
  over a perf.data file.

The facts come from tools/perf/Documentation/perf.data-file-format.txt and
/usr/include/linux/perf_event.h; the tests compare with perf 6.1 on the same files.
"""

from profiler.format import perf_data_opener  # noqa: F401  registers: perf.data opens as a capture
from profiler.format.perfdata.reader import PerfDataReader, is_perf_data

__all__ = ["PerfDataReader", "is_perf_data"]
