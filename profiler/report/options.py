"""Report options: one frozen dataclass whose fields say the defaults (the CLI only parses)."""

from __future__ import annotations

from dataclasses import dataclass, field

from profiler.errors import UsageError
from profiler.format.container import DEFAULT_CAPTURE

SORT_KEYS: tuple[str, ...] = ("pid", "tid", "comm", "dso", "sym", "cpu", "srcline")
DEFAULT_SORT: tuple[str, ...] = ("comm", "dso", "sym")
CALLGRAPH_MODES: tuple[str, ...] = ("caller", "callee", "none")
FORMATS: tuple[str, ...] = ("table", "json", "csv", "folded")


@dataclass(frozen=True)
class Filters:
    """Which samples count. Empty tuples mean "all"; ``time`` is (start, end) in seconds from
    the capture's start, either end None for open."""

    comms: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    tids: tuple[int, ...] = ()
    cpus: tuple[int, ...] = ()
    dsos: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    time: tuple[float | None, float | None] = (None, None)
    event: str | None = None

    @property
    def any(self) -> bool:
        return bool(self.comms or self.pids or self.tids or self.cpus or self.dsos or self.symbols
                    or self.time != (None, None))


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
    srclines: bool = False  # look up the source line of every address (--sort srcline, script)


@dataclass(frozen=True)
class ReportOptions:
    """``profiler report``: what to show and how."""

    load: LoadOptions = field(default_factory=LoadOptions)
    sort: tuple[str, ...] = DEFAULT_SORT
    children: bool = True  # only meaningful when the capture has callchains
    callgraph: str | None = None  # caller/callee/none; None: perf's default for the mode
    callchain_threshold: float = 0.5  # percent of the total below which branches are hidden
    percent_limit: float = 0.0
    format: str = "table"
    stats: bool = False
    header: bool = False
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


def parse_time_range(text: str) -> tuple[float | None, float | None]:
    """``START,END`` in seconds from the capture's start; either side may be empty."""
    parts = text.split(",")
    if len(parts) != 2:
        raise UsageError(f"--time {text!r} must be START,END in seconds (either may be empty).")
    try:
        start = float(parts[0]) if parts[0].strip() else None
        end = float(parts[1]) if parts[1].strip() else None
    except ValueError:
        raise UsageError(f"--time {text!r} must be START,END in seconds (either may be empty).") from None
    if start is not None and end is not None and end < start:
        raise UsageError(f"--time {text!r} ends before it starts.")
    return start, end


def parse_int_list(text: str, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise UsageError(f"{what} must be a comma-separated list of numbers, not {text!r}.") from None


def parse_str_list(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())
