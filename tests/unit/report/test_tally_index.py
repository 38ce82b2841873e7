"""INDEX frames (format x.1): a report's first pass counts the compressed frames an index
names instead of inflating them, and the second pass checks each such frame before trusting
it. The committed format-3.1 capture (a real recording) reads the same with and without its
index, with the extension and with the numpy fallback; an index that lies about a frame (a
count off by one, a frame that holds maps and names, an entry for a frame that is not
compressed, a damaged INDEX frame) never changes a number: the report is made without it,
with one warning when the lie was only found by reading the frame."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.support.cli import run_main
from tests.support.paths import CAPTURES

from profiler.format.container.layout import FRAME_INDEX, FRAME_RAW_ZSTD, INDEX_ENTRY
from profiler.format.container.reader import CaptureReader
from profiler.format.container.scan import FileFrame
from profiler.format.container.writer import CaptureWriter
from profiler.native import kernels
from profiler.report.options import Filters
from profiler.report.tally import prepare

FIXTURE = CAPTURES / "format-3.1.prof"
REPORTS = [("report", "--sort", "pid,comm,dso,sym", "-g", "none"), ("report", "--format", "folded")]
needs_kernels = pytest.mark.skipif(kernels() is None, reason="the compiled kernels are not built (no C compiler?)")

Edit = Callable[[FileFrame, dict[int, FileFrame]], bytes | None]  # an INDEX frame's new payload, None: drop it


def copy_capture(out: Path, edit: Edit, fixture: Path = FIXTURE) -> Path:
    """``fixture`` copied frame by frame (compressed payloads as stored, the same sequence
    numbers), with each INDEX frame's payload given by ``edit``."""
    with CaptureReader.open(fixture) as reader:
        stored = reader.stored_frames()
        assert stored is not None
        by_seq = {f.seq: f for f in stored}
        writer = CaptureWriter.create(out, reader.header, reader.version)
        seq = 0
        for frame in stored:
            payload: bytes | None = bytes(frame.payload)
            if frame.kind == FRAME_INDEX:
                payload = edit(frame, by_seq)
            if payload is None:  # a dropped frame leaves its number unused: use it for a no-op ROUND
                payload, kind = b"", 3
            else:
                kind = frame.kind
            assert frame.seq == seq
            writer._frames([(kind, frame.cpu, (payload,), frame.flags)])
            seq += 1
        writer.close(reader.trailer)
    return out


def entries(frame: FileFrame) -> list[tuple[int, int]]:
    return list(INDEX_ENTRY.iter_unpack(frame.payload))


def pack(pairs: list[tuple[int, int]]) -> bytes:
    return b"".join(INDEX_ENTRY.pack(seq, n) for seq, n in pairs)


def outputs(path: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[int, str, str]]:
    return [run_main(capsys, *command, "-i", str(path)) for command in REPORTS]


@pytest.fixture
def without_index(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
                  ) -> list[tuple[int, str, str]]:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))
    return outputs(copy_capture(tmp_path / "plain.prof", lambda f, _: None), capsys)


def test_the_fixture_carries_an_index_of_its_sample_only_frames() -> None:
    with CaptureReader.open(FIXTURE) as reader:
        assert reader.version == (3, 1) and reader.warnings == []
        stored = reader.stored_frames()
        assert stored is not None
        by_seq = {f.seq: f for f in stored}
        named = [pair for f in stored if f.kind == FRAME_INDEX for pair in entries(f)]
        assert len(named) >= 2
        assert all(by_seq[seq].kind == FRAME_RAW_ZSTD for seq, _ in named)
        # and some compressed frames are not named: those with maps, names, exits
        assert len([f for f in stored if f.kind == FRAME_RAW_ZSTD]) > len(named)
        counted = {seq: n for seq, n in named}
        for frame, rec in reader.iter_records_with_frames():
            if frame.seq in counted:
                counted[frame.seq] -= 1
                assert type(rec).__name__ == "Sample"
        assert set(counted.values()) == {0}


@needs_kernels
def test_the_first_pass_skims_what_the_index_counts() -> None:
    with CaptureReader.open(FIXTURE) as reader:
        full = prepare(reader, Filters(), skim=False)
        skimmed = prepare(reader, Filters(), skim=True)
        assert full is not None and skimmed is not None
        assert not any(c.skimmed for c in full.plan.stream_chunks)
        assert any(c.skimmed for c in skimmed.plan.stream_chunks)
        assert skimmed.counts == full.counts
        assert skimmed.plan.other_seq.tolist() == full.plan.other_seq.tolist()


@pytest.mark.parametrize("native", [True, False])
def test_reports_are_the_same_with_and_without_the_index(native: bool, without_index: list[tuple[int, str, str]],
                                                         tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if native and kernels() is None:
        pytest.skip("the compiled kernels are not built")
    monkeypatch.setenv("PROFILER_NO_NATIVE", "0" if native else "1")
    got = outputs(FIXTURE, capsys)
    assert got == without_index
    assert all(code == 0 and not err for code, _, err in got)


def count_off_by_one(frame: FileFrame, _: dict[int, FileFrame]) -> bytes:
    pairs = entries(frame)
    return pack([(seq, n + 1) for seq, n in pairs[:1]] + pairs[1:])


def _names_a_frame_with_maps(frame: FileFrame, by_seq: dict[int, FileFrame]) -> bytes:
    """The first compressed frame with records other than samples (maps, names, exits)
    claimed as samples only, with its true number of records."""
    records: dict[int, int] = {}
    others: set[int] = set()
    with CaptureReader.open(FIXTURE) as reader:
        for f, rec in reader.iter_records_with_frames():
            records[f.seq] = records.get(f.seq, 0) + 1
            if type(rec).__name__ != "Sample":
                others.add(f.seq)
    first = min(seq for seq in others if by_seq[seq].kind == FRAME_RAW_ZSTD)
    return pack([(first, records[first])] + entries(frame))


@needs_kernels
@pytest.mark.parametrize("edit", [count_off_by_one, _names_a_frame_with_maps])
def test_an_index_the_records_belie_is_dropped_with_one_warning(
        edit: Edit, without_index: list[tuple[int, str, str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_NO_NATIVE", "0")
    forged = copy_capture(tmp_path / "forged.prof", edit)
    for (code, out, err), (plain_code, plain_out, _) in zip(outputs(forged, capsys), without_index):
        assert (code, out) == (plain_code, plain_out)
        assert err.count("the capture's index does not match the records of frame") == 1, err
        assert "It was read without the index." in err
        assert "Traceback" not in err


@pytest.mark.parametrize("payload", [
    b"\x01\x02\x03",  # not whole entries
    pack([(0, 5), (2, 9)]),  # frames that are not compressed raw frames (metadata)
    pack([(1 << 31, 4)]),  # no such frame
    pack([(3, 0)]),  # no records
], ids=["torn", "metadata frames", "no such frame", "no records"])
def test_index_entries_that_name_nothing_countable_are_ignored(
        payload: bytes, without_index: list[tuple[int, str, str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_NO_NATIVE", "0")
    forged = copy_capture(tmp_path / "odd.prof", lambda f, _: payload)
    assert outputs(forged, capsys) == without_index


def test_the_copy_helper_keeps_the_capture_intact(tmp_path: Path) -> None:
    """The forged captures above differ from the fixture only where their edit says."""
    copy = copy_capture(tmp_path / "same.prof", lambda f, _: bytes(f.payload))
    assert copy.read_bytes() == FIXTURE.read_bytes()
