"""Source lines and inline chains (symbolic's SymCache) against binutils' addr2line -f -i.

fixtures/workloads/inline has functions GCC must inline (mix, fold, step) into drive; for
every instruction of drive the inline chain (functions and file:line, innermost first) must
be what ``addr2line -f -i`` prints, for the PIE build and the non-PIE one (image base
0x400000). Packed tables (what ``profiler archive`` stores) answer the same.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from profiler.errors import FormatError
from profiler.symbols.srcline import LineTable, SourceFrame, clear_line_tables, load_line_table
from profiler.report.offline.strip import strip_meta

pytestmark = pytest.mark.skipif(shutil.which("addr2line") is None, reason="binutils not installed")


def run(*cmd: str | Path) -> str:
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True).stdout


def instructions(binary: Path, function: str) -> list[int]:
    text = run("objdump", "-d", "--no-show-raw-insn", binary)
    body = text.split(f"<{function}>:\n", 1)[1].split("\n\n", 1)[0]
    return [int(m.group(1), 16) for m in re.finditer(r"^\s*([0-9a-f]+):", body, re.M)]


def addr2line_chains(binary: Path, addrs: list[int]) -> dict[int, list[tuple[str, str]]]:
    """addr -> [(function, base:line)] innermost first, from one addr2line -a -f -i run."""
    out = run("addr2line", "-a", "-f", "-i", "-e", binary, *[hex(a) for a in addrs])
    chains: dict[int, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    lines = out.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("0x"):
            current = chains.setdefault(int(lines[i], 16), [])
            i += 1
            continue
        func, where = lines[i], lines[i + 1].split(" (discriminator")[0]
        current.append((func, where.rsplit("/", 1)[-1]))
        i += 2
    return chains


@pytest.fixture(autouse=True)
def _fresh() -> None:
    clear_line_tables()


@pytest.mark.parametrize("name", ["inline", "inline_nopie"])
def test_inline_chains_match_addr2line(fixtures_dir: Path, tmp_path: Path, name: str) -> None:
    binary = fixtures_dir / "workloads" / name
    addrs = instructions(binary, "drive")
    assert len(addrs) > 20
    table = load_line_table(binary, None, tmp_path)
    assert table is not None
    expected = addr2line_chains(binary, addrs)
    for a in addrs:
        ours = [(f.function, f.srcline) for f in table.lookup(a)]
        assert ours == expected[a], hex(a)
    functions = {f.function for a in addrs for f in table.lookup(a)}
    assert {"mix", "fold", "step", "drive"} <= functions


def test_symcache_is_kept_on_disk_by_build_id(fixtures_dir: Path, tmp_path: Path) -> None:
    binary = fixtures_dir / "workloads" / "inline"
    first = load_line_table(binary, "ab" * 20, tmp_path)
    stored = tmp_path / "symcache" / f"{'ab' * 20}.symc"
    assert first is not None and stored.is_file()
    clear_line_tables()
    addr = instructions(binary, "drive")[10]
    again = load_line_table(binary, "ab" * 20, tmp_path)
    assert again is not None and again.lookup(addr) == first.lookup(addr)


def test_no_dwarf_no_table(fixtures_dir: Path, tmp_path: Path) -> None:
    assert load_line_table(fixtures_dir / "elf" / "prog_bid_stripped", None, tmp_path) is None


def test_packed_table_answers_the_same(fixtures_dir: Path, tmp_path: Path) -> None:
    binary = fixtures_dir / "workloads" / "inline"
    addrs = instructions(binary, "drive")
    table = load_line_table(binary, None, tmp_path)
    assert table is not None
    packed = LineTable.from_packed(table.to_packed(addrs[:10]))
    for a in addrs[:10]:
        assert packed.lookup(a) == table.lookup(a)
    assert packed.lookup(addrs[11]) == ()  # not packed: not sampled


def test_damaged_packed_table_is_a_format_error() -> None:
    good = LineTable(None, 0, {0x10: (SourceFrame("f", "/src/a.c", 3),)}).to_packed([0x10])
    for broken in ({**good, "start": b"\0"}, {**good, "version": 9}, {k: v for k, v in good.items() if k != "files"},
                   {**good, "entries": b"\xff" * 12}):
        with pytest.raises(FormatError):
            LineTable.from_packed(broken)


def test_strip_paths_keeps_base_names_of_source_files() -> None:
    lines = LineTable(None, 0, {0x10: (SourceFrame("operator/", "/home/me/src/a.c", 3),)}).to_packed([0x10])
    out = strip_meta("symbols", {"kind": "elf", "path": "/home/me/bin/app", "lines": lines})
    assert out["lines"]["files"] == ["a.c"] and out["lines"]["functions"] == ["operator/"]
    assert LineTable.from_packed(out["lines"]).lookup(0x10)[0].srcline == "a.c:3"
