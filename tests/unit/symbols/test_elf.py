"""ElfFile against GNU binutils on the fixture binaries (differential tests).

readelf/nm/objdump run in each test give the expected values: headers, build-ids, load
segments, every function symbol (aliases and zero-size symbols included), PLT entries;
live fixture processes give real (mapping, ip) pairs for address translation.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiler.format.buildid import read_build_id
from profiler.symbols.elf import ElfError, ElfFile, symbol_dtype
from profiler.symbols.elfheaders import ElfLayout
from profiler.symbols.dso import load_dso_symbols
from profiler.symbols.table import SymbolTable

pytestmark = pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils not installed")

FIXTURES = ["prog_pie", "prog_nopie", "prog_ibt", "libshared.so", "prog_uselib", "cxx_prog"]
RANKS = {"GLOBAL": 0, "LOCAL": 1, "WEAK": 2}


def run(*cmd: str | Path) -> str:
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True).stdout


@dataclass(frozen=True)
class Sym:
    value: int
    size: int
    type: str
    bind: str
    ndx: str
    name: str


@dataclass(frozen=True)
class Section:
    index: int
    name: str
    addr: int
    size: int
    flags: str


def readelf_symbols(path: Path, table: str) -> list[Sym]:
    """Entries of symbol table ``table`` (".symtab" or ".dynsym") per ``readelf -sW``."""
    out: list[Sym] = []
    current = None
    for line in run("readelf", "-sW", path).splitlines():
        header = re.match(r"Symbol table '(\S+)'", line)
        if header:
            current = header.group(1)
            continue
        fields = line.split(None, 7)
        if current != table or len(fields) < 7 or not fields[0][:-1].isdigit():
            continue
        name = fields[7].split("@")[0] if len(fields) > 7 else ""  # .dynsym: drop "@@VERSION"
        out.append(Sym(int(fields[1], 16), int(fields[2], 0), fields[3], fields[4], fields[6], name))
    return out


def readelf_sections(path: Path) -> dict[int, Section]:
    pattern = re.compile(r"\[\s*(\d+)\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+[0-9a-f]+\s+(\S*)")
    found = {}
    for line in run("readelf", "-SW", path).splitlines():
        m = pattern.search(line)
        if m and int(m.group(1)) > 0:
            found[int(m.group(1))] = Section(int(m.group(1)), m.group(2), int(m.group(3), 16), int(m.group(4), 16),
                                             m.group(5))
    return found


def readelf_build_id(path: Path) -> str | None:
    m = re.search(r"Build ID: ([0-9a-f]+)", run("readelf", "-n", path))
    return m.group(1) if m else None


def expected_functions(path: Path) -> list[tuple[int, int, str]]:
    """(start, end, chosen name) per the documented rules, from readelf's output alone."""
    sections = readelf_sections(path)
    syms = readelf_symbols(path, ".symtab") or readelf_symbols(path, ".dynsym")
    groups: dict[int, list[Sym]] = {}
    for s in syms:
        if not s.ndx.isdigit() or int(s.ndx) == 0 or not s.name or s.name.startswith("$"):
            continue
        code = "X" in sections[int(s.ndx)].flags
        if s.type in ("FUNC", "IFUNC") or (s.type == "NOTYPE" and code):
            groups.setdefault(s.value, []).append(s)
    chosen = []
    for value in sorted(groups):
        members = groups[value]
        # perf's choice: sized, global < local < weak, fewer leading underscores, longest, first
        best = min(members, key=lambda s: (s.size == 0, RANKS.get(s.bind, 3),
                                           len(s.name) - len(s.name.lstrip("_")), -len(s.name.encode())))
        sec = sections[int(best.ndx)]
        chosen.append((value, max(s.size for s in members), best.name, sec.addr + sec.size))
    result = []
    for i, (value, size, name, sec_end) in enumerate(chosen):
        if size == 0 and any(v < value < v + z for v, z, _, _ in chosen[:i] if z):
            continue
        following = [v for v, _, _, _ in chosen[i + 1 :]]
        end = value + size if size else min(following[0] if following else sec_end, sec_end)
        result.append((value, end, name))
    return result


@pytest.fixture(scope="module")
def elf_dir(fixtures_dir: Path) -> Path:
    return fixtures_dir / "elf"


@pytest.mark.parametrize("name", FIXTURES)
def test_headers_match_readelf(elf_dir: Path, name: str) -> None:
    path = elf_dir / name
    elf = ElfFile(path)
    header = run("readelf", "-hW", path)
    kind = re.search(r"Type:\s+(\w+)", header).group(1)  # type: ignore[union-attr]
    assert elf.e_type == f"ET_{kind}"
    assert ("X86-64" in header) == (elf.machine == "EM_X86_64")
    assert elf.build_id == readelf_build_id(path) == read_build_id(path)
    loads = [line.split() for line in run("readelf", "-lW", path).splitlines() if line.strip().startswith("LOAD")]
    assert [(s.p_offset, s.p_vaddr, s.p_filesz, s.p_memsz) for s in elf.load_segments] == [
        (int(f[1], 16), int(f[2], 16), int(f[4], 16), int(f[5], 16)) for f in loads
    ]
    assert [s.executable for s in elf.load_segments] == ["E" in " ".join(f[6:-1]) for f in loads]


def test_executable_kinds(elf_dir: Path) -> None:
    assert ElfFile(elf_dir / "prog_nopie").e_type == "ET_EXEC"
    assert ElfFile(elf_dir / "prog_pie").e_type == "ET_DYN"
    assert ElfFile(elf_dir / "libshared.so").e_type == "ET_DYN"


@pytest.mark.parametrize("name", FIXTURES)
def test_every_function_symbol_resolves_like_readelf_says(elf_dir: Path, name: str) -> None:
    path = elf_dir / name
    table = ElfFile(path).symbol_table(include_plt=False)
    expected = expected_functions(path)
    assert len(table) == len(expected)
    for start, end, sym in expected:
        assert table.lookup(start) == (sym, 0)
        assert table.lookup(end - 1) == (sym, end - 1 - start)
    lasts = np.array([e - 1 for _, e, _ in expected], dtype=np.uint64)
    idx, off = table.lookup_many(lasts)
    assert [table.name(i) for i in idx.tolist()] == [n for _, _, n in expected]
    assert off.tolist() == [e - 1 - s for s, e, _ in expected]


def nm_addresses(path: Path) -> dict[str, int]:
    found = {}
    for line in run("nm", "--defined-only", path).splitlines():
        parts = line.split()
        if len(parts) == 3:
            found[parts[2]] = int(parts[0], 16)
    return found


@pytest.mark.parametrize("name", ["prog_pie", "prog_nopie"])
def test_zero_size_symbols_cover_up_to_the_next_symbol(elf_dir: Path, name: str) -> None:
    path = elf_dir / name
    table = ElfFile(path).symbol_table()
    addr = nm_addresses(path)
    sizes = {s.name: s.size for s in readelf_symbols(path, ".symtab")}
    assert sizes["zero_size_func"] == 0 and sizes["zero_size_label"] == 0
    func, label = addr["zero_size_func"], addr["zero_size_label"]
    after_label = min(a for a in addr.values() if a > label)  # leaf_add, per nm
    assert table.lookup(label - 1) == ("zero_size_func", label - 1 - func)
    assert table.lookup(label) == ("zero_size_label", 0)
    assert table.lookup(after_label - 1) == ("zero_size_label", after_label - 1 - label)
    assert table.lookup(after_label)[0] != "zero_size_label"  # type: ignore[index]


def test_aliases_choose_global_then_longest_like_perf(elf_dir: Path) -> None:
    path = elf_dir / "prog_pie"
    syms = readelf_symbols(path, ".symtab")
    target = next(s for s in syms if s.name == "alias_target_with_a_long_name")
    group = {s.name: s.bind for s in syms if s.value == target.value and s.type == "FUNC"}
    assert group == {
        "alias_target_with_a_long_name": "GLOBAL", "alias_b1": "GLOBAL", "alias_a1": "GLOBAL",
        "aw": "WEAK", "al": "LOCAL",
    }
    table = ElfFile(path).symbol_table()
    assert table.lookup(target.value + 3) == ("alias_target_with_a_long_name", 3)


def objdump_plt(path: Path) -> dict[str, int]:
    found = {}
    for line in run("objdump", "-d", "--no-show-raw-insn", path).splitlines():
        m = re.match(r"([0-9a-f]+) <(\S+@plt)>:", line)
        if m:
            found[m.group(2)] = int(m.group(1), 16)
    return found


def ifunc_name(path: Path, plt_name: str) -> str:
    """objdump calls an R_X86_64_IRELATIVE slot ``*ABS*+0x<resolver>@plt``; we name it after
    the .dynsym STT_GNU_IFUNC symbol at the resolver (global, weak, local; shortest) if any."""
    m = re.fullmatch(r"\*ABS\*\+0x([0-9a-f]+)@plt", plt_name)
    if m is None:
        return plt_name
    ifuncs = [s for s in readelf_symbols(path, ".dynsym") if s.type == "IFUNC" and s.value == int(m.group(1), 16)]
    if not ifuncs:
        return plt_name
    return min(ifuncs, key=lambda s: (RANKS.get(s.bind, 3), len(s.name), s.name)).name + "@plt"


@pytest.mark.parametrize("name", ["prog_pie", "prog_nopie", "prog_ibt", "libshared.so", "cxx_prog"])
def test_plt_entries_match_objdump(elf_dir: Path, name: str) -> None:
    path = elf_dir / name
    table = ElfFile(path).symbol_table()
    plt = {ifunc_name(path, sym): addr for sym, addr in objdump_plt(path).items()}
    assert plt, "objdump shows PLT entries for every fixture"
    ours = {table.name(i): int(table.starts[i]) for i in range(len(table)) if table.name(i).endswith("@plt")}
    assert ours == plt
    for sym, addr in plt.items():
        assert table.lookup(addr + 5) == (sym, 5)


def test_irelative_plt_slots(elf_dir: Path) -> None:
    path = elf_dir / "libshared.so"
    relocs = run("readelf", "-rW", path)
    resolvers = [int(line.split()[-1], 16) for line in relocs.splitlines() if "R_X86_64_IRELATIVE" in line]
    assert len(resolvers) == 2
    table = ElfFile(path).symbol_table()
    names = {table.name(i) for i in range(len(table))}
    dynsym = {s.name for s in readelf_symbols(path, ".dynsym")}
    assert "mix_protected" in dynsym and "mix_hidden" not in dynsym
    hidden_resolver = next(s.value for s in readelf_symbols(path, ".symtab") if s.name == "mix_hidden")
    assert {"mix_protected@plt", f"*ABS*+{hidden_resolver:#x}@plt"} <= names


def test_ibt_plt_uses_plt_sec(elf_dir: Path) -> None:
    elf = ElfFile(elf_dir / "prog_ibt")
    sec = elf.section(".plt.sec")
    assert sec is not None
    table = elf.symbol_table()
    hit = table.lookup(sec.sh_addr)
    assert hit is not None and hit[0].endswith("@plt")


def maps_of(pid: int) -> list[tuple[int, int, int, str]]:
    rows = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            rows.append((lo, hi, int(parts[2], 16), parts[5].strip() if len(parts) > 5 else ""))
    return rows


@pytest.mark.parametrize(
    ("program", "dso_name"),
    [("prog_pie", "prog_pie"), ("prog_nopie", "prog_nopie"), ("prog_uselib", "libshared.so")],
)
def test_runtime_ip_translates_to_the_symbol(elf_dir: Path, program: str, dso_name: str) -> None:
    proc = subprocess.Popen([elf_dir / program, "--addresses"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        wanted = 1 if dso_name == "libshared.so" else 3
        printed = [proc.stdout.readline().split() for _ in range(wanted)]
        maps = maps_of(proc.pid)
    finally:
        proc.communicate("")
    elf = ElfFile(elf_dir / dso_name)
    table = elf.symbol_table()
    target = str((elf_dir / dso_name).resolve())
    for sym, text in printed:
        ip = int(text, 16)
        lo, _, pgoff, _ = next(m for m in maps if m[0] <= ip < m[1] and m[3] == target)
        vaddr = elf.layout.file_offset_to_vaddr(ip - lo + pgoff)
        assert vaddr is not None
        if elf.e_type == "ET_EXEC":
            assert vaddr == ip
        assert table.lookup(vaddr) == (sym, 0)
        many, found = elf.layout.file_offsets_to_vaddrs(np.array([ip - lo + pgoff, 0xFFFF_FFFF_FF]))
        assert many.tolist()[0] == vaddr and found.tolist() == [True, False]
        dso = load_dso_symbols(elf_dir / dso_name, elf.build_id)
        assert dso.layout is not None
        vaddrs, found = dso.layout.file_offsets_to_vaddrs(np.array([ip + 2 - lo + pgoff]))
        idx, off = dso.lookup_many(vaddrs[found])
        assert dso.table.name(int(idx[0])) == sym and off.tolist() == [2]


def test_layout_packs_for_msgpack(elf_dir: Path) -> None:
    layout = ElfFile(elf_dir / "prog_pie").layout
    again = ElfLayout.from_packed(msgpack.unpackb(msgpack.packb(layout.to_packed()), raw=False))
    assert again == layout
    seg = next(s for s in layout.load_segments if s.executable)
    assert again.file_offset_to_vaddr(seg.p_offset + 7) == seg.p_vaddr + 7
    beyond = max(s.p_offset + s.p_filesz for s in layout.load_segments)
    assert again.file_offset_to_vaddr(beyond) is None


def test_symbol_table_round_trips_through_packing(elf_dir: Path) -> None:
    table = ElfFile(elf_dir / "cxx_prog").symbol_table()
    again = SymbolTable.from_packed(msgpack.unpackb(msgpack.packb(table.to_packed()), raw=False))
    probe = np.arange(int(table.starts[0]), int(table.ends.max()), 3, dtype=np.uint64)
    assert [x.tolist() for x in again.lookup_many(probe)] == [x.tolist() for x in table.lookup_many(probe)]
    assert [again.name(i) for i in range(len(again))] == [table.name(i) for i in range(len(table))]


def test_not_an_elf_file(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello, not an ELF\n")
    with pytest.raises(ElfError, match="is not an ELF file"):
        ElfFile(text)
    with pytest.raises(ElfError, match="cannot read"):
        ElfFile(tmp_path / "missing")
    with pytest.raises(ElfError):
        ElfFile(tmp_path)


@pytest.mark.parametrize("keep", [4, 20, 63, 64, 200, 0.5, 0.98])
def test_truncated_elf_raises_elf_error(elf_dir: Path, tmp_path: Path, keep: float) -> None:
    data = (elf_dir / "prog_pie").read_bytes()
    cut = tmp_path / "cut"
    cut.write_bytes(data[: int(keep if keep >= 1 else len(data) * keep)])
    with pytest.raises(ElfError, match=str(cut)):
        ElfFile(cut).symbol_table()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_elf_never_raises_anything_but_elf_error(elf_dir: Path, tmp_path: Path, data: st.DataObject) -> None:
    blob = bytearray((elf_dir / "libshared.so").read_bytes())
    shoff, shnum = int.from_bytes(blob[40:48], "little"), int.from_bytes(blob[60:62], "little")
    headers = st.one_of(st.integers(0, 63), st.integers(shoff, shoff + 64 * shnum - 1))
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.one_of(headers, st.integers(0, len(blob) - 1)))
        blob[pos] = data.draw(st.integers(0, 255))
    size = data.draw(st.integers(0, len(blob)))
    path = tmp_path / "damaged.so"
    path.write_bytes(bytes(blob[:size]) if data.draw(st.booleans()) else bytes(blob))
    try:
        elf = ElfFile(path)
        elf.symbol_table()
        _ = elf.layout.to_packed(), elf.debuglink
    except ElfError:
        pass


def test_symbol_dtypes_follow_elf_h() -> None:
    assert symbol_dtype(64, True).itemsize == 24
    assert symbol_dtype(32, False).itemsize == 16
    assert symbol_dtype(32, False)["st_value"].byteorder == ">"
    assert list(symbol_dtype(32, True).names or ()) == ["st_name", "st_value", "st_size", "st_info", "st_other",
                                                        "st_shndx"]
