"""The disassembly behind ``profiler annotate``: capstone against binutils' objdump."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from profiler.report.annotate import _code, _disassemble
from profiler.symbols.elf import ElfFile

pytestmark = pytest.mark.skipif(shutil.which("objdump") is None, reason="binutils not installed")


def objdump(binary: Path, function: str) -> list[tuple[int, str]]:
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(binary)], capture_output=True,
                          text=True, check=True).stdout
    body = text.split(f"<{function}>:\n", 1)[1].split("\n\n", 1)[0]
    return [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"^\s*([0-9a-f]+):\s+(\S+)", body, re.M)]


@pytest.mark.parametrize("name,function", [("workloads/inline", "drive"), ("workloads/inline_nopie", "drive"),
                                           ("workloads/shares", "work_a"), ("elf/cxx_prog", "main")])
def test_instructions_are_objdumps(fixtures_dir: Path, name: str, function: str) -> None:
    binary = fixtures_dir / name
    table = ElfFile(binary).symbol_table()
    idx = next(i for i in range(len(table)) if table.name(i) == function)
    start, end = int(table.starts[idx]), int(table.ends[idx])
    code, machine = _code(str(binary), ElfFile(binary).build_id, start, end, None)
    ours = _disassemble(code, start, machine)
    theirs = [(a, m) for a, m in objdump(binary, function) if a < end]  # objdump adds the padding after it
    assert [a for a, _, _ in ours] == [a for a, _ in theirs]
    # AT&T mnemonics: capstone adds the operand-size suffix objdump leaves out when implied
    for (_, mine, _), (_, ref) in zip(ours, theirs):
        assert mine == ref or mine.rstrip("bwlq") == ref or mine == ref.rstrip("bwlq") or mine.startswith(ref)


def test_wrong_build_id_gives_no_code(fixtures_dir: Path) -> None:
    from profiler.errors import ReportError

    with pytest.raises(ReportError, match="not on this machine"):
        _code(str(fixtures_dir / "workloads" / "inline"), "ab" * 20, 0x1000, 0x1010, None)
