"""Side-band records shown among the samples: ``script --show-namespace-events``.

perf script prints a NAMESPACES record as the sample header of its thread (the comm of the
record's own pid/tid at that time, the record's ``sample_id`` tid and time) followed by
``PERF_RECORD_NAMESPACES pid/tid - nr_namespaces: N`` and the namespaces, four to a line,
``idx/name: dev/0xinode`` (perf's ``perf_event__fprintf_namespaces``). Here the header follows
this project's sample line (``comm pid/tid seconds.micros:``); the rest is perf's text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from profiler.format import records as R
from profiler.format.abi import NAMESPACE_NAMES
from profiler.format.container.layout import NO_CPU
from profiler.format.decode.columns import OtherRecord
from profiler.report.replay import ReplayState, on_comm, on_fork

SideText = tuple[int, int, str]  # (time, position in the file, text): a script stream's items


def namespaces_text(rec: R.Namespaces) -> str:
    """perf's text of a NAMESPACES record after its header: ``PERF_RECORD_NAMESPACES`` on."""
    parts = [f" {rec.pid}/{rec.tid} - nr_namespaces: {len(rec.namespaces)}\n\t\t["]
    for idx, (dev, ino) in enumerate(rec.namespaces):
        if idx and idx % 4 == 0:
            parts.append("\n\t\t ")
        name = NAMESPACE_NAMES[idx] if idx < len(NAMESPACE_NAMES) else "UNKNOWN"  # perf_ns__name past its table
        end = ", " if idx + 1 != len(rec.namespaces) else "]\n"
        parts.append(f"{idx}/{name}: {dev}/{ino:#x}{end}")
    if not rec.namespaces:
        parts.append("]\n")  # perf leaves the bracket open and the line unended here
    return "PERF_RECORD_NAMESPACES" + "".join(parts)


def namespace_events(others: Sequence[OtherRecord]) -> list[SideText]:
    """Every NAMESPACES record of ``others`` (sorted by time) as a script item, the comm of its
    task from the COMM and FORK records before it."""
    state = ReplayState()
    out: list[SideText] = []
    for other in others:
        rec = other.record
        if isinstance(rec, R.Comm):
            on_comm(state, rec)
        elif isinstance(rec, R.Fork):
            on_fork(state, rec)
        elif isinstance(rec, R.Namespaces):
            out.append((max(other.time, 0), other.seq, _header(state, rec, other) + namespaces_text(rec)))
    return out


def _header(state: ReplayState, rec: R.Namespaces, other: OtherRecord) -> str:
    """The sample line's start: comm, the trailer's pid/tid, the CPU where known (the
    trailer's, else the ring buffer's; none for a synthesized record) and the time."""
    comm = state.tid_comm.get(rec.tid, state.tid_comm.get(rec.pid))
    name = state.comm_names[comm] if comm is not None else f":{rec.tid}"
    sid = rec.sample_id
    pid = rec.pid if sid is None or sid.pid is None else sid.pid
    tid = rec.tid if sid is None or sid.tid is None else sid.tid
    cpu = sid.cpu if sid is not None and sid.cpu is not None else (other.cpu if other.cpu != NO_CPU else None)
    cpu_text = "" if cpu is None else f"[{cpu:03d}] "
    t = max(other.time, 0)
    return f"{name} {pid:5d}/{tid:<5d} {cpu_text}{t // 1_000_000_000:5d}.{(t % 1_000_000_000) // 1000:06d}: "


class Pending:
    """Side-band items handed out window by window: those up to a window's last sample with
    it, the rest at the end."""

    def __init__(self, items: list[SideText]) -> None:
        self.items = items
        self.next = 0

    def upto(self, key: tuple[int, int]) -> Iterator[SideText]:
        while self.next < len(self.items) and self.items[self.next][:2] <= key:
            self.next += 1
            yield self.items[self.next - 1]

    def rest(self) -> Iterator[SideText]:
        while self.next < len(self.items):
            self.next += 1
            yield self.items[self.next - 1]
