"""The Python reader against the real 3.11, 3.12 and 3.13 interpreters (pyenv's, where they
are installed; REQUIRE_PERF=1, as CI sets, makes a missing one a failure): each version's
offsets (tables for 3.11 and 3.12, ``_Py_DebugOffsets`` for 3.13) must give the frames and
lines a stopped target is known to be at. Reading our own child needs no privilege."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from profiler.format.pylinetable import line_at, line_ranges
from profiler.record.pyfind import Interpreter, elf_symbol, find_interpreter, interpreter_name
from profiler.record.pyoffsets import DEBUG_SIZE, from_debug_offsets
from profiler.record.pyreader import ProcessReader, UnknownPython, offsets_for
from profiler.record.vmread import Memory

PYENV = Path("/root/.pyenv/versions")
VERSIONS = ("3.11.7", "3.12.1", "3.13.0")

TARGET = '''\
import sys, threading
gate = threading.Event()
def leaf():
    sys.stdin.readline()  # LEAF
def mid():
    leaf()  # MID
class Box:
    def run(self):
        mid()  # RUN
def waiter():
    gate.wait()  # WAITER
def gen():
    yield mid()  # GEN
threading.Thread(target=waiter, daemon=True).start()
print("ready", flush=True)
next(gen())  # MODULE
'''


def marker_line(name: str) -> int:
    return next(i for i, text in enumerate(TARGET.splitlines(), 1) if text.endswith(f"# {name}"))


def interpreters() -> list[str]:
    out = []
    for v in VERSIONS:
        exe = PYENV / v / "bin" / "python3"
        if exe.exists():
            out.append(str(exe))
        elif os.environ.get("REQUIRE_PERF") == "1":
            out.append(str(exe))  # missing: the test fails, as CI must have it
    return out or ["none"]


@pytest.fixture(params=interpreters())
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    exe = request.param
    if not Path(exe).exists():
        if os.environ.get("REQUIRE_PERF") == "1":
            pytest.fail(f"REQUIRE_PERF=1 but {exe} is missing")
        pytest.skip("no pyenv CPython 3.11-3.13 here")
    yield from started_target(exe, tmp_path)


def started_target(exe: str, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """TARGET running under ``exe``, once it says it is ready; killed afterwards."""
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    proc = subprocess.Popen([exe, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_frames_and_lines_of_every_thread(target: subprocess.Popen[str]) -> None:
    interp = find_interpreter(target.pid)
    assert interp is not None and interp.version in ((3, 11), (3, 12), (3, 13))
    reader = ProcessReader(target.pid, interp, [0])
    deadline = time.monotonic() + 5
    while True:  # until the main thread waits in leaf (it printed "ready" a little before)
        threads = reader.read()
        codes = {c.id: c for c in reader.new_codes}
        main = dict(threads).get(target.pid, [])
        if main and codes[main[0][0]].qualname == "leaf" or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    reader.new_codes = list(codes.values())

    def named(frames: list[tuple[int, int]]) -> list[tuple[str, int]]:
        out = []
        for ident, offset in frames:
            c = codes[ident]
            out.append((c.qualname, line_at(line_ranges(c.linetable, c.firstlineno), offset)))
        return out

    stacks = {tid: named(frames) for tid, frames in threads}
    assert target.pid in stacks  # the main thread's native id is the pid
    assert stacks[target.pid] == [("leaf", marker_line("LEAF")), ("mid", marker_line("MID")),
                                  ("gen", marker_line("GEN")), ("<module>", marker_line("MODULE"))]
    others = [s for tid, s in stacks.items() if tid != target.pid]
    assert len(others) == 1 and ("waiter", marker_line("WAITER")) in others[0]  # below Event.wait's frames
    assert {c.filename.rpartition("/")[2] for c in codes.values() if c.qualname in ("leaf", "waiter")} == {"target.py"}
    again = reader.read()  # the cache: no new code objects, the same frames
    assert again == threads and reader.new_codes == list(codes.values())


def test_an_unknown_version_is_refused() -> None:
    with pytest.raises(UnknownPython):
        offsets_for(Memory(os.getpid()), Interpreter("/x/libpython3.10.so", (3, 10), 1))


def test_names_symbols_and_debug_offsets_are_checked(tmp_path: Path) -> None:
    assert interpreter_name("/usr/lib/libpython3.12.so.1.0") == (True, (3, 12))
    assert interpreter_name("/usr/bin/python3.11") == (False, (3, 11))
    assert interpreter_name("/usr/bin/python3") is None and interpreter_name("/x/python3.11-config") is None
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x7fELF\x02\x01" + bytes(200))
    fd = os.open(junk, os.O_RDONLY)
    try:
        assert elf_symbol(fd) is None
    finally:
        os.close(fd)
    assert from_debug_offsets(b"xdebugpy" + bytes(DEBUG_SIZE)) is None  # version 0
    assert from_debug_offsets(b"notdebug" + bytes(DEBUG_SIZE)) is None
    assert from_debug_offsets(b"xdebugpy") is None


def test_unreadable_memory_is_an_oserror() -> None:
    mem = Memory(os.getpid())
    with pytest.raises(OSError):
        mem.read(8, 8)
    assert mem.try_read(0, 8) is None and mem.try_read(1 << 70, 8) is None
    data = b"hello"
    import ctypes

    buf = ctypes.create_string_buffer(data)
    assert mem.read(ctypes.addressof(buf), 5) == data
    assert sys.byteorder in ("little", "big")
