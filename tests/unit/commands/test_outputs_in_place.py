"""Outputs that are not regular files are written where they are, never replaced.

Every writing command builds its file beside the name and renames it over (a reader of the old
file is unharmed, a symlink is not followed). Done to ``-o /dev/null`` that replaced the
machine's ``/dev/null`` with a regular file. These tests use a FIFO of their own (and
``/proc/self/fd/1``, which cannot be renamed over if the check is wrong) rather than the
system's ``/dev/null``.
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from profiler.format.container.reader import CaptureReader
from profiler.format.localfile import written_in_place

from tests.support.paths import CAPTURES

CAPTURE = CAPTURES / "small.prof"


def test_which_outputs_are_written_in_place(tmp_path: Path) -> None:
    regular = tmp_path / "file"
    regular.write_text("x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "to-file").symlink_to(regular)
    (tmp_path / "to-fifo").symlink_to(fifo)
    (tmp_path / "dangling").symlink_to(tmp_path / "nothing")
    assert not written_in_place(tmp_path / "missing")
    assert not written_in_place(regular)
    assert not written_in_place(tmp_path / "to-file")  # replaced, not followed
    assert not written_in_place(tmp_path / "dangling")
    assert written_in_place(fifo)
    assert written_in_place(tmp_path / "to-fifo")
    assert written_in_place("/dev/null")
    with open(regular, "a") as stream:  # a regular file behind the kernel's own link
        assert written_in_place(f"/proc/self/fd/{stream.fileno()}")


def _drain(fifo: Path) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as stream:
            got.append(stream.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader, got


@pytest.mark.slow  # make check leaves it out; make test runs it
@pytest.mark.parametrize(("args", "starts"), [
    (["flamegraph", "-i", str(CAPTURE), "-o"], b"<!DOCTYPE html>"),
    (["export", "--format", "folded", "-i", str(CAPTURE), "-o"], b""),
    (["export", "--format", "pprof", "-i", str(CAPTURE), "-o"], b"\x1f\x8b"),
    (["archive", "-i", str(CAPTURE), "-o"], b"\x7fPROFCAP"),
])
def test_a_fifo_output_stays_a_fifo_and_gets_the_output(args: list[str], starts: bytes, tmp_path: Path,
                                                        profiler_cmd: list[str]) -> None:
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    reader, got = _drain(fifo)
    result = subprocess.run([*profiler_cmd, *args, str(fifo)], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PROFILER_CACHE_DIR": str(tmp_path / "cache")})
    reader.join(timeout=30)
    if args[0] == "archive":  # the fixture's program is not on this machine: said, exit 1, written
        assert result.returncode == 1 and "could not pack the symbols of 1 DSO" in result.stderr, result.stderr
    else:
        assert result.returncode == 0, result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].startswith(starts) and len(got[0]) > 100
    assert set(os.listdir(tmp_path)) <= {"out", "cache"}  # no temporary file left beside it
    if args[0] == "archive":
        copy = tmp_path / "copy.prof"
        copy.write_bytes(got[0])
        with CaptureReader.open(copy) as capture:
            assert capture.clean_end


def test_stdout_redirected_to_a_file_is_written_through_the_kernels_link(tmp_path: Path,
                                                                        profiler_cmd: list[str]) -> None:
    out = tmp_path / "flame.html"
    with open(out, "w") as stream:
        stream.write("old contents, longer than nothing " * 4000)  # truncated, not overwritten in part
    with open(out, "r+") as stream:
        result = subprocess.run([*profiler_cmd, "flamegraph", "-i", str(CAPTURE), "-o", "/proc/self/fd/1"],
                                stdout=stream, stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "old contents" not in text


@pytest.mark.slow  # make check leaves it out; make test runs it
@pytest.mark.parametrize("args", [["export", "-f", "folded"], ["flamegraph"], ["export", "-f", "speedscope"]])
def test_names_that_are_not_utf8_are_written_as_recorded(tmp_path: Path, args: list[str],
                                                         profiler_cmd: list[str]) -> None:
    # a comm of bytes that are not UTF-8 (decoded with surrogateescape): the file gets the
    # same bytes as standard output, where a strict encoder raised (found with a fuzzed perf.data)
    from tests.support.report_capture import comm, user_sample, write_capture

    path = write_capture(tmp_path / "c.prof", [comm(100, 100, "bad\udcff\udcfename", 0, exec=True),
                                                user_sample([0x400100], 1_000)])
    out = tmp_path / "out"
    to_file = subprocess.run([*profiler_cmd, *args, "-i", str(path), "-o", str(out)], capture_output=True, timeout=60)
    to_stdout = subprocess.run([*profiler_cmd, *args, "-i", str(path), "-o", "-"], capture_output=True, timeout=60)
    assert to_file.returncode == 0 and to_stdout.returncode == 0, to_file.stderr + to_stdout.stderr
    assert out.read_bytes() == to_stdout.stdout
    if args[-1] == "folded":
        assert b"bad\xff\xfename" in to_stdout.stdout


def test_archive_to_standard_output(tmp_path: Path, profiler_cmd: list[str]) -> None:
    # the archived copy on stdout, what was packed on stderr, no file named '-'
    done = subprocess.run([*profiler_cmd, "archive", "-i", str(CAPTURE), "-o", "-"], capture_output=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "PROFILER_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 1 and b"could not pack the symbols of 1 DSO" in done.stderr, done.stderr
    assert b"[ profiler archive: packed" in done.stderr and done.stdout.startswith(b"\x7fPROFCAP")
    assert not (tmp_path / "-").exists()
    copy = tmp_path / "copy.prof"
    copy.write_bytes(done.stdout)
    with CaptureReader.open(copy) as capture:
        assert capture.clean_end and capture.metadata("symbols")
