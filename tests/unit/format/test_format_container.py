"""The container: round trip, damage, truncation, versions, bad files."""

from __future__ import annotations

import os
import stat
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import msgpack
import pytest
from tests.support.capture_factory import make_test_header, write_small_capture
from tests.support.paths import ROOT

from profiler.errors import DiskFullError, FormatError, NotACaptureError, ProfilerError, VersionError
from profiler.format.container.layout import (
    FORMAT_MAJOR,
    FLAG_STACKS,
    FORMAT_MINOR,
    FRAME_HEADER_SIZE,
    FRAME_META,
    FRAME_RAW,
    FRAME_ROUND,
    FRAME_SYNTH,
    MAGIC,
    VERSION_PLAIN,
)
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter



def records_of(reader: CaptureReader) -> list[object]:
    return list(reader.iter_records())


def test_round_trip_frames_and_records(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    written = write_small_capture(path)
    with CaptureReader.open(path) as reader:
        assert reader.clean_end
        assert reader.warnings == []
        assert reader.trailer == {"samples": 20}
        assert reader.header["hostname"] == "testhost"
        assert reader.header["format_version"] == list(VERSION_PLAIN)
        kinds = [f.kind for f in reader.iter_frames()]
        assert kinds == [FRAME_SYNTH, FRAME_META, FRAME_RAW, FRAME_RAW, FRAME_ROUND, FRAME_RAW,
                         FRAME_RAW, FRAME_ROUND]
        assert [f.cpu for f in reader.iter_frames() if f.kind == FRAME_RAW] == [0, 1, 0, 1]
        assert records_of(reader) == written
        assert reader.metadata("buildids")[0]["entries"][0]["build_id"] == "ab" * 20


def test_file_mode_is_0600(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    path.write_bytes(b"old")
    os.chmod(path, 0o644)
    write_small_capture(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_frames_are_8_aligned(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    write_small_capture(path)
    with CaptureReader.open(path) as reader:
        for frame in reader.iter_frames():
            assert frame.offset % 8 == 0
            assert (frame.offset + FRAME_HEADER_SIZE) % 8 == 0


def test_no_trailer_reads_everything_and_warns(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    written = write_small_capture(path, trailer=False)
    with CaptureReader.open(path) as reader:
        assert not reader.clean_end
        assert records_of(reader) == written
        assert any("no trailer" in w for w in reader.warnings)


@pytest.mark.slow  # make check leaves it out; make test runs it
def test_truncation_at_every_offset(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    written = write_small_capture(path)
    data = path.read_bytes()
    with CaptureReader.open(path) as full:
        frame_ends = [f.offset for f in full.iter_frames()]
    header_end = frame_ends[0]
    # the trailer is the last frame: its end without padding
    (trailer_len,) = struct.unpack_from("<I", data, _last_frame_offset(data, frame_ends) + 4)
    trailer_end = _last_frame_offset(data, frame_ends) + FRAME_HEADER_SIZE + trailer_len
    for cut in range(len(data)):
        try:
            reader = CaptureReader.from_bytes(data[:cut])
        except FormatError:
            assert cut < header_end  # only a cut inside the file header is fatal
            continue
        got = records_of(reader)
        assert got == written[:len(got)], f"cut at {cut}: not a prefix"
        assert reader.clean_end == (cut >= trailer_end)
        assert reader.warnings or cut >= trailer_end
        # every frame that lies wholly before the cut was read
        complete = [f for f in frame_ends if f <= cut]
        assert len(list(reader.iter_frames())) >= len(complete) - 1


def _last_frame_offset(data: bytes, frame_offsets: list[int]) -> int:
    """Offset of the frame after the last listed one (the trailer)."""
    last = frame_offsets[-1]
    (length,) = struct.unpack_from("<I", data, last + 4)
    return last + FRAME_HEADER_SIZE + length + (-length % 8)


def test_a_corrupted_frame_is_skipped_and_reading_resumes(tmp_path: Path) -> None:
    """A frame with a bad checksum in the middle: skipped with a warning saying where and how
    many bytes; every frame after it is read (one damaged frame costs its own records only)."""
    path = tmp_path / "c.prof"
    write_small_capture(path)
    with CaptureReader.open(path) as reader:
        frames = list(reader.iter_frames())
        damaged = frames[3]
        offset = damaged.offset + FRAME_HEADER_SIZE + 5
        per_frame = [(f.seq, r) for f, r in reader.iter_records_with_frames()]
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    reader = CaptureReader.from_bytes(bytes(data))
    assert [f.seq for f in reader.iter_frames()] == [f.seq for f in frames if f.seq != damaged.seq]
    assert any("checksum" in w and "reading resumed" in w for w in reader.warnings), reader.warnings
    assert records_of(reader) == [r for seq, r in per_frame if seq != damaged.seq]
    assert reader.clean_end


def test_a_file_cut_inside_a_raw_frame_keeps_its_whole_records(tmp_path: Path) -> None:
    """A recorder killed in the middle of a write: the last frame's complete records are kept
    (their checksum cannot be verified), the partial one is not."""
    path = tmp_path / "c.prof"
    write_small_capture(path)
    with CaptureReader.open(path) as reader:
        frames = list(reader.iter_frames())
        raw = [f for f in frames if f.kind == 1][-1]
        per_frame = [(f.seq, r) for f, r in reader.iter_records_with_frames()]
    sizes = []
    at = 0
    while at < len(raw.payload):
        sizes.append(struct.unpack_from("<H", raw.payload, at + 6)[0])
        at += sizes[-1]
    assert len(sizes) >= 2
    cut = raw.offset + FRAME_HEADER_SIZE + sizes[0] + sizes[1] // 2  # inside the second record
    reader = CaptureReader.from_bytes(path.read_bytes()[:cut])
    kept = [r for seq, r in per_frame if seq < raw.seq] + [r for seq, r in per_frame if seq == raw.seq][:1]
    assert records_of(reader) == kept
    assert any("cut inside a raw frame" in w for w in reader.warnings), reader.warnings
    # such a file is not extended in place (its last frame's header claims bytes it lacks)
    shorter = tmp_path / "cut.prof"
    shorter.write_bytes(path.read_bytes()[:cut])
    with pytest.raises(ProfilerError, match="ends inside a frame"):
        CaptureWriter.append_to(shorter)


def test_newer_major_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    write_small_capture(path)
    data = bytearray(path.read_bytes())
    struct.pack_into("<HH", data, 8, FORMAT_MAJOR + 1, 1)
    path.write_bytes(bytes(data))
    with pytest.raises(VersionError, match=rf"format {FORMAT_MAJOR + 1}\.1.*{FORMAT_MAJOR}\.{FORMAT_MINOR}"):
        CaptureReader.open(path)


def test_newer_minor_version_is_read(tmp_path: Path) -> None:
    body = msgpack.packb({**make_test_header(), "future_key": 1}, use_bin_type=True)
    data = MAGIC + struct.pack("<HHII", 1, 7, len(body), zlib.crc32(body)) + body
    data += b"\0" * (-len(data) % 8)
    reader = CaptureReader.from_bytes(data)
    assert reader.version == (1, 7)
    assert list(reader.iter_frames()) == []


@pytest.mark.parametrize("content,expect", [
    (b"", "empty"),
    (b"\x7fELF\x02\x01\x01" + b"\0" * 100, "ELF"),
    (b"hello world\n", "text"),
    (b"\x00\x01\x02\xff\xfe" * 10, "magic"),
])
def test_foreign_files(tmp_path: Path, content: bytes, expect: str) -> None:
    path = tmp_path / "x"
    path.write_bytes(content)
    with pytest.raises(NotACaptureError, match=expect):
        CaptureReader.open(path)


def test_a_damaged_perf_data_file_is_named(tmp_path: Path) -> None:
    import profiler.format.perfdata  # noqa: F401  registers the reader, as the commands that read captures do

    path = tmp_path / "x"
    path.write_bytes(b"PERFILE2" + b"\0" * 200)  # perf.data files open as captures (profiler.format.perfdata)
    with pytest.raises(FormatError, match="damaged perf.data file"):
        CaptureReader.open(path)


def test_missing_directory_and_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ProfilerError, match="no such file"):
        CaptureReader.open(tmp_path / "missing.prof")
    with pytest.raises(ProfilerError, match="directory"):
        CaptureReader.open(tmp_path)
    path = tmp_path / "c.prof"
    write_small_capture(path)
    os.chmod(path, 0)
    if os.geteuid() != 0:  # root reads anything
        with pytest.raises(ProfilerError, match="permission denied"):
            CaptureReader.open(path)


def test_damaged_header_checksum(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    write_small_capture(path)
    data = bytearray(path.read_bytes())
    data[25] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="damaged header"):
        CaptureReader.open(path)


def test_header_without_events_is_refused() -> None:
    body = msgpack.packb({"hostname": "x"}, use_bin_type=True)
    data = MAGIC + struct.pack("<HHII", 1, 0, len(body), zlib.crc32(body)) + body
    with pytest.raises(FormatError, match="without events"):
        CaptureReader.from_bytes(data)


def test_huge_frame_length_is_damage_not_allocation(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    write_small_capture(path)
    data = bytearray(path.read_bytes())
    with CaptureReader.open(path) as reader:
        offset = list(reader.iter_frames())[2].offset
    struct.pack_into("<I", data, offset + 4, 0xFFFFFFF0)
    reader = CaptureReader.from_bytes(bytes(data))
    seqs = [f.seq for f in reader.iter_frames()]
    assert seqs[:2] == [0, 1] and 2 not in seqs and len(seqs) > 2  # skipped; reading resumed after it
    assert any("incomplete frame" in w and "reading resumed" in w for w in reader.warnings), reader.warnings


def test_disk_full_keeps_whole_frames(tmp_path: Path) -> None:
    """Writes to /dev/full fail with ENOSPC: the writer reports it in one sentence."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    with pytest.raises(DiskFullError, match="disk is full"):
        CaptureWriter.create("/dev/full", make_test_header())


def test_disk_full_mid_capture_leaves_valid_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.prof"
    writer = CaptureWriter.create(path, make_test_header())
    writer.write_raw(0, b"\x09\0\0\0\x02\0\x10\0" + b"\0" * 8)
    good_size = writer.bytes_written
    real_writev = os.writev

    def full_after_some(fd: int, buffers: list[memoryview]) -> int:
        real_writev(fd, [bytes(buffers[0])[:7]])  # a partial write, then ENOSPC
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "writev", full_after_some)
    with pytest.raises(DiskFullError):
        writer.write_raw(1, b"\0" * 64)
    monkeypatch.setattr(os, "writev", real_writev)
    writer.abort()
    assert path.stat().st_size == good_size
    reader = CaptureReader.open(path)
    assert len(list(reader.iter_frames())) == 1


def test_unwritable_output(tmp_path: Path) -> None:
    with pytest.raises(ProfilerError, match="cannot write"):
        CaptureWriter.create(tmp_path / "no" / "such" / "dir.prof", make_test_header())


def test_every_released_version_fixture_is_read() -> None:
    """fixtures/captures/format-<version>.prof: one capture per released format version."""
    fixtures = sorted((ROOT / "fixtures" / "captures").glob("format-*.prof"))
    assert fixtures, "no format fixtures committed"
    for path in fixtures:
        with CaptureReader.open(path) as reader:
            assert reader.clean_end, path
            records = records_of(reader)
            if reader.version >= (4, 0):  # a real --call-graph dwarf recording, its stack copies apart
                stored = CaptureReader.open(path).stored_frames() or []
                assert [f for f in stored if f.flags == FLAG_STACKS] and reader.warnings == []
                samples = [r for r in records if type(r).__name__ == "Sample"]
                assert len(samples) > 50 and all(s.stack_user is not None for s in samples)  # type: ignore[attr-defined]
                continue
            if reader.version >= (3, 0):  # a real recording of a command on two CPUs
                by_cpu: dict[int, int] = {}
                for frame, rec in reader.iter_records_with_frames():
                    if type(rec).__name__ == "Sample":
                        assert rec.cpu is None  # no PERF_SAMPLE_CPU: the frame names the CPU
                        by_cpu[frame.cpu] = by_cpu.get(frame.cpu, 0) + 1
                assert sorted(by_cpu) == [0, 1] and min(by_cpu.values()) > 20, by_cpu
                assert reader.warnings == []
                continue
            if reader.version >= (2, 0):  # a real --call-graph dwarf recording (raw_zstd frames)
                samples = [r for r in records if type(r).__name__ == "Sample"]
                assert len(samples) > 50 and all(s.stack_user is not None for s in samples)  # type: ignore[attr-defined]
                assert reader.warnings == []
                continue
            assert len(records) == 24, path
            assert records[0].comm == "demo" and records[0].exec  # type: ignore[attr-defined]
            assert sum(type(r).__name__ == "Sample" for r in records) == 20
            assert reader.warnings == []


def test_large_metadata_is_compressed_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    text = "ffffffff81000000 T _text\n" * 20000
    writer = CaptureWriter.create(path, make_test_header())
    writer.write_meta("kallsyms", {"text": text, "kptr_restrict": 0, "hidden": False})
    writer.close()
    assert path.stat().st_size < len(text) // 20
    with CaptureReader.open(path) as reader:
        assert reader.metadata("kallsyms")[0]["text"] == text


def test_damaged_compressed_metadata_is_a_format_error(tmp_path: Path) -> None:
    import zlib as _z

    from profiler.format.container.layout import FLAG_ZLIB
    from profiler.format.container.scan import FileFrame

    frame = FileFrame(FRAME_META, 0xFFFF, 0, 0, memoryview(_z.compress(b"x" * 100)[:-4] + b"junk"), FLAG_ZLIB)
    with pytest.raises(FormatError, match="compressed"):
        frame.meta()


def test_append_replaces_trailer_and_continues(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    written = write_small_capture(path)
    writer = CaptureWriter.append_to(path)
    writer.write_meta("symbols", {"build_id": "ab" * 20})
    writer.close({"archived": 1})
    with CaptureReader.open(path) as reader:
        assert reader.clean_end and reader.warnings == []
        assert reader.trailer == {"archived": 1}
        assert records_of(reader) == written
        assert reader.metadata("symbols") == [{"build_id": "ab" * 20}]


def test_append_to_unwritable_capture_leaves_it_unchanged(tmp_path: Path) -> None:
    """Run as an unprivileged user (root writes anything): one sentence, file untouched."""
    import shutil
    import subprocess
    import sys

    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="profiler-ro-"))  # pytest's own tmp is private to root
    os.chmod(shared, 0o755)
    path = shared / "c.prof"
    write_small_capture(path)
    os.chmod(path, 0o444)
    before = path.read_bytes()
    code = ("import sys\nfrom profiler.errors import ProfilerError\n"
            "from profiler.format.container.writer import CaptureWriter\n"
            "try:\n    CaptureWriter.append_to(sys.argv[1])\n"
            "except ProfilerError as exc:\n    print(exc)\n    sys.exit(3)\n")
    argv = [sys.executable, "-c", code, str(path)]
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0:
        if setpriv is None:
            pytest.skip("root without setpriv cannot test a missing write permission")
        argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd="/")
    try:
        assert result.returncode == 3, result.stderr
        assert result.stdout.strip() == f"cannot write the capture {path}: Permission denied."
        assert path.read_bytes() == before
    finally:
        shutil.rmtree(shared, ignore_errors=True)


# --- a new file every time: NAME.old, symlinks, readers of the old file ---------------------


def _capture_at(path: Path, comm: str) -> None:
    writer = CaptureWriter.create(path, make_test_header(), keep_old=True)
    writer.write_meta("kernel", {"release": comm})
    writer.close()


def _note(path: Path) -> str:
    with CaptureReader.open(path) as reader:
        return str(reader.metadata("kernel")[0]["release"])


def test_a_new_capture_keeps_the_previous_one_as_old(tmp_path: Path) -> None:
    path = tmp_path / "profile.prof"
    _capture_at(path, "first")
    assert not (tmp_path / "profile.prof.old").exists()
    _capture_at(path, "second")
    _capture_at(path, "third")
    assert _note(path) == "third" and _note(tmp_path / "profile.prof.old") == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.prof", "profile.prof.old"]  # no temporaries


def test_a_symlink_at_the_output_is_replaced_not_followed(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("do not overwrite")
    link = tmp_path / "out.prof"
    link.symlink_to(precious)
    _capture_at(link, "new")
    assert precious.read_text() == "do not overwrite"
    assert not link.is_symlink() and _note(link) == "new"
    assert (tmp_path / "out.prof.old").is_symlink()  # the link itself, as perf renames it


READ_AFTER_GO = """
import sys, zlib
from profiler.format.container.reader import CaptureReader
reader = CaptureReader.open(sys.argv[1])
print(len(list(reader.iter_frames())), flush=True)
sys.stdin.readline()  # the test writes a new capture at the same path meanwhile
print(zlib.crc32(reader.raw_view()), len(reader.raw_view()), flush=True)
"""


def test_a_reader_of_the_old_file_is_unharmed(tmp_path: Path) -> None:
    """A reader memory-maps the old file: writing the new one must not truncate it under the
    reader (which would die of SIGBUS), so it is run in a process of its own."""
    path = tmp_path / "c.prof"
    writer = CaptureWriter.create(path, make_test_header())
    for _ in range(64):
        writer.write_raw(0, bytes(range(256)) * 32)
    writer.close()
    before = path.read_bytes()
    reader = subprocess.Popen([sys.executable, "-c", READ_AFTER_GO, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert reader.stdin is not None and reader.stdout is not None
    assert reader.stdout.readline().strip() == "64"
    _capture_at(path, "replacement")
    out, _ = reader.communicate("go\n", timeout=60)
    assert reader.returncode == 0, f"the reader died: status {reader.returncode}"
    assert out.split() == [str(zlib.crc32(before)), str(len(before))]
    assert _note(path) == "replacement"


def test_a_failed_header_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.prof"
    _capture_at(path, "kept")

    def full(fd: int, buffers: list[memoryview]) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "writev", full)
    with pytest.raises(DiskFullError, match=str(path)):
        CaptureWriter.create(path, make_test_header(), keep_old=True)
    monkeypatch.undo()
    assert _note(path) == "kept" and sorted(p.name for p in tmp_path.iterdir()) == ["c.prof"]


def test_strings_that_are_not_utf8_are_written_with_replacement_characters(tmp_path: Path) -> None:
    """A command line or mapped path read with surrogateescape (bytes that are not UTF-8): the
    header and metadata strings of a capture are UTF-8, so those bytes become U+FFFD;
    msgpack raised on them, and a recording of a program so named failed."""
    path = tmp_path / "c.prof"
    header = make_test_header()
    header["cmdline"] = ["profiler", "record", "--", "/tmp/sh\udcffres"]
    writer = CaptureWriter.create(path, header)
    writer.write_meta("buildids", {"entries": [{"path": "/opt/\udcfe/lib.so", "source": "file"}]})
    writer.close()
    with CaptureReader.open(path) as reader:
        assert reader.header["cmdline"][-1] == "/tmp/sh\ufffdres"
        assert reader.metadata("buildids")[0]["entries"][0]["path"] == "/opt/\ufffd/lib.so"
