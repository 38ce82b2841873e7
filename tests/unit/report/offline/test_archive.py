"""profiler archive: packed symbols, idempotence, safety on failure, stripped copies."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from profiler.errors import ProfilerError, UsageError
from profiler.format import records as R
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter
from profiler.report.offline.archive import archive_capture, subset_table
from profiler.symbols.elf import ElfFile
from profiler.report.capture import metadata_of
from profiler.symbols.sources import MISMATCH, PACKED, SymbolSources
from profiler.symbols.dso import clear_symbol_cache
from profiler.symbols.table import SymbolTable

from tests.support.offline_factory import BASE, runtime_ip, write_capture

STACKS = [["leaf_add", "local_sum", "main"], ["local_sum", "main"], ["main"], ["leaf_add", "local_sum", "main"]]


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_symbol_cache()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sampled_ips(elf: ElfFile, names: list[str]) -> dict[str, int]:
    """Each name's sampled ip (read while the binary still exists)."""
    return {name: runtime_ip(elf, name) for name in names}


def resolve_names(capture: Path, binary_path: str, build_id: str | None, ips: dict[str, int],
                  **kw: Any) -> list[str | None]:
    """Resolve each sampled ip through the capture's sources, as the reporter does."""
    with CaptureReader.open(capture) as reader:
        sources = SymbolSources(metadata_of(reader), **kw)
    syms, _ = sources.for_dso(binary_path, build_id)
    out: list[str | None] = []
    for ip in ips.values():
        if not syms.ok:
            out.append(None)
            continue
        assert syms.layout is not None
        vaddr = syms.layout.file_offset_to_vaddr(ip - BASE)
        hit = None if vaddr is None else syms.lookup(vaddr)
        out.append(None if hit is None else hit[0])
    return out


@pytest.fixture
def setup(fixtures_dir: Path, tmp_path: Path) -> tuple[Path, Path, ElfFile]:
    binary = tmp_path / "bin" / "prog"
    binary.parent.mkdir()
    shutil.copy(fixtures_dir / "elf" / "prog_pie", binary)
    capture = tmp_path / "c.prof"
    write_capture(capture, binary, STACKS)
    return capture, binary, ElfFile(binary)


def test_archive_then_delete_binary(setup: tuple[Path, Path, ElfFile], tmp_path: Path) -> None:
    capture, binary, elf = setup
    wanted = ["leaf_add", "local_sum", "main"]
    ips = sampled_ips(elf, wanted)
    assert resolve_names(capture, str(binary), elf.build_id, ips, debug_dirs=()) == wanted
    result = archive_capture(capture, debug_dirs=())
    kinds = sorted(p.kind for p in result.packed)
    assert kinds == ["elf", "kernel"] and result.written and result.bytes_added > 0
    elf_entry = next(p for p in result.packed if p.kind == "elf")
    assert elf_entry.coverage == "sampled" and elf_entry.symbols == 3  # only the sampled symbols
    binary.unlink()
    assert resolve_names(capture, str(binary), elf.build_id, ips, symfs=tmp_path / "empty", debug_dirs=()) == wanted
    with CaptureReader.open(capture) as reader:
        assert reader.clean_end
        ks, label, _ = SymbolSources(metadata_of(reader)).kernel()
    assert label == PACKED and ks is not None
    assert ks.lookup(0xFFFF_FFFF_8101_0104) == ("[mymod]", "m_eps", 4)


def test_rerun_is_harmless(setup: tuple[Path, Path, ElfFile]) -> None:
    capture, _, _ = setup
    first = archive_capture(capture, debug_dirs=())
    before = digest(capture)
    again = archive_capture(capture, debug_dirs=())
    assert not again.written and not again.packed and len(again.already) == len(first.packed)
    assert digest(capture) == before


def test_not_found_is_reported(setup: tuple[Path, Path, ElfFile]) -> None:
    capture, binary, _ = setup
    binary.unlink()
    result = archive_capture(capture, debug_dirs=())
    assert [p for p, _ in result.not_found] == [str(binary)]
    assert [p.kind for p in result.packed] == ["kernel"]


def test_failure_half_way_leaves_capture_unchanged(setup: tuple[Path, Path, ElfFile],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    capture, _, _ = setup
    before = digest(capture)
    calls: list[str] = []
    original = CaptureWriter.write_meta

    def explode(self: CaptureWriter, kind: str, payload: dict[str, Any]) -> None:
        calls.append(kind)
        if len(calls) == 2:
            raise ProfilerError("simulated failure")
        original(self, kind, payload)

    monkeypatch.setattr(CaptureWriter, "write_meta", explode)
    with pytest.raises(ProfilerError, match="simulated"):
        archive_capture(capture, debug_dirs=())
    assert digest(capture) == before
    assert sorted(p.name for p in capture.parent.iterdir()) == ["bin", "c.prof"]  # no temp file left


def test_big_endian_capture_is_read_from_its_header(fixtures_dir: Path, tmp_path: Path) -> None:
    binary = tmp_path / "prog"
    shutil.copy(fixtures_dir / "elf" / "prog_pie", binary)
    capture = tmp_path / "be.prof"
    write_capture(capture, binary, STACKS, byte_order="big")
    result = archive_capture(capture, debug_dirs=())
    assert sorted(p.kind for p in result.packed) == ["elf", "kernel"]
    elf = ElfFile(binary)
    names = ["leaf_add", "local_sum", "main"]
    ips = sampled_ips(elf, names)
    binary.unlink()
    assert resolve_names(capture, str(binary), elf.build_id, ips, debug_dirs=()) == names


def test_mismatch_without_archive_names_nothing(setup: tuple[Path, Path, ElfFile], fixtures_dir: Path) -> None:
    capture, binary, elf = setup
    ips = sampled_ips(elf, ["main"])
    archived = capture.with_name("archived.prof")
    archive_capture(capture, output=archived, debug_dirs=())
    shutil.copy(fixtures_dir / "elf" / "prog_nopie", binary)  # another build at the same path
    clear_symbol_cache()
    with CaptureReader.open(capture) as reader:
        sources = SymbolSources(metadata_of(reader), debug_dirs=())
    syms, label = sources.for_dso(str(binary), elf.build_id)
    assert label == MISMATCH and not syms.ok and len(sources.warnings) == 1
    assert resolve_names(archived, str(binary), elf.build_id, ips, debug_dirs=()) == ["main"]


def test_strip_paths_copy(fixtures_dir: Path, tmp_path: Path) -> None:
    binary = tmp_path / "secret" / "dir" / "prog"
    binary.parent.mkdir(parents=True)
    shutil.copy(fixtures_dir / "elf" / "prog_pie", binary)
    capture = tmp_path / "c.prof"
    write_capture(capture, binary, STACKS, cmdline=["/usr/local/bin/profiler", "record", "-o",
                                                    "/home/me/out.prof", "--", str(binary), "--in=/home/me/x"])
    before = digest(capture)
    shared = tmp_path / "share.prof"
    result = archive_capture(capture, output=shared, strip_paths=True, debug_dirs=())
    assert digest(capture) == before and result.stripped
    raw = shared.read_bytes()
    assert b"/secret/" not in raw and str(tmp_path).encode() not in raw
    with CaptureReader.open(shared) as reader:
        assert reader.header["cmdline"] == ["profiler", "record", "-o", "out.prof", "--", "prog", "--in=x"]
        assert reader.header["target"]["command"] == reader.header["cmdline"]
        mmaps = [r for r in reader.iter_records() if isinstance(r, (R.Mmap, R.Mmap2))]
        assert sorted(r.filename for r in mmaps) == ["[kernel.kallsyms]_text", "prog"]
        assert all(r.sample_id is not None and r.sample_id.pid in (100, 0xFFFFFFFF) for r in mmaps)
        entries = reader.metadata("buildids")[0]["entries"]
        assert [e["path"] for e in entries] == ["prog"]
        assert {m["path"] for m in reader.metadata("symbols")} == {"prog", "[kernel.kallsyms]"}
    elf = ElfFile(binary)
    ips = sampled_ips(elf, ["leaf_add", "main"])
    binary.unlink()
    assert resolve_names(shared, "prog", elf.build_id, ips, debug_dirs=()) == ["leaf_add", "main"]


def test_strip_paths_needs_an_output(setup: tuple[Path, Path, ElfFile]) -> None:
    from profiler.commands.archive import command

    capture, _, _ = setup
    result = CliRunner().invoke(command, ["-i", str(capture), "--strip-paths"])
    assert isinstance(result.exception, UsageError) and result.exception.exit_code == 2
    assert "-o OUT" in str(result.exception)


def test_subset_falls_back_to_full_table_when_it_would_differ() -> None:
    # an outer function [0x100, 0x400) and a nested sized one [0x200, 0x280):
    # 0x300 belongs to the outer one; a subset holding only the inner one would lose it
    table = SymbolTable.from_symbols([0x100, 0x200], [0x300, 0x80], ["outer", "inner"])
    packed, coverage, count = subset_table(table, np.array([0x210, 0x300], np.uint64), False)
    small = SymbolTable.from_packed(packed)
    assert small.lookup(0x300) == ("outer", 0x200) and small.lookup(0x210) == ("inner", 0x10)
    _, coverage_one, count_one = subset_table(table, np.array([0x210], np.uint64), False)
    assert (coverage_one, count_one) == ("sampled", 1)


def test_no_write_permission_is_one_sentence(setup: tuple[Path, Path, ElfFile],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    capture, _, _ = setup
    before = digest(capture)

    def denied(path: Any, flags: int, *args: Any) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(ProfilerError, match="Permission denied.*left unchanged"):
        archive_capture(capture)
    monkeypatch.undo()
    assert digest(capture) == before


def test_missing_capture() -> None:
    with pytest.raises(ProfilerError, match="no such file"):
        archive_capture("/nonexistent/c.prof")
