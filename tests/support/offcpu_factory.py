"""Small captures with switch-outs for the off-CPU pipeline's unit tests (no privileges).

A capture of two events as ``record --off-cpu -g`` writes them: ``cpu-clock`` (the tracking
event, with ``context_switch``: PERF_RECORD_SWITCH records) and ``sched:sched_switch`` samples
whose RAW payload is laid out by the stored format (fixtures/tracepoints/sched_switch.format).
Tests describe a timeline of switch-outs, switch-ins and on-CPU samples; the expected intervals
follow from it by the model of docs/offcpu.md.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from profiler.format import records as R
from profiler.format.attr import PERF_TYPE_TRACEPOINT, attr_to_dict, new_attr
from profiler.format.container.writer import CaptureWriter
from profiler.format.encode import encode
from tests.support.capture_factory import make_test_header

FORMAT = Path(__file__).resolve().parents[2] / "fixtures" / "tracepoints" / "sched_switch.format"
PID = 100
EXE = "/usr/bin/waiter"
BASE = R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_CPU | R.PERF_SAMPLE_PERIOD \
    | R.PERF_SAMPLE_CALLCHAIN | R.PERF_SAMPLE_IDENTIFIER
CLOCK_ID, SWITCH_ID = 7, 8
STATE = {"R": 0, "R+": 0x100, "S": 0x1, "D": 0x2, "X": 0x10}


def switch_payload(prev_tid: int, prev_state: int, next_tid: int, prev_comm: str = "t", next_comm: str = "n") -> bytes:
    """sched_switch's record as the kernel writes it (offsets of the stored format)."""
    out = bytearray(64)
    struct.pack_into("<HBBi", out, 0, 372, 0, 0, prev_tid)
    out[8:8 + len(prev_comm)] = prev_comm.encode()
    struct.pack_into("<iiq", out, 24, prev_tid, 120, prev_state)
    out[40:40 + len(next_comm)] = next_comm.encode()
    struct.pack_into("<ii", out, 56, next_tid, 120)
    return bytes(out) + b"\0" * 4  # with its u32 size, the RAW field ends on an 8-byte boundary


@dataclass
class Timeline:
    """What happened, in time order (times in ns on the sample clock)."""

    records: list[tuple[int, R.Record]] = field(default_factory=list)
    system_wide: bool = False

    def switch_out(self, t: int, tid: int, state: str, chain: tuple[int, ...], next_tid: int = 0,
                   cpu: int = 0) -> None:
        """A sched_switch sample of ``tid`` (and its PERF_RECORD_SWITCH out record)."""
        sid = R.SampleId(pid=PID, tid=tid, time=t, cpu=cpu, res=0, identifier=CLOCK_ID)
        self.records.append((t, R.Sample(
            identifier=SWITCH_ID, ip=chain[0], pid=PID, tid=tid, time=t, cpu=cpu, res=0, period=1,
            callchain=(R.PERF_CONTEXT_USER, *chain), raw=switch_payload(tid, STATE[state], next_tid),
            misc=R.PERF_RECORD_MISC_USER)))
        if not self.system_wide:
            self.records.append((t, R.Switch(misc=R.PERF_RECORD_MISC_SWITCH_OUT, sample_id=sid)))

    def switch_in(self, t: int, tid: int, cpu: int = 0) -> None:
        sid = R.SampleId(pid=PID, tid=tid, time=t, cpu=cpu, res=0, identifier=CLOCK_ID)
        self.records.append((t, R.Switch(sample_id=sid)))

    def on_cpu(self, t: int, tid: int, chain: tuple[int, ...], period: int = 250_000, cpu: int = 0) -> None:
        self.records.append((t, R.Sample(
            identifier=CLOCK_ID, ip=chain[0], pid=PID, tid=tid, time=t, cpu=cpu, res=0, period=period,
            callchain=(R.PERF_CONTEXT_USER, *chain), misc=R.PERF_RECORD_MISC_USER)))

    def exit(self, t: int, tid: int) -> None:
        sid = R.SampleId(pid=PID, tid=tid, time=t, cpu=0, res=0, identifier=CLOCK_ID)
        self.records.append((t, R.Exit(PID, PID, tid, PID, t, sample_id=sid)))


def offcpu_header() -> dict[str, object]:
    clock = new_attr(type=1, config=0, sample_type=BASE, sample_id_all=1, freq=1, sample_period=4000, mmap=1,
                     mmap2=1, comm=1, comm_exec=1, task=1, context_switch=1)
    switch = new_attr(type=PERF_TYPE_TRACEPOINT, config=372, sample_type=BASE | R.PERF_SAMPLE_RAW,
                      sample_id_all=1, sample_period=1)
    return make_test_header([{"name": "cpu-clock", "attr": attr_to_dict(clock), "ids": [CLOCK_ID]},
                             {"name": "sched:sched_switch", "attr": attr_to_dict(switch), "ids": [SWITCH_ID]}])


def write_offcpu_capture(path: Path, timeline: Timeline, comms: dict[int, str], formats: bool = True,
                         damaged_formats: object = None) -> None:
    """The timeline as a capture: one process ``PID`` running ``EXE`` with threads ``comms``;
    ``formats=False`` leaves out the tracepoint's stored format (a capture cut before it);
    ``damaged_formats``: a ``tracepoint_formats`` metadata whose ``entries`` is this instead."""
    header = offcpu_header()
    layout = R.SampleLayout.from_attr(header["events"][0]["attr"])  # type: ignore[index]
    sid = R.SampleId(pid=PID, tid=PID, time=0, cpu=0, res=0, identifier=CLOCK_ID)
    synth: list[R.Record] = [
        R.Mmap2(PID, PID, 0x400000, 0x10000, 0, maj=8, min=1, ino=1, prot=5, flags=2, filename=EXE, sample_id=sid),
    ]
    for tid, comm in comms.items():
        synth.append(R.Comm(PID, tid, comm, sample_id=R.SampleId(pid=PID, tid=tid, time=0, cpu=0, res=0,
                                                                  identifier=CLOCK_ID)))
    writer = CaptureWriter.create(path, header)
    writer.write_synth(b"".join(encode(r, layout) for r in synth))
    if damaged_formats is not None:
        writer.write_meta("tracepoint_formats", {"entries": damaged_formats})
    elif formats:
        writer.write_meta("tracepoint_formats", {"entries": [{"event": "sched:sched_switch",
                                                              "format": FORMAT.read_text()}]})
    recs = [r for _, r in sorted(timeline.records, key=lambda tr: tr[0])]
    writer.write_raw(0, b"".join(encode(r, _layout_of(r, header)) for r in recs))
    writer.write_round()
    writer.close({"samples": sum(isinstance(r, R.Sample) for r in recs)})


def _layout_of(rec: R.Record, header: dict[str, object]) -> R.SampleLayout:
    events = header["events"]  # type: ignore[index]
    index = 1 if isinstance(rec, R.Sample) and rec.identifier == SWITCH_ID else 0
    return R.SampleLayout.from_attr(events[index]["attr"])  # type: ignore[index]


MAIN = 0x400010
COMMS = {101: "sleeper", 102: "spinner", 103: "disk", 104: "sampled", 105: "exiter", 106: "dying"}


def timeline() -> tuple[Timeline, dict[int, tuple[int, str]]]:
    """A timeline of every case of the model and, per thread, the off-CPU interval the model
    gives it (ns, state frame)."""
    t = Timeline()
    t.on_cpu(1_000, 101, (0x400100, MAIN))
    t.switch_out(10_000, 101, "S", (0x400200, MAIN))
    t.switch_in(510_000, 101)                        # blocked 500 us
    t.switch_out(20_000, 102, "R+", (0x400300, MAIN))
    t.switch_in(120_000, 102)                        # preempted: runnable 100 us
    t.on_cpu(200_000, 102, (0x400300, MAIN))
    t.switch_out(30_000, 103, "D", (0x400400, MAIN))  # never back: open until the end
    t.switch_out(40_000, 104, "S", (0x400500, MAIN))
    t.on_cpu(90_000, 104, (0x400500, MAIN))           # no switch-in record: its next sample ends it
    t.switch_out(45_000, 105, "S", (0x400600, MAIN))
    t.exit(65_000, 105)                               # ends at its exit, not open
    t.switch_out(50_000, 106, "X", (0x400700, MAIN))  # an exiting thread's last switch: no interval
    t.on_cpu(1_000_000, 102, (0x400300, MAIN))        # the capture's last record
    want = {101: (500_000, "[blocked]"), 102: (100_000, "[runnable]"),
            103: (970_000, "[blocked (D), open at end]"), 104: (50_000, "[blocked]"), 105: (20_000, "[blocked]")}
    return t, want
