"""A ``--call-graph dwarf`` capture's report tallied chunk by chunk with its user stacks unwound
in the tally (profiler/report/tally_unwound.py) is the report of the whole decode
(``PROFILER_TALLY=0``, which unwinds every selected sample at once): the same output, unwinding
figures (the header's and the JSON's rule-table origins) and warnings, in one process and in
worker processes, with chunks of a few frames, under the entry filters (which apply to the
tally's rows after the unwinding), on captures written whole, split (format 4.0), and split
with damaged stack fields; and a compressed capture's chunks inflated in the workers that
unwind them, the frames its index counts checked there (an index that lies is dropped, as in
the tally that does not unwind)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tests.support.cli import run_main
from tests.support.paths import CAPTURES
from tests.unit.format.test_splitstacks import field_spoiler, split_copy
from tests.unit.report.test_tally_index import copy_capture, count_off_by_one

from profiler.report.tally_unwound import REASON_SHIFT, TallyUnwind

WHOLE = CAPTURES / "format-2.0.prof"  # a real --call-graph dwarf recording, written whole
SPLIT = CAPTURES / "format-4.0.prof"  # one written by the recorder with its stack copies apart
OPTIONS = [
    (),
    ("--no-children", "-g", "caller"),
    ("--format", "folded"),
    ("--format", "json"),
    ("--sort", "pid,comm,dso,sym", "-g", "none"),
    ("--sort", "dso,sym", "--no-children"),
    ("--comm", "dwarf_mix"),
    ("--cpu", "1"),
    ("--symbol", "lib_mix"),
]


def report(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, mode: str, path: Path,
           *argv: str) -> tuple[int, str, str]:
    """The report: decoded whole, or tallied (chunks of one or two frames) in one process
    or in two."""
    monkeypatch.setenv("PROFILER_TALLY", "0" if mode == "whole" else "1")
    monkeypatch.setenv("PROFILER_JOBS", "2" if mode == "jobs2" else "1")
    return run_main(capsys, "report", "-i", str(path), *argv)


@pytest.fixture(autouse=True)
def _small_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(TallyUnwind, "chunk_bytes", 4096)


def assert_same_reports(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, path: Path,
                        modes: tuple[str, ...] = ("jobs1", "jobs2"), tid: str = "") -> None:
    for argv in OPTIONS + ([("--tid", tid)] if tid else []):
        whole = report(capsys, monkeypatch, "whole", path, *argv)
        assert whole[0] == 0, (argv, whole)
        for mode in modes:
            assert report(capsys, monkeypatch, mode, path, *argv) == whole, (mode, argv)


@pytest.mark.parametrize(("path", "tid"), [(WHOLE, "3643"), (SPLIT, "2215")], ids=["written-whole", "recorded-split"])
def test_the_unwinding_tally_reports_what_the_whole_decode_reports(
        path: Path, tid: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert_same_reports(capsys, monkeypatch, path, tid=tid)  # a thread of the fixture's two
    code, out, _ = report(capsys, monkeypatch, "jobs1", path)
    assert code == 0 and "# DWARF unwinding: " in out  # the figures are there to compare


@pytest.mark.parametrize(("path", "chunks"), [(WHOLE, 20), (SPLIT, 3)])
def test_the_tally_unwinds_in_many_chunks(path: Path, chunks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunks the tests above use are several (a split frame is one), and each one unwinds
    its own samples."""
    from profiler.report import tally, tally_unwound

    seen: list[int] = []
    real = TallyUnwind.tally_chunk

    def counted(self: TallyUnwind, plan: tally.Plan, index: int) -> tally.ChunkResult:
        seen.append(index)
        result = real(self, plan, index)
        assert (result.rows.misc >> REASON_SHIFT).max(initial=0) <= 7  # a stop reason, above the misc bits
        return result

    monkeypatch.setattr(tally_unwound.TallyUnwind, "tally_chunk", counted)
    monkeypatch.setenv("PROFILER_JOBS", "1")
    from profiler.report.options import LoadOptions
    from profiler.report.pipeline import load_profile

    profile = load_profile(LoadOptions(input=str(path)))
    assert len(seen) >= chunks and sorted(seen) == list(range(len(seen)))
    assert profile.unwind is not None and profile.unwind.samples == profile.total_samples > 0


@pytest.mark.parametrize("seed", range(2))
def test_damaged_stack_fields_warn_the_same_in_the_tally(
        seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Split frames whose stack fields are damaged (short, a size word spoiled, data changed):
    the tally's chunks say what the whole decode says, once each, in the same order."""
    spoiled = split_copy(tmp_path / "spoiled.prof", field_spoiler(random.Random(seed)))
    assert_same_reports(capsys, monkeypatch, spoiled, modes=("jobs2",))
    assert "are damaged" in report(capsys, monkeypatch, "jobs1", spoiled)[2]


def test_a_dwarf_capture_whose_index_lies_reads_as_without_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pass counts the split frames the index names without inflating them; the worker
    that unwinds such a chunk finds the lie, and the report is made again without the index."""
    plain = copy_capture(tmp_path / "plain.prof", lambda f, _: None, SPLIT)
    forged = copy_capture(tmp_path / "forged.prof", count_off_by_one, SPLIT)
    for argv in [(), ("--format", "folded")]:
        want = report(capsys, monkeypatch, "whole", plain, *argv)
        assert report(capsys, monkeypatch, "jobs2", plain, *argv) == want
        code, out, err = report(capsys, monkeypatch, "jobs2", forged, *argv)
        assert (code, out) == want[:2]
        assert err.count("the capture's index does not match the records of frame") == 1, err
        assert "It was read without the index." in err and "Traceback" not in err
