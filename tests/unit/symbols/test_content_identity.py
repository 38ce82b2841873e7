"""Files without a build-id: the content identity, and the report's refusal of another file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from profiler.format import records as R
from profiler.format.fileident import content_identity, identities_match
from profiler.format.recorded import UNVERIFIED, RecordedBuildIds, content_key
from profiler.report.replay import ReplayState, on_mmap
from profiler.symbols.dso import SymbolStatus, clear_symbol_cache, load_dso_symbols
from profiler.symbols.sources import MISMATCH, PACKED, SymbolSources


@pytest.fixture(autouse=True)
def _fresh() -> None:
    clear_symbol_cache()


@pytest.fixture
def builds(fixtures_dir: Path) -> tuple[Path, Path]:
    return fixtures_dir / "containers" / "spin_nobid_a", fixtures_dir / "containers" / "spin_nobid_b"


def test_the_digest_follows_the_bytes_not_the_mtime(builds: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = builds
    copy = tmp_path / "a"
    shutil.copy(a, copy)
    os.utime(copy, ns=(1, 1))
    ia, ib, ic = content_identity(a), content_identity(b), content_identity(copy)
    assert ia is not None and ib is not None and ic is not None
    assert identities_match(ia, ic) and ia["mtime_ns"] != ic["mtime_ns"]
    assert not identities_match(ia, ib)
    text = tmp_path / "not-elf"
    text.write_text("hello")
    assert content_identity(text) is None and content_identity(tmp_path / "absent") is None


def test_a_changed_text_byte_changes_the_digest(builds: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = builds
    copy = tmp_path / "a"
    data = bytearray(a.read_bytes())
    ident = content_identity(a)
    assert ident is not None
    # the first executable segment's bytes: flip one in the middle of the file's text
    from profiler.symbols.elf import ElfFile

    text = ElfFile(a).section(".text")
    assert text is not None
    data[text.sh_offset + 4] ^= 0xFF
    copy.write_bytes(bytes(data))
    changed = content_identity(copy)
    assert changed is not None and changed["digest"] != ident["digest"] and changed["size"] == ident["size"]


def test_load_refuses_a_file_that_is_not_the_recorded_one(builds: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = builds
    ident = content_identity(a)
    assert ident is not None
    key = content_key(ident)
    assert load_dso_symbols(a, None, (), expected_content=key).ok
    refused = load_dso_symbols(b, None, (), expected_content=key)
    assert refused.status is SymbolStatus.BUILD_ID_MISMATCH
    assert f"{b} is not the recorded file: it was recorded without a build-id as {ident['size']} bytes" \
        in refused.message and "rebuilt since the capture?" in refused.message
    unverified = load_dso_symbols(a, None, (), expected_content=UNVERIFIED)
    assert unverified.status is SymbolStatus.BUILD_ID_MISMATCH and "nothing vouches for it" in unverified.message


def test_the_chain_warns_once_and_uses_only_matching_packed_symbols(builds: tuple[Path, Path],
                                                                    tmp_path: Path) -> None:
    a, b = builds
    path = tmp_path / "spin"
    shutil.copy(b, path)  # the rebuild is what this machine has
    key_a = content_key(content_identity(a) or {})
    chain = SymbolSources(None, debug_dirs=())
    for _ in range(2):
        syms, label = chain.for_dso(str(path), None, key_a)
        assert label == MISMATCH and not syms.ok
    assert len(chain.warnings) == 1 and "is not the recorded file" in chain.warnings[0]
    assert chain.for_dso(str(path), None, content_key(content_identity(b) or {}))[1] != MISMATCH
    # packed symbols of the file as recorded: used for the matching identity only
    syms_a = load_dso_symbols(a, None, ())
    payload = {"kind": "elf", "path": str(path), "build_id": None, "layout": syms_a.layout.to_packed()
               if syms_a.layout else None, "symtab": syms_a.table.to_packed(), "count": len(syms_a.table),
               "coverage": "all", "source": "namespace", "content": content_identity(a)}
    packed = SymbolSources({"symbols": [payload]}, debug_dirs=())
    assert packed.for_dso(str(path), None, key_a)[1] == PACKED
    assert packed.for_dso(str(path), None, content_key(content_identity(b) or {}))[1] != PACKED


def test_replay_takes_each_mapping_s_entry_by_inode() -> None:
    recorded = RecordedBuildIds()
    recorded.add({"path": "/app/spin", "build_id": "aa" * 20, "maj": 8, "min": 1, "ino": 10, "ino_generation": 0})
    recorded.add({"path": "/app/spin", "build_id": "bb" * 20, "maj": 0, "min": 50, "ino": 3, "ino_generation": 0,
                  "source": "map_files", "namespace": True})
    recorded.add({"path": "/app/gone", "maj": 8, "min": 1, "ino": 11, "ino_generation": 0, "replaced": True})
    recorded.add({"path": "/app/nobid", "maj": 8, "min": 1, "ino": 12, "ino_generation": 0, "source": "root",
                  "content": {"size": 5, "mtime_ns": 1, "digest": "ab" * 32}})
    state = ReplayState(build_ids=dict(recorded), by_inode=recorded.by_inode)
    for pid, (maj, mnr, ino), path in ((1, (8, 1, 10), "/app/spin"), (2, (0, 50, 3), "/app/spin"),
                                       (3, (8, 1, 11), "/app/gone"), (4, (8, 1, 12), "/app/nobid"),
                                       (5, (9, 9, 9), "/app/spin")):
        on_mmap(state, R.Mmap2(pid, pid, 0x1000, 0x1000, 0, maj, mnr, ino, 0, 5, 2, path))
    got = [(d.path, d.build_id, d.content) for d in state.dsos.dsos]
    assert got == [("/app/spin", "aa" * 20, None), ("/app/spin", "bb" * 20, None), ("/app/gone", None, UNVERIFIED),
                   ("/app/nobid", None, f"5:{'ab' * 32}")]  # pid 5's unknown inode: by path, as before
