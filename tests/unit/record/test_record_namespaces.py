"""--namespaces without privileges: the attr bit and the NAMESPACES records synthesized from a
made-up /proc (and from this process's own)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from profiler.format import abi
from profiler.format import records as R
from profiler.format.attr import attr_to_dict
from profiler.record import synth
from profiler.record.events import EventSpec
from profiler.record.options import RecordOptions
from profiler.record.recorder import build_attr


def test_the_tracking_event_asks_for_namespaces_only_with_the_option() -> None:
    def attr(opts: RecordOptions, tracking: bool) -> dict[str, int]:
        return attr_to_dict(build_attr(EventSpec("cpu-clock", 1, 0), opts, tracking=tracking, several=False,
                                       enable_on_exec=True, inherit=True, data_size=4096))

    asked = RecordOptions(command=("x",), namespaces=True)
    assert attr(asked, tracking=True)["namespaces"] == 1
    assert attr(asked, tracking=False)["namespaces"] == 0  # one event carries the side-band records
    assert attr(RecordOptions(command=("x",)), tracking=True)["namespaces"] == 0


def with_namespaces(proc: Path, tid: int, missing: tuple[str, ...] = ()) -> dict[str, os.stat_result]:
    ns = proc / "100" / "task" / str(tid) / "ns"
    ns.mkdir()
    for name in abi.NAMESPACE_NAMES:
        if name not in missing:
            (ns / name).write_text("")
    return {name: os.stat(ns / name) for name in abi.NAMESPACE_NAMES if name not in missing}


def made_up_proc(tmp_path: Path) -> Path:
    """Process 100 with threads 100 and 101 and one executable mapping."""
    proc = tmp_path / "proc"
    for tid in (100, 101):
        (proc / "100" / "task" / str(tid)).mkdir(parents=True)
        (proc / "100" / "task" / str(tid) / "comm").write_text("spinner\n")
    (proc / "100" / "comm").write_text("spinner\n")
    (proc / "100" / "maps").write_text("55d0c0a00000-55d0c0a01000 r-xp 00001000 08:02 1234 /usr/bin/spinner\n")
    return proc


def test_every_thread_gets_its_namespaces_after_its_comm(tmp_path: Path) -> None:
    proc = made_up_proc(tmp_path)
    main = with_namespaces(proc, 100)
    helper = with_namespaces(proc, 101, missing=("cgroup",))  # a kernel without cgroup namespaces
    recs = list(synth.process_records(100, 7, namespaces=True, proc=proc))
    kinds = [(r.type, getattr(r, "tid", None)) for r in recs if r.type != abi.PERF_RECORD_MMAP2]
    assert kinds == [(abi.PERF_RECORD_COMM, 100), (abi.PERF_RECORD_NAMESPACES, 100), (abi.PERF_RECORD_FORK, 101),
                     (abi.PERF_RECORD_COMM, 101), (abi.PERF_RECORD_NAMESPACES, 101)]
    first, second = (r for r in recs if r.type == abi.PERF_RECORD_NAMESPACES)
    assert (first.pid, first.tid, first.misc) == (100, 100, 0)
    assert first.namespaces == tuple((synth.encode_dev(main[n].st_dev), main[n].st_ino) for n in abi.NAMESPACE_NAMES)
    assert second.namespaces[abi.CGROUP_NS_INDEX] == (0, 0)  # as perf leaves what it cannot stat
    assert second.namespaces[0] == (synth.encode_dev(helper["net"].st_dev), helper["net"].st_ino)
    assert not [r for r in synth.process_records(100, 7, proc=proc) if r.type == abi.PERF_RECORD_NAMESPACES]


def test_the_synthesized_record_decodes_as_the_kernel_s(tmp_path: Path) -> None:
    pid = os.getpid()
    rec = synth.namespaces_record(pid, pid, 7)
    own = os.stat(f"/proc/{pid}/ns/cgroup")
    assert rec.namespaces[abi.CGROUP_NS_INDEX] == (synth.encode_dev(own.st_dev), own.st_ino)
    layout = R.SampleLayout.from_attr({"sample_type": R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_IDENTIFIER,
                                       "sample_id_all": 1}, sys.byteorder)
    decoded = R.decode_record(synth.encode_all([rec], layout), 0, layout)
    assert isinstance(decoded, R.Namespaces)
    assert (decoded.pid, decoded.tid, decoded.namespaces) == (pid, pid, rec.namespaces)


def test_device_numbers_are_encoded_as_the_kernel_s_new_encode_dev() -> None:
    assert synth.encode_dev(os.makedev(0, 4)) == 4  # nsfs, as NAMESPACES records show it
    assert synth.encode_dev(os.makedev(8, 2)) == 0x802
    assert synth.encode_dev(os.makedev(259, 0x12345)) == 0x12345 & 0xFF | 259 << 8 | (0x12345 & ~0xFF) << 12
