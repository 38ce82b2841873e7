"""/proc synthesis, build-id reading and the recorder's header walk, on made-up inputs."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.format import records as R

from profiler.format.encode import encode
from profiler.format.attr import attr_to_dict
from profiler.format.events import EventTable
from profiler.format import buildid
from profiler.record import synth
from profiler.record.events import EventSpec
from profiler.record.options import RecordOptions
from profiler.record.recorder import build_attr
from profiler.record.mapped import MappedFiles
from profiler.record.session import StreamStats


def layout_and_attr(several: bool = False) -> tuple[R.SampleLayout, dict[str, int]]:
    attr = build_attr(EventSpec("cpu-clock", 1, 0), RecordOptions(command=("x",), callgraph=True),
                      tracking=True, several=several, enable_on_exec=True, inherit=True, data_size=1 << 19)
    d = attr_to_dict(attr)
    return R.SampleLayout.from_attr(d, sys.byteorder), d


def test_attr_of_the_first_event() -> None:
    _, a = layout_and_attr()
    assert a["sample_type"] == (R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_CPU
                                | R.PERF_SAMPLE_PERIOD | R.PERF_SAMPLE_CALLCHAIN)
    assert a["freq"] == 1 and a["sample_period"] == 4000
    for flag in ("mmap", "mmap2", "comm", "comm_exec", "task", "sample_id_all", "inherit",
                 "enable_on_exec", "disabled", "watermark", "use_clockid"):
        assert a[flag] == 1, flag
    assert a["build_id"] == 0  # as in perf: other tools' MMAP2 records would be flagged too
    opt_in = build_attr(EventSpec("cpu-clock", 1, 0), RecordOptions(command=("x",), buildid_mmap=True),
                        tracking=True, several=False, enable_on_exec=True, inherit=True, data_size=4096)
    assert opt_in.build_id == 1
    assert a["wakeup_events"] == (1 << 19) // 2  # wakeup_watermark: half the buffer, as the kernel and perf
    _, several = layout_and_attr(several=True)
    assert several["sample_type"] & R.PERF_SAMPLE_IDENTIFIER


@pytest.mark.parametrize("opts, cpus, sample_cpu", [
    (RecordOptions(command=("x",)), [0, 1], False),  # every ring one CPU's: the frame names it
    (RecordOptions(pids=(1,)), [0, 1], False),
    (RecordOptions(system_wide=True), [0, 1], True),  # perf 6.1 keeps CPU for -a and -C
    (RecordOptions(command=("x",), cpus=(1,), system_wide=True), [1], True),
    (RecordOptions(command=("x",)), [-1], True),  # a ring that is no one CPU's
])
def test_samples_carry_the_cpu_only_where_no_frame_names_it_or_perf_keeps_it(
        opts: RecordOptions, cpus: list[int], sample_cpu: bool) -> None:
    from profiler.record.recorder import Recorder

    recorder = Recorder(opts)
    assert recorder._sample_cpu(cpus) == sample_cpu
    attr = build_attr(EventSpec("cpu-clock", 1, 0), opts, tracking=True, several=False, enable_on_exec=True,
                      inherit=True, data_size=4096, sample_cpu=recorder._sample_cpu(cpus))
    assert bool(attr.sample_type & R.PERF_SAMPLE_CPU) == sample_cpu
    assert attr.sample_type & ~R.PERF_SAMPLE_CPU == (R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME
                                                     | R.PERF_SAMPLE_PERIOD)


def test_period_and_tracepoint_defaults() -> None:
    spec = EventSpec("sched:sched_switch", 2, 316)
    a = build_attr(spec, RecordOptions(system_wide=True), tracking=False, several=False,
                   enable_on_exec=False, inherit=False, data_size=4096)
    assert (a.freq, a.sample_period, a.mmap) == (0, 1, 0)
    a = build_attr(EventSpec("cpu-clock", 1, 0), RecordOptions(command=("x",), period=12345, user_only=True),
                   tracking=False, several=False, enable_on_exec=True, inherit=True, data_size=4096)
    assert (a.freq, a.sample_period, a.exclude_kernel, a.exclude_user) == (0, 12345, 1, 0)


MAPS = """\
55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 1234 /usr/bin/spinner
55d0c0a01000-55d0c0a02000 r-xp 00001000 fd:01 1234 /usr/bin/spinner
55d0c0c00000-55d0c0c21000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000001000 rwxp 00000000 00:00 0
7f1000000000-7f1000100000 r-xs 00010000 08:02 99 /dev/shm/with space name
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]
garbage line
"""


@pytest.fixture()
def fake_proc(tmp_path: Path) -> Path:
    proc = tmp_path / "proc"
    task = proc / "100" / "task"
    for tid, comm in ((100, "spinner"), (101, "helper")):
        (task / str(tid)).mkdir(parents=True)
        (task / str(tid) / "comm").write_text(comm + "\n")
    (proc / "100" / "comm").write_text("spinner\n")
    (proc / "100" / "maps").write_text(MAPS)
    return proc


def test_parse_maps_line() -> None:
    entry = synth.parse_maps_line("7f1000000000-7f1000100000 r-xs 00010000 08:02 99 /dev/shm/with space name")
    assert entry is not None
    assert (entry.start, entry.end, entry.pgoff, entry.maj, entry.min, entry.ino) == (
        0x7F1000000000, 0x7F1000100000, 0x10000, 8, 2, 99)
    assert entry.path == "/dev/shm/with space name"
    assert (entry.prot, entry.flags, entry.executable) == (5, synth.MAP_SHARED, True)
    assert synth.parse_maps_line("garbage line") is None


def test_process_records(fake_proc: Path) -> None:
    recs = list(synth.process_records(100, 7, proc=fake_proc))
    comms = [(r.pid, r.tid, r.comm) for r in recs if r.type == R.PERF_RECORD_COMM]
    assert comms == [(100, 100, "spinner"), (100, 101, "helper")]
    forks = [(r.pid, r.ppid, r.tid, r.ptid) for r in recs if r.type == R.PERF_RECORD_FORK]
    assert forks == [(100, 100, 101, 100)]
    maps = [(r.filename, r.addr, r.pgoff, r.prot) for r in recs if r.type == R.PERF_RECORD_MMAP2]
    assert maps == [
        ("/usr/bin/spinner", 0x55D0C0A01000, 0x1000, 5),
        ("//anon", 0x7F0000000000, 0, 7),
        ("/dev/shm/with space name", 0x7F1000000000, 0x10000, 5),
        ("[vdso]", 0x7FFD00000000, 0, 5),
    ]
    assert all(r.sample_id is not None and r.sample_id.identifier == 7 for r in recs)
    with_data = [r for r in synth.process_records(100, 7, data_mmaps=True, proc=fake_proc)
                 if r.type == R.PERF_RECORD_MMAP2]
    assert len(with_data) == 6  # + the read-only part of the binary and [heap]
    assert sum(1 for r in with_data if r.misc & R.PERF_RECORD_MISC_MMAP_DATA) == 2
    assert list(synth.process_records(999, 7, proc=fake_proc)) == []


def test_synthesized_records_decode_like_kernel_ones(fake_proc: Path) -> None:
    layout, attr = layout_and_attr()
    kallsyms = "ffffffff81000000 T _stext\nffffffff81000000 T _text\n"
    modules = "nf_tables 286720 0 - Live 0xffffffffc0a00000\nzero 4096 0 - Live 0x0000000000000000\n"
    text = synth.kernel_text_address(kallsyms)
    recs = [*synth.kernel_records(text, modules, 9), *synth.process_records(100, 9, proc=fake_proc)]
    data = synth.encode_all(recs, layout)
    table = EventTable.from_header({"byte_order": sys.byteorder, "events": [{"name": "e", "attr": attr, "ids": [9]}]})
    decoded = list(table.decode_stream(data))
    assert [r.TYPE for r in decoded] == [r.type for r in recs]
    for rec, back in zip(recs, decoded):  # every field, as the kernel's records would decode
        assert {name: getattr(back, name) for name, _ in R.BODY_SPECS[rec.type]} == {
            name: getattr(rec, name) for name, _ in R.BODY_SPECS[rec.type]}
        assert (back.misc, back.sample_id.pid, back.sample_id.tid, back.sample_id.time) == (
            rec.misc, rec.sample_id.pid, rec.sample_id.tid, 0)
    kernel = decoded[0]
    assert isinstance(kernel, R.Mmap) and kernel.filename == "[kernel.kallsyms]_text"
    assert (kernel.addr, kernel.pgoff, kernel.pid) == (0xFFFFFFFF81000000, 0xFFFFFFFF81000000, synth.KERNEL_PID)
    assert isinstance(decoded[1], R.Mmap) and decoded[1].filename == "[nf_tables]" and decoded[1].len == 286720
    assert synth.kernel_text_address("0000000000000000 T _text\n") is None


def notes(*entries: tuple[int, bytes, bytes]) -> bytes:
    out = b""
    for ntype, name, desc in entries:
        out += struct.pack("<III", len(name), len(desc), ntype)
        out += name + b"\0" * (-len(name) % 4) + desc + b"\0" * (-len(desc) % 4)
    return out


def test_build_id_from_notes() -> None:
    bid = bytes(range(20))
    data = notes((1, b"GNU\0", b"\0" * 16), (3, b"Xen\0", b"x" * 8), (3, b"GNU\0", bid))
    assert buildid.build_id_from_notes(data) == bid.hex()
    assert buildid.build_id_from_notes(data[:-8]) is None  # truncated
    assert buildid.build_id_from_notes(b"") is None


def test_build_id_of_fixture_binary_matches_readelf(fixtures_dir: Path) -> None:
    binary = fixtures_dir / "workloads" / "shares"
    out = subprocess.run(["readelf", "-n", str(binary)], capture_output=True, text=True).stdout
    expected = next(line.split()[-1] for line in out.splitlines() if "Build ID" in line)
    got = buildid.read_build_id(binary)
    assert got == expected


def test_build_id_of_non_elf_and_hostile_files(tmp_path: Path) -> None:
    (tmp_path / "text").write_text("hello")
    assert buildid.read_build_id(tmp_path / "text") is None
    assert buildid.read_build_id(tmp_path / "missing") is None
    hostile = bytearray(64)
    hostile[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", hostile, 32, 1 << 40)  # program headers far beyond the file
    struct.pack_into("<HH", hostile, 54, 56, 65535)  # absurd phnum
    (tmp_path / "hostile").write_bytes(bytes(hostile))
    assert buildid.read_build_id(tmp_path / "hostile") is None


def test_header_walk_counts_samples_lost_and_reads_mapped_files(tmp_path: Path) -> None:
    layout, _ = layout_and_attr()
    binary = Path(sys.executable).resolve()
    st = binary.stat()
    ident = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino, 0)
    recs: list[R.Record] = [
        R.Sample(ip=1, pid=2, tid=2, time=3, cpu=0, period=1, callchain=(1,)),
        R.Mmap2(2, 2, 0x3000, 0x1000, 0, *ident, 5, 2, str(binary)),
        R.Mmap2(2, 2, 0x5000, 0x1000, 0, filename="[vdso]"),
        R.Lost(5, 42),
        R.Sample(ip=1, pid=2, tid=2, time=4, cpu=0, period=1, callchain=()),
    ]
    stats = StreamStats()
    stats.scan(1, b"".join(encode(r, layout) for r in recs))
    assert stats.samples == 2 and stats.lost == 42 and stats.lost_per_cpu == {1: 42}
    entries = stats.mapped.entries()
    assert [e["path"] for e in entries] == [str(binary)]
    expected = buildid.read_build_id(binary)
    assert expected is not None and entries[0]["build_id"] == expected
    assert (entries[0]["maj"], entries[0]["min"], entries[0]["ino"]) == ident[:3]


def test_header_walk_ignores_a_build_id_flag_it_did_not_ask_for() -> None:
    """Another tool's attr.build_id flags our MMAP2 header too: the union is still maj/min/ino."""
    layout, _ = layout_and_attr()
    rec = R.Mmap2(2, 2, 0x3000, 0x1000, 0, 8, 1, 77, 0, 5, 2, "/no/such/file")
    data = bytearray(encode(rec, layout))
    struct.pack_into("=H", data, 4, rec.misc | R.PERF_RECORD_MISC_MMAP_BUILD_ID)
    stats = StreamStats()
    stats.scan(0, bytes(data))
    assert stats.mapped.entries() == [
        {"path": "/no/such/file", "maj": 8, "min": 1, "ino": 77, "ino_generation": 0}
    ]
    asked = StreamStats(kernel_build_ids=True)
    bid = bytes(range(1, 21))
    asked.scan(0, encode(R.Mmap2(2, 2, 0x1000, 0x1000, 0, filename="/lib/libx.so", build_id=bid), layout))
    assert asked.mapped.entries() == [{"path": "/lib/libx.so", "build_id": bid.hex(), "source": "mmap2"}]


def test_a_replaced_file_lends_no_build_id(tmp_path: Path) -> None:
    """MMAP2 names inode A; the file now at the path is inode B: its build-id is not A's."""
    target = tmp_path / "prog"
    shutil.copy(sys.executable, target)
    st = target.stat()
    mapped = MappedFiles()
    mapped.seen(str(target), (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino + 1, 0))
    mapped.seen(str(target), (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino, 0))
    by_ino = {e["ino"]: e for e in mapped.entries()}
    assert by_ino[st.st_ino + 1].get("replaced") is True and "build_id" not in by_ino[st.st_ino + 1]
    expected = buildid.read_build_id(target)
    assert expected is not None  # Python's interpreter carries a GNU build-id note
    assert by_ino[st.st_ino]["build_id"] == expected
