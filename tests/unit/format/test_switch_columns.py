"""Context-switch records decoded as columns (profiler/format/decode/switches.py), checked
against the exact one-record-at-a-time decoder on the same bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiler.format import records as R
from profiler.format.container.reader import CaptureReader
from profiler.format.decode.decoder import load_capture
from profiler.format.decode.switches import SwitchColumns, columnar_layout, decode_switches
from profiler.format.encode import encode
from profiler.format.events import EventTable
from tests.support.offcpu_factory import COMMS, offcpu_header, timeline, write_offcpu_capture


def test_the_columns_hold_what_the_records_say(tmp_path: Path) -> None:
    path = tmp_path / "offcpu.prof"
    t = timeline()[0]
    write_offcpu_capture(path, t, COMMS)
    want = [r for _, r in sorted(t.records, key=lambda tr: tr[0]) if isinstance(r, R.Switch)]
    with CaptureReader.open(path) as reader:
        data = load_capture(reader)
    sw = data.switches
    assert sw is not None and len(sw) == len(want)
    assert not any(isinstance(o.record, (R.Switch, R.SwitchCpuWide)) for o in data.others)
    assert sw.tid.tolist() == [r.sample_id.tid for r in want if r.sample_id]
    assert sw.time.tolist() == [r.sample_id.time for r in want if r.sample_id]
    assert sw.out.tolist() == [r.switch_out for r in want]
    assert (sw.next_prev_tid == -1).all() and (sw.pid == 100).all()
    assert data.counts["SWITCH"] == len(want)


def test_cpu_wide_records_and_damage() -> None:
    header = offcpu_header()
    events = EventTable.from_header(header)
    layout = columnar_layout(events)
    assert layout is not None
    rec_layout = events.events[0].layout
    recs = [
        R.SwitchCpuWide(41, 42, misc=R.PERF_RECORD_MISC_SWITCH_OUT | R.PERF_RECORD_MISC_SWITCH_OUT_PREEMPT,
                        sample_id=R.SampleId(pid=7, tid=8, time=1234, cpu=1, res=0, identifier=7)),
        R.SwitchCpuWide(0xFFFFFFFF, 0xFFFFFFFF, sample_id=R.SampleId(pid=9, tid=10, time=99, cpu=0, res=0)),
        R.Switch(sample_id=R.SampleId(pid=5, tid=6, time=55, cpu=1, res=0)),
    ]
    blobs = [encode(r, rec_layout) for r in recs]
    buf = b"".join(blobs)
    offsets = np.cumsum([0] + [len(b) for b in blobs[:-1]]).astype(np.int64)
    sizes = np.asarray([len(b) for b in blobs], dtype=np.int64)
    sizes[2] = 8  # a SWITCH record too short for its trailer: damaged
    types = np.asarray([r.TYPE for r in recs], dtype=np.int64)
    cols, damaged = decode_switches(np.frombuffer(buf, "<u4"), np.frombuffer(buf, "<u8"), layout, True,
                                    offsets, sizes, types, np.zeros(3, dtype=np.int64))
    assert damaged.tolist() == [False, False, True]
    assert cols.tid.tolist() == [8, 10] and cols.pid.tolist() == [7, 9] and cols.time.tolist() == [1234, 99]
    assert cols.cpu.tolist() == [1, 0] and cols.out.tolist() == [True, False]
    assert cols.preempt.tolist() == [True, False] and cols.next_prev_tid.tolist() == [42, -1]
    assert len(SwitchColumns.concat([])) == 0 and len(SwitchColumns.concat([cols, cols])) == 4


def test_events_with_different_trailers_keep_the_records_as_objects() -> None:
    header = offcpu_header()
    header["events"][1]["attr"]["sample_type"] &= ~R.PERF_SAMPLE_CPU  # type: ignore[index]
    assert columnar_layout(EventTable.from_header(header)) is None
