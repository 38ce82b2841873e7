"""jitdump reading: the layout perf's jitdump specification gives, as CPython 3.13 writes it,
and what a torn or hostile file does."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from profiler.errors import FormatError
from profiler.symbols.jitdump import JIT_CODE_LOAD, JIT_CODE_MOVE, JIT_CODE_UNWINDING_INFO, parse_jitdump
from profiler.symbols.jitsources import JitBlobs, JitSymbols
from profiler.unwind.jitcode import JitCodeOf
from profiler.symbols.perfmap import parse_perf_map
from profiler.unwind.arch import X86_64_COLUMNS

TRAMPOLINE = bytes.fromhex("4883ec08ffd14883c408c3")
# the .eh_frame CPython 3.13.0 wrote for that trampoline (a real jitdump of this machine)
EH_FRAME = bytes.fromhex("1400000000000000017a5200017810011b0c070890010000"
                         "140000001c000000d0ffffff0b00000000440e10460e0800")


def header(pid: int = 42, magic: int = 0x4A695444) -> bytes:
    return struct.pack("<IIIIIIQQ", magic, 1, 40, 0, 0, pid, 1, 0)


def record(rid: int, body: bytes) -> bytes:
    return struct.pack("<IIQ", rid, 16 + len(body), 7) + body


def load(addr: int, name: str, code: bytes = TRAMPOLINE, index: int = 1) -> bytes:
    body = struct.pack("<IIQQQQ", 42, 42, addr, addr, len(code), index) + name.encode() + b"\0" + code
    return record(JIT_CODE_LOAD, body)


def unwinding(eh: bytes = EH_FRAME, hdr: bytes = b"\x01\x1b\x03\x3b" + bytes(16)) -> bytes:
    return record(JIT_CODE_UNWINDING_INFO, struct.pack("<QQQ", len(eh) + len(hdr), len(hdr), 80) + eh + hdr)


def test_code_loads_name_their_code_and_keep_its_bytes_and_cfi() -> None:
    data = header() + unwinding() + load(0x7F0000001000, "py::leaf:/app.py") + load(0x7F0000001010, "py::mid:/app.py")
    dump = parse_jitdump(data)
    assert dump.pid == 42 and dump.skipped == 0
    assert [(f.start, f.size, f.name) for f in dump.functions] == [
        (0x7F0000001000, 11, "py::leaf:/app.py"), (0x7F0000001010, 11, "py::mid:/app.py")]
    assert dump.functions[0].eh_frame == EH_FRAME and dump.functions[1].eh_frame is None  # one record each
    assert dump.functions[0].code == TRAMPOLINE


def test_a_moved_function_is_found_at_its_new_address() -> None:
    move = record(JIT_CODE_MOVE, struct.pack("<IIQQQQQ", 42, 42, 0, 0x1000, 0x5000, 11, 1))
    dump = parse_jitdump(header() + load(0x1000, "f") + move)
    assert [(f.start, f.name) for f in dump.functions] == [(0x5000, "f")]


def test_a_torn_tail_keeps_what_came_before() -> None:
    whole = header() + load(0x1000, "first") + load(0x2000, "second")
    dump = parse_jitdump(whole[:-5])
    assert [f.name for f in dump.functions] == ["first"] and dump.skipped == 1


@pytest.mark.parametrize("bad", [
    b"", b"JiTD", header(magic=0x12345678), header(magic=0x4454694A),
    struct.pack("<IIIIIIQQ", 0x4A695444, 2, 40, 0, 0, 1, 0, 0),
    struct.pack("<IIIIIIQQ", 0x4A695444, 1, 1 << 30, 0, 0, 1, 0, 0),
])
def test_not_a_jitdump_is_one_sentence(bad: bytes) -> None:
    with pytest.raises(FormatError):
        parse_jitdump(bad)


def test_hostile_records_never_name_code_outside_them() -> None:
    huge_size = struct.pack("<IIQ", JIT_CODE_LOAD, 1 << 31, 0) + bytes(64)
    no_nul = record(JIT_CODE_LOAD, struct.pack("<IIQQQQ", 1, 1, 0, 0x1000, 4, 1) + b"x" * 5000)
    short_code = record(JIT_CODE_LOAD, struct.pack("<IIQQQQ", 1, 1, 0, 0x1000, 1 << 20, 1) + b"f\0" + TRAMPOLINE)
    wraps = record(JIT_CODE_LOAD, struct.pack("<IIQQQQ", 1, 1, 0, (1 << 64) - 4, 11, 1) + b"f\0" + TRAMPOLINE)
    tiny = struct.pack("<IIQ", JIT_CODE_LOAD, 3, 0)
    bad_unwind = record(JIT_CODE_UNWINDING_INFO, struct.pack("<QQQ", 1 << 40, 0, 0))
    for rec in (no_nul, short_code, wraps, bad_unwind + load(0x3000, "g")):
        dump = parse_jitdump(header() + rec)
        assert all(f.start == 0x3000 and f.eh_frame is None for f in dump.functions)
    for rec in (huge_size, tiny):
        assert parse_jitdump(header() + load(0x1000, "ok") + rec).skipped == 1


def test_names_and_unwind_rules_of_a_process() -> None:
    dump = parse_jitdump(header() + unwinding() + load(0x7F0000001000, "py::leaf:/app.py")
                         + load(0x7F0000002000, "not_python", code=b"\x90" * 8))
    perf_map, _ = parse_perf_map("7f0000003000 b py::old:/app.py\n7f0000001000 b overridden\n")
    syms = JitSymbols.of(perf_map, dump, "local")
    assert syms.table is not None
    assert [syms.table.name(i) for i in range(len(syms.table))] == [
        "py::leaf:/app.py", "not_python", "py::old:/app.py"]
    again = JitBlobs.from_packed(syms.blobs.to_packed())
    assert again == syms.blobs
    code = JitCodeOf(lambda pid: syms, X86_64_COLUMNS)(42)
    # the jitdump's function by its .eh_frame, the map's py:: entry by the trampoline of its size;
    # eight nops are no trampoline: no rules, so unwinding stops there as before
    assert code.start.tolist() == [0x7F0000001000, 0x7F0000003000] and code.end.tolist() == [0x7F000000100B,
                                                                                              0x7F000000300B]
    assert all(code.tables[k].source in (".eh_frame", "trampoline") for k in code.slot.tolist())


def test_a_forked_child_runs_its_parents_trampolines() -> None:
    parent, _ = parse_perf_map("1000 b py::main:/app.py\n2000 b py::work:/app.py\n")
    child, _ = parse_perf_map("2000 b py::child_work:/app.py\n")
    tables = {1: JitSymbols.of(parent, None, "local"), 2: JitSymbols.of(child, None, "local")}
    code = JitCodeOf(tables.get, X86_64_COLUMNS, {2: 1})(2)
    assert code.start.tolist() == [0x1000, 0x2000]


@pytest.mark.parametrize("damage", [
    {"start": "x"}, {"blob": (5).to_bytes(4, "little")}, {"blobs": [[b"x", 3]]}, {"blobs": "no"},
])
def test_damaged_packed_code_is_refused(damage: dict[str, object]) -> None:
    good = JitBlobs([0x1000], [11], [0], [(TRAMPOLINE, b"")]).to_packed()
    with pytest.raises(FormatError):
        JitBlobs.from_packed({**good, **damage})


def test_a_jitdump_of_another_process_is_refused(tmp_path: Path) -> None:
    from profiler.symbols.sources import SymbolSources

    (tmp_path / "jit-7.dump").write_bytes(header(pid=8) + load(0x1000, "py::f:/a.py"))
    (tmp_path / "jit-9.dump").write_bytes(header(pid=9) + load(0x1000, "py::f:/a.py"))
    (tmp_path / "jit-11.dump").write_bytes(b"")  # a forked child's, its buffer lost at os._exit
    chain = SymbolSources(perf_map_dir=tmp_path)
    assert chain.jit(7) == (None, "missing") and "written by process 8, not 7" in chain.warnings[0]
    table, origin = chain.jit(9)
    assert table is not None and table.lookup(0x1005) == ("py::f:/a.py", 5) and origin == "local"
    assert chain.jit(11) == (None, "missing") and len(chain.warnings) == 1
