"""What ``profiler info`` shows: a capture described as plain data (rendering is the CLI's)."""

from __future__ import annotations

from collections import Counter
from dataclasses import field
from typing import Any

from profiler.dataclass import dataclass
from profiler.format import records as R
from profiler.format.attr import FLAG_BITS
from profiler.format.decode.decoder import load_capture
from profiler.format.container.layout import NO_CPU
from profiler.format.container.reader import CaptureReader

SAMPLE_BIT_NAMES: tuple[tuple[int, str], ...] = tuple(
    (getattr(R, name), name[len("PERF_SAMPLE_"):])
    for name in dir(R)
    if name.startswith("PERF_SAMPLE_") and not name.startswith("PERF_SAMPLE_BRANCH")
    and name != "PERF_SAMPLE_MAX"
)
TYPE_NAMES = {0: "hardware", 1: "software", 2: "tracepoint", 3: "hw-cache", 4: "raw",
              5: "breakpoint"}


def sample_type_words(sample_type: int) -> str:
    names = [name for bit, name in sorted(SAMPLE_BIT_NAMES) if sample_type & bit]
    return "|".join(names) if names else "0"


def attr_words(attr: dict[str, Any]) -> list[str]:
    """An event's attr in words, one short line per aspect."""
    kind = TYPE_NAMES.get(int(attr.get("type", 0)), f"pmu type {attr.get('type')}")
    lines = [f"type {kind}, config {int(attr.get('config', 0)):#x}"]
    if attr.get("freq"):
        lines.append(f"sampling at {attr.get('sample_period', 0)} Hz")
    else:
        lines.append(f"sampling every {attr.get('sample_period', 0)} events")
    lines.append(f"sample_type {sample_type_words(int(attr.get('sample_type', 0)))}")
    flags = [name for name, _ in FLAG_BITS if not name.startswith("__") and attr.get(name)]
    lines.append("flags " + (" ".join(flags) if flags else "none"))
    if attr.get("sample_max_stack"):
        lines.append(f"sample_max_stack {attr['sample_max_stack']}")
    return lines


@dataclass
class CaptureSummary:
    path: str
    size: int
    version: tuple[int, int]
    header: dict[str, Any]
    clean_end: bool
    record_counts: Counter[str] = field(default_factory=Counter)
    frame_counts: Counter[str] = field(default_factory=Counter)
    samples: int = 0
    first_time: int | None = None
    last_time: int | None = None
    lost_records: int = 0  # sum of LOST records' counts
    lost_samples: int = 0  # sum of LOST_SAMPLES records' counts
    metadata: Counter[str] = field(default_factory=Counter)
    zstd_bytes: tuple[int, int] | None = None  # RAW_ZSTD frames: (stored, inflated) payload bytes
    trailer: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> float | None:
        if self.first_time is None or self.last_time is None:
            return None
        return (self.last_time - self.first_time) / 1e9


def summarize(reader: CaptureReader) -> CaptureSummary:
    data = load_capture(reader, callchains=False)  # counts and times only
    summary = CaptureSummary(
        path=str(reader.path), size=reader.size, version=reader.version, header=reader.header,
        clean_end=reader.clean_end, record_counts=data.counts, samples=len(data.samples),
        trailer=reader.trailer,
    )
    inflated = getattr(reader, "inflated", None)  # a perf.data reader has no RAW_ZSTD frames
    for frame in reader.iter_frames():
        zstd = inflated is not None and frame.seq in inflated.seqs
        summary.frame_counts["raw_zstd" if zstd else frame.kind_name] += 1
    if inflated is not None and inflated.seqs:
        summary.zstd_bytes = (inflated.stored, inflated.inflated)
    for kind, _ in reader.iter_metadata():
        summary.metadata[kind] += 1
    times = [int(data.samples.time.min()), int(data.samples.time.max())] if len(data.samples) else []
    for other in data.others:
        rec = other.record
        if isinstance(rec, R.Lost):
            summary.lost_records += rec.lost
        elif isinstance(rec, R.LostSamples):
            summary.lost_samples += rec.lost
        if other.cpu != NO_CPU and other.time > 0:  # kernel records, not synthesized ones
            times.append(other.time)
    if times:
        summary.first_time, summary.last_time = min(times), max(times)
    summary.warnings = list(dict.fromkeys(reader.warnings + data.warnings))
    return summary
