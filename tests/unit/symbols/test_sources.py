"""The symbol-source chain: packed → symfs → debug-dir → local (build-id match) → missing."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from profiler.report.offline.archive import archive_capture
from profiler.symbols.elf import ElfFile
from profiler.symbols.elfheaders import ElfLayout, LoadSegment
from profiler.report.capture import metadata_of
from profiler.symbols.sources import (
    DEBUG_DIR,
    KALLSYMS_FILE,
    LOCAL,
    MISMATCH,
    MISSING,
    PACKED,
    SYMFS,
    SymbolSources,
    rebuilt_layout,
)
from profiler.symbols.dso import clear_symbol_cache
from profiler.format.container.reader import CaptureReader

from tests.support.offline_factory import KALLSYMS, write_capture


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_symbol_cache()


def names_at(syms_layout: ElfLayout | None, table: object, elf: ElfFile, names: list[str]) -> list[str | None]:
    """Resolve the start (+4) of each named symbol of ``elf`` through a source's layout and table."""
    out: list[str | None] = []
    full = elf.symbol_table()
    starts = {full.name(i): int(full.starts[i]) for i in range(len(full))}
    for name in names:
        vaddr = starts[name] + 4
        offset = next(vaddr - s.p_vaddr + s.p_offset for s in elf.load_segments
                      if s.p_vaddr <= vaddr < s.p_vaddr + s.p_filesz)
        assert syms_layout is not None
        v = syms_layout.file_offset_to_vaddr(offset)
        hit = None if v is None else table.lookup(v)  # type: ignore[attr-defined]
        out.append(None if hit is None else hit[0])
    return out


def test_local_file_used_only_when_build_id_matches(fixtures_dir: Path) -> None:
    binary = fixtures_dir / "elf" / "prog_pie"
    bid = ElfFile(binary).build_id
    sources = SymbolSources(None, debug_dirs=())
    syms, label = sources.for_dso(str(binary), bid)
    assert (label, syms.ok) == (LOCAL, True)
    assert syms.lookup(int(syms.table.starts[0])) is not None

    other = SymbolSources(None, debug_dirs=())
    wrong = "00" * 19 + "01"
    syms, label = other.for_dso(str(binary), wrong)
    assert label == MISMATCH and not syms.ok and len(syms.table) == 0 and syms.layout is None
    assert len(other.warnings) == 1 and str(binary) in other.warnings[0] and wrong in other.warnings[0]
    other.for_dso(str(binary), wrong)  # cached: no second warning
    assert len(other.warnings) == 1


def test_missing_file(tmp_path: Path) -> None:
    syms, label = SymbolSources(None, debug_dirs=()).for_dso(str(tmp_path / "gone"), "ab" * 20)
    assert label == MISSING and not syms.ok


def test_symfs_before_local(fixtures_dir: Path, tmp_path: Path) -> None:
    binary = fixtures_dir / "elf" / "prog_pie"
    root = tmp_path / "sysroot"
    recorded = "/opt/app/bin/prog"  # does not exist on this machine
    (root / "opt/app/bin").mkdir(parents=True)
    shutil.copy(binary, root / "opt/app/bin/prog")
    bid = ElfFile(binary).build_id
    syms, label = SymbolSources(None, symfs=root, debug_dirs=()).for_dso(recorded, bid)
    assert label == SYMFS and syms.ok
    # a sysroot holding another build is a mismatch, not a match
    shutil.copy(fixtures_dir / "elf" / "prog_nopie", root / "opt/app/bin/prog")
    clear_symbol_cache()
    syms, label = SymbolSources(None, symfs=root, debug_dirs=()).for_dso(recorded, bid)
    assert label == MISMATCH and not syms.ok


def test_debug_dir_by_build_id_with_and_without_the_runtime_file(fixtures_dir: Path, tmp_path: Path) -> None:
    elf_dir = fixtures_dir / "elf"
    stripped = ElfFile(elf_dir / "prog_bid_stripped")
    reference = ElfFile(elf_dir / "prog_bid")  # the unstripped build the debug file came from
    wanted = ["leaf_add", "local_sum", "main"]
    sources = SymbolSources(None, debug_dirs=[str(elf_dir / "debug")])
    syms, label = sources.for_dso(str(stripped.path), stripped.build_id)
    assert label == DEBUG_DIR and syms.ok
    assert names_at(syms.layout, syms.table, reference, wanted) == wanted
    # the runtime file gone (another machine): the debug file's zeroed segments are rebuilt
    gone = str(tmp_path / "prog_bid_stripped")
    syms, label = SymbolSources(None, debug_dirs=[str(elf_dir / "debug")]).for_dso(gone, stripped.build_id)
    assert label == DEBUG_DIR and syms.ok
    assert names_at(syms.layout, syms.table, reference, wanted) == wanted


def test_a_debug_file_from_the_debug_dir_keeps_the_runtime_files_plt_names(fixtures_dir: Path) -> None:
    """The debug file's .plt holds no bytes: with the runtime file present, its stubs are
    still ``name@plt`` (a libc page fault on ``__tunable_get_val@plt`` came out unnamed)."""
    from tests.unit.symbols.test_elf_debug import objdump_plt

    stripped = ElfFile(fixtures_dir / "elf" / "prog_bid_stripped")
    plt = objdump_plt(stripped.path)
    assert plt
    syms, label = SymbolSources(None, debug_dirs=[str(fixtures_dir / "elf" / "debug")]).for_dso(
        str(stripped.path), stripped.build_id)
    assert label == DEBUG_DIR and syms.ok
    assert [syms.table.lookup(a) for a in plt.values()] == [(name, 0) for name in plt]  # objdump: addresses
    main = ElfFile(fixtures_dir / "elf" / "prog_bid").symbol_table()
    assert any(syms.table.lookup(int(main.starts[i])) == (main.name(i), 0) for i in range(len(main)))


def test_rebuilt_layout_keeps_real_segments() -> None:
    real = ElfLayout("ab", "ET_DYN", "EM_X86_64", (LoadSegment(0x1000, 0x1000, 0x200, 0x200, 5),))
    assert rebuilt_layout(real) is real
    zeroed = ElfLayout("ab", "ET_EXEC", "EM_X86_64", (LoadSegment(0x400000, 0, 0, 0x500, 4),
                                                      LoadSegment(0x401000, 0, 0, 0x300, 5)))
    rebuilt = rebuilt_layout(zeroed)
    assert rebuilt.file_offset_to_vaddr(0x1010) == 0x401010


def test_packed_beats_every_other_source(fixtures_dir: Path, tmp_path: Path) -> None:
    binary = tmp_path / "prog"
    shutil.copy(fixtures_dir / "elf" / "prog_pie", binary)
    capture = tmp_path / "c.prof"
    write_capture(capture, binary, [["leaf_add", "local_sum", "main"]])
    archive_capture(capture, debug_dirs=())
    with CaptureReader.open(capture) as reader:
        sources = SymbolSources(metadata_of(reader), debug_dirs=())
    syms, label = sources.for_dso(str(binary), ElfFile(binary).build_id)
    assert label == PACKED and syms.ok
    ks, klabel, _ = sources.kernel()
    assert klabel == PACKED and ks is not None and ks.lookup(0xFFFF_FFFF_8100_0208)[1] == "k_beta"  # type: ignore[index]


def test_kallsyms_override_and_hidden_snapshot(tmp_path: Path) -> None:
    override = tmp_path / "kallsyms"
    override.write_text(KALLSYMS.replace("k_beta", "k_renamed"))
    hidden: dict[str, list[dict[str, Any]]] = {"kallsyms": [{"text": "0000000000000000 T _stext\n", "hidden": True,
                                                             "kptr_restrict": 2}],
              "kernel": [{"build_id": "ef" * 20}]}
    ks, label, _ = SymbolSources(hidden, kallsyms_path=override).kernel()
    assert label == KALLSYMS_FILE and ks is not None
    assert ks.lookup(0xFFFF_FFFF_8100_0208)[1] == "k_renamed"  # type: ignore[index]
    ks, label, note = SymbolSources(hidden).kernel()
    # the running kernel is not the recorded one (build-id ef...): never its symbols
    assert ks is None and label in (MISMATCH, MISSING) and "hidden" in note


def test_jit_map_packed_or_local(tmp_path: Path) -> None:
    (tmp_path / "perf-42.map").write_text("1000 100 jitted_fn\n")
    table, label = SymbolSources(None, perf_map_dir=tmp_path).jit(42)
    assert label == LOCAL and table is not None and table.lookup(0x1010) == ("jitted_fn", 0x10)
    assert SymbolSources(None, perf_map_dir=tmp_path).jit(43) == (None, MISSING)


def test_a_recorded_path_never_leaves_symfs(fixtures_dir: Path, tmp_path: Path) -> None:
    """``/../outside/prog`` and a symlink pointing out of the sysroot name files outside
    ``--symfs``: they are not read (the symbols stay missing), even with the right build-id."""
    binary = fixtures_dir / "elf" / "prog_pie"
    bid = ElfFile(binary).build_id
    root = tmp_path / "sysroot"
    (root / "opt").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    shutil.copy(binary, tmp_path / "outside" / "prog")
    (root / "opt" / "link").symlink_to(tmp_path / "outside" / "prog")
    for recorded in ("/../outside/prog", "/opt/link"):
        clear_symbol_cache()
        syms, label = SymbolSources(None, symfs=root, debug_dirs=()).for_dso(recorded, bid)
        assert label == MISSING and not syms.ok, recorded
    # the same file inside the sysroot is used
    shutil.copy(binary, root / "opt" / "prog")
    clear_symbol_cache()
    syms, label = SymbolSources(None, symfs=root, debug_dirs=()).for_dso("/opt/prog", bid)
    assert label == SYMFS and syms.ok


def test_a_build_id_that_is_not_hex_never_names_a_file(fixtures_dir: Path, tmp_path: Path) -> None:
    """A capture's build-id ``../../x`` would make ``<debug-dir>/.build-id/../../x.debug``: it
    is not a build-id, so no debug file is looked for and the reader's table drops it."""
    from profiler.symbols.debugfile import build_id_path

    debug = tmp_path / "debug"
    target = tmp_path / "x.debug"
    shutil.copy(fixtures_dir / "elf" / "prog_bid", target)
    assert debug.resolve() in build_id_path(debug, "../../x").resolve().parents
    syms, label = SymbolSources(None, debug_dirs=[str(debug)]).for_dso(str(tmp_path / "gone"), "../../x")
    assert label == MISSING and not syms.ok


def test_a_fifo_at_a_recorded_path_is_not_opened(fixtures_dir: Path, tmp_path: Path) -> None:
    """A FIFO where the capture says a binary was: skipped at once (an open would block until
    a writer came), as is any file that is not a regular one."""
    import os
    import threading

    from profiler.format.buildid import read_build_id
    from profiler.format.localfile import open_regular
    from profiler.symbols.elf import ElfError

    fifo = tmp_path / "prog"
    os.mkfifo(fifo)
    done: list[object] = []

    def attempt() -> None:
        done.append(SymbolSources(None, symfs=None, debug_dirs=()).for_dso(str(fifo), "ab" * 20)[1])
        done.append(read_build_id(fifo))
        try:
            ElfFile(fifo)
        except ElfError:
            done.append("refused")
        try:
            open_regular(fifo)
        except OSError:
            done.append("not regular")

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert done == [MISSING, None, "refused", "not regular"]
