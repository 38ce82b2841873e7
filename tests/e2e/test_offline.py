"""Offline analysis end to end: record on this machine, archive, report "elsewhere".

"Elsewhere" is simulated by deleting or replacing the recorded binary, pointing ``--symfs``
and the debug directories at empty directories, and (for the committed capture) by a
capture whose recorded binary was deleted when it was made. Rows are the reporter's own
pipeline (``load_profile`` with the symbol options, ``offline_helpers``); the same is then
checked through the ``profiler report`` and ``profiler record --archive`` commands.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from profiler.format import records as R
from profiler.format.container.reader import CaptureReader
from profiler.report.offline.archive import archive_capture
from profiler.symbols.elf import ElfFile
from profiler.symbols.dso import clear_symbol_cache

from tests.support.offline_helpers import Row, profile_rows, record, rows_from_json

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "fixtures" / "captures" / "offline-shares.prof"
EXPECTED = ROOT / "fixtures" / "captures" / "offline-shares.expected.json"


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_symbol_cache()


@pytest.fixture
def recorded(fixtures_dir: Path, tmp_path: Path, require_perf: None) -> tuple[Path, Path]:
    """(capture, binary): ``shares`` copied to a private directory and recorded with -g."""
    binary = tmp_path / "app" / "shares"
    binary.parent.mkdir()
    shutil.copy(fixtures_dir / "workloads" / "shares", binary)
    capture = tmp_path / "cap.prof"
    record(capture, [str(binary), "0.15"])
    return capture, binary


def frames_of(rows: list[Row], dso: str) -> list[str]:
    return [label for _, frames, _ in rows for d, label in frames if d == dso]


def nowhere(tmp_path: Path) -> dict[str, object]:
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    return {"symfs": empty, "debug_dirs": [str(empty)]}


def test_archive_then_delete_binary_reports_identically(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    capture, binary = recorded
    before, _ = profile_rows(capture)
    assert {"work_a", "work_b", "work_c", "run", "other"} <= set(frames_of(before, "shares"))
    result = archive_capture(capture)
    assert str(binary) in [p.path for p in result.packed] and result.bytes_added > 0
    binary.unlink()
    clear_symbol_cache()
    after, warnings = profile_rows(capture, **nowhere(tmp_path))
    assert after == before
    assert not [w for w in warnings if "shares" in w]


def test_rebuilt_binary_is_refused_without_archive(recorded: tuple[Path, Path], fixtures_dir: Path) -> None:
    capture, binary = recorded
    before, _ = profile_rows(capture)
    archived = capture.with_name("archived.prof")
    archive_capture(capture, output=archived)
    shutil.copy(fixtures_dir / "offline" / "impostor", binary)  # new code, new build-id, same path
    clear_symbol_cache()
    impostor = ElfFile(binary).symbol_table()
    impostor_names = {impostor.name(i) for i in range(len(impostor))}

    rows, warnings = profile_rows(capture)
    labels = frames_of(rows, "shares")
    assert labels and all(label.startswith("0x") for label in labels)  # [unknown] with offset
    assert not impostor_names & set(labels)
    mismatch = [w for w in warnings if str(binary) in w]
    assert len(mismatch) == 1 and "build-id" in mismatch[0]

    clear_symbol_cache()
    rows, _ = profile_rows(archived)
    assert rows == before


def test_symfs_with_a_copy_under_another_root(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    capture, binary = recorded
    before, _ = profile_rows(capture, debug_dirs=())
    root = tmp_path / "sysroot"
    (root / str(binary.parent).lstrip("/")).mkdir(parents=True)
    shutil.copy(binary, root / str(binary).lstrip("/"))
    binary.unlink()
    clear_symbol_cache()
    gone, _ = profile_rows(capture, debug_dirs=())
    assert all(label.startswith("0x") for label in frames_of(gone, "shares"))
    clear_symbol_cache()
    rows, _ = profile_rows(capture, symfs=root, debug_dirs=())
    assert rows == before


def test_committed_capture_reports_identically_elsewhere(tmp_path: Path) -> None:
    expected = json.loads(EXPECTED.read_text())
    assert not Path(expected["binary"]).exists()  # the recorded binary is gone for good
    want = rows_from_json(expected["rows"])
    rows, _ = profile_rows(COMMITTED, **nowhere(tmp_path))
    assert rows == want
    # every DSO a sample hit comes from the capture, never from a file of this machine
    labels = buildids_json(COMMITTED, "--symfs", str(tmp_path / "empty"), "--debug-dir", str(tmp_path / "empty"))
    hit = {e["path"]: e["source"] for e in labels if e["samples"]}
    assert hit and set(hit.values()) == {"packed"}
    # and the stripped copy (no recorded path exists at all) reports the same rows
    shared = tmp_path / "shared.prof"
    archive_capture(COMMITTED, output=shared, strip_paths=True)
    clear_symbol_cache()
    rows, _ = profile_rows(shared, **nowhere(tmp_path))
    assert rows == want


def buildids_json(capture: Path, *extra: str) -> list[dict[str, object]]:
    done = subprocess.run([sys.executable, "-m", "profiler", "buildids", "-i", str(capture), "--json", *extra],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert isinstance(data, list)
    return data


def test_buildids_lists_every_dso_with_its_source(recorded: tuple[Path, Path], tmp_path: Path,
                                                  fixtures_dir: Path) -> None:
    capture, binary = recorded
    empty = str(tmp_path / "empty")
    os.mkdir(empty)
    with CaptureReader.open(capture) as reader:
        mapped = {r.filename for r in reader.iter_records() if isinstance(r, R.Mmap2)}
    listing = buildids_json(capture, "--debug-dir", empty)
    by_path = {e["path"]: e for e in listing}
    assert mapped <= set(by_path) and "[kernel.kallsyms]" in by_path
    assert by_path[str(binary)]["source"] == "local"
    assert by_path[str(binary)]["build_id"] == ElfFile(binary).build_id
    assert int(by_path[str(binary)]["samples"]) > 0  # type: ignore[call-overload]
    assert by_path["[kernel.kallsyms]"]["source"] == "packed"  # the capture's kallsyms snapshot
    libc = next(p for p in mapped if "/libc.so" in p)
    assert by_path[libc]["source"] == "local" and int(by_path[libc]["samples"]) > 0  # type: ignore[call-overload]

    debug = tmp_path / "debug"
    bid = str(by_path[str(binary)]["build_id"])
    (debug / ".build-id" / bid[:2]).mkdir(parents=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(binary),
                    str(debug / ".build-id" / bid[:2] / f"{bid[2:]}.debug")],
                   check=True)
    assert source_of(capture, binary, "--debug-dir", str(debug)) == "debug-dir"
    root = tmp_path / "root"
    (root / str(binary.parent).lstrip("/")).mkdir(parents=True)
    shutil.copy(binary, root / str(binary).lstrip("/"))
    assert source_of(capture, binary, "--symfs", str(root), "--debug-dir", empty) == "symfs"
    shutil.copy(fixtures_dir / "offline" / "impostor", binary)
    assert source_of(capture, binary, "--debug-dir", empty) == "mismatch"
    binary.unlink()
    assert source_of(capture, binary, "--debug-dir", empty) == "missing"
    archive_capture(capture, debug_dirs=(str(debug),))
    assert source_of(capture, binary, "--debug-dir", empty) == "packed"


def source_of(capture: Path, binary: Path, *extra: str) -> object:
    return next(e["source"] for e in buildids_json(capture, *extra) if e["path"] == str(binary))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run_unprivileged(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        return None
    cmd = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": "/"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd="/")


def test_archive_without_write_permission(recorded: tuple[Path, Path]) -> None:
    capture, _ = recorded
    # a directory every user can enter (pytest's own is private to root), the capture readable
    shared_dir = Path(tempfile.mkdtemp(prefix="profiler-ro-"))
    try:
        os.chmod(shared_dir, 0o755)
        target = shared_dir / "cap.prof"
        shutil.copy(capture, target)
        os.chmod(target, 0o644)
        before = digest(target)
        done = _run_unprivileged([sys.executable, "-m", "profiler", "archive", "-i", str(target)])
        if done is None:
            pytest.skip("cannot run a command as an unprivileged user here (not root, or no setpriv)")
        if "No module named" in done.stderr or "Traceback" in done.stderr and "Permission denied: '" in done.stderr:
            pytest.skip(f"the unprivileged user cannot run this interpreter: {done.stderr.strip()[-200:]}")
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("profiler: cannot archive into") and "Permission denied" in done.stderr
        assert "left unchanged" in done.stderr and done.stderr.count("\n") == 1
        assert digest(target) == before and sorted(os.listdir(shared_dir)) == ["cap.prof"]
    finally:
        shutil.rmtree(shared_dir)


def test_archive_of_an_immutable_capture(recorded: tuple[Path, Path]) -> None:
    capture, _ = recorded
    before = digest(capture)
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(capture)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available on this file system")
    try:
        done = subprocess.run([sys.executable, "-m", "profiler", "archive", "-i", str(capture)],
                              capture_output=True, text=True, timeout=120)
    finally:
        subprocess.run([chattr, "-i", str(capture)], check=True)
    assert done.returncode == 1 and "cannot archive into" in done.stderr and "left unchanged" in done.stderr
    assert digest(capture) == before


# --- the same through `profiler report` and `profiler record --archive` ---------------------


def report_text(capture: Path, *extra: str) -> str:
    done = subprocess.run([sys.executable, "-m", "profiler", "report", "-i", str(capture), *extra],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_report_cli_identical_after_deleting_the_binary(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    capture, binary = recorded
    empty = tmp_path / "empty"
    empty.mkdir()
    before = report_text(capture)
    archive_capture(capture)
    binary.unlink()
    after = report_text(capture, "--symfs", str(empty), "--debug-dir", str(empty))
    assert after == before and "work_a" in after


def test_report_cli_committed_capture(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    text = report_text(COMMITTED, "--symfs", str(empty), "--debug-dir", str(empty))
    assert "work_a" in text and "[unknown]" not in text.split("work_a")[0][-200:]


def packed_paths(capture: Path) -> set[str]:
    with CaptureReader.open(capture) as reader:
        return {str(m.get("path")) for m in reader.metadata("symbols")}


def record_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler", "record", *argv],
                          capture_output=True, text=True, timeout=120)


def test_record_archive_packs_when_recording_ends(fixtures_dir: Path, tmp_path: Path, require_perf: None) -> None:
    binary = tmp_path / "app" / "shares"
    binary.parent.mkdir()
    shutil.copy(fixtures_dir / "workloads" / "shares", binary)
    capture = tmp_path / "cap.prof"
    done = record_cli("-g", "--archive", "-o", str(capture), "--", str(binary), "0.15")
    assert done.returncode == 0, done.stderr
    summary = [line for line in done.stderr.splitlines() if line.startswith("[ profiler archive:")]
    assert len(summary) == 1 and f"into {capture}" in summary[0] and "packed" in summary[0]
    assert str(binary) in packed_paths(capture)
    before = report_text(capture)
    binary.unlink()
    empty = tmp_path / "empty"
    empty.mkdir()
    after = report_text(capture, "--symfs", str(empty), "--debug-dir", str(empty))
    assert after == before and "work_a" in after

    quiet = tmp_path / "quiet.prof"
    shutil.copy(fixtures_dir / "workloads" / "shares", binary)
    done = record_cli("-g", "-q", "--archive", "-o", str(quiet), "--", str(binary), "0.1")
    assert done.returncode == 0 and done.stderr == ""
    assert str(binary) in packed_paths(quiet)


def test_record_archive_failure_is_a_warning(fixtures_dir: Path, tmp_path: Path, require_perf: None) -> None:
    """The workload makes the capture's directory immutable: the capture is written (its file
    is already open) but archive cannot put its temporary copy beside it."""
    chattr = shutil.which("chattr")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    if chattr is None or subprocess.run([chattr, "+i", str(out_dir)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available on this file system")
    subprocess.run([chattr, "-i", str(out_dir)], check=True)
    capture = out_dir / "cap.prof"
    script = 'chattr +i "$1" && "$2" 0.1; exit 3'
    try:
        done = record_cli("-g", "--archive", "-o", str(capture), "--", "sh", "-c", script, "sh", str(out_dir),
                          str(fixtures_dir / "workloads" / "shares"))
    finally:
        subprocess.run([chattr, "-i", str(out_dir)], check=True)
    assert done.returncode == 3, done.stderr  # the workload's status, not archive's
    warning = [line for line in done.stderr.splitlines() if "archiving failed" in line]
    assert len(warning) == 1 and warning[0].startswith("profiler: warning:") and "left as recorded" in warning[0]
    assert "Traceback" not in done.stderr
    assert sorted(os.listdir(out_dir)) == ["cap.prof"]
    with CaptureReader.open(capture) as reader:
        # nothing archived: only the kernel symbols the recorder packs itself
        assert reader.clean_end and all(m["source"] == "recorded" for m in reader.metadata("symbols"))
    assert "shares" in report_text(capture)


def test_report_symfs_must_be_a_directory(tmp_path: Path) -> None:
    not_dir = tmp_path / "file"
    not_dir.write_text("x")
    for bad, why in ((tmp_path / "nope", "does not exist"), (not_dir, "is not a directory")):
        done = subprocess.run([sys.executable, "-m", "profiler", "report", "-i", str(COMMITTED), "--symfs", str(bad)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith(f"profiler: --symfs {bad} {why}") and done.stderr.count("\n") == 1
