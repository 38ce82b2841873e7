"""The markers of ``profiler view``'s timeline: exec, fork, exit, lost records and throttling,
from the capture's non-sample records (their times on the sample clock)."""

from __future__ import annotations

from profiler.format import records as R
from profiler.report.capture import Capture
from profiler.report.render.viewdata import Marker

#: At most this many markers of one kind go into the file (the page says when more were left out).
MAX_PER_KIND = 20_000


def capture_markers(capture: Capture, t0: int) -> list[Marker]:
    """Every marker of the capture (of every thread: the page filters threads itself), in time
    order; ``t0`` is the page's time origin (ns). Records without a time (synthesized at the
    start) are not markers."""
    out: list[Marker] = []
    counts: dict[str, int] = {}
    for other in capture.data.others:
        marker = _marker(other.record, other.time - t0)
        if marker is None or other.time <= 0:
            continue
        counts[marker.kind] = counts.get(marker.kind, 0) + 1
        if counts[marker.kind] <= MAX_PER_KIND:
            out.append(marker)
    for kind, n in sorted(counts.items()):
        if n > MAX_PER_KIND:
            out.append(Marker("note", 0, -1, -1, f"{n - MAX_PER_KIND} more {kind} markers left out of the file"))
    return out


def _marker(rec: R.Record, time: int) -> Marker | None:
    sid = rec.sample_id
    pid = sid.pid if sid is not None and sid.pid is not None else -1
    tid = sid.tid if sid is not None and sid.tid is not None else -1
    if isinstance(rec, R.Comm) and rec.exec:
        return Marker("exec", time, rec.pid, rec.tid, f"exec {rec.comm}")
    if isinstance(rec, R.Fork):
        return Marker("fork", time, rec.pid, rec.tid, f"fork from {rec.ppid}/{rec.ptid}")
    if isinstance(rec, R.Exit):
        return Marker("exit", time, rec.pid, rec.tid, "exit")
    if isinstance(rec, R.Lost):
        return Marker("lost", time, pid, tid, f"{rec.lost} records lost")
    if isinstance(rec, R.LostSamples):
        return Marker("lost", time, pid, tid, f"{rec.lost} samples lost")
    if isinstance(rec, R.Throttle):
        return Marker("throttle", time, pid, tid, "throttled")
    if isinstance(rec, R.Unthrottle):
        return Marker("unthrottle", time, pid, tid, "unthrottled")
    return None
