"""The compiled tally kernel (profiler/native/compiled.c, through profiler/report/tally_native.py)
against the numpy code it replaces (tally.tally_chunk_numpy and the numpy first pass): the same
rows, chains, counts, warnings and errors on every fixture capture, on random captures of every
sample layout the decoder reads (READ in every read_format, RAW, BRANCH_STACK with and without
HW_INDEX, REGS_USER/INTR with and without registers, STACK_USER, AUX, the one-word fields, one
event or several told apart by IDENTIFIER or ID), with damaged samples, damaged frames, every
filter the kernel applies (--cpu, --time) and without callchains or CPUs; and the CLI's outputs
are byte-identical with the extension hidden (PROFILER_NO_NATIVE=1)."""

from __future__ import annotations

import contextlib
import random
import shutil
import struct
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.support.capture_factory import cpu_clock_attr, make_test_header
from tests.support.cli import run_main
from tests.support.paths import CAPTURES
from tests.support.report_capture import comm, fork, mmap2

from profiler.format import perf_data_opener  # noqa: F401  registers: perf.data opens as a capture
from profiler.errors import FormatError
from profiler.format import records as R
from profiler.format.container.layout import VERSION_FRAME_CPU, VERSION_PLAIN
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter
from profiler.format.encode import encode
from profiler.native import kernels
from profiler.report import tally
from profiler.report.options import Filters, TimeRange

SEEDS = [seed if seed < 4 else pytest.param(seed, marks=pytest.mark.slow) for seed in range(12)]
needs_kernels = pytest.mark.skipif(kernels() is None, reason="the compiled kernels are not built (no C compiler?)")


def outcome(path: Path, native: bool, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> Any:
    """What tally_capture gives (every field, as plain values), or the error it raises."""
    monkeypatch.setenv("PROFILER_NO_NATIVE", "0" if native else "1")
    reader = CaptureReader.open(str(path))
    try:
        t = tally.tally_capture(reader, jobs=1, **kw)
        read = (list(reader.warnings), sorted(reader.inflated.seqs), reader.inflated.stored, reader.inflated.inflated)
    except Exception as exc:  # noqa: BLE001  both paths must fail alike
        return ("error", type(exc).__name__, str(exc))
    finally:
        reader.close()
    if t is None:
        return None
    rows = {f.name: getattr(t.rows, f.name).tolist() for f in fields(t.rows)}
    return (rows, t.chains.start.tolist(), t.chains.words.tolist(), sorted(t.has), t.recorded.tolist(),
            dict(t.counts), t.warnings, t.damaged_samples, t.first_time, t.state.comm_names, read)


FILTERS = [
    Filters(),
    Filters(cpus=(1,)),
    Filters(cpus=(0, 5)),
    Filters(time=(TimeRange("s", 0.0000012, 0.0000016),)),
    Filters(time=(TimeRange("s", None, 0.0000014), TimeRange("s", 0.0000017, None))),
]


def assert_same(path: Path, monkeypatch: pytest.MonkeyPatch, chunks: tuple[int | None, ...] = (None, 600)) -> None:
    """The kernel's tally is numpy's, field for field; with the capture's index (which only
    the kernel's path reads, and which may split chunks) the same rows in some order."""
    for chunk_bytes in chunks:
        for filters in FILTERS:
            for callchains, keep_cpu in ((True, True), (False, True), (True, False)):
                kw = dict(filters=filters, callchains=callchains, keep_cpu=keep_cpu, chunk_bytes=chunk_bytes)
                want = outcome(path, False, monkeypatch, **kw)
                got = outcome(path, True, monkeypatch, skim=False, **kw)
                assert got == want, (path.name, chunk_bytes, filters, callchains, keep_cpu)
                skimmed = outcome(path, True, monkeypatch, **kw)
                assert canonical(skimmed) == canonical(want), (path.name, chunk_bytes, filters, callchains, keep_cpu)


def canonical(result: Any) -> Any:
    """An :func:`outcome` with its rows sorted and each row's chain written out."""
    if not isinstance(result, tuple) or result[0] == "error":
        return result
    rows, start, words, *rest = result
    chains = [tuple(words[start[c]:start[c + 1]]) for c in rows["chain_id"]]
    names = [k for k in rows if k != "chain_id"]
    return sorted(zip(*(rows[k] for k in names), chains)), *rest


def fixture_captures() -> list[Path]:
    return sorted(CAPTURES.glob("*.prof")) + sorted(CAPTURES.glob("*.data"))


@needs_kernels
@pytest.mark.parametrize("path", fixture_captures(), ids=lambda p: p.name)
def test_the_kernel_tallies_every_fixture_capture_as_numpy_does(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_same(path, monkeypatch)


# --- random captures of every sample layout -------------------------------------------------

OPTIONAL_BITS = [R.PERF_SAMPLE_IP, R.PERF_SAMPLE_TID, R.PERF_SAMPLE_ADDR, R.PERF_SAMPLE_ID, R.PERF_SAMPLE_STREAM_ID,
                 R.PERF_SAMPLE_CPU, R.PERF_SAMPLE_PERIOD, R.PERF_SAMPLE_READ, R.PERF_SAMPLE_CALLCHAIN,
                 R.PERF_SAMPLE_RAW, R.PERF_SAMPLE_BRANCH_STACK, R.PERF_SAMPLE_REGS_USER, R.PERF_SAMPLE_STACK_USER,
                 R.PERF_SAMPLE_WEIGHT, R.PERF_SAMPLE_DATA_SRC, R.PERF_SAMPLE_TRANSACTION, R.PERF_SAMPLE_REGS_INTR,
                 R.PERF_SAMPLE_PHYS_ADDR, R.PERF_SAMPLE_AUX, R.PERF_SAMPLE_CGROUP, R.PERF_SAMPLE_DATA_PAGE_SIZE,
                 R.PERF_SAMPLE_CODE_PAGE_SIZE]
READ_FORMATS = [0, R.PERF_FORMAT_ID, R.PERF_FORMAT_TOTAL_TIME_ENABLED | R.PERF_FORMAT_LOST,
                R.PERF_FORMAT_GROUP, R.PERF_FORMAT_GROUP | R.PERF_FORMAT_ID | R.PERF_FORMAT_LOST,
                R.PERF_FORMAT_GROUP | R.PERF_FORMAT_TOTAL_TIME_ENABLED | R.PERF_FORMAT_TOTAL_TIME_RUNNING]


def random_attr(rng: random.Random, identifier: bool) -> dict[str, int]:
    sample_type = R.PERF_SAMPLE_TIME | (R.PERF_SAMPLE_IDENTIFIER if identifier else 0)
    for bit in OPTIONAL_BITS:
        if rng.random() < 0.5:
            sample_type |= bit
    return cpu_clock_attr(sample_type, read_format=rng.choice(READ_FORMATS),
                          branch_sample_type=rng.choice([0, R.PERF_SAMPLE_BRANCH_HW_INDEX]),
                          sample_regs_user=rng.choice([0b111, 0xFF0F]), sample_regs_intr=rng.choice([1, 0b1010]),
                          sample_stack_user=64)


CHAINS = [(R.PERF_CONTEXT_USER, 0x401000, 0x401200), (R.PERF_CONTEXT_KERNEL, 0xFFFFFFFF81000010),
          (R.PERF_CONTEXT_KERNEL, 0xFFFFFFFF81000010, R.PERF_CONTEXT_USER, 0x401000, 0x401300),
          (0x401000,), ()]


def sample_words(rng: random.Random, layout: R.SampleLayout, ident: int, t: int, pid: int,
                 periods: tuple[int, ...] = (1, 1000, 7)) -> list[int]:
    """One SAMPLE record's words (header first) of ``layout``, with random field values."""
    words = [0]
    for f in layout.sample_fields:
        shape = layout.shape(f)
        if f.name in ("identifier", "id"):
            words.append(ident)
        elif f.name == "tid":
            words.append(pid | (pid + rng.randint(0, 1)) << 32)
        elif f.name == "time":
            words.append(t)
        elif f.name == "cpu":
            words.append(rng.choice([0, 1, 1, 0xFFFFFFFF]))
        elif f.name == "period":
            words.append(rng.choice(periods))
        elif f.name == "ip":
            words.append(rng.choice([0x401000, 0x401008, 0xFFFFFFFF81000010]))
        elif f.kind in R.FIXED_KINDS:
            words.append(rng.getrandbits(64))
        elif f.kind == R.KIND_READ:
            times = R.popcount(shape & (R.PERF_FORMAT_TOTAL_TIME_ENABLED | R.PERF_FORMAT_TOTAL_TIME_RUNNING))
            per = 1 + bool(shape & R.PERF_FORMAT_ID) + bool(shape & R.PERF_FORMAT_LOST)
            if shape & R.PERF_FORMAT_GROUP:
                nr = rng.randint(0, 3)
                words += [nr] + [rng.getrandbits(20) for _ in range(times + nr * per)]
            else:
                words += [rng.getrandbits(20) for _ in range(times + per)]
        elif f.kind == R.KIND_CALLCHAIN:
            chain = rng.choice(CHAINS)
            words += [len(chain), *chain]
        elif f.kind == R.KIND_RAW:
            n = rng.choice([4, 12, 20])  # u32 size + bytes end on a word
            data = rng.randbytes(n)
            words += list(struct.unpack(f"<{(n + 4) // 8}Q", struct.pack("<I", n) + data))
        elif f.kind == R.KIND_BRANCH:
            nr = rng.randint(0, 2)
            hw = [rng.getrandbits(8)] if shape & R.PERF_SAMPLE_BRANCH_HW_INDEX else []
            words += [nr, *hw] + [rng.getrandbits(48) for _ in range(3 * nr)]
        elif f.kind == R.KIND_REGS:
            abi = rng.choice([0, 2, 2])
            words += [abi] + ([rng.getrandbits(48) for _ in range(R.popcount(shape))] if abi else [])
        elif f.kind == R.KIND_STACK:
            size = rng.choice([0, 16, 64])
            words += [size] + [rng.getrandbits(64) for _ in range(size // 8)] + ([rng.randint(0, size)] if size else [])
        else:  # AUX
            size = rng.choice([0, 8, 13])
            words += [size] + [rng.getrandbits(64) for _ in range((size + 7) // 8)]
    return words


def damaged(rng: random.Random, words: list[int]) -> list[int]:
    """Damage a record the way a hostile capture would: a count word too large, a record cut
    short, any word random (the header's size is kept right, so the frame walks on)."""
    roll = rng.random()
    out = list(words)
    if roll < 0.4 and len(out) > 2:
        out[rng.randrange(1, len(out))] = rng.choice([rng.getrandbits(64), 2 ** 63, 0xFFFF, len(out), len(out) - 2])
    elif roll < 0.7 and len(out) > 2:
        out = out[:rng.randrange(1, len(out))]
    else:
        out[rng.randrange(1, len(out))] = rng.getrandbits(rng.choice([3, 16, 64]))
    return out


def layout_capture(path: Path, seed: int, damage: float = 0.0, zstd: bool = False) -> Path:
    """One to three events of random layouts (several: told apart by IDENTIFIER, or by ID with
    one layout), samples of four threads on two CPUs among COMM/MMAP2/FORK records, raw frames
    of a few records (``zstd``: half of them RAW_ZSTD), in format 2.x or 3.0 (frames name their
    CPU)."""
    rng = random.Random(seed)
    nev = rng.choice([1, 2, 3])
    by_id = nev > 1 and rng.random() < 0.5
    attrs = [random_attr(rng, identifier=nev > 1 and not by_id)]
    for _ in range(nev - 1):
        attrs.append(dict(attrs[0], config=len(attrs)) if by_id else random_attr(rng, identifier=True))
    if by_id:
        for a in attrs:
            a["sample_type"] |= R.PERF_SAMPLE_ID
    events = [{"name": f"ev{k}", "attr": a, "ids": [10 + k, 20 + k]} for k, a in enumerate(attrs)]
    layouts = [R.SampleLayout.from_attr(a) for a in attrs]
    version = rng.choice([VERSION_PLAIN, VERSION_FRAME_CPU])
    writer = CaptureWriter.create(path, make_test_header(events), version)
    base = layouts[0]
    writer.write_synth(b"".join(encode(r, base) for r in [comm(100, 100, "a", 1), comm(200, 200, "b", 1),
                                                           mmap2(100, 0x400000, 0x10000, 0, "/bin/a", 1)]))
    t = 1000
    # one capture in five has periods that add up past 2^64 (refused alike by both paths)
    periods = (1, 1000, 2 ** 63 + 5) if rng.random() < 0.2 else (1, 1000, 7)
    pending: dict[int, list[bytes]] = {0: [], 1: [], 0xFFFF: []}
    for i in range(300):
        t += rng.choice([0, 1, 2])
        cpu = rng.choice([0, 1, 1, 0xFFFF] if version == VERSION_FRAME_CPU else [0, 1])
        roll = rng.random()
        if roll < 0.05:
            data = encode(comm(rng.choice([100, 200, 101]), rng.choice([100, 101, 201]), rng.choice("xyz"), t,
                               exec=True), base)
        elif roll < 0.08:
            data = encode(mmap2(rng.choice([100, 200]), 0x401000, 0x1000, 0, rng.choice(["/bin/c", "/bin/d"]), t),
                          base)
        elif roll < 0.1:
            data = encode(fork(300 + i, 100, 300 + i, 100, t), base)
        else:
            k = rng.randrange(nev)
            words = sample_words(rng, layouts[k], rng.choice(events[k]["ids"] + [99]), t, rng.choice([100, 200]),
                                 periods)
            if rng.random() < damage:
                words = damaged(rng, words)
            misc = rng.choice([R.PERF_RECORD_MISC_USER, R.PERF_RECORD_MISC_KERNEL])
            words[0] = R.PERF_RECORD_SAMPLE | misc << 32 | (8 * len(words)) << 48
            data = struct.pack(f"<{len(words)}Q", *words)
        pending[cpu].append(data)
        if len(pending[cpu]) >= rng.randint(2, 9):
            write_frame(writer, rng, cpu, b"".join(pending[cpu]), zstd)
            pending[cpu] = []
    for cpu, recs in pending.items():
        if recs:
            write_frame(writer, rng, cpu, b"".join(recs), zstd)
    writer.close({})
    return path


def write_frame(writer: CaptureWriter, rng: random.Random, cpu: int, data: bytes, zstd: bool) -> None:
    if zstd and rng.random() < 0.5:
        writer.write_raw_zstd(cpu, data)
    else:
        writer.write_raw(cpu, data)


@needs_kernels
@pytest.mark.parametrize("seed", SEEDS)
def test_compressed_frames_streamed_through_one_buffer_tally_as_inflated_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """RAW_ZSTD frames inflated chunk by chunk into the kernel's buffer (FrameStream) give what
    the reader's inflation into a temporary file gives the numpy path; the report never makes
    that file."""
    path = layout_capture(tmp_path / "r.prof", 300 + seed, damage=0.1, zstd=True)
    assert_same(path, monkeypatch, chunks=(None, 300))
    monkeypatch.setenv("PROFILER_NO_NATIVE", "0")
    reader = CaptureReader.open(str(path))
    with contextlib.suppress(FormatError):  # periods made to add up past 2^64: refused alike
        tally.tally_capture(reader, Filters(), jobs=1)
    assert reader.stored_frames() is not None  # never inflated into a temporary file
    reader.close()


@needs_kernels
@pytest.mark.parametrize("base", [600, 3000, 20000])
def test_streamed_frames_past_the_inflation_budget_are_skipped_as_the_reader_skips_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base: int) -> None:
    from profiler.format.container import inflate

    path = layout_capture(tmp_path / "r.prof", 3, zstd=True)  # 28 KB of records inflated
    monkeypatch.setattr(inflate, "RAW_INFLATE_BASE", base)
    monkeypatch.setattr(inflate, "RAW_INFLATE_PER_BYTE", 0)
    want = outcome(path, False, monkeypatch, filters=Filters())
    assert want is not None and want[0] != "error" and any("skipped" in w for w in want[-1][0]), want
    assert outcome(path, True, monkeypatch, filters=Filters()) == want
    reader = CaptureReader.open(str(path))  # two tallies of one capture: one warning, counted once
    tally.tally_capture(reader, Filters(), jobs=1)
    tally.tally_capture(reader, Filters(), callchains=False, jobs=1)
    assert (list(reader.warnings), sorted(reader.inflated.seqs), reader.inflated.stored,
            reader.inflated.inflated) == want[-1]
    reader.close()


@needs_kernels
@pytest.mark.parametrize("seed", SEEDS)
def test_the_kernel_tallies_random_layouts_as_numpy_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         seed: int) -> None:
    assert_same(layout_capture(tmp_path / "r.prof", seed), monkeypatch, chunks=(None, 300))


@needs_kernels
@pytest.mark.parametrize("seed", SEEDS)
def test_the_kernel_drops_damaged_samples_as_numpy_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        seed: int) -> None:
    path = layout_capture(tmp_path / "r.prof", 100 + seed, damage=0.3)
    assert_same(path, monkeypatch, chunks=(None,))
    want = outcome(path, False, monkeypatch, filters=Filters())
    assert want is None or want[0] == "error" or want[7] > 0  # some samples were damaged


def frames_damaged(data: bytes, rng: random.Random) -> Iterator[bytes]:
    """The capture with one random word of its records area changed (frames' CRCs stay wrong
    or right as it happens: the reader decides what to skip, both paths read what it gives)."""
    for _ in range(6):
        b = bytearray(data)
        at = rng.randrange(64, len(b) - 8) & ~7
        b[at:at + 8] = rng.getrandbits(64).to_bytes(8, "little")
        yield bytes(b)


@needs_kernels
@pytest.mark.slow  # make check leaves it out; make test runs it
def test_hostile_bytes_give_the_same_rows_or_the_same_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    for seed in range(4):
        data = layout_capture(tmp_path / "r.prof", 200 + seed).read_bytes()
        for k, hostile in enumerate(frames_damaged(data, rng)):
            path = tmp_path / f"h{seed}-{k}.prof"
            path.write_bytes(hostile)
            try:
                CaptureReader.open(str(path)).close()
            except Exception:  # noqa: BLE001  refused before any tally: not this test's business
                continue
            assert_same(path, monkeypatch, chunks=(None,))


# --- the CLI with and without the extension ---------------------------------------------------

COMMANDS = [
    ("report",), ("report", "--no-children", "-g", "none"), ("report", "--sort", "comm,pid,tid,cpu,dso,sym"),
    ("report", "--format", "json"), ("report", "--cpu", "1", "-g", "none"), ("report", "--format", "folded"),
    ("script",), ("export", "-f", "folded"), ("export", "-f", "speedscope"),
]


def cli_output(args: list[str], native: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
               ) -> tuple[int, str, str]:
    monkeypatch.setenv("PROFILER_NO_NATIVE", "0" if native else "1")
    return run_main(capsys, *args)


@pytest.mark.parametrize("name", ["small.prof", "format-4.0.prof", "format-3.1.prof", "format-3.0.prof",
                                  "format-2.0.prof",
                                  pytest.param("offline-shares.prof", marks=pytest.mark.slow),
                                  "perf-6.1-zstd-two-events.data"])
def test_every_output_is_the_same_with_the_extension_hidden(name: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The key paths run on the numpy fallback (PROFILER_NO_NATIVE=1, as on a machine without a
    compiler) and give what the kernel gives, byte for byte."""
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))
    path = str(CAPTURES / name)
    for command in COMMANDS:
        args = [*command, "-i", path]
        hidden = cli_output(args, False, monkeypatch, capsys)
        assert hidden[0] == 0 or "--cpu" in command, (command, hidden)
        assert cli_output(args, True, monkeypatch, capsys) == hidden, command


def test_the_extension_is_built_where_there_is_a_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """``make venv`` (pip's editable install) builds it in place; without a compiler the
    install goes on without it (setup.py: optional)."""
    monkeypatch.delenv("PROFILER_NO_NATIVE", raising=False)
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the numpy fallback runs")
    assert kernels() is not None
    monkeypatch.setenv("PROFILER_NO_NATIVE", "1")
    assert kernels() is None


def test_the_kernel_declines_a_frame_it_cannot_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame outside the buffer (or not 8-aligned): the kernel returns None, never reads it."""
    module = kernels()
    if module is None:
        pytest.skip("the compiled kernels are not built")
    view = bytes(64)
    one = np.zeros(1, dtype=np.int64)
    for start, length in ((8, 64), (4, 8), (-8, 8), (0, 1 << 62)):
        frames = (np.asarray([start], dtype=np.int64), np.asarray([length], dtype=np.int64))
        assert module.scan_chunk(view, *frames, -1) is None
        empty = np.zeros(0, dtype=np.int64)
        assert module.tally_chunk(view, *frames, one, empty, np.zeros(2, dtype=np.int64), empty.view(np.uint64),
                                  empty, empty, empty.view(np.uint64), empty.view(np.uint64), empty, empty, empty,
                                  0, -1, 0, 1, 0, 1) is None


@needs_kernels
@pytest.mark.parametrize("seed", range(4))
def test_inflate_parts_inflates_what_zstd_inflates_one_frame_at_a_time(seed: int) -> None:
    """The compiled ``inflate_parts`` (libzstd, a chunk's frames in one call) against
    ``codec.zstd_decompress_into`` (zstandard, one frame): the same bytes where the frame
    inflates to the size it declares, and FRAME_DAMAGED (1) for one that does not (a byte
    changed, its end cut, a byte too many, another size declared, no zstd frame at all)."""
    import zstandard

    from profiler.format.container.codec import zstd_decompress_into

    module = kernels()
    if module is None or module.inflate_parts((), np.zeros((0, 2), dtype=np.int64), bytearray(8)) is None:
        pytest.skip("no libzstd.so.1")
    rng = random.Random(seed)
    compressor = zstandard.ZstdCompressor(level=3)
    parts: list[bytes] = []
    table: list[tuple[int, int]] = []
    want: list[bytes | None] = []
    at = 0
    for _ in range(40):
        data = bytes(rng.choice(b"ab\0") for _ in range(rng.randrange(0, 3000))) * rng.randint(1, 4)
        part = bytearray(compressor.compress(data))
        size = len(data)
        pick = rng.randrange(7)
        if pick == 1 and len(part) > 12:
            part[rng.randrange(6, len(part))] ^= 1 << rng.randrange(8)
        elif pick == 2:
            del part[-rng.randint(1, 4):]
        elif pick == 3:
            part += b"\0"
        elif pick == 4:
            size += 8  # a size the frame does not declare
        elif pick == 5:
            part = bytearray(rng.randbytes(rng.randrange(0, 40)))
        ref = bytearray(size)
        try:
            n = zstd_decompress_into(memoryview(bytes(part)), lambda k, ref=ref: memoryview(ref)[:k], size)
        except FormatError:
            n = None
        want.append(bytes(ref) if n == size else None)  # a changed literal may inflate (no checksum)
        parts.append(bytes(part))
        table.append((at, size))
        at += size + (-size) % 8
    dst = bytearray(at)
    status = module.inflate_parts(tuple(parts), np.asarray(table, dtype=np.int64), dst)
    for k, ((start, size), expected) in enumerate(zip(table, want)):
        if expected is None:
            assert status[k] == 1, k
        else:
            assert status[k] == 0 and dst[start:start + size] == expected, k
    assert any(w is None for w in want) and any(w is not None for w in want)
    with pytest.raises(ValueError):
        module.inflate_parts(tuple(parts[:1]), np.asarray([(at, 16)], dtype=np.int64), dst)


@needs_kernels
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_the_stream_inflates_a_chunk_at_once_or_frame_by_frame_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Without ``inflate_parts`` (or libzstd), the stream inflates each frame with zstandard:
    the same tally, the same warnings."""
    from profiler.report import tally_native

    path = layout_capture(tmp_path / "r.prof", 310 + seed, damage=0.1, zstd=True)
    at_once = outcome(path, True, monkeypatch, filters=Filters())
    monkeypatch.setattr(tally_native.FrameStream, "_inflated_at_once", lambda self, module, chunk: None)
    assert outcome(path, True, monkeypatch, filters=Filters()) == at_once
