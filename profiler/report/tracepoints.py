"""Tracepoint samples: their payloads (PERF_SAMPLE_RAW) and stored formats.

The payloads come from the columnar decoder's RAW column (file offset and size of each
sample's bytes). ``raw_payloads`` is the fallback for a decoder without it: the exact record
decoder for the samples asked for only, walking the records in the columnar decoder's order
so that its ``seq`` numbers name the same records.

``--trace-filter`` is :mod:`profiler.report.tracefilter`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from profiler.errors import UsageError
from profiler.format import records as R
from profiler.format.attr import PERF_TYPE_TRACEPOINT
from profiler.format.decode.views import RecordViews
from profiler.format.container.layout import FRAME_RAW, FRAME_SYNTH
from profiler.format.container.reader import CaptureReader
from profiler.format.events import EventTable
from profiler.format.typed_header import CaptureHeader

if TYPE_CHECKING:
    from profiler.format.decode.columns import SampleColumns
    from profiler.report.capture import Capture
    from profiler.format.tracepoint import TraceFormat
    from profiler.report.options import LoadOptions


def is_tracepoint(header: CaptureHeader, index: int) -> bool:
    events = header.events
    if not 0 <= index < len(events):
        return False
    attr = events[index].get("attr") or {}
    return attr.get("type") == PERF_TYPE_TRACEPOINT and bool(
        int(attr.get("sample_type", 0)) & R.PERF_SAMPLE_RAW)


def trace_format(reader: CaptureReader, event: str) -> TraceFormat | None:
    """The stored ``format`` of a tracepoint event of the capture (None: not stored)."""
    from profiler.format.tracepoint import formats_from_meta  # only for a tracepoint event (start-up)

    entries: list[object] = []
    for meta in reader.metadata("tracepoint_formats"):
        got = meta.get("entries")
        entries.extend(got if isinstance(got, list) else [])  # a damaged list: no format, as none stored
    return formats_from_meta(entries).get(event)


def raw_payloads(reader: CaptureReader, seqs: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """The PERF_SAMPLE_RAW bytes of the sample records numbered ``seqs`` (file order, as the
    columnar decoder numbers them), as an object array aligned with ``seqs``."""
    events = EventTable.from_header(reader.header)
    views = RecordViews(reader, events.bo)
    wanted = np.unique(seqs)
    found: dict[int, bytes] = {}
    next_seq = 0
    for frame in reader.iter_frames():
        if frame.kind not in (FRAME_RAW, FRAME_SYNTH) or not len(frame.payload):
            continue
        offsets = views.record_offsets(frame, [])
        lo = int(np.searchsorted(wanted, next_seq))
        hi = int(np.searchsorted(wanted, next_seq + len(offsets)))
        for q in wanted[lo:hi].tolist():
            off = int(offsets[q - next_seq])
            size = int(views.w16[(off >> 1) + 3])
            ev = events.event_for(views.view, off, R.PERF_RECORD_SAMPLE, size)
            try:
                rec = R.decode_record(views.view[:off + size], off, ev.layout)
            except Exception:  # a damaged record: no payload
                continue
            raw = getattr(rec, "raw", None)
            if raw is not None:
                found[q] = bytes(raw)
        next_seq += len(offsets)
    out = np.empty(len(seqs), dtype=object)
    out[:] = [found.get(q, b"") for q in seqs.tolist()]
    return out


def event_payloads(capture: Capture, index: int, s: SampleColumns,
                   options: LoadOptions) -> tuple[TraceFormat | None, npt.NDArray[Any] | None]:
    """A tracepoint event's stored format and, when asked for (``options.payloads``) or a
    ``--trace-filter`` needs them, the payloads of the rows ``s``."""
    name = capture.names[index]
    trace = options.filters.trace
    if not is_tracepoint(capture.info, index):
        if trace:
            raise UsageError(f"--trace-filter selects tracepoint samples by field: '{name}' is not a tracepoint.")
        return None, None
    tfmt = trace_format(capture.reader, name)
    if tfmt is None and trace:
        raise UsageError(f"--trace-filter: the capture does not hold the format of {name} "
                         "(recorded by an older profiler).")
    if not (options.payloads or trace):
        return tfmt, None
    if s.raw is None:  # a decoder without the RAW column: the exact one, by record number
        return tfmt, raw_payloads(capture.reader, s.seq)
    view = capture.reader.raw_view()
    out = np.empty(len(s), dtype=object)
    out[:] = [bytes(view[o:o + n]) for o, n in zip(s.raw.offset.tolist(), s.raw.size.tolist())]
    return tfmt, out
