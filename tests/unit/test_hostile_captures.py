"""Hostile captures: the cases a fuzzing campaign found, crafted by hand, and a short fuzzing
campaign of its own (``make fuzz`` runs a long one). Each input is read by the real CLI in a
child process; it must end with one ``profiler:`` sentence and exit status 1 or 2, or read
what is intact (exit 0) with a warning — never a traceback, a hang or a memory blow-up."""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib
from pathlib import Path

import msgpack
import pytest

from tests.fuzz import capture_fuzz as cf
from tests.support.paths import CAPTURES, ROOT

RSS_LIMIT_KB = 200 * 1024
# a small launcher: its children's peak RSS (the CLI's own, measured by the kernel)
_MEASURE = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
            "sys.stdout.buffer.write(r.stderr); "
            "print('\\nRC', r.returncode, 'RSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def run_cli(capture: Path, *args: str) -> tuple[int, str, int]:
    """(exit status, stderr, peak RSS in KiB) of ``profiler ARGS -i capture``."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, sys.executable, "-m", "profiler", *args, "-i", str(capture)],
                          capture_output=True, text=True, errors="replace", timeout=120, cwd=ROOT)
    *err, last = done.stdout.rstrip("\n").split("\n")
    _, rc, _, rss = last.split()
    return int(rc), "\n".join(err), int(rss)


def assert_clean(rc: int, err: str, rss: int) -> None:
    assert "Traceback" not in err, err
    assert rc in (0, 1, 2), (rc, err)
    if rc:
        assert any(line.startswith("profiler: ") for line in err.splitlines()), err
    assert rss < RSS_LIMIT_KB, f"peak RSS {rss} KiB"


def write(tmp_path: Path, data: bytes, name: str = "hostile.prof") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def seed(name: str) -> cf.CaptureParts:
    return cf.parse((CAPTURES / name).read_bytes())


@pytest.mark.slow  # make check leaves it out; make test runs it
def test_a_metadata_frame_inflating_to_a_gibibyte_is_skipped_within_bounds(tmp_path: Path) -> None:
    """0.9 MB in the file, 1 GiB of kallsyms text once inflated: the frame is damage (a
    warning), the samples are reported, and memory stays small."""
    text_len = 1 << 30
    head = (b"\x82\xa4kind" + msgpack.packb("kallsyms") + b"\xa4data\x81\xa4text\xdb" + struct.pack(">I", text_len))
    squeeze = zlib.compressobj(9)
    body = [squeeze.compress(head)]
    zeros = b"0" * (1 << 20)
    for _ in range(text_len >> 20):
        body.append(squeeze.compress(zeros))
    body.append(squeeze.flush())
    parts = seed("small.prof")
    parts.frames.insert(1, cf.FrameParts(4, 1, 0xFFFF, 0, b"".join(body)))
    cf._renumber(parts)
    path = write(tmp_path, cf.build(parts))
    assert path.stat().st_size < 2 << 20
    rc, err, rss = run_cli(path, "report")
    assert_clean(rc, err, rss)
    assert rc == 0 and "damaged metadata frame" in err, err


@pytest.mark.slow  # make check leaves it out; make test runs it
def test_a_msgpack_array_claiming_millions_of_entries_is_refused(tmp_path: Path) -> None:
    parts = seed("small.prof")
    n = 16 << 20  # nils: one byte each, 128 MiB of list slots if believed
    body = (b"\x82\xa4kind" + msgpack.packb("buildids") + b"\xa4data\x81\xa7entries\xdd" + struct.pack(">I", n)
            + b"\xc0" * n)
    parts.frames.insert(1, cf.FrameParts(4, 1, 0xFFFF, 0, zlib.compress(body, 9)))
    cf._renumber(parts)
    rc, err, rss = run_cli(write(tmp_path, cf.build(parts)), "report")
    assert_clean(rc, err, rss)


@pytest.mark.slow  # make check leaves it out; make test runs it
def test_a_packed_symbol_table_with_an_integer_for_bytes_is_ignored(tmp_path: Path) -> None:
    """``bytes(10**9)`` would allocate a gigabyte: the damaged table is ignored with a warning."""
    parts = seed("offline-shares.prof")
    for f in parts.frames:
        if f.kind == 4 and cf.meta_of(f)["kind"] == "symbols":
            obj = cf.meta_of(f)
            obj["data"]["symtab"]["starts"] = 10 ** 9
            cf.set_meta(f, obj)
    rc, err, rss = run_cli(write(tmp_path, cf.build(parts)), "report")
    assert_clean(rc, err, rss)
    assert rc == 0 and "packed symbols" in err and "damaged" in err, err


@pytest.mark.parametrize("field, value", [("sample_type", float("nan")), ("sample_period", float("inf")),
                                          ("sample_type", "IP|TID"), ("wakeup_events", -1), ("size", 1 << 40)])
def test_an_attr_field_of_the_wrong_type_or_range_is_one_sentence(tmp_path: Path, field: str, value: object) -> None:
    parts = seed("small.prof")
    parts.header["events"][0]["attr"][field] = value
    rc, err, rss = run_cli(write(tmp_path, cf.build(parts)), "info")
    assert_clean(rc, err, rss)
    assert rc != 0 and f"attr.{field}" in err, err


@pytest.mark.slow  # make check leaves it out; make test runs it
def test_an_mmap2_covering_the_whole_address_space_and_a_ragged_raw_frame(tmp_path: Path) -> None:
    parts = seed("format-1.0.prof")
    for f in parts.frames:
        for off, _size in cf.record_spans(f.payload) if f.kind in (1, 2) else []:
            if struct.unpack_from("<I", f.payload, off)[0] == 10:  # PERF_RECORD_MMAP2: len at +24
                f.payload = f.payload[:off + 24] + struct.pack("<Q", (1 << 64) - 1) + f.payload[off + 32:]
    raw = next(f for f in parts.frames if f.kind == 1)
    raw.payload = raw.payload + b"\x01\x02\x03"  # not a whole record, not even 8-byte aligned
    path = write(tmp_path, cf.build(parts))
    for args in (["report"], ["script"], ["buildids"], ["info"]):
        rc, err, rss = run_cli(path, *args)
        assert_clean(rc, err, rss)
        assert rc == 0, err


@pytest.mark.slow  # make check leaves it out; make test runs it
def test_a_short_fuzzing_campaign_finds_nothing() -> None:
    """A fixed-seed campaign (so a failure reproduces with ``capture_fuzz.py --seed``):
    structure-aware mutations of every committed capture through every reading command."""
    report = cf.parallel_campaign(count=800, seed=20261124, jobs=2, timeout=30)
    assert report.runs == 800
    assert len(report.by_command) == len(cf.COMMANDS), report.by_command  # every command and output ran
    assert not report.failures, cf.summary(report)


@pytest.mark.slow  # make check leaves it out; make test runs it
@pytest.mark.parametrize("cpu", [0xFFFF, 2, 4095])
def test_samples_in_a_frame_naming_no_cpu_of_the_machine_get_no_cpu(tmp_path: Path, cpu: int) -> None:
    """Format 3.0: samples without PERF_SAMPLE_CPU take their raw frame's cpu. A frame of no
    CPU (0xFFFF) or of one beyond the header's nr_cpus (2) gives its samples no CPU (-1, not a
    made-up one), with one sentence; the others keep theirs."""
    parts = seed("format-3.0.prof")
    raws = [f for f in parts.frames if f.kind == 1 and f.payload]
    assert {f.cpu for f in raws} == {0, 1} and parts.header["nr_cpus"] == 2
    raws[0].cpu = cpu
    path = write(tmp_path, cf.build(parts))
    for args in (["report", "--sort", "cpu", "-g", "none"], ["script", "-F", "cpu,ip"],
                 ["report", "--cpu", "0,1", "-g", "none"]):
        rc, err, rss = run_cli(path, *args)
        assert_clean(rc, err, rss)
        what = "no CPU" if cpu == 0xFFFF else f"CPU {cpu} (the machine had 2)"
        assert rc == 0 and f"samples are in frames that name {what}: their CPU is unknown" in err, err
    done = subprocess.run([sys.executable, "-m", "profiler", "report", "--sort", "cpu", "-g", "none", "-i", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    rows = [line.split()[-1] for line in done.stdout.splitlines() if line.strip() and not line.startswith("#")]
    assert sorted(rows) == ["-001", "000", "001"], done.stdout


@pytest.mark.slow  # make check leaves it out; make test runs it
def test_a_last_frame_at_the_largest_sequence_number_is_not_extended(tmp_path: Path) -> None:
    """archive appends frames after the last one: a damaged last sequence number of 2^32 - 1
    leaves none for them, one sentence (it gave a struct.error traceback)."""
    parts = seed("small.prof")
    assert parts.frames[-1].kind == 5  # the trailer: dropped, the frame before it is the last
    parts.frames[-2].seq = 0xFFFFFFFF  # read, after a warning that frames are missing
    path = write(tmp_path, cf.build(parts))
    before = path.read_bytes()
    for args in (["archive", "-o", str(tmp_path / "copy.prof")], ["archive"]):
        rc, err, rss = run_cli(path, *args)
        assert_clean(rc, err, rss)
        assert rc == 1 and "its last frame's sequence number is the largest a frame can have" in err, err
    assert path.read_bytes() == before and not (tmp_path / "copy.prof").exists()
