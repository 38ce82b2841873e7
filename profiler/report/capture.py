"""The first step of the report pipeline: a capture opened for reading (ours or perf.data).

:class:`Capture` holds the reader, the event table and what every step after it asks of the
capture: the whole decode (:attr:`Capture.data`) or the tally of distinct rows
(:meth:`Capture.tally`), each made at most once, the symbol sources' metadata, the
recorded build-ids. Commands open a capture once and hand it to :mod:`profiler.report.pipeline`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from profiler.errors import FormatError, ReportError
from profiler.format import perf_data_opener  # noqa: F401  registers: perf.data opens as a capture
from profiler.format.decode.columns import CaptureData
from profiler.format.decode.decoder import load_capture
from profiler.format.container.reader import CaptureReader
from profiler.format.attr import PERF_TYPE_SOFTWARE
from profiler.format.events import EventTable
from profiler.format.typed_header import CaptureHeader
from profiler.report.model import pseudo_events
from profiler.report.options import Filters
from profiler.report.tally import Tally, Unwinding
from profiler.symbols.sources import SOURCE_KINDS, Metadata


PERF_COUNT_SW_DUMMY = 9  # perf_event.h: enum perf_sw_ids


class Capture:
    """A capture opened for reports (errors are the format's one-sentence errors)."""

    def __init__(self, path: str, callchains: bool = True, stacks_apart: bool = True) -> None:
        self.path = path
        self.reader = CaptureReader.open(path)
        if stacks_apart and isinstance(self.reader, CaptureReader):  # a report unwinds from them: never joined
            self.reader.keep_stacks_apart()
        self.callchains = callchains
        self.events = EventTable.from_header(self.reader.header)
        self._data: CaptureData | None = None
        self._tallies: dict[tuple[bool, bool, bool], Tally | None] = {}
        self._metadata: Metadata | None = None
        # what one analysis derives from the decoded data and another reuses, by name (e.g. the
        # off-CPU intervals: profiler.report.offcpu.switch_outs)
        self.memo: dict[str, Any] = {}

    @property
    def names(self) -> list[str]:
        return [ev.name for ev in self.events.events]

    @property
    def sampled_names(self) -> list[str]:
        """The events that take samples: every one but the software "dummy" events that only
        carry side-band records (perf's tracking event, --overwrite's side-band), which perf
        report does not show either; all of them when that leaves none."""
        kept = [ev.name for ev in self.events.events
                if not (ev.attr.get("type") == PERF_TYPE_SOFTWARE and ev.attr.get("config") == PERF_COUNT_SW_DUMMY)]
        return kept or self.names

    @property
    def event_names(self) -> list[str]:
        """The recorded events, then the pseudo-events computed from them (``offcpu`` and
        ``wall`` for a capture with sched_switch samples: :mod:`profiler.report.offcpu`)."""
        names = self.names
        return names + pseudo_events(names)

    def is_pseudo(self, index: int) -> bool:
        """Whether event ``index`` (of :attr:`event_names`) is computed, not recorded."""
        return index >= len(self.events.events)

    @property
    def info(self) -> CaptureHeader:
        """The capture's header, typed."""
        return self.reader.info

    @property
    def byte_order(self) -> str:
        return self.reader.info.byte_order

    @property
    def arch(self) -> str:
        return self.reader.info.arch

    def event_index(self, wanted: str | None) -> int:
        """Index of the event called ``wanted`` (the first without one; ``cpu-clock`` also
        matches ``cpu-clock:u``); a ReportError naming the capture's events otherwise."""
        return select_event(self.event_names, wanted)

    @property
    def data(self) -> CaptureData:
        """Every record decoded into columns (memory grows with the samples)."""
        if self._data is None:
            self._data = decode_whole(self.path, self.reader, self.callchains)
        return self._data

    def tally(self, filters: Filters, callchains: bool, keep_cpu: bool,
              unwinding: Unwinding | None = None) -> Tally | None:
        """The capture tallied into distinct rows after ``--cpu``/``--time`` (memory grows with
        the distinct rows); None when it cannot be (see :mod:`profiler.report.tally`).
        ``unwinding``: its DWARF events' user stacks unwound into the rows' callchains."""
        from profiler.report.tally import tally_capture

        key = (callchains and self.callchains, keep_cpu, unwinding is not None)
        if key not in self._tallies:
            try:
                self._tallies[key] = tally_capture(self.reader, filters, key[0], keep_cpu, unwinding=unwinding)
            except (ValueError, IndexError) as exc:
                raise FormatError(f"{self.path} is damaged beyond reading ({exc}).") from None
        return self._tallies[key]

    def symbol_metadata(self) -> Metadata:
        """What the capture holds for the symbol sources (packed symbols, kallsyms, kernel, vdso)."""
        if self._metadata is None:
            self._metadata = metadata_of(self.reader)
        return self._metadata

    def build_ids(self) -> dict[str, str]:
        """DSO path -> the build-id recorded for it."""
        return self.reader.build_ids()

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def decode_whole(path: str, reader: CaptureReader, callchains: bool = True) -> CaptureData:
    """Every record of the capture decoded into columns; damage the decoder cannot step over
    is one sentence."""
    try:
        return load_capture(reader, callchains)
    except (ValueError, IndexError) as exc:
        raise FormatError(f"{path} is damaged beyond reading ({exc}).") from None


def metadata_of(reader: CaptureReader, kinds: Iterable[str] = SOURCE_KINDS) -> Metadata:
    """The payloads of some metadata kinds (by default what the symbol sources read), in one
    pass over the capture's metadata."""
    wanted = set(kinds)
    out: dict[str, list[dict[str, object]]] = {k: [] for k in wanted}
    for kind, data in reader.iter_metadata():
        if kind in wanted:
            out[kind].append(data)
    return out


def select_event(names: list[str], wanted: str | None) -> int:
    """Index of the event called ``wanted`` (``cpu-clock`` also matches ``cpu-clock:u``)."""
    if wanted is None:
        return 0
    for i, name in enumerate(names):
        if name == wanted:
            return i
    for i, name in enumerate(names):
        if name.split(":", 1)[0] == wanted.split(":", 1)[0]:
            return i
    raise ReportError(f"the capture has no event {wanted!r}: it has {', '.join(names)}.")
