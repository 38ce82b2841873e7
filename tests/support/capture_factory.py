"""Build small captures in tests with the format's own encoder (no privileges needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiler.format import records as R

from profiler.format.encode import encode
from profiler.format.attr import attr_to_dict, new_attr
from profiler.format.container.writer import CaptureWriter

SAMPLE_TYPE = (R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_CPU
               | R.PERF_SAMPLE_PERIOD | R.PERF_SAMPLE_CALLCHAIN)


def cpu_clock_attr(sample_type: int = SAMPLE_TYPE, **extra: int) -> dict[str, int]:
    """The tracking event's attr; ``build_id`` 1 (MMAP2 records may carry build-ids, as with
    ``record --buildid-mmap``) unless given."""
    extra.setdefault("build_id", 1)
    attr = new_attr(type=1, config=0, sample_type=sample_type, sample_id_all=1, freq=1,
                    sample_period=4000, mmap=1, mmap2=1, comm=1, comm_exec=1, task=1, **extra)
    return attr_to_dict(attr)


def make_test_header(events: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    header: dict[str, Any] = {
        "tool_version": "test", "hostname": "testhost", "kernel_release": "6.0.0-test",
        "arch": "x86_64", "byte_order": "little", "word_size": 8, "nr_cpus": 2,
        "online_cpus": [0, 1], "page_size": 4096, "cmdline": ["profiler", "record", "test"],
        "target": {"command": ["test"], "pids": [], "tids": [], "system_wide": False, "cpus": None},
        "start_time_ns": 1_700_000_000_000_000_000, "start_perf_clock_ns": 1_000,
        "events": events or [{"name": "cpu-clock", "attr": cpu_clock_attr(), "ids": [7]}],
    }
    header.update(extra)
    return header


def small_capture_records() -> tuple[list[R.Record], list[list[R.Record]]]:
    """(synthesized records, raw frames of records) of a tiny two-CPU recording."""
    sid = R.SampleId
    synth = [
        R.Comm(100, 100, "demo", exec=True, sample_id=sid(pid=100, tid=100, time=0, cpu=0, res=0)),
        R.Mmap2(100, 100, 0x400000, 0x2000, 0, maj=8, min=1, ino=1234, prot=5, flags=2,
                filename="/usr/bin/demo", sample_id=sid(pid=100, tid=100, time=0, cpu=0, res=0)),
    ]
    frames: list[list[R.Record]] = []
    t = 2_000
    for frame_no in range(4):
        recs: list[R.Record] = []
        for i in range(5):
            t += 10
            chain = (R.PERF_CONTEXT_USER, 0x400100 + i, 0x400050, 0x400010)
            recs.append(R.Sample(ip=0x400100 + i, pid=100, tid=100 + frame_no % 2, time=t,
                                 cpu=frame_no % 2, res=0, period=250_000, callchain=chain,
                                 misc=R.PERF_RECORD_MISC_USER))
        if frame_no == 1:
            recs.append(R.Fork(100, 100, 101, 100, t + 1,
                               sample_id=sid(pid=100, tid=101, time=t + 1, cpu=1, res=0)))
        if frame_no == 3:
            recs.append(R.Exit(100, 100, 100, 100, t + 5,
                               sample_id=sid(pid=100, tid=100, time=t + 5, cpu=1, res=0)))
        frames.append(recs)
    return synth, frames


def write_small_capture(path: Path, *, trailer: bool = True) -> list[R.Record]:
    """Write the tiny capture; return every record in file order."""
    header = make_test_header()
    layout = R.SampleLayout.from_attr(header["events"][0]["attr"])
    synth, frames = small_capture_records()
    writer = CaptureWriter.create(path, header)
    writer.write_synth(b"".join(encode(r, layout) for r in synth))
    writer.write_meta("buildids", {"entries": [{"path": "/usr/bin/demo", "build_id": "ab" * 20,
                                                "source": "file"}]})
    for no, recs in enumerate(frames):
        writer.write_raw(no % 2, b"".join(encode(r, layout) for r in recs))
        if no % 2:
            writer.write_round()
    if trailer:
        writer.close({"samples": 20})
    else:
        writer.abort()
    return synth + [r for recs in frames for r in recs]
