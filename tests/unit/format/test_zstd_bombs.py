"""zstd bombs in RAW_ZSTD frames: a few kilobytes in the file that claim hundreds of megabytes
(or gibibytes) of records once inflated. Raw frames inflate within a budget tied to the
file's size (``profiler.format.container.inflate``): a frame past it is skipped with one
warning, the records of the other frames are still read, and every reading command ends
cleanly within bounded memory under a 2 GiB address-space limit."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard
from tests.support.capture_factory import make_test_header, small_capture_records

from profiler.format import records as R

from profiler.format.encode import encode
from profiler.format.container import inflate
from profiler.format.container.inflate import RAW_INFLATE_BASE, RAW_INFLATE_PER_BYTE, raw_budget
from profiler.format.container.layout import FRAME_RAW_ZSTD, VERSION_ZSTD
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter
from profiler.format.decode.decoder import load_capture

ROOT = Path(__file__).resolve().parents[3]
MIB = 1 << 20
SAMPLE_HEADER = struct.pack("<IHH", R.PERF_RECORD_SAMPLE, R.PERF_RECORD_MISC_USER, 8)  # a SAMPLE of no body
AS_LIMIT = 2 << 30
RSS_LIMIT_KB = 150 * 1024

# A child that limits its address space, runs the CLI and reports its peak RSS (the kernel's).
_MEASURE = ("import resource, subprocess, sys\n"
            "def limit():\n"
            f"    resource.setrlimit(resource.RLIMIT_AS, ({AS_LIMIT}, {AS_LIMIT}))\n"
            "r = subprocess.run(sys.argv[1:], capture_output=True, preexec_fn=limit)\n"
            "sys.stdout.buffer.write(r.stderr)\n"
            "print('\\nRC', r.returncode, 'RSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")

COMMANDS = [
    ["info"], ["report"], ["script"], ["annotate", "main"], ["flamegraph", "-o", "{out}"],
    ["export", "-f", "folded", "-o", "{out}"], ["export", "-f", "pprof", "-o", "{out}"],
    ["buildids"], ["dump"],
]


def bomb_frame(inflated: int) -> bytes:
    """One zstd frame (content size declared) of ``inflated`` bytes of 8-byte SAMPLE headers."""
    squeeze = zstandard.ZstdCompressor(level=3).compressobj(size=inflated)
    block = SAMPLE_HEADER * (MIB // 8)
    parts = [squeeze.compress(block) for _ in range(inflated // MIB)]
    parts.append(squeeze.flush())
    return b"".join(parts)


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``one``: one frame of 256 MiB; ``three``: three frames of 900 MiB; each after the small
    capture's ordinary records (which must still be read)."""
    where = tmp_path_factory.mktemp("bombs")
    big = bomb_frame(900 * MIB)
    out = {}
    for name, frames in (("one", [bomb_frame(256 * MIB)]), ("three", [big, big, big])):
        path = where / f"{name}.prof"
        synth, raws = small_capture_records()
        layout = R.SampleLayout.from_attr(make_test_header()["events"][0]["attr"])
        with CaptureWriter.create(path, make_test_header(), VERSION_ZSTD) as writer:
            writer.write_synth(b"".join(encode(rec, layout) for rec in synth))
            for frame in frames:
                writer._frame(FRAME_RAW_ZSTD, 0, (frame,))
            for cpu, recs in enumerate(raws):
                writer.write_raw(cpu % 2, b"".join(encode(rec, layout) for rec in recs))
            writer.close()
        out[name] = path
    return out


def test_the_bombs_are_small_files(bombs: dict[str, Path]) -> None:
    assert bombs["one"].stat().st_size < 64 * 1024
    assert bombs["three"].stat().st_size < 1 * MIB


def test_the_inflation_budget_is_tied_to_the_file_size() -> None:
    assert raw_budget(0) == RAW_INFLATE_BASE
    assert raw_budget(1000) == RAW_INFLATE_BASE + 1000 * RAW_INFLATE_PER_BYTE


@pytest.mark.parametrize("name", ["one", "three"])
def test_a_frame_past_the_budget_is_skipped_with_one_warning(bombs: dict[str, Path], name: str) -> None:
    with CaptureReader.open(bombs[name]) as reader:
        data = load_capture(reader)
        skipped = [w for w in reader.warnings if "compressed raw frame" in w]
        assert len(skipped) == 1, reader.warnings
        assert "inflate past" in skipped[0]
        assert not reader.inflated.seqs  # nothing was inflated
        assert len(data.samples) == 20  # the ordinary frames' samples are all there
        assert reader.size < 1 * MIB and len(reader.raw_view()) < 2 * reader.size + 4096


def test_frames_within_the_budget_are_inflated_and_the_rest_skipped(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget is spent frame by frame: a frame that fits is read and spends it, one past
    what is left is skipped, and all the skipped frames are named in one warning."""
    monkeypatch.setattr(inflate, "RAW_INFLATE_PER_BYTE", 0)  # the budget is the base
    header = make_test_header()
    layout = R.SampleLayout.from_attr(header["events"][0]["attr"])
    _, raws = small_capture_records()
    records = [b"".join(encode(rec, layout) for rec in recs) for recs in raws]
    compress = zstandard.ZstdCompressor(level=3).compress
    copies = RAW_INFLATE_BASE // len(records[0]) // 2 + 2  # of 5 samples: just over half the base
    half = records[0] * copies
    path = tmp_path / "c.prof"
    with CaptureWriter.create(path, header, VERSION_ZSTD) as writer:
        writer._frame(FRAME_RAW_ZSTD, 0, (compress(half),))  # fits
        writer._frame(FRAME_RAW_ZSTD, 0, (compress(half + half),))  # past what is left: skipped
        writer._frame(FRAME_RAW_ZSTD, 0, (compress(records[0] * (copies // 2)),))  # fits in what is left
        writer._frame(FRAME_RAW_ZSTD, 0, (compress(half),))  # past what is left now: skipped
        writer.write_raw(1, records[1])
        writer.close()
    with CaptureReader.open(path) as reader:
        data = load_capture(reader)
        assert reader.inflated.seqs == {0, 2}
        skipped = [w for w in reader.warnings if "compressed raw frame" in w]
        assert len(skipped) == 1 and "2 compressed raw frames (numbers 1, 3) were skipped" in skipped[0], skipped
        assert len(data.samples) == 5 * (copies + copies // 2) + 5  # frames 0, 2 and the RAW one


def run_measured(args: list[str]) -> tuple[int, str, int]:
    done = subprocess.run([sys.executable, "-c", _MEASURE, sys.executable, "-m", "profiler", *args],
                          capture_output=True, text=True, errors="replace", timeout=300, cwd=ROOT)
    *err, last = done.stdout.rstrip("\n").split("\n")
    _, rc, _, rss = last.split()
    return int(rc), "\n".join(err), int(rss)


@pytest.mark.parametrize("name", ["one", "three"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:3:2]) if c[0] == "export" else c[0])
def test_every_reading_command_ends_cleanly_on_a_bomb(bombs: dict[str, Path], name: str, command: list[str],
                                                      tmp_path: Path) -> None:
    args = [a.replace("{out}", str(tmp_path / "out")) for a in command] + ["-i", str(bombs[name])]
    rc, err, rss = run_measured(args)
    assert "Traceback" not in err, err
    assert rc == 0 or (rc in (1, 2) and err.strip().startswith("profiler: ")), (rc, err)
    assert err.count("inflate past") == 1, err  # the one warning
    assert rss < RSS_LIMIT_KB, f"peak RSS {rss} KiB"
