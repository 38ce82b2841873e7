"""Report options: one frozen dataclass whose fields say the defaults (the CLI only parses)."""

from __future__ import annotations

import os
from dataclasses import field
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.errors import UsageError
from profiler.format.container.layout import DEFAULT_CAPTURE

SORT_KEYS: tuple[str, ...] = ("pid", "tid", "comm", "dso", "sym", "cpu", "srcline", "cgroup", "cgroup_id")
DEFAULT_SORT: tuple[str, ...] = ("comm", "dso", "sym")
CALLGRAPH_MODES: tuple[str, ...] = ("caller", "callee", "none")
FORMATS: tuple[str, ...] = ("table", "json", "csv", "folded", "markdown", "github", "simple")
PERCENTAGES: tuple[str, ...] = ("absolute", "relative")


@dataclass(frozen=True)
class TimeRange:
    """One ``--time`` range. ``unit`` "s": seconds, either perf's absolute timestamps (as
    ``script`` prints them) or, for values before the capture's start, seconds from the start;
    ``unit`` "%": fractions (0..1) of the span from the first sample to the last; ``unit``
    "wall": whole nanoseconds since the epoch (dates), put on the sample clock once the capture is known
    (:func:`on_sample_clock`). An end of None is open; ``inclusive_end`` is False for a slice
    followed by another slice."""

    unit: str
    start: float | None
    end: float | None
    inclusive_end: bool = True


_TIME_HELP = ("START,END in seconds (as script prints them, or from the capture's start), several "
              "ranges separated by spaces, percentages: 10%-20%, 10%/2, 0%-10%,30%-40%, or dates: "
              "2026-11-27T10:00:00,+30s (local time unless it ends in Z or +HH:MM)")


@dataclass(frozen=True)
class Filters:
    """Which samples count. Empty tuples mean "all"; ``time`` lists ranges (``--time``), a
    sample counts when it is in any of them."""

    comms: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    tids: tuple[int, ...] = ()
    cpus: tuple[int, ...] = ()
    dsos: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    time: tuple[TimeRange, ...] = ()  # any of these ranges; () = all
    time_text: str = ""
    event: str | None = None
    trace: str | None = None  # --trace-filter: tracepoint payload fields (report/tracepoints.py)

    @property
    def any(self) -> bool:
        return bool(self.comms or self.pids or self.tids or self.cpus or self.dsos or self.symbols
                    or self.time or self.trace)


@dataclass(frozen=True)
class SymbolOptions:
    """Where symbols come from, for every command that names frames (report, script,
    flamegraph, export, buildids, archive); see :mod:`profiler.symbols.sources`."""

    symfs: str | None = None  # a root the recorded paths are looked up under first
    debug_dirs: tuple[str, ...] | None = None  # None: the system's (/usr/lib/debug)
    kallsyms: str | None = None  # kernel symbols from this file instead of the capture's
    debuginfod: str | None = None  # server URLs (whitespace-separated); None: $DEBUGINFOD_URLS
    offline: bool = False  # never use the network: debuginfod answers only from its cache

    def validated(self) -> SymbolOptions:
        """Itself, or UsageError (one sentence, exit 2) when a path cannot be what it names."""
        if self.symfs is not None and not os.path.isdir(self.symfs):
            what = "is not a directory" if os.path.exists(self.symfs) else "does not exist"
            raise UsageError(f"--symfs {self.symfs} {what}: it must name the root the recorded files are under.")
        if self.kallsyms is not None and not os.path.isfile(self.kallsyms):
            what = "is not a file" if os.path.exists(self.kallsyms) else "does not exist"
            raise UsageError(f"--kallsyms {self.kallsyms} {what}: it must name a copy of /proc/kallsyms.")
        return self


@dataclass(frozen=True)
class LoadOptions:
    """How a capture is turned into resolved stacks (shared by report, script, flamegraph...)."""

    input: str = DEFAULT_CAPTURE
    filters: Filters = field(default_factory=Filters)
    demangle: bool = True
    debug_dirs: tuple[str, ...] | None = None  # None: the system's (/usr/lib/debug)
    symfs: str | None = None  # a root the recorded paths are looked up under first
    kallsyms: str | None = None  # kernel symbols from this file instead of the capture's
    perf_map_dir: str = "/tmp"
    callchains: bool = True  # False: only the sampled ip, even when callchains were recorded
    debuginfod: str | None = None  # server URLs (whitespace-separated); None: $DEBUGINFOD_URLS
    offline: bool = False  # never use the network: debuginfod answers only from its cache
    inline: bool = True  # inlined functions (DWARF) as their own frames in stacks
    python_frames: str = "python"  # "all": keep the interpreter's frames between Python ones
    srclines: bool = False  # look up the source line of every address (--sort srcline, script)
    payloads: bool = False  # True: keep tracepoint samples' PERF_SAMPLE_RAW bytes (script)
    cgroup_ns: bool = False  # True: each row's cgroup namespace (--sort cgroup_id): rows decoded whole

    @classmethod
    def with_symbols(cls, symbols: SymbolOptions, **fields: Any) -> LoadOptions:
        """LoadOptions whose symbol fields come from ``symbols``."""
        return cls(symfs=symbols.symfs, debug_dirs=symbols.debug_dirs, kallsyms=symbols.kallsyms,
                   debuginfod=symbols.debuginfod, offline=symbols.offline, **fields)


@dataclass(frozen=True)
class ReportOptions:
    """``profiler report``: what to show and how."""

    load: LoadOptions = field(default_factory=LoadOptions)
    sort: tuple[str, ...] = DEFAULT_SORT
    children: bool = True  # only meaningful when the capture has callchains
    callgraph: str | None = None  # caller/callee/none; None: perf's default for the mode
    callchain_threshold: float = 0.5  # percent of the total below which branches are hidden
    percent_limit: float = 0.0
    group: bool = False  # --group: a ':S' group's events side by side
    percentage: str = "absolute"  # perf's default; "relative": of the filtered total
    format: str = "table"
    stats: bool = False
    header: bool = False
    thread_states: bool = False  # --thread-states: per thread running/runnable/blocked (docs/offcpu.md)
    progress: bool = True  # only shown when stderr is a terminal

    def __post_init__(self) -> None:
        bad = [k for k in self.sort if k not in SORT_KEYS]
        if bad:
            raise UsageError(f"unknown sort key {bad[0]!r}: valid keys are {', '.join(SORT_KEYS)}.")
        if not self.sort:
            raise UsageError(f"--sort needs at least one key of {', '.join(SORT_KEYS)}.")
        if self.callgraph is not None and self.callgraph not in CALLGRAPH_MODES:
            raise UsageError(f"unknown call graph mode {self.callgraph!r}: use caller, callee or none.")
        if self.format not in FORMATS:
            raise UsageError(f"unknown format {self.format!r}: use {', '.join(FORMATS)}.")
        if self.callchain_threshold < 0 or self.percent_limit < 0:
            raise UsageError("thresholds are percentages and cannot be negative.")


def parse_sort(text: str) -> tuple[str, ...]:
    """``comm,dso,sym`` -> ("comm", "dso", "sym"); also accepts perf's ``symbol``/``shared``."""
    aliases = {"symbol": "sym", "shared": "dso", "command": "comm", "shared_object": "dso"}
    keys = tuple(aliases.get(k.strip().lower(), k.strip().lower()) for k in text.split(",") if k.strip())
    bad = [k for k in keys if k not in SORT_KEYS]
    if bad:
        raise UsageError(f"unknown sort key {bad[0]!r}: valid keys are {', '.join(SORT_KEYS)}.")
    if not keys:
        raise UsageError(f"--sort needs at least one key of {', '.join(SORT_KEYS)}.")
    return keys


def parse_time(text: str) -> tuple[TimeRange, ...]:
    """perf's ``--time`` forms: ``START,END`` (either side may be empty), several such ranges
    separated by spaces, and percentages of the recording, ``A%-B%`` and ``A%/N`` (the N-th
    slice of A%), several separated by commas."""
    text = text.strip()
    if "%" in text:
        return tuple(_percent_range(part, text) for part in text.replace(" ", ",").split(",") if part)
    ranges = tuple(_wall_range(part, text) if _DATE.match(part) else _seconds_range(part, text)
                   for part in text.split())
    if not ranges:
        raise UsageError(f"--time {text!r}: give {_TIME_HELP}.")
    return ranges


def _seconds_range(part: str, text: str) -> TimeRange:
    pieces = part.split(",")
    if len(pieces) != 2:
        raise UsageError(f"--time {text!r}: give {_TIME_HELP}.")
    try:
        start = float(pieces[0]) if pieces[0].strip() else None
        end = float(pieces[1]) if pieces[1].strip() else None
    except ValueError:
        raise UsageError(f"--time {text!r}: give {_TIME_HELP}.") from None
    if start is not None and end is not None and end < start:
        raise UsageError(f"--time {text!r}: the range {part} ends before it starts.")
    return TimeRange("s", start, end)


import re  # noqa: E402  (with the date forms it reads)

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}T")
_SPAN = re.compile(r"^\+(\d+(?:\.\d*)?)(ns|us|ms|s|m|h)$")
_SPAN_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def _wall_range(part: str, text: str) -> TimeRange:
    """``DATE,DATE``, ``DATE,+30s`` (a length: ns, us, ms, s, m, h) or ``DATE,`` (open). The
    dates are kept as whole nanoseconds since the epoch: a float of seconds is only good to
    about 240 ns today, which would drop a sample printed at the very microsecond asked for."""
    import datetime

    lo, sep, hi = part.partition(",")
    if not sep:
        raise UsageError(f"--time {text!r}: give {_TIME_HELP}.")

    def date(value: str) -> int:
        try:
            when = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"--time {text!r}: {value!r} is not a date (2026-11-27T10:00:00).") from None
        whole_seconds = round(when.replace(microsecond=0).timestamp())
        return whole_seconds * 1_000_000_000 + when.microsecond * 1000

    start = date(lo)
    if not hi.strip():
        return TimeRange("wall", start, None)
    span = _SPAN.match(hi.strip())
    end = start + round(float(span.group(1)) * _SPAN_NS[span.group(2)]) if span else date(hi)
    if end < start:
        raise UsageError(f"--time {text!r}: the range {part} ends before it starts.")
    return TimeRange("wall", start, end)


def on_sample_clock(ranges: tuple[TimeRange, ...], start_time_ns: int | None,
                    start_perf_clock_ns: int | None) -> tuple[TimeRange, ...]:
    """``ranges`` with their dates put on the capture's sample clock (absolute seconds, as
    script prints them); a ReportError when the capture does not say when its clock started."""
    if not any(r.unit == "wall" for r in ranges):
        return ranges
    if start_time_ns is None or start_perf_clock_ns is None:
        from profiler.errors import ReportError

        raise ReportError("--time with dates needs the capture's wall-clock start (a perf.data file needs "
                          "perf record -k; profiler record always keeps it).")
    offset = start_time_ns - start_perf_clock_ns

    def clock(wall_ns: float | None) -> float | None:
        # at or after the start, so that it reads as an absolute clock value; in whole ns
        # until here, and a sample-clock ns value survives seconds-as-float and back
        return None if wall_ns is None else max(start_perf_clock_ns, int(wall_ns) - offset) / 1e9

    return tuple(TimeRange("s", clock(r.start), clock(r.end), r.inclusive_end) if r.unit == "wall" else r
                 for r in ranges)


def _percent(value: str, text: str) -> float:
    try:
        pct = float(value.strip().rstrip("%"))
    except ValueError:
        raise UsageError(f"--time {text!r}: give {_TIME_HELP}.") from None
    if not value.strip().endswith("%") or not 0 <= pct <= 100:
        raise UsageError(f"--time {text!r}: percentages run from 0% to 100%.")
    return pct / 100


def _percent_range(part: str, text: str) -> TimeRange:
    if "/" in part:
        size_text, _, nth_text = part.partition("/")
        size = _percent(size_text, text)
        try:
            nth = int(nth_text)
        except ValueError:
            raise UsageError(f"--time {text!r}: in A%/N, N is the slice number (1, 2, ...).") from None
        if size <= 0 or nth < 1 or nth * size > 1 + 1e-9:
            raise UsageError(f"--time {text!r}: slice {nth} of {size * 100:g}% lies outside the recording.")
        end = min(1.0, nth * size)
        return TimeRange("%", (nth - 1) * size, end, inclusive_end=end >= 1.0)
    lo, sep, hi = part.partition("-")
    if not sep:
        raise UsageError(f"--time {text!r}: give {_TIME_HELP}.")
    start, end = _percent(lo, text), _percent(hi, text)
    if end < start:
        raise UsageError(f"--time {text!r}: the range {part} ends before it starts.")
    return TimeRange("%", start, end)


def parse_int_list(text: str, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise UsageError(f"{what} must be a comma-separated list of numbers, not {text!r}.") from None


def parse_str_list(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


U64 = npt.NDArray[np.uint64]


def time_bounds(r: TimeRange, times: U64, start_ns: int) -> tuple[int, int]:
    """[lo, hi] in sample-clock ns of one ``--time`` range. Seconds at or after the capture's
    start are perf's absolute timestamps; smaller ones count from the start. Percentages are
    of the span from the first sample to the last (of every event), as in perf."""
    top = (1 << 64) - 1
    if r.unit == "%":
        first, last = (int(times.min()), int(times.max())) if len(times) else (0, 0)
        span = last - first
        lo = first + int(round((r.start or 0.0) * span))
        hi = first + int(round((1.0 if r.end is None else r.end) * span))
        return lo, hi if r.inclusive_end else hi - 1
    start_s = start_ns / 1e9

    def at(sec: float) -> int:
        return int(round(sec * 1e9)) if sec >= start_s else start_ns + int(round(sec * 1e9))

    lo = 0 if r.start is None else max(0, at(r.start))
    hi = top if r.end is None else max(0, at(r.end))
    return lo, hi


def time_mask(times: U64, ranges: tuple[TimeRange, ...], start_ns: int) -> npt.NDArray[np.bool_]:
    mask = np.zeros(len(times), dtype=bool)
    for r in ranges:
        lo, hi = time_bounds(r, times, start_ns)
        mask |= (times >= np.uint64(lo)) & (times <= np.uint64(hi))
    return mask
