"""``profiler info`` and ``profiler dump``, and the one-sentence rule for bad files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.capture_factory import write_small_capture
from tests.support.paths import ROOT



def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_info_describes_capture(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    write_small_capture(path)
    result = run("info", "-i", str(path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "format 1.1" in out
    assert "host: testhost, kernel 6.0.0-test, x86_64 little-endian 64-bit, 2 CPUs" in out
    assert "event 0: cpu-clock (ids 7)" in out
    assert "sample_type IP|TID|TIME|CALLCHAIN|CPU|PERIOD" in out
    assert "sampling at 4000 Hz" in out
    assert "samples: 20" in out
    assert "SAMPLE             20" in out and "FORK               1" in out
    assert "duration: 0.000 s" in out
    assert "ended cleanly: yes" in out
    assert result.stderr == ""


def test_dump_one_line_per_record(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    write_small_capture(path)
    result = run("dump", "-i", str(path))
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert sum(line.strip().startswith("SAMPLE ") for line in lines) == 20
    assert any("COMM misc=0x2000" in line and "comm=demo exec=1" in line for line in lines)
    assert any(line.startswith("frame 1 ") and "meta" in line and "kind=buildids" in line for line in lines)


def test_dump_lists_metadata_keys_of_any_type(tmp_path: Path) -> None:
    """A metadata frame whose keys are not all strings (msgpack allows nil and integer keys;
    the fuzzer made one) is listed, not a traceback."""
    from profiler.format.container.writer import CaptureWriter

    from tests.support.capture_factory import make_test_header

    path = tmp_path / "c.prof"
    writer = CaptureWriter.create(path, make_test_header())
    writer.write_meta("buildids", {None: 1, 7: 2, "entries": []})
    writer.close({"samples": 0})
    result = run("dump", "-i", str(path))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "kind=buildids keys=7,None,entries" in result.stdout


def test_truncated_capture_is_a_warning_and_exit_zero(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    write_small_capture(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 100])
    result = run("info", "-i", str(path))
    assert result.returncode == 0
    assert "ended cleanly: no" in result.stdout
    assert "warning:" in result.stderr and "skipped the last" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("setup,expect", [
    ("missing", "no such file"),
    ("directory", "is a directory"),
    ("empty", "it is empty"),
    ("perf", "perf.data file"),
    ("newer", "newer than"),
    ("header-cut", "truncated"),
])
def test_bad_files_one_sentence(tmp_path: Path, setup: str, expect: str) -> None:
    path = tmp_path / "bad.prof"
    if setup == "directory":
        path.mkdir()
    elif setup == "empty":
        path.write_bytes(b"")
    elif setup == "perf":
        path.write_bytes(b"PERFILE2" + b"\0" * 100)
    elif setup in ("newer", "header-cut"):
        write_small_capture(path)
        data = bytearray(path.read_bytes())
        if setup == "newer":
            data[8] = 9
        else:
            data = data[:30]
        path.write_bytes(bytes(data))
    for cmd in ("info", "dump"):
        result = run(cmd, "-i", str(path))
        assert result.returncode != 0
        assert expect in result.stderr
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_unreadable_capture_one_sentence() -> None:
    """No read permission (run as user nobody, since root reads anything)."""
    import shutil
    import tempfile

    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and setpriv is None:
        pytest.skip("root without setpriv cannot test a missing read permission")
    shared = Path(tempfile.mkdtemp(prefix="profiler-noread-"))
    os.chmod(shared, 0o755)
    try:
        path = shared / "c.prof"
        write_small_capture(path)  # mode 0600, owned by us
        argv = [sys.executable, "-m", "profiler", "info", "-i", str(path)]
        if os.geteuid() == 0:
            argv = [str(setpriv), "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
        result = subprocess.run(argv, capture_output=True, text=True, cwd="/",
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert result.returncode == 1
        assert result.stderr.strip() == f"profiler: {path}: permission denied (cannot read it)."
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_info_names_zstd_frames_with_their_sizes() -> None:
    """A --call-graph dwarf capture's RAW_ZSTD frames (kind 6, docs/format.md) are counted as
    such, with their stored and inflated bytes; checked by walking the frames by hand."""
    import re
    import struct

    import zstandard

    from profiler.format.container.reader import CaptureReader

    path = ROOT / "fixtures" / "captures" / "format-2.0.prof"
    data = path.read_bytes()
    with CaptureReader.open(path) as reader:
        pos = reader._frames_start  # where the first frame starts (after the file header)
    count = stored = inflated = 0
    while pos + 16 <= len(data):
        kind, _flags, _cpu, length, _seq, _crc = struct.unpack_from("<BBHIII", data, pos)
        if kind == 6:
            payload = data[pos + 16:pos + 16 + length]
            count, stored = count + 1, stored + length
            inflated += len(zstandard.ZstdDecompressor().decompress(payload, max_output_size=1 << 30))
        pos += 16 + length + (-length % 8)
    assert count > 0
    result = run("info", "-i", str(path))
    assert result.returncode == 0, result.stderr
    assert re.search(rf"# frames: .*raw_zstd {count}\b", result.stdout), result.stdout
    assert f"{stored} bytes stored, {inflated} bytes inflated" in result.stdout
