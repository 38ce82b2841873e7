"""Stack copies kept apart (format 4.0, profiler/format/splitstacks.py): the recorder's split and
the reader's join give back the records byte for byte, the compiled join agrees with its
Python reference on every input (damaged ones included), and a capture whose ``--call-graph
dwarf`` frames are split reads exactly as the same capture written whole: every report, the
unwound call graphs included, with the extension and without it. A frame whose two parts do
not fit is skipped with one warning; the other frames are read."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.support.cli import run_main
from tests.support.paths import CAPTURES

from profiler.errors import FormatError
from profiler.format.container.layout import FRAME_META, FRAME_RAW, FRAME_ROUND, FRAME_SYNTH, VERSION_STACKS
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter
from profiler.format.events import EventTable
from profiler.format.records import SampleLayout
from profiler.format.splitstacks import join_stacks, join_stacks_python, split_stacks, stack_split_ok
from profiler.native import kernels

DWARF = CAPTURES / "format-2.0.prof"  # a real --call-graph dwarf recording, written whole
COMMANDS = [("report",), ("report", "--no-children", "-g", "none"), ("report", "--format", "folded"),
            ("script", "-F", "comm,tid,ip,sym")]


def dwarf_frames() -> tuple[SampleLayout, list[bytes]]:
    with CaptureReader.open(DWARF) as reader:
        layout = EventTable.from_header(reader.header).events[0].layout
        return layout, [bytes(f.payload) for f in reader.iter_frames() if f.kind == FRAME_RAW and f.payload]


def split_copy(out: Path, spoil: Callable[[int, tuple[bytes, bytes]], tuple[bytes, bytes] | bytes] | None = None
               ) -> Path:
    """DWARF rewritten as format 4.0: its raw frames split (``spoil`` may change frame k's parts,
    or give frame k whole: bytes)."""
    with CaptureReader.open(DWARF) as reader:
        layout = EventTable.from_header(reader.header).events[0].layout
        writer = CaptureWriter.create(out, reader.header, VERSION_STACKS)
        k = 0
        for frame in reader.iter_frames():
            if frame.kind == FRAME_RAW:
                parts = split_stacks(frame.payload, layout)
                assert parts is not None
                chosen = spoil(k, parts) if spoil else parts
                writer.write_pass([(frame.cpu, bytes(frame.payload) if isinstance(chosen, bytes) else chosen)],
                                  compressed=True)
                k += 1
            elif frame.kind == FRAME_SYNTH:
                writer.write_synth(frame.payload)
            elif frame.kind == FRAME_META:
                writer.write_meta(*frame.meta())
            elif frame.kind == FRAME_ROUND:
                writer.write_round()
        writer.close(reader.trailer)
    return out


def test_split_and_join_give_back_every_record() -> None:
    layout, frames = dwarf_frames()
    assert len(frames) > 3 and stack_split_ok([layout])
    for buf in frames:
        parts = split_stacks(buf, layout)
        assert parts is not None
        lean, fields = parts
        assert len(lean) + len(fields) > len(buf) and len(lean) * 5 < len(buf)  # the stacks went
        assert join_stacks_python(lean, fields, layout) == buf
        assert join_stacks(lean, fields, layout) == buf


@pytest.mark.skipif(kernels() is None, reason="the compiled kernels are not built")
@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_join_agrees_with_python_on_damaged_parts(seed: int) -> None:
    layout, frames = dwarf_frames()
    rnd = random.Random(seed)
    module = kernels()
    for _ in range(60):
        lean, fields = split_stacks(rnd.choice(frames), layout) or (b"", b"")
        lean, fields = bytearray(lean), bytearray(fields)
        for _ in range(rnd.randint(1, 4)):
            target = lean if rnd.random() < 0.5 else fields
            if not target:
                continue
            roll = rnd.random()
            at = rnd.randrange(len(target))
            if roll < 0.6:
                target[at] = rnd.randrange(256)
            elif roll < 0.8:
                del target[at - at % 8:]
            else:
                target[at:at] = bytes(8)
        try:
            want: bytes | None = join_stacks_python(bytes(lean), bytes(fields), layout)
        except FormatError:
            want = None
        out = bytearray(len(lean) + len(fields))
        n = module.join_stacks(bytes(lean), bytes(fields), *_words(layout), out)
        assert (None if n is None else bytes(out[:n])) == want


def _words(layout: SampleLayout) -> tuple[int, int, int]:
    from profiler.format.splitstacks import stack_words

    return stack_words(layout)


def test_layouts_that_cannot_be_split() -> None:
    layout, _ = dwarf_frames()
    other = SampleLayout(layout.sample_type, sample_regs_user=layout.sample_regs_user >> 1)
    assert not stack_split_ok([layout, other])
    assert not stack_split_ok([SampleLayout(layout.sample_type & ~(1 << 13))])  # no STACK_USER
    assert not stack_split_ok([])


@pytest.mark.parametrize("native", [True, False])
def test_a_split_capture_reads_as_the_whole_one(native: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    if native and kernels() is None:
        pytest.skip("the compiled kernels are not built")
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PROFILER_NO_NATIVE", "0" if native else "1")
    split = split_copy(tmp_path / "split.prof")
    assert split.stat().st_size < DWARF.stat().st_size * 1.1
    for command in COMMANDS:
        whole = run_main(capsys, *command, "-i", str(DWARF))
        assert whole[0] == 0 and whole[1].count("\n") > 2, (command, whole)
        assert run_main(capsys, *command, "-i", str(split)) == whole, command


def test_frames_the_recorder_wrote_whole_unwind_beside_split_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A 4.0 capture may hold a frame the recorder could not split (written whole): its samples
    keep their stack copies in the records and unwind as before, beside the split frames'."""
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))
    mixed = split_copy(tmp_path / "mixed.prof", lambda k, parts: b"whole" if k % 2 else parts)
    for command in COMMANDS:
        assert run_main(capsys, *command, "-i", str(mixed)) == run_main(capsys, *command, "-i", str(DWARF)), command


def test_a_frame_whose_parts_do_not_fit_is_skipped_with_one_warning(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A report reads the frame's lean records (its samples are all there) and unwinds them
    without their damaged stack copies, saying so once; what reads the records joined (``dump``)
    skips the frame, saying so once; the other frames are read either way."""
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))

    def short_fields(k: int, parts: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
        return (parts[0], parts[1][:-8]) if k == 1 else parts

    spoiled = split_copy(tmp_path / "spoiled.prof", short_fields)
    code, out, err = run_main(capsys, "report", "--format", "folded", "-i", str(spoiled))
    assert code == 0 and out
    assert err.count("are damaged (its samples and their stack copies do not fit together): its ") == 1, err
    whole = run_main(capsys, "report", "--format", "folded", "-i", str(DWARF))[1]

    def counts(folded: str) -> dict[str, int]:
        return {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in folded.splitlines()}

    got, want = counts(out), counts(whole)
    assert sum(got.values()) == sum(want.values())  # every sample is there
    rooted = sum(n for stack, n in got.items() if ";_start;" in stack or ";clone3;" in stack)
    assert 0 < rooted < sum(n for stack, n in want.items() if ";_start;" in stack or ";clone3;" in stack)
    code, out, err = run_main(capsys, "dump", "-i", str(spoiled))
    assert code == 0 and err.count("is damaged (its samples and their stack copies do not fit together): skipped") == 1


@pytest.mark.skipif(kernels() is None, reason="the compiled kernels are not built")
@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_field_and_sample_walks_agree_with_python(seed: int) -> None:
    """What the unwinder of a capture read lean uses: each stack field's place and sizes, and
    where each SAMPLE record starts, on real parts and damaged ones."""
    import numpy as np

    from profiler.format.compact import record_offsets
    from profiler.format.splitstacks import field_spans_python, sample_offsets

    layout, frames = dwarf_frames()
    rnd = random.Random(seed)
    module = kernels()
    for _ in range(40):
        lean, fields = split_stacks(rnd.choice(frames), layout) or (b"", b"")
        spoiled = bytearray(fields)
        if rnd.random() < 0.7 and spoiled:
            at = rnd.randrange(len(spoiled))
            spoiled[at] = rnd.randrange(256)
        try:
            want = field_spans_python(bytes(spoiled))
        except FormatError:
            want = None
        got = module.field_spans(bytes(spoiled))
        assert (got is None) == (want is None)
        if want is not None:
            assert np.array_equal(np.frombuffer(got, dtype=np.int64).reshape(-1, 3), want)
        offsets = sample_offsets(lean)
        assert len(offsets) == len(field_spans_python(fields))
        reference = [p for p in record_offsets(lean) if int.from_bytes(lean[p:p + 4], sys.byteorder) == 9]
        assert offsets.tolist() == reference


@pytest.mark.skipif(kernels() is None, reason="the compiled kernels are not built")
@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_split_agrees_with_python(seed: int) -> None:
    """The recorder's split (per drained buffer): the compiled one and its Python reference give
    the same parts, or both refuse, on real records and damaged ones."""
    from profiler.format.compact import compact_stacks
    from profiler.format.splitstacks import split_stacks_python, stack_words

    layout, frames = dwarf_frames()
    rnd = random.Random(seed)
    module = kernels()
    for _ in range(40):
        data = bytearray(compact_stacks(rnd.choice(frames), layout))
        if rnd.random() < 0.6:
            for _ in range(rnd.randint(1, 3)):
                data[rnd.randrange(len(data))] = rnd.randrange(256)
        if rnd.random() < 0.2:
            del data[rnd.randrange(len(data)) & ~7:]
        want = split_stacks_python(bytes(data), layout)
        assert module.split_stacks(bytes(data), *stack_words(layout)) == want


def field_spoiler(rnd: random.Random) -> Callable[[int, tuple[bytes, bytes]], tuple[bytes, bytes]]:
    """A ``split_copy`` spoiler that damages some frames' stack fields before compression: one
    field short, the first field's size word changed, or data bytes changed."""

    def spoil(k: int, parts: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
        lean, fields = parts
        data = bytearray(fields)
        pick = rnd.randrange(5)
        if pick == 1:
            del data[-8:]
        elif pick == 2:
            data[0] ^= 8  # the first field's size
        elif pick == 3 and len(data) > 64:
            for _ in range(8):
                data[rnd.randrange(8, len(data))] = rnd.randrange(256)
        return lean, bytes(data)

    return spoil


@pytest.mark.skipif(kernels() is None or not hasattr(kernels(), "unwind_frames"),
                    reason="the compiled kernels are not built")
@pytest.mark.parametrize("seed", range(3))
def test_damaged_stack_fields_read_the_same_with_the_compiled_frame_unwinder(
        seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled ``unwind_frames`` (libzstd inflating each frame's stack fields, its own
    field and record walks) and the way it falls back to (zstandard's stream reader,
    field_spans, sample_offsets, unwind_all): the same output and the same warnings, on fields
    damaged before compression (a field short, a size word spoiled, data changed) and after it
    (a byte changed, one too many, a cut end, another frame's fields)."""
    from profiler.format.container import writer as capture_writer
    from profiler.report import unwind_samples

    rnd = random.Random(seed)
    compress = capture_writer.zstd_compress
    calls = [0]
    others: list[bytes] = []

    def spoiled_compress(data: bytes | memoryview) -> bytes:
        out = bytearray(compress(data))
        calls[0] += 1
        if calls[0] % 2:  # a frame's lean records: a damaged one is skipped before unwinding
            return bytes(out)
        others.append(bytes(out))
        pick = rnd.randrange(6)
        if pick == 1:
            out[rnd.randrange(6, len(out))] ^= 1 << rnd.randrange(8)
        elif pick == 2:
            out += b"\0"
        elif pick == 3:
            del out[-rnd.randint(1, 4):]
        elif pick == 4 and len(others) > 1:
            out = bytearray(rnd.choice(others[:-1]))
        return bytes(out)

    spoil = field_spoiler(rnd)
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(capture_writer, "zstd_compress", spoiled_compress)
    spoiled = split_copy(tmp_path / "spoiled.prof", spoil)
    monkeypatch.setattr(capture_writer, "zstd_compress", compress)
    fused = [run_main(capsys, *command, "-i", str(spoiled)) for command in COMMANDS]
    monkeypatch.setattr(unwind_samples, "unwind_frames", lambda *args: None)  # as without libzstd
    apart = [run_main(capsys, *command, "-i", str(spoiled)) for command in COMMANDS]
    assert fused == apart
    assert all(code == 0 for code, _, _ in fused)
    assert "are damaged" in fused[0][2]  # some frames were: the test saw the fallback's warnings
