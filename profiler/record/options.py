"""``profiler record`` options as one frozen value (profiler/value.py), validated before anything is opened."""

from __future__ import annotations

from profiler.errors import UsageError
from profiler.format.container.layout import DEFAULT_CAPTURE
from profiler.value import Frozen

DEFAULT_FREQ = 4000  # perf's default; the docs say that higher rates slow the target
DEFAULT_DATA_PAGES = 128  # 512 KiB per CPU with 4 KiB pages, like perf; 1 control page on top
DWARF_DATA_PAGES = 512  # --call-graph dwarf: each sample carries up to 8 KiB of stack, so 2 MiB per CPU
# (--off-cpu too: a sample per context switch; at -m 128 a pipe ping-pong lost 0.5-6 % of them)
DEFAULT_OUTPUT = DEFAULT_CAPTURE

# clock_gettime(2)'s clocks by perf's names for -k (time's constants, without importing time)
CLOCKS: dict[str, int] = {"realtime": 0, "monotonic": 1, "monotonic_raw": 4, "boottime": 7, "tai": 11}
CLOCK_ALIASES: dict[str, str] = {"mono": "monotonic", "raw": "monotonic_raw", "real": "realtime",
                                 "boot": "boottime"}
DEFAULT_CLOCKID = CLOCKS["monotonic"]
OFFCPU_TRACEPOINT = "sched:sched_switch"  # --off-cpu samples it at every switch-out (docs/offcpu.md)
MAX_SAMPLE_RATE = "/proc/sys/kernel/perf_event_max_sample_rate"
MAX_STACK = "/proc/sys/kernel/perf_event_max_stack"


class RecordOptions(Frozen):
    """What ``profiler record`` was asked for. A class attribute holds each field's default."""

    command: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    tids: tuple[int, ...] = ()
    system_wide: bool = False
    cpus: tuple[int, ...] | None = None
    duration: float | None = None
    events: tuple[str, ...] = ()  # each an -e value (comma-separated list)
    freq: int | None = None  # -F; DEFAULT_FREQ when neither -F nor -c is given
    period: int | None = None  # -c
    callgraph: bool = False  # -g / --call-graph: record call chains
    dwarf_stack_size: int | None = None  # --call-graph dwarf[,SIZE]: user stack bytes per sample
    callchain_max_stack: int | None = None
    user_only: bool = False
    kernel_only: bool = False
    data_pages: int = DEFAULT_DATA_PAGES  # -m
    output: str = DEFAULT_OUTPUT
    quiet: bool = False
    data_mmaps: bool = False
    inherit: bool = True
    buildid_mmap: bool = False  # ask the kernel for build-ids in MMAP2 records (attr.build_id)
    compress: bool = True  # RAW_ZSTD frames (format 2.0); --no-compress: RAW frames (1.1)
    cmdline: tuple[str, ...] = ()
    filters: tuple[tuple[int, str], ...] = ()  # --filter: (index into events, tracepoint filter)
    clockid: int = DEFAULT_CLOCKID  # -k: the clock of every sample's time
    switch_output: str | None = None  # --switch-output: signal, SIZE or TIME (profiler/record/rotate.py)
    switch_max_files: int | None = None
    max_size: str | None = None  # --max-size: the rotated files' total
    python_lines: bool = False  # --python-lines: read Python processes' frames (record/pylines.py)
    push: tuple[str, ...] = ()  # --push: `profiler push FILE`'s destination and header options
    overwrite: bool = False  # --overwrite: the flight recorder (profiler/record/flight.py)
    archive_files: bool = False  # --archive with --switch-output: each file archived as it is finished
    snapshot_on: str | None = None  # --snapshot-on: signal, exit, SECONDS
    off_cpu: bool = False  # --off-cpu: sched:sched_switch samples + context-switch records (docs/offcpu.md)
    off_cpu_kernel: bool = False  # --off-cpu-kernel: switch-outs' call chains keep their kernel frames
    switch_events: bool = False  # --switch-events: context-switch records (attr.context_switch), as perf
    namespace_symbols: bool = True  # pack namespace-only files and JIT maps at the end (docs/containers.md)
    all_cgroups: bool = False  # --all-cgroups: PERF_SAMPLE_CGROUP + PERF_RECORD_CGROUP, as perf
    namespaces: bool = False  # --namespaces: PERF_RECORD_NAMESPACES (attr.namespaces), as perf
    cgroup: str | None = None  # -G/--cgroup PATH: only this cgroup's tasks, system-wide (record/cgroups.py)
    python: str = "auto"  # --python: CPython's perf support for the command (record/python.py)

    _fields = (
        "command", "pids", "tids", "system_wide", "cpus", "duration", "events", "freq", "period", "callgraph",
        "dwarf_stack_size", "callchain_max_stack", "user_only", "kernel_only", "data_pages", "output", "quiet",
        "data_mmaps", "inherit", "buildid_mmap", "compress", "cmdline", "filters", "clockid",
        "switch_output", "switch_max_files", "max_size", "python_lines", "push",
        "overwrite", "snapshot_on", "archive_files", "off_cpu", "off_cpu_kernel", "switch_events", "namespace_symbols",
        "all_cgroups", "cgroup", "python", "namespaces",
    )

    def __init__(
        self,
        command: tuple[str, ...] = (),
        pids: tuple[int, ...] = (),
        tids: tuple[int, ...] = (),
        system_wide: bool = False,
        cpus: tuple[int, ...] | None = None,
        duration: float | None = None,
        events: tuple[str, ...] = (),
        freq: int | None = None,
        period: int | None = None,
        callgraph: bool = False,
        dwarf_stack_size: int | None = None,
        callchain_max_stack: int | None = None,
        user_only: bool = False,
        kernel_only: bool = False,
        data_pages: int = DEFAULT_DATA_PAGES,
        output: str = DEFAULT_OUTPUT,
        quiet: bool = False,
        data_mmaps: bool = False,
        inherit: bool = True,
        buildid_mmap: bool = False,
        compress: bool = True,
        cmdline: tuple[str, ...] = (),
        filters: tuple[tuple[int, str], ...] = (),
        clockid: int = DEFAULT_CLOCKID,
        switch_output: str | None = None,
        switch_max_files: int | None = None,
        max_size: str | None = None,
        python_lines: bool = False,
        push: tuple[str, ...] = (),
        overwrite: bool = False,
        snapshot_on: str | None = None,
        archive_files: bool = False,
        off_cpu: bool = False,
        off_cpu_kernel: bool = False,
        switch_events: bool = False,
        namespace_symbols: bool = True,
        all_cgroups: bool = False,
        namespaces: bool = False,
        cgroup: str | None = None,
        python: str = "auto",
    ) -> None:
        self.command = command
        self.pids = pids
        self.tids = tids
        self.system_wide = system_wide
        self.cpus = cpus
        self.duration = duration
        self.events = events
        self.freq = freq
        self.period = period
        self.callgraph = callgraph
        self.dwarf_stack_size = dwarf_stack_size
        self.callchain_max_stack = callchain_max_stack
        self.user_only = user_only
        self.kernel_only = kernel_only
        self.data_pages = data_pages
        self.output = output
        self.quiet = quiet
        self.data_mmaps = data_mmaps
        self.inherit = inherit
        self.buildid_mmap = buildid_mmap
        self.compress = compress
        self.cmdline = cmdline
        self.filters = filters
        self.clockid = clockid
        self.switch_output = switch_output
        self.switch_max_files = switch_max_files
        self.max_size = max_size
        self.python_lines = python_lines
        self.push = push
        self.overwrite = overwrite
        self.snapshot_on = snapshot_on
        self.archive_files = archive_files
        self.off_cpu = off_cpu or off_cpu_kernel
        self.off_cpu_kernel = off_cpu_kernel
        self.switch_events = switch_events
        self.namespace_symbols = namespace_symbols
        self.all_cgroups = all_cgroups
        self.namespaces = namespaces
        self.cgroup = cgroup
        self.python = python

    def validate(self) -> None:
        """Reject conflicting or impossible combinations with one sentence each."""
        targets = [bool(self.command), bool(self.pids), bool(self.tids), self.system_wide]
        if sum(targets) == 0:
            raise UsageError("nothing to record: give a command after '--', -p PID, -t TID or -a.")
        if self.system_wide and (self.pids or self.tids):
            raise UsageError("-a (all CPUs) cannot be combined with -p or -t.")
        if self.cgroup is not None and not self.system_wide:
            raise UsageError("-G/--cgroup records a cgroup's tasks on every CPU: give -a (or -C), as perf needs.")
        if self.overwrite and (self.switch_output is not None or self.push):
            raise UsageError("--overwrite writes snapshots (--snapshot-on), not --switch-output files.")
        if self.snapshot_on is not None and not self.overwrite:
            raise UsageError("--snapshot-on goes with --overwrite (the flight recorder).")
        if self.overwrite and self.output in ("-", "/dev/stdout"):
            raise UsageError("--overwrite writes snapshot files: give -o a file name, not standard output.")
        if (self.switch_max_files is not None or self.max_size) and self.switch_output is None and not self.overwrite:
            raise UsageError("--switch-max-files and --max-size apply to the files of --switch-output "
                             "or --overwrite.")
        if self.switch_output is not None and self.output in ("-", "/dev/stdout"):
            raise UsageError("--switch-output writes files: give -o a file name, not standard output.")
        if self.push and self.switch_output is None:
            raise UsageError("--push sends the files of --switch-output: give it too "
                             "(profiler push sends one capture).")
        if self.switch_max_files is not None and self.switch_max_files < 1:
            raise UsageError("--switch-max-files keeps at least 1 file.")
        if self.freq is not None and self.period is not None:
            raise UsageError("-F (frequency) and -c (period) cannot be used together.")
        if self.freq is not None:
            _check_freq(self.freq)
        if self.period is not None and self.period <= 0:
            raise UsageError("-c PERIOD must be a positive number of events.")
        if self.user_only and self.kernel_only:
            raise UsageError("--user-only and --kernel-only exclude each other.")
        if self.duration is not None and self.duration <= 0:
            raise UsageError("--duration must be a positive number of seconds.")
        if self.callchain_max_stack is not None:
            _check_max_stack(self.callchain_max_stack)
        if self.dwarf_stack_size is not None:
            check_dwarf_stack_size(self.dwarf_stack_size)
            if not self.compress:
                raise UsageError("--call-graph dwarf captures are always compressed: leave out --no-compress.")
        if self.cpus is not None and not self.cpus:
            raise UsageError("-C needs at least one CPU.")


def _read_text(path: str) -> str:
    with open(path) as stream:
        return stream.read()


def _check_freq(freq: int) -> None:
    if freq <= 0:
        raise UsageError("-F HZ must be a positive sampling frequency.")
    try:
        limit = int(_read_text(MAX_SAMPLE_RATE).strip())
    except (OSError, ValueError):
        return
    if freq > limit:
        raise UsageError(
            f"-F {freq} exceeds the kernel's limit of {limit} Hz "
            "(kernel.perf_event_max_sample_rate)."
        )


def _check_max_stack(depth: int) -> None:
    if not 1 <= depth <= 0xFFFF:
        raise UsageError("--callchain-max-stack must be between 1 and 65535.")
    try:
        limit = int(_read_text(MAX_STACK).strip())
    except (OSError, ValueError):
        return
    if depth > limit:
        raise UsageError(
            f"--callchain-max-stack {depth} exceeds the kernel's limit of {limit} frames "
            "(kernel.perf_event_max_stack in /proc/sys/kernel/perf_event_max_stack)."
        )


DEFAULT_DWARF_STACK = 8192  # perf's default copy of the user stack per sample
MAX_DWARF_STACK = 65528  # the sample's size field is a u16: perf's limit, a multiple of 8


def check_dwarf_stack_size(size: int) -> None:
    if not 8 <= size <= MAX_DWARF_STACK:
        raise UsageError(f"--call-graph dwarf,{size}: the stack size must be between 8 and "
                         f"{MAX_DWARF_STACK} bytes.")


def parse_clockid(text: str) -> int:
    """-k's clock: perf's names (``mono``, ``monotonic``, ``raw``, ``realtime``, ``boot``,
    ``tai``, with or without ``CLOCK_``) or a clock id number."""
    name = text.strip().lower().removeprefix("clock_")
    name = CLOCK_ALIASES.get(name, name)
    if name in CLOCKS:
        return CLOCKS[name]
    if name.isdigit() and int(name) in CLOCKS.values():
        return int(name)
    raise UsageError(f"-k {text!r}: the clocks are {', '.join(CLOCKS)} (or mono, raw, real, boot).")


def parse_call_graph(text: str) -> int | None:
    """``--call-graph fp`` -> None (frame pointers), ``dwarf[,SIZE]`` -> the user stack bytes
    to copy per sample, rounded up to a multiple of 8 as perf does."""
    mode, comma, size_text = text.strip().partition(",")
    if mode == "fp" and not comma:
        return None
    if mode != "dwarf":
        raise UsageError(f"--call-graph {text!r}: give 'fp' or 'dwarf[,SIZE]'.")
    if not comma:
        return DEFAULT_DWARF_STACK
    try:
        size = int(size_text, 0)
    except ValueError:
        raise UsageError(f"--call-graph {text!r}: SIZE must be a number of bytes.") from None
    check_dwarf_stack_size(size)
    return min(MAX_DWARF_STACK, -(-size // 8) * 8)


_SIZE_RE = r"^(\d+)([kKmMgG]?)[bB]?$"


def parse_mmap_pages(text: str, page_size: int) -> int:
    """``-m``: a number of data pages (a power of two), or a size such as ``512K`` / ``2M``
    rounded up to a power-of-two number of pages."""
    import re  # only -m reads a size: re is not in every recording's start-up

    match = re.match(_SIZE_RE, text.strip())
    if not match:
        raise UsageError(f"-m {text!r}: give a number of pages (a power of two) or a size like 512K.")
    number, unit = int(match.group(1)), match.group(2).lower()
    if not unit:
        pages = number
        if pages < 1 or pages & (pages - 1):
            raise UsageError(f"-m {pages}: the number of data pages must be a power of two.")
        return pages
    size = number << {"k": 10, "m": 20, "g": 30}[unit]
    pages = max(1, -(-size // page_size))
    return 1 << (pages - 1).bit_length()
