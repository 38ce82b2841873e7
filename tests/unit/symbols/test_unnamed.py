"""Functions of stripped code: FDE bounds from .eh_frame, MiniDebugInfo, unnamed names.

References: binutils' ``readelf --debug-dump=frames`` lists every FDE's ``pc=start..end``;
``nm`` on the unstripped build gives the function addresses; the MiniDebugInfo fixture is
made as Fedora makes it (objcopy keeps the local function symbols, xz compresses them,
objcopy adds ``.gnu_debugdata``).
"""

from __future__ import annotations

import lzma
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.symbols.ehframe import EhFrameError, read_fde_bounds, walk_eh_frame
from profiler.symbols.elf import ElfError, ElfFile
from profiler.symbols.minidebuginfo import read_gnu_debugdata
from profiler.symbols.dso import SymbolStatus, clear_symbol_cache, load_dso_symbols
from profiler.symbols.unnamed import fde_bounds, is_unnamed, unnamed_name

pytestmark = pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils not installed")

SYSTEM_BINARIES = ["/usr/bin/xz", "/usr/bin/gzip", "/usr/lib/x86_64-linux-gnu/liblzma.so.5"]


def run(*cmd: str | Path) -> str:
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True).stdout


def readelf_fdes(path: Path) -> list[tuple[int, int]]:
    """(start, size) of every non-empty FDE in .eh_frame, as readelf prints them."""
    text = run("readelf", "--debug-dump=frames", path)
    found = [(int(a, 16), int(b, 16) - int(a, 16))
             for a, b in re.findall(r"FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", text)]
    return sorted(f for f in found if f[1] > 0)


def nm_functions(path: Path) -> dict[str, int]:
    out = {}
    for line in run("nm", "--defined-only", path).splitlines():
        addr, kind, name = line.split()
        if kind in "tT":
            out[name] = int(addr, 16)
    return out


@pytest.fixture
def elf_dir(fixtures_dir: Path) -> Path:
    return fixtures_dir / "elf"


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    clear_symbol_cache()


def binaries(elf_dir: Path) -> list[Path]:
    local = [elf_dir / n for n in ("prog_pie", "prog_nopie", "libshared.so", "prog_bid_stripped", "cxx_prog")]
    return local + [Path(p) for p in SYSTEM_BINARIES if Path(p).exists()]


def test_fde_bounds_match_readelf(elf_dir: Path) -> None:
    for path in binaries(elf_dir):
        bounds = fde_bounds(ElfFile(path))
        ours = list(zip(bounds.starts.tolist(), bounds.sizes.tolist()))
        assert ours == readelf_fdes(path), path


def test_walking_the_section_agrees_with_the_header_table(elf_dir: Path) -> None:
    for path in binaries(elf_dir):
        elf = ElfFile(path)
        eh = elf.section(".eh_frame")
        assert eh is not None and elf.section(".eh_frame_hdr") is not None
        walked = walk_eh_frame(elf.read_section(eh), eh.sh_addr)
        table = fde_bounds(elf)
        assert np.array_equal(walked.starts, table.starts) and np.array_equal(walked.sizes, table.sizes)
        assert np.array_equal(walked.offsets, table.offsets)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=64))
def test_damaged_sections_raise_one_error(eh: bytes, hdr: bytes) -> None:
    try:
        read_fde_bounds(eh, 0x1000, hdr or None, 0x800)
    except EhFrameError:
        pass


def test_truncated_header_table_is_an_error(elf_dir: Path) -> None:
    elf = ElfFile(elf_dir / "prog_pie")
    eh, hdr = elf.section(".eh_frame"), elf.section(".eh_frame_hdr")
    assert eh is not None and hdr is not None
    data = elf.read_section(hdr)
    with pytest.raises(EhFrameError):
        read_fde_bounds(elf.read_section(eh), eh.sh_addr, data[: len(data) - 5], hdr.sh_addr)


def test_stripped_functions_get_unnamed_names_at_their_nm_address(elf_dir: Path) -> None:
    functions = nm_functions(elf_dir / "prog_bid")
    dso = load_dso_symbols(elf_dir / "prog_bid_stripped", None, [])
    fdes = dict(readelf_fdes(elf_dir / "prog_bid_stripped"))
    checked = 0
    for name, start in functions.items():
        if start not in fdes:
            continue  # no unwind info of its own (assembler labels, aliases)
        got = dso.lookup(start + fdes[start] - 1)
        assert got is not None
        if got[0] == name:  # still in .dynsym
            continue
        assert got == (unnamed_name("prog_bid_stripped", start), fdes[start] - 1)
        assert is_unnamed(got[0], "prog_bid_stripped")
        checked += 1
    assert checked >= 2  # local_sum, leaf_add, main ...


def test_real_symbols_win_over_fde_ranges(elf_dir: Path) -> None:
    dso = load_dso_symbols(elf_dir / "prog_pie", None, [])
    for name, start in nm_functions(elf_dir / "prog_pie").items():
        hit = dso.lookup(start)
        assert hit is not None and not is_unnamed(hit[0], "prog_pie"), name


def test_is_unnamed_needs_the_dso_name_and_a_hex_start() -> None:
    assert is_unnamed("liblzma.so.5+0x15b40", "liblzma.so.5")
    assert not is_unnamed("liblzma.so.5+0x15b40", "libc.so.6")
    assert not is_unnamed("lzma_code", "liblzma.so.5")
    assert not is_unnamed("liblzma.so.5+0x15b40+1", "liblzma.so.5")
    assert not is_unnamed(None, "liblzma.so.5")


def make_minidebuginfo(elf_dir: Path, out: Path) -> Path:
    """The Fedora recipe: keep the function symbols .dynsym lacks, xz them, add .gnu_debugdata."""
    full = elf_dir / "prog_bid"
    dynamic = set(run("nm", "-D", "--defined-only", "--format=posix", full).split("\n"))
    dyn_names = {line.split()[0] for line in dynamic if line}
    keep = sorted(n for n, _ in nm_functions(full).items() if n not in dyn_names)
    (out / "keep").write_text("\n".join(keep) + "\n")
    run("objcopy", "--only-keep-debug", full, out / "mini.debug")
    run("objcopy", "-S", "--remove-section", ".comment", f"--keep-symbols={out / 'keep'}",
        out / "mini.debug", out / "mini")
    (out / "mini.xz").write_bytes(lzma.compress((out / "mini").read_bytes(), format=lzma.FORMAT_XZ))
    target = out / "prog_mini"
    run("strip", "--strip-all", "-o", target, full)
    run("objcopy", "--add-section", f".gnu_debugdata={out / 'mini.xz'}", target)
    return target


def test_minidebuginfo_names_local_functions(elf_dir: Path, tmp_path: Path) -> None:
    target = make_minidebuginfo(elf_dir, tmp_path)
    functions = nm_functions(elf_dir / "prog_bid")
    mini = read_gnu_debugdata(ElfFile(target))
    assert mini is not None and mini.has_symtab
    dso = load_dso_symbols(target, None, [])
    assert dso.status is SymbolStatus.OK and ".gnu_debugdata" in dso.source
    for name in ("local_sum", "leaf_add", "main"):
        assert dso.lookup(functions[name] + 1) == (name, 1), name


def test_damaged_minidebuginfo_is_one_error(elf_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "junk.xz").write_bytes(lzma.compress(b"not an ELF file", format=lzma.FORMAT_XZ)[:-8])
    target = tmp_path / "prog_bad"
    run("strip", "--strip-all", "-o", target, elf_dir / "prog_bid")
    run("objcopy", "--add-section", f".gnu_debugdata={tmp_path / 'junk.xz'}", target)
    with pytest.raises(ElfError):
        read_gnu_debugdata(ElfFile(target))
    dso = load_dso_symbols(target, None, [])  # still loads: .dynsym and .eh_frame
    assert dso.status is SymbolStatus.OK and ".gnu_debugdata" not in dso.source


def test_oversized_minidebuginfo_is_refused(elf_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "big.xz").write_bytes(lzma.compress(bytes(4 << 20), format=lzma.FORMAT_XZ))
    target = tmp_path / "prog_big"
    run("strip", "--strip-all", "-o", target, elf_dir / "prog_bid")
    run("objcopy", "--add-section", f".gnu_debugdata={tmp_path / 'big.xz'}", target)
    with pytest.raises(ElfError, match="more than 1 MB"):
        read_gnu_debugdata(ElfFile(target), max_size=1 << 20)
