"""What a recording ended with: the files written, the samples and the losses, and the line
that says so."""

from __future__ import annotations

from profiler.format.container.layout import STDOUT
from profiler.value import Value


class RecordResult(Value):
    __slots__ = _fields = (
        "exit_code", "path", "samples", "lost", "bytes_written", "lost_per_cpu", "notices", "stopped_by"
    )

    def __init__(
        self,
        exit_code: int,
        path: str,
        samples: int,
        lost: int,
        bytes_written: int,
        lost_per_cpu: dict[int, int] | None = None,
        notices: list[str] | None = None,
        stopped_by: int | None = None,  # the SIGINT/SIGTERM that ended the recording
    ) -> None:
        self.exit_code = exit_code
        self.path = path
        self.samples = samples
        self.lost = lost
        self.bytes_written = bytes_written
        self.lost_per_cpu: dict[int, int] = {} if lost_per_cpu is None else lost_per_cpu
        self.notices: list[str] = [] if notices is None else notices
        self.stopped_by = stopped_by

    def closing_line(self) -> str:
        mb = self.bytes_written / 1e6
        lost = f", {self.lost} lost" if self.lost else ""
        path = "to standard output" if self.path == STDOUT else self.path
        return f"[ profiler record: Captured and wrote {mb:.3f} MB {path} ({self.samples} samples{lost}) ]"
