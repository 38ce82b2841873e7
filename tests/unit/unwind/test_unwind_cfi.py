"""The CFI rule compiler on hand-written CFI (fixtures/dwarf/cfi/cfi_cases.S, built by its
build.sh into the committed cfi_cases.so), checked row by row and against GNU readelf."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from profiler.unwind.arch import X86_64_COLUMNS
from profiler.unwind.cfi import compile_path
from profiler.unwind.table import (
    AT_CFA,
    AT_REG,
    CFA_DEREF,
    CFA_PLT,
    CFA_REG,
    CFA_UNSUPPORTED,
    FLAG_SIGNAL,
    SAME,
    UNDEF,
    RuleTable,
)

from tests.support.paths import FIXTURES

SO = FIXTURES / "dwarf" / "cfi" / "cfi_cases.so"
COLS = X86_64_COLUMNS
RA, SP, RBP, RBX, R12, R13 = 0, 1, 2, 3, 4, 5


def symbols() -> dict[str, int]:
    from elftools.elf.elffile import ELFFile

    with open(SO, "rb") as fh:
        elf = ELFFile(fh)
        tab = elf.get_section_by_name(".symtab")
        return {s.name: int(s["st_value"]) for s in tab.iter_symbols() if s.name.startswith("f_")}


@pytest.fixture(scope="module")
def table() -> RuleTable:
    return compile_path(str(SO), COLS)


def rule(table: RuleTable, pc: int) -> tuple[int, int, int, list[int], list[int]]:
    i = table.row_at(pc)
    assert i is not None, hex(pc)
    return (int(table.cfa_kind[i]), int(table.cfa_reg[i]), int(table.cfa_off[i]),
            table.rule_kind[i].tolist(), table.rule_arg[i].tolist())


def test_rsp_based_rows(table: RuleTable) -> None:
    sym = symbols()
    kind, reg, off, kinds, args = rule(table, sym["f_rsp"])
    assert (kind, reg, off) == (CFA_REG, SP, 8)
    assert (kinds[RA], args[RA]) == (AT_CFA, -8)
    kind, reg, off, kinds, args = rule(table, sym["f_rsp_body"])
    assert (kind, reg, off) == (CFA_REG, SP, 40)
    assert (kinds[RBX], args[RBX]) == (AT_CFA, -16)
    kind, reg, off, kinds, _ = rule(table, sym["f_rsp_ret"])
    assert (kind, reg, off) == (CFA_REG, SP, 8)
    assert kinds[RBX] == SAME  # .cfi_restore: back to the CIE's rule


def test_frame_pointer_rows(table: RuleTable) -> None:
    kind, reg, off, kinds, args = rule(table, symbols()["f_rbp_body"])
    assert (kind, reg, off) == (CFA_REG, RBP, 16)
    assert (kinds[RBP], args[RBP], kinds[R12], args[R12]) == (AT_CFA, -16, AT_CFA, -24)


def test_remember_and_restore_state(table: RuleTable) -> None:
    kind, reg, off, kinds, args = rule(table, symbols()["f_state_after"])
    assert (kind, reg, off) == (CFA_REG, SP, 16)
    assert (kinds[R13], args[R13]) == (AT_CFA, -16)


def test_expressions(table: RuleTable) -> None:
    sym = symbols()
    i = table.row_at(sym["f_deref"])
    assert i is not None
    assert (table.cfa_kind[i], table.cfa_reg[i], table.cfa_off[i]) == (CFA_DEREF, SP, 8)
    assert (table.rule_kind[i, RBP], table.rule_reg[i, RBP], table.rule_arg[i, RBP]) == (AT_REG, SP, 16)
    i = table.row_at(sym["f_plt"])
    assert i is not None
    assert (table.cfa_kind[i], table.cfa_reg[i], table.cfa_off[i], table.plt_threshold[i]) == (CFA_PLT, SP, 8, 11)
    assert rule(table, sym["f_other_expr"])[0] == CFA_UNSUPPORTED


def test_root_signal_frame_and_gap(table: RuleTable) -> None:
    sym = symbols()
    assert rule(table, sym["f_root"])[3][RA] == UNDEF
    i = table.row_at(sym["f_signal"])
    assert i is not None
    assert table.flags[i] & FLAG_SIGNAL
    assert (table.cfa_kind[i], table.cfa_off[i]) == (CFA_DEREF, 160)
    assert (table.rule_kind[i, RA], table.rule_reg[i, RA], table.rule_arg[i, RA]) == (AT_REG, SP, 168)
    assert (table.rule_kind[i, RBP], table.rule_arg[i, RBP]) == (AT_REG, 120)
    assert table.row_at(sym["f_gap"]) is None
    assert table.row_at(sym["f_signal"] - 1) is None  # the nop before it: no FDE


def test_round_trip_through_bytes(table: RuleTable) -> None:
    again = RuleTable.from_bytes(table.to_bytes())
    for name in RuleTable._ARRAYS:
        assert np.array_equal(getattr(again, name), getattr(table, name)), name
    with pytest.raises(ValueError):
        RuleTable.from_bytes(b"not a table")


def test_a_packed_table_zipfile_cannot_read_is_not_a_table(table: RuleTable) -> None:
    """A capture's packed table is untrusted: an archive whose entry needs a zip version or a
    compression method zipfile lacks (NotImplementedError), or says it is encrypted
    (RuntimeError), is a ValueError like any other damage (found by the capture fuzzer)."""
    data = bytearray(table.to_bytes())
    central = data.index(b"PK\x01\x02")  # the first central directory entry
    version = bytearray(data)
    version[central + 6:central + 8] = (206).to_bytes(2, "little")  # needs zip 20.6 to extract
    method = bytearray(data)
    local = method.index(b"PK\x03\x04")
    method[central + 10:central + 12] = method[local + 8:local + 10] = (99).to_bytes(2, "little")  # AES
    encrypted = bytearray(data)
    encrypted[central + 8] |= 1  # the encrypted flag
    for bad in (version, method, encrypted):
        with pytest.raises(ValueError, match="not an unwind table"):
            RuleTable.from_bytes(bytes(bad))


def test_round_trip_through_the_cache_layout(table: RuleTable) -> None:
    data = table.to_cache_bytes()
    again = RuleTable.from_cache_bytes(data)
    assert (again.arch, again.source) == (table.arch, table.source)
    for name in RuleTable._ARRAYS:
        mine, theirs = getattr(again, name), getattr(table, name)
        assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs), name
    for bad in (b"not a table", data[:-1], data + b"\0" * 8, b"XXXXXXXX" + data[8:],
                table.to_bytes()):
        with pytest.raises(ValueError):
            RuleTable.from_cache_bytes(bad)
    unsorted = bytearray(data)  # rows out of order: the table's own check refuses it
    head = RuleTable._CACHE_HEAD.size + RuleTable._CACHE_HEAD.unpack_from(data)[4]
    unsorted[head:head + 8] = (1 << 63).to_bytes(8, "little")
    with pytest.raises(ValueError):
        RuleTable.from_cache_bytes(bytes(unsorted))


_ROW = re.compile(r"^([0-9a-f]{16}) (\S+)\s+(.*)$")


def readelf_rows(path: Path) -> dict[int, tuple[str, dict[str, str]]]:
    """pc -> (CFA text, {register: rule}) from readelf --debug-dump=frames-interp."""
    text = subprocess.run(["readelf", "--debug-dump=frames-interp", str(path)], capture_output=True,
                          text=True, check=False).stdout  # exit 1 on warnings about other sections
    rows: dict[int, tuple[str, dict[str, str]]] = {}
    names: list[str] = []
    in_fde = False
    for line in text.splitlines():
        if " FDE " in line or " CIE " in line:
            in_fde = " FDE " in line  # a CIE's initial row is printed too: not an address
            names = []
            continue
        if in_fde and line.strip().startswith("LOC"):
            names = line.split()[2:]
            continue
        m = _ROW.match(line)
        if m and names:
            cells = re.sub(r"(\S+) \(\S+\)", r"\1", m.group(3)).split()  # "r10 (r10)": one cell
            rows[int(m.group(1), 16)] = (m.group(2), dict(zip(names, cells)))
    return rows


@pytest.mark.slow  # make check leaves it out; make test runs it
@pytest.mark.skipif(shutil.which("readelf") is None, reason="GNU readelf is not installed")
@pytest.mark.parametrize("path", [SO, Path("/lib/x86_64-linux-gnu/libc.so.6")])
def test_rows_agree_with_readelf(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    table = compile_path(str(path), COLS)
    regs = {"rbx": RBX, "rbp": RBP, "r12": R12, "r13": R13, "r14": 6, "r15": 7, "ra": RA}
    checked = 0
    for pc, (cfa, rules) in readelf_rows(path).items():
        i = table.row_at(pc)
        assert i is not None, hex(pc)
        m = re.fullmatch(r"(rsp|rbp)\+(\d+)", cfa)
        if m:
            assert table.cfa_kind[i] == CFA_REG, hex(pc)
            assert table.cfa_reg[i] == (SP if m.group(1) == "rsp" else RBP), hex(pc)
            assert table.cfa_off[i] == int(m.group(2)), hex(pc)
        for name, col in regs.items():
            text = rules.get(name, "u")
            got = int(table.rule_kind[i, col]), int(table.rule_arg[i, col])
            if re.fullmatch(r"c-?\d+", text):
                assert got == (AT_CFA, int(text[1:])), (hex(pc), name)
            elif text == "u" and name == "ra":
                assert got[0] == UNDEF, hex(pc)
            elif text == "u":
                assert got[0] in (SAME, UNDEF), (hex(pc), name)
        checked += 1
    assert checked > 10


def test_vdso_table_is_cached_by_its_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The [vdso] has no recorded build-id: its table is cached under a hash of the image the
    recorder saved, so a second report does not compile it again (nor import pyelftools)."""
    from profiler.unwind import sources as S

    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))
    image = SO.read_bytes()  # any ELF image with CFI stands in for the vdso
    first = S.TableSources(COLS, vdso_image=image)
    table = first.table(S.VDSO, None)
    assert table is not None and first.origin[(S.VDSO, None)] == "file"
    compiled: list[str] = []
    monkeypatch.setattr(S.TableSources, "_compile", lambda self, path, bid, content=None: compiled.append(path))
    again = S.TableSources(COLS, vdso_image=image)
    cached = again.table(S.VDSO, None)
    assert again.origin[(S.VDSO, None)] == "cache" and not compiled
    assert cached is not None and np.array_equal(cached.start, table.start)
    other = S.TableSources(COLS, vdso_image=image + b"\0")  # another kernel's image
    assert other.table(S.VDSO, None) is None and compiled == [S.VDSO]
