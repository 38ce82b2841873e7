"""The perf.data reader on hand-built files: layouts, features, events, compression, damage.

The same records written as file mode, pipe mode, compressed and COMPRESSED2 must decode to
the same samples; damage of every kind ends in warnings or one FormatError, never a
traceback. (tests/e2e/test_perfdata_e2e.py compares with perf itself on real recordings.)
"""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.support.capture_factory import cpu_clock_attr
from tests.support.perfdata_factory import (
    PerfEvent,
    attr_bytes,
    PerfFile,
    build_id_entry,
    compressed,
    encode_all,
    file_mode,
    pipe_mode,
    pstring,
    round_record,
    standard_features,
)
from tests.support.report_capture import comm, kaddr, kallsyms_text, kernel_sample, mmap2, user_sample
from tests.support.paths import CAPTURES

from profiler.errors import FormatError, ProfilerError
from profiler.format import records as R
from profiler.format.encode import encode
from profiler.format.decode.decoder import load_capture
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter
from profiler.format.perfdata import PerfDataReader
from profiler.format.perfdata import walk as W
from profiler.format.perfdata.convert import write_capture
from profiler.format.perfdata.features import decode_attr

ST = (R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_CPU
      | R.PERF_SAMPLE_PERIOD | R.PERF_SAMPLE_CALLCHAIN)
BID = bytes.fromhex("58c95b632be844d4be265bdf4a3659ffabaf5851")
KBID = bytes.fromhex("48dc540c8b76393804ca8088dbfa7d42911a9444")


def scenario(n: int = 60) -> tuple[PerfEvent, list[bytes]]:
    attr = cpu_clock_attr(ST)
    ev = PerfEvent(attr, [11, 12], "cpu-clock:ppp")
    recs: list[R.Record] = [comm(100, 100, "demo", 0, exec=True),
                            mmap2(100, 0x400000, 0x2000, 0, "/usr/bin/demo", 0)]
    for i in range(n):
        t = 1_000 + 10 * i
        if i % 3 == 0:
            recs.append(kernel_sample(["k_leaf_a", "k_mid", "k_root"], t, cpu=i % 2))
        else:
            recs.append(user_sample([0x400100 + i % 4, 0x400050], t, cpu=i % 2))
    return ev, encode_all(recs, attr)


def features(ev: PerfEvent) -> dict[int, bytes]:
    bids = build_id_entry(100, 2, BID, "/usr/bin/demo") + build_id_entry(-1, 1, KBID, "[kernel.kallsyms]")
    return standard_features([ev], bids)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def decode(path: Path) -> tuple[CaptureReader, object]:
    reader = CaptureReader.open(path)
    return reader, load_capture(reader)


def columns(data: object) -> dict[str, list[int]]:
    s = data.samples  # type: ignore[attr-defined]
    chains = [s.chain(i).tolist() for i in range(len(s))]
    return {"ip": s.ip.tolist(), "tid": s.tid.tolist(), "time": s.time.tolist(), "cpu": s.cpu.tolist(),
            "period": s.period.tolist(), "chains": chains}  # type: ignore[dict-item]


@pytest.fixture
def layouts(tmp_path: Path) -> dict[str, Path]:
    ev, recs = scenario()
    feats = features(ev)
    half = len(recs) // 2
    plain = PerfFile([ev], [*recs[:half], round_record(), *recs[half:]], feats)
    return {
        "file": write(tmp_path, "file.data", file_mode(plain)),
        "pipe": write(tmp_path, "pipe.data", pipe_mode(plain)),
        "zstd": write(tmp_path, "z.data", file_mode(PerfFile([ev], [*compressed(recs[:half]), round_record(),
                                                                     *compressed(recs[half:])], feats))),
        "zstd2": write(tmp_path, "z2.data", file_mode(PerfFile([ev], compressed(recs, 96, True), feats))),
        "zpipe": write(tmp_path, "zp.data", pipe_mode(PerfFile([ev], compressed(recs, 50), feats))),
    }


def test_every_layout_decodes_to_the_same_samples(layouts: dict[str, Path]) -> None:
    results = {}
    for name, path in layouts.items():
        reader, data = decode(path)
        assert isinstance(reader, PerfDataReader)
        assert reader.warnings == [], (name, reader.warnings)
        assert reader.clean_end
        results[name] = columns(data)
        assert data.counts["SAMPLE"] == 60 and data.counts["MMAP2"] == 1  # type: ignore[attr-defined]
    first = results["file"]
    assert len(first["ip"]) == 60 and first["chains"][0][0] == R.PERF_CONTEXT_KERNEL
    for name, cols in results.items():
        assert cols == first, name


def test_file_mode_frames_are_views_of_the_file_others_are_spooled(layouts: dict[str, Path]) -> None:
    file_reader = CaptureReader.open(layouts["file"])
    assert file_reader._data is file_reader._file_data  # type: ignore[attr-defined]
    for name in ("pipe", "zstd", "zpipe"):
        reader = CaptureReader.open(layouts[name])
        if name != "pipe":  # compressed records: copied, decompressed, into a spool file
            assert reader._data is not reader._file_data  # type: ignore[attr-defined]
        assert all(f.offset % 8 == 0 for f in reader.iter_frames())


def test_header_and_metadata_from_the_features(layouts: dict[str, Path]) -> None:
    reader = CaptureReader.open(layouts["file"])
    h = reader.header
    assert h["hostname"] == "testhost" and h["kernel_release"] == "6.0.0-test" and h["arch"] == "x86_64"
    assert h["tool_version"] == "perf 6.1.0" and h["byte_order"] == "little" and h["word_size"] == 8
    assert h["nr_cpus"] == 4 and h["online_cpus"] == [0, 1]  # NRCPUS: available, then online
    assert h["cmdline"] == ["/usr/bin/perf", "record", "-g", "./demo"]
    assert h["start_perf_clock_ns"] == 2_000
    assert [e["name"] for e in h["events"]] == ["cpu-clock:ppp"] and h["events"][0]["ids"] == [11, 12]
    assert h["events"][0]["attr"] == {**cpu_clock_attr(ST)}
    topo = h["perf_data"]["cpu_topology"]
    assert topo["thread_siblings"] == ["0-1", "2-3"] and topo["core_id"] == [0, 0, 1, 1]
    assert reader.build_ids() == {"/usr/bin/demo": BID.hex()}
    assert reader.metadata("kernel") == [{"build_id": KBID.hex(), "release": "6.0.0-test"}]
    pipe = CaptureReader.open(layouts["pipe"])
    assert pipe.header["events"][0]["name"] == "cpu-clock:ppp"  # from EVENT_UPDATE
    assert pipe.header["perf_data"]["mode"] == "pipe" and pipe.build_ids() == {"/usr/bin/demo": BID.hex()}


def test_report_on_perf_data_resolves_kernel_frames(layouts: dict[str, Path], tmp_path: Path) -> None:
    ksyms = write(tmp_path, "kallsyms", kallsyms_text().encode())
    for name in ("file", "zpipe"):
        out = run("report", "-i", str(layouts[name]), "--kallsyms", str(ksyms), "--format", "json",
                  "--no-children", "-g", "none", "--sort", "sym")
        assert out.returncode == 0, out.stderr
        rows = {r["symbol"]: r["samples"] for r in json.loads(out.stdout)["rows"]}
        assert rows["k_leaf_a"] == 20 and sum(rows.values()) == 60


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler", *args], capture_output=True, text=stdin is None,
                          input=stdin, timeout=120)  # type: ignore[call-overload, no-any-return]


def test_standard_input_reads_a_pipe_mode_stream(layouts: dict[str, Path]) -> None:
    res = run("script", "-i", "-", stdin=layouts["pipe"].read_bytes())
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().count("cpu-clock:ppp:") == 60


def test_events_named_by_sample_id_and_dummy_last(tmp_path: Path) -> None:
    st = R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_ID | R.PERF_SAMPLE_PERIOD
    dummy = PerfEvent({**cpu_clock_attr(st), "config": 9}, [1], "dummy:u")
    clock = PerfEvent(cpu_clock_attr(st), [2, 3], "cpu-clock")
    faults = PerfEvent({**cpu_clock_attr(st), "config": 2}, [4], "page-faults")
    layout = R.SampleLayout.from_attr(clock.attr)
    recs = [encode(R.Sample(ip=0x1000 + i, pid=1, tid=1, time=10 + i, id=[2, 3, 4][i % 3], period=1), layout)
            for i in range(30)]
    path = write(tmp_path, "multi.data", file_mode(PerfFile([dummy, clock, faults], recs,
                                                            standard_features([dummy, clock, faults]))))
    reader, data = decode(path)
    names = [e["name"] for e in reader.header["events"]]
    assert names == ["cpu-clock", "page-faults", "dummy:u"]
    ev = data.samples.event  # type: ignore[attr-defined]
    assert np.count_nonzero(ev == 0) == 20 and np.count_nonzero(ev == 1) == 10


def test_attr_flags_of_a_big_endian_writer() -> None:
    attr = cpu_clock_attr(ST, exclude_kernel=1, precise_ip=2)
    little = attr_bytes(attr)
    assert decode_attr(little, "<") == attr
    flags = struct.unpack_from("<Q", little, 40)[0]
    # big endian: every integer byte-swapped, and bitfield bit i is bit 7 - i % 8 of byte i // 8
    be_flags = bytes(int(f"{(flags >> (8 * k)) & 0xFF:08b}"[::-1], 2) for k in range(8))
    fields = struct.unpack_from("<IIQQQQ", little, 0)
    tail = struct.unpack_from("<IIQQQQIiQIHHIIQ", little, 48)
    big = struct.pack(">IIQQQQ", *fields) + be_flags + struct.pack(">IIQQQQIiQIHHIIQ", *tail)
    assert decode_attr(big, ">") == attr


def test_auxtrace_and_tracing_data_payloads_are_skipped(tmp_path: Path) -> None:
    ev, recs = scenario(6)
    aux = struct.pack("<IHHQQQIIII", 71, 0, 48, 24, 0, 0, 0, 0, 0, 0) + b"\xff" * 24
    tracing = struct.pack("<IHHII", 66, 0, 16, 16, 0) + b"\x09" * 16
    path = write(tmp_path, "aux.data", file_mode(PerfFile([ev], [*recs[:3], aux, tracing, *recs[3:]], features(ev))))
    reader, data = decode(path)
    assert reader.warnings == [] and data.counts["SAMPLE"] == 6  # type: ignore[attr-defined]
    assert reader.header["perf_data"]["perf_records"] == {"AUXTRACE": 1, "HEADER_TRACING_DATA": 1}


def test_a_killed_perf_record_is_read_to_its_last_record(tmp_path: Path) -> None:
    ev, recs = scenario()
    whole = file_mode(PerfFile([ev], recs, {}), data_size=0)  # perf writes the size at exit only
    cut = write(tmp_path, "killed.data", whole[:len(whole) - 13])
    reader, data = decode(cut)
    assert not reader.clean_end
    assert any("did not finish" in w for w in reader.warnings)
    assert any("skipped the last" in w for w in reader.warnings)
    assert data.counts["SAMPLE"] == 59  # type: ignore[attr-defined]


def test_truncated_file_and_damaged_sections_warn(tmp_path: Path) -> None:
    ev, recs = scenario()
    data = bytearray(file_mode(PerfFile([ev], recs, features(ev))))
    short = write(tmp_path, "short.data", bytes(data[:len(data) // 2]))
    reader, decoded = decode(short)
    assert not reader.clean_end and any("truncated" in w for w in reader.warnings)
    assert 0 < decoded.counts["SAMPLE"] < 60  # type: ignore[attr-defined]
    # a feature section claiming bytes past the end of the file is ignored
    table = len(data) - sum(len(b) for b in features(ev).values()) - 16 * len(features(ev))
    struct.pack_into("<Q", data, table + 8, 1 << 40)
    reader2, decoded2 = decode(write(tmp_path, "feat.data", bytes(data)))
    assert any("runs past the end" in w for w in reader2.warnings)
    assert decoded2.counts["SAMPLE"] == 60  # type: ignore[attr-defined]


def test_damaged_header_is_one_format_error(tmp_path: Path) -> None:
    ev, recs = scenario(3)
    good = file_mode(PerfFile([ev], recs, features(ev)))
    for offset, value in ((16, 3), (24, 1 << 50), (40, 1 << 50), (8, 7)):
        bad = bytearray(good)
        struct.pack_into("<Q", bad, offset, value)
        with pytest.raises(FormatError, match="perf.data"):
            CaptureReader.open(write(tmp_path, "bad.data", bytes(bad)))
    with pytest.raises(FormatError, match="first version"):
        CaptureReader.open(write(tmp_path, "v1.data", b"PERFFILE" + bytes(200)))


def test_random_damage_never_escapes_as_anything_but_a_sentence(layouts: dict[str, Path], tmp_path: Path) -> None:
    rng = random.Random(14)
    for name in ("file", "pipe", "zstd"):
        good = layouts[name].read_bytes()
        for k in range(120):
            bad = bytearray(good)
            if k % 3 == 0:
                bad = bad[:rng.randrange(16, len(bad))]
            for _ in range(rng.randrange(1, 6)):
                at = rng.randrange(8, len(bad))
                bad[at] = rng.randrange(256)
            path = write(tmp_path, "fuzz.data", bytes(bad))
            try:
                reader = CaptureReader.open(path)
                load_capture(reader)
            except ProfilerError:
                pass


def test_a_zstd_bomb_stops_at_the_ratio_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(W, "INFLATE_FLOOR", 1 << 16)
    monkeypatch.setattr(W, "INFLATE_RATIO", 10)
    ev, recs = scenario(3)
    sample = recs[-1]
    bomb = compressed([sample] * 20000, piece=4000)  # ~1 MB of identical records in a few KB
    path = write(tmp_path, "bomb.data", file_mode(PerfFile([ev], [*recs, *bomb], features(ev))))
    reader, data = decode(path)
    assert any("inflate beyond" in w for w in reader.warnings)
    assert data.counts["SAMPLE"] < 20000  # type: ignore[attr-defined]


def test_import_writes_a_capture_that_reports_the_same(layouts: dict[str, Path], tmp_path: Path) -> None:
    for name in ("file", "zstd"):
        reader, data = decode(layouts[name])
        out = tmp_path / f"{name}.prof"
        result = write_capture(reader, out)
        assert result.frames >= 1 and out.exists()
        again = CaptureReader.open(out)
        assert not isinstance(again, PerfDataReader) and again.clean_end
        assert columns(load_capture(again)) == columns(data)
        assert again.build_ids() == reader.build_ids() and again.header["imported_from"]["format"] == "perf.data"
    res = run("import", str(layouts["pipe"]), "-o", str(tmp_path / "cli.prof"))
    assert res.returncode == 0 and "profiler import" in res.stdout, res.stderr
    res = run("import", str(tmp_path / "cli.prof"), "-o", str(tmp_path / "again.prof"))
    assert res.returncode == 2 and "already a profiler capture" in res.stderr


def test_perf_data_is_never_written_to(layouts: dict[str, Path]) -> None:
    before = layouts["file"].read_bytes()
    with pytest.raises(ProfilerError, match="profiler import"):
        CaptureWriter.append_to(layouts["file"])
    res = run("archive", "-i", str(layouts["file"]))
    assert res.returncode == 2 and "-o OUT" in res.stderr
    assert layouts["file"].read_bytes() == before


def test_walk_reports_where_a_stream_is_damaged() -> None:
    ev, recs = scenario(4)
    stream = b"".join(recs) + struct.pack("<IHH", 9, 0, 4) + bytes(32)
    state = W.StreamState("<", W.Features(), _Sink())
    stop = W.walk(stream, 0, len(stream), state)
    assert stop == len(b"".join(recs))


class _Sink(W.RecordSink):
    def kernel_run(self, buf: bytes | memoryview, offsets: object, end: int, in_file: bool) -> None:
        pass


def test_strings_and_counts_in_features_are_checked() -> None:
    from profiler.format.perfdata.features import Features, parse_feature

    feat = Features()
    parse_feature(feat, 3, struct.pack("<I", 1 << 30) + b"x" * 8, "<", 0, 12)
    parse_feature(feat, 11, struct.pack("<I", 1 << 31), "<", 0, 4)
    parse_feature(feat, 12, struct.pack("<II", 1 << 30, 128), "<", 0, 8)
    assert feat.hostname is None and feat.cmdline == [] and feat.event_desc == []
    assert len(feat.warnings) == 3 and all("damaged" in w for w in feat.warnings)
    ok = Features()
    parse_feature(ok, 3, pstring("host"), "<", 0, len(pstring("host")))
    parse_feature(ok, 29, struct.pack("<IIQQ", 1, 1, 5_000, 700), "<", 0, 24)
    assert ok.hostname == "host" and ok.clock_data["wall_clock_ns"] == 5_000
    assert kaddr("k_mid") > 0  # the fake kernel of report_capture is what these files sample


@pytest.mark.slow  # make check leaves it out; make test runs it
def test_strings_that_are_not_utf8_are_imported_as_replacement_characters(tmp_path: Path) -> None:
    """A real perf 6.1 file whose cmdline feature holds a byte that is not UTF-8: the capture's
    strings must be UTF-8 (msgpack), so import writes U+FFFD there, where it raised (found by
    fuzzing), and the capture reports as the perf.data file does."""
    data = bytearray((CAPTURES / "perf-6.1-g.data").read_bytes())
    at = data.index(b"/usr/bin/perf\0") + len("/usr/bin/")
    data[at] = 0xFF  # "/usr/bin/\xfferf"
    damaged = tmp_path / "damaged.data"
    damaged.write_bytes(bytes(data))
    out = tmp_path / "imported.prof"
    done = subprocess.run([sys.executable, "-m", "profiler", "import", str(damaged), "-o", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    with CaptureReader.open(out) as capture:
        assert "/usr/bin/\ufffderf" in capture.header["cmdline"]
    reports = [subprocess.run([sys.executable, "-m", "profiler", "report", "--sort", "comm,dso", "-g", "none",
                               "-i", str(path)], capture_output=True, text=True, timeout=60).stdout
               for path in (damaged, out)]
    rows = [[line for line in r.splitlines() if line.strip() and not line.startswith("#")] for r in reports]
    assert rows[0] and rows[0] == rows[1]
