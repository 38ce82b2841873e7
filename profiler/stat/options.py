"""``profiler stat`` options as one frozen dataclass, validated before anything is opened."""

from __future__ import annotations

from profiler.dataclass import dataclass
from profiler.errors import UsageError

MIN_INTERVAL_MS = 10  # perf's lower bound for -I


@dataclass(frozen=True)
class StatOptions:
    command: tuple[str, ...] = ()
    events: tuple[str, ...] = ()  # each an -e value; empty: perf's default set
    pids: tuple[int, ...] = ()
    tids: tuple[int, ...] = ()
    system_wide: bool = False  # -a (or -C alone)
    cpus: tuple[int, ...] | None = None  # -C
    cpu_list: str | None = None  # -C as given, for the header
    repeat: int = 1  # -r
    interval_ms: int | None = None  # -I
    per_thread: bool = False
    per_cpu: bool = False  # -A / --per-cpu / --no-aggr
    csv_sep: str | None = None  # -x
    json: bool = False
    table_format: str | None = None  # --format markdown|github|simple (the summary, through tabulate)
    inherit: bool = True  # --no-inherit clears it
    pid_text: str = ""  # -p / -t as given, for the header
    tid_text: str = ""

    @property
    def attached(self) -> bool:
        return bool(self.pids or self.tids)

    def validate(self) -> None:
        """Reject conflicting or impossible combinations with one sentence each."""
        if not (self.command or self.attached or self.system_wide):
            raise UsageError("nothing to count: give a command after '--', -p PID, -t TID or -a.")
        if self.system_wide and self.attached:
            raise UsageError("-a (all CPUs) cannot be combined with -p or -t.")
        if self.pids and self.tids:
            raise UsageError("give either -p or -t, not both.")
        if self.repeat < 1:
            raise UsageError("-r N needs a positive number of runs.")
        if self.repeat > 1 and not self.command:
            raise UsageError("-r repeats a command: give one after '--'.")
        if self.repeat > 1 and self.interval_ms is not None:
            raise UsageError("-r and -I cannot be combined.")
        if self.interval_ms is not None and self.interval_ms < MIN_INTERVAL_MS:
            raise UsageError(f"-I takes at least {MIN_INTERVAL_MS} milliseconds.")
        if self.csv_sep is not None and self.json:
            raise UsageError("-x (CSV) and --json cannot be combined.")
        if self.table_format is not None and (self.csv_sep is not None or self.json):
            raise UsageError("--format makes a table of the counts: it cannot be combined with -x or --json.")
        if self.table_format is not None and self.interval_ms is not None:
            raise UsageError("--format makes a table of the final counts: it cannot be combined with -I.")
        if self.csv_sep == "":
            raise UsageError("-x needs a separator, such as ',' or ';'.")
        self._validate_aggregation()

    def _validate_aggregation(self) -> None:
        if self.per_thread and self.per_cpu:
            raise UsageError("--per-thread and -A/--per-cpu cannot be combined.")
        if self.per_thread and not self.attached:
            raise UsageError(
                "--per-thread needs -p or -t: a command's threads are summed into one inherited counter."
            )
        if self.cpus is not None and not self.cpus:
            raise UsageError("-C needs at least one CPU.")
