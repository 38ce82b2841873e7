"""The recorder's view of a container's files, without privileges: ``/proc`` is a directory the
test lays out like ``/proc/PID/root/PATH``, so a "namespace" is a different file at that place."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from profiler.format.buildid import read_build_id
from profiler.format.fileident import content_identity
from profiler.record import mapped as M
from profiler.record.packing import write_mapped_metadata
from profiler.symbols.table import SymbolTable


class Writer:
    def __init__(self) -> None:
        self.meta: list[tuple[str, dict[str, Any]]] = []

    def write_meta(self, kind: str, payload: dict[str, Any], level: int = 1) -> None:
        self.meta.append((kind, payload))


def ident(path: Path) -> M.Identity:
    st = path.stat()
    return (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino, 0)


@pytest.fixture
def fake_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    monkeypatch.setattr(M, "PROC", str(proc))
    return proc


def in_root(proc: Path, pid: int, path: Path, source: Path) -> Path:
    inside = proc / str(pid) / "root" / str(path).lstrip("/")
    inside.parent.mkdir(parents=True)
    shutil.copy(source, inside)
    return inside


def test_a_file_seen_only_through_the_process_root_is_namespace_only_and_packed(
        fixtures_dir: Path, tmp_path: Path, fake_proc: Path) -> None:
    host = tmp_path / "app" / "spin"
    host.parent.mkdir()
    shutil.copy(fixtures_dir / "containers" / "spin_host", host)
    inside = in_root(fake_proc, 4242, host, fixtures_dir / "containers" / "spin_container")
    files = M.MappedFiles()
    files.seen(str(host), ident(inside), 4242, 0x1000, 0x2000)
    files.seen(str(host), ident(host), 7, 0x1000, 0x2000)  # a host process: its root shows nothing
    by_ino = {e["ino"]: e for e in files.entries()}
    ns, own = by_ino[ident(inside)[2]], by_ino[ident(host)[2]]
    assert ns["build_id"] == read_build_id(inside) != read_build_id(host)
    assert ns["source"] == M.FROM_ROOT and ns["namespace"] is True
    assert own["build_id"] == read_build_id(host) and own["source"] == M.FROM_HOST and "namespace" not in own
    assert len(files.kept) == 1
    inside.unlink()  # the container stopped: the kept descriptor still reads its file
    writer = Writer()
    assert write_mapped_metadata(writer, files) == []
    assert not files.kept
    kinds = [k for k, _ in writer.meta]
    assert kinds == ["buildids", "symbols"]
    packed = writer.meta[1][1]
    assert packed["path"] == str(host) and packed["source"] == "namespace" and packed["coverage"] == "all"
    names = {SymbolTable.from_packed(packed["symtab"]).name(i) for i in range(packed["count"])}
    assert "container_fn" in names and "host_only_fn" not in names


def test_dwarf_captures_pack_the_unwind_table_too(fixtures_dir: Path, tmp_path: Path, fake_proc: Path) -> None:
    host = tmp_path / "spin"
    inside = in_root(fake_proc, 99, host, fixtures_dir / "containers" / "spin_container")
    files = M.MappedFiles()
    files.seen(str(host), ident(inside), 99)
    writer = Writer()
    write_mapped_metadata(writer, files, dwarf=True)
    assert [k for k, _ in writer.meta] == ["buildids", "symbols", "unwind"]
    assert writer.meta[2][1]["path"] == str(host) and writer.meta[2][1]["table"]


def test_a_file_without_build_id_gets_a_content_identity(fixtures_dir: Path, tmp_path: Path) -> None:
    binary = tmp_path / "spin"
    shutil.copy(fixtures_dir / "containers" / "spin_nobid_a", binary)
    files = M.MappedFiles()
    files.seen(str(binary), ident(binary))
    (entry,) = files.entries()
    assert "build_id" not in entry and entry["source"] == M.FROM_HOST
    assert entry["content"] == content_identity(binary) and entry["content"]["size"] == binary.stat().st_size


def test_the_process_view_that_maps_another_inode_is_passed_over(fixtures_dir: Path, tmp_path: Path,
                                                                 fake_proc: Path) -> None:
    """The root view shows another inode than MMAP2 named (remapped since): the host path,
    which is the named inode, is used."""
    host = tmp_path / "spin"
    shutil.copy(fixtures_dir / "containers" / "spin_host", host)
    in_root(fake_proc, 5, host, fixtures_dir / "containers" / "spin_container")
    files = M.MappedFiles()
    files.seen(str(host), ident(host), 5)
    (entry,) = files.entries()
    assert entry["source"] == M.FROM_HOST and entry["build_id"] == read_build_id(host)
    assert not files.kept


def test_kept_files_are_bounded(fixtures_dir: Path, tmp_path: Path, fake_proc: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(M, "MAX_KEPT", 1)
    files = M.MappedFiles()
    for pid in (11, 12):
        path = tmp_path / f"p{pid}"
        inside = in_root(fake_proc, pid, path, fixtures_dir / "containers" / "spin_container")
        files.seen(str(path), ident(inside), pid)
    assert len(files.kept) == 1 and all(e.get("namespace") for e in files.entries())
    files.close()


# --- JIT maps of processes in other namespaces (profiler/record/perfmaps.py) -----------------


def fake_process(proc: Path, pid: int, nspid: int) -> Path:
    """``/proc/PID/status`` with ``NSpid: PID NSPID`` and the process's own ``/tmp``."""
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "status").write_text(f"Name:\tjit\nPid:\t{pid}\nNSpid:\t{pid}\t{nspid}\n")
    tmp = proc / str(pid) / "root" / "tmp"
    tmp.mkdir(parents=True)
    return tmp


@pytest.fixture
def perfmaps_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from profiler.record import perfmaps

    proc = tmp_path / "proc-of-jits"
    proc.mkdir()
    monkeypatch.setattr(perfmaps, "PROC", str(proc))
    return proc


def test_a_jit_map_in_a_pid_namespace_is_found_by_its_own_pid_and_packed(perfmaps_proc: Path) -> None:
    tmp = fake_process(perfmaps_proc, 4321, 7)
    files = M.MappedFiles()
    files.perf_maps.seen_process(4321)
    (tmp / "perf-7.map").write_text("7f0000001000 40 jitted_a\n7f0000002000 20 jitted b\nbad line\n")
    (tmp / "perf-4321.map").write_text("7f0000001000 40 wrong_pid\n")
    writer = Writer()
    write_mapped_metadata(writer, files)
    (jit,) = [p for k, p in writer.meta if k == "symbols"]
    assert jit["kind"] == "jit" and jit["pid"] == 4321 and jit["path"] == "/tmp/perf-4321.map"
    assert jit["namespace_pid"] == 7 and jit["source"] == "namespace"
    table = SymbolTable.from_packed(jit["symtab"])
    assert sorted(table.name(i) for i in range(len(table))) == ["jitted b", "jitted_a"]
    assert not files.perf_maps.roots  # closed


def test_the_recorder_s_own_namespace_is_left_to_the_report(perfmaps_proc: Path) -> None:
    """Same pid, same root as the recorder: nothing kept (the report reads /tmp/perf-PID.map)."""
    from profiler.record.perfmaps import NamespacedPerfMaps

    pid = os.getpid()
    (perfmaps_proc / str(pid)).mkdir()
    (perfmaps_proc / str(pid) / "status").write_text(f"NSpid:\t{pid}\n")
    os.symlink("/", perfmaps_proc / str(pid) / "root")
    maps = NamespacedPerfMaps()
    maps.seen_process(pid)
    assert not maps.roots


def test_a_symlinked_tmp_or_map_is_not_followed(perfmaps_proc: Path, tmp_path: Path) -> None:
    from profiler.record.perfmaps import NamespacedPerfMaps

    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "perf-3.map").write_text("1000 10 host_secret\n")
    (perfmaps_proc / "50").mkdir()
    (perfmaps_proc / "50" / "status").write_text("NSpid:\t50\t3\n")
    (perfmaps_proc / "50" / "root").mkdir()
    os.symlink(secret, perfmaps_proc / "50" / "root" / "tmp")  # tmp -> a host directory
    tmp = fake_process(perfmaps_proc, 51, 3)
    os.symlink(secret / "perf-3.map", tmp / "perf-3.map")  # the map -> a host file
    maps = NamespacedPerfMaps()
    maps.seen_process(50)
    maps.seen_process(51)
    assert 50 not in maps.roots and maps.read(51) is None and maps.payloads() == []
    maps.close()


def test_no_namespace_symbols_packs_nothing_and_closes(fixtures_dir: Path, tmp_path: Path, fake_proc: Path,
                                                       perfmaps_proc: Path) -> None:
    host = tmp_path / "spin"
    inside = in_root(fake_proc, 77, host, fixtures_dir / "containers" / "spin_container")
    tmp = fake_process(perfmaps_proc, 78, 2)
    (tmp / "perf-2.map").write_text("1000 10 jitted\n")
    files = M.MappedFiles()
    files.seen(str(host), ident(inside), 77)
    files.perf_maps.seen_process(78)
    writer = Writer()
    write_mapped_metadata(writer, files, pack=False)
    assert [k for k, _ in writer.meta] == ["buildids"] and writer.meta[0][1]["entries"][0]["namespace"] is True
    assert not files.kept and not files.perf_maps.roots


def test_a_file_not_read_through_its_first_process_is_read_through_the_next(
        fixtures_dir: Path, tmp_path: Path, fake_proc: Path) -> None:
    host = tmp_path / "app" / "spin"
    host.parent.mkdir()
    shutil.copy(fixtures_dir / "containers" / "spin_host", host)
    inside = in_root(fake_proc, 301, host, fixtures_dir / "containers" / "spin_container")
    files = M.MappedFiles()
    files.seen(str(host), ident(inside), 300)  # the first process exited: no view of it left
    (entry,) = files.entries()
    assert entry.get("replaced") is True and "build_id" not in entry
    files.seen(str(host), ident(inside), 301)  # the same file mapped by a live process
    (entry,) = files.entries()
    assert entry["build_id"] == read_build_id(inside) and entry["namespace"] is True and "replaced" not in entry
    files.close()
