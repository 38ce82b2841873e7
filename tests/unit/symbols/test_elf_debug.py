"""Separate debug files (build-id and .gnu_debuglink) and load_dso_symbols statuses.

Expected values come from binutils run in the test: readelf's build-id note and its
``--debug-dump=links`` view of ``.gnu_debuglink``, nm on the debug file, objdump's PLT.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest

from profiler.symbols.debugfile import build_id_path, find_debug_file
from profiler.symbols.elf import ElfFile
from profiler.symbols.dso import (
    SymbolStatus,
    build_ids_match,
    clear_symbol_cache,
    load_dso_symbols,
)

pytestmark = pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils not installed")


def run(*cmd: str | Path) -> str:
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True).stdout


def build_id_of(path: Path) -> str:
    m = re.search(r"Build ID: ([0-9a-f]+)", run("readelf", "-n", path))
    assert m is not None
    return m.group(1)


def nm_functions(path: Path) -> dict[str, int]:
    found = {}
    for line in run("nm", "--defined-only", path).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            found[parts[2]] = int(parts[0], 16)
    return found


def objdump_plt(path: Path) -> dict[str, int]:
    lines = run("objdump", "-d", path).splitlines()
    return {m.group(2): int(m.group(1), 16) for m in (re.match(r"([0-9a-f]+) <(\S+@plt)>:", x) for x in lines) if m}


@pytest.fixture(scope="module")
def elf_dir(fixtures_dir: Path) -> Path:
    return fixtures_dir / "elf"


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    clear_symbol_cache()


def test_debug_file_found_by_build_id(elf_dir: Path, tmp_path: Path) -> None:
    stripped = elf_dir / "prog_bid_stripped"
    bid = build_id_of(stripped)
    expected = elf_dir / "debug" / ".build-id" / bid[:2] / f"{bid[2:]}.debug"
    assert expected.is_file() and build_id_path(elf_dir / "debug", bid) == expected
    assert find_debug_file(ElfFile(stripped), [tmp_path, elf_dir / "debug"]) == expected
    assert find_debug_file(ElfFile(stripped), [tmp_path]) is None


def test_build_id_candidate_with_another_build_id_is_refused(elf_dir: Path, tmp_path: Path) -> None:
    stripped = elf_dir / "prog_bid_stripped"
    fake = build_id_path(tmp_path, build_id_of(stripped))
    fake.parent.mkdir(parents=True)
    shutil.copy(elf_dir / "prog_pie", fake)
    assert find_debug_file(ElfFile(stripped), [tmp_path]) is None


def test_symbols_come_from_the_build_id_debug_file(elf_dir: Path) -> None:
    stripped = elf_dir / "prog_bid_stripped"
    bid = build_id_of(stripped)
    debug = build_id_path(elf_dir / "debug", bid)
    functions = nm_functions(debug)
    assert "local_sum" in functions and "no symbols" in subprocess.run(["nm", stripped], capture_output=True,
                                                                       text=True).stderr
    dso = load_dso_symbols(stripped, bid, [elf_dir / "debug"])
    assert dso.status is SymbolStatus.OK and dso.source == "debug file" and dso.debug_file == debug
    for name in ("local_sum", "leaf_add", "main", "zero_size_label"):
        assert dso.lookup(functions[name] + 1) == (name, 1)
    for name, addr in objdump_plt(stripped).items():
        assert dso.lookup(addr) == (name, 0)
    assert dso.layout is not None and dso.layout.load_segments == ElfFile(stripped).load_segments


def test_without_debug_file_only_dynamic_symbols_remain(elf_dir: Path, tmp_path: Path) -> None:
    stripped = elf_dir / "prog_bid_stripped"
    functions = nm_functions(build_id_path(elf_dir / "debug", build_id_of(stripped)))
    dso = load_dso_symbols(stripped, None, [tmp_path])
    assert dso.status is SymbolStatus.OK and dso.source == ".dynsym+.eh_frame" and dso.debug_file is None
    # local_sum has no symbol left, but its FDE gives its bounds: an unnamed function at
    # the address nm reads from the debug file.
    start = functions["local_sum"]
    assert dso.lookup(start + 1) == (f"prog_bid_stripped+{start:#x}", 1)
    off = load_dso_symbols(stripped, None, [elf_dir / "debug"], search_debug_files=False)
    assert off.debug_file is None


def debuglink_of(path: Path) -> tuple[str, int]:
    text = run("readelf", "--debug-dump=links", path)
    name = re.search(r"Separate debug info file: (\S+)", text)
    crc = re.search(r"CRC value: 0x([0-9a-f]+)", text)
    assert name is not None and crc is not None
    return name.group(1), int(crc.group(1), 16)


def test_debuglink_name_and_crc_match_readelf(elf_dir: Path) -> None:
    stripped = elf_dir / "prog_link_stripped"
    name, crc = debuglink_of(stripped)
    assert ElfFile(stripped).debuglink == (name, crc)
    assert zlib.crc32((elf_dir / ".debug" / name).read_bytes()) == crc
    assert ElfFile(elf_dir / "prog_pie").debuglink is None


def test_debug_file_found_by_debuglink_in_dot_debug(elf_dir: Path, tmp_path: Path) -> None:
    stripped = elf_dir / "prog_link_stripped"
    dso = load_dso_symbols(stripped, build_id_of(stripped), [tmp_path])
    assert dso.status is SymbolStatus.OK and dso.debug_file == elf_dir / ".debug" / "prog_link.debug"
    functions = nm_functions(elf_dir / ".debug" / "prog_link.debug")
    assert dso.lookup(functions["local_sum"] + 2) == ("local_sum", 2)


@pytest.mark.parametrize("layout", ["same-dir", "debug-dir"])
def test_debuglink_other_locations(elf_dir: Path, tmp_path: Path, layout: str) -> None:
    bindir, debug_root = tmp_path / "bin", tmp_path / "debugroot"
    bindir.mkdir()
    binary = bindir / "prog"
    shutil.copy(elf_dir / "prog_link_stripped", binary)
    name, _ = debuglink_of(binary)
    where = bindir if layout == "same-dir" else debug_root / str(bindir.resolve()).lstrip(os.sep)
    where.mkdir(parents=True, exist_ok=True)
    shutil.copy(elf_dir / ".debug" / name, where / name)
    assert find_debug_file(ElfFile(binary), [debug_root]) == where / name


def test_debuglink_with_wrong_crc_is_refused(elf_dir: Path, tmp_path: Path) -> None:
    binary = tmp_path / "prog"
    shutil.copy(elf_dir / "prog_link_stripped", binary)
    name, _ = debuglink_of(binary)
    shutil.copy(elf_dir / "prog_pie", tmp_path / name)
    assert find_debug_file(ElfFile(binary), []) is None
    dso = load_dso_symbols(binary, None, [])
    assert dso.status is SymbolStatus.OK and dso.source.startswith(".dynsym")


def test_build_id_mismatch_gives_no_symbols(elf_dir: Path) -> None:
    path = elf_dir / "prog_pie"
    real = build_id_of(path)
    other = build_id_of(elf_dir / "prog_nopie")
    dso = load_dso_symbols(path, other)
    assert dso.status is SymbolStatus.BUILD_ID_MISMATCH and len(dso.table) == 0
    assert real in dso.message and other in dso.message and dso.build_id == real
    assert load_dso_symbols(path, real.upper()).ok
    assert load_dso_symbols(path, bytes.fromhex(real)).ok
    assert load_dso_symbols(path, None).ok


def test_kernel_zero_padding_is_not_a_mismatch() -> None:
    assert build_ids_match("abcd", "abcd000000")
    assert not build_ids_match("abcd", "abce000000")
    assert not build_ids_match(None, "abcd")
    assert build_ids_match(None, None)


def test_statuses_for_bad_files(elf_dir: Path, tmp_path: Path) -> None:
    text = tmp_path / "script.sh"
    text.write_text("#!/bin/sh\n")
    cut = tmp_path / "cut.so"
    cut.write_bytes((elf_dir / "libshared.so").read_bytes()[:3000])
    cases = {text: SymbolStatus.NOT_ELF, cut: SymbolStatus.NOT_ELF, tmp_path / "gone": SymbolStatus.MISSING}
    for path, status in cases.items():
        dso = load_dso_symbols(path)
        assert dso.status is status and len(dso.table) == 0 and str(path) in dso.message
        assert dso.lookup(0x1000) is None


def test_results_are_cached_until_the_file_changes(elf_dir: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lib.so"
    shutil.copy(elf_dir / "libshared.so", lib)
    first = load_dso_symbols(lib)
    assert load_dso_symbols(lib) is first
    shutil.copy(elf_dir / "prog_pie", lib)
    os.utime(lib, ns=(1, 1))
    assert load_dso_symbols(lib) is not first
