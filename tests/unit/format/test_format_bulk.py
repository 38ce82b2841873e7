"""The columnar decoder agrees with the exact per-record decoder."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from tests.support.capture_factory import cpu_clock_attr, make_test_header, write_small_capture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiler.errors import ProfilerError
from profiler.format import records as R
from profiler.format.encode import encode
from profiler.format.decode import decoder, views
from profiler.format.decode.chains import cpumode_context, split_callchains
from profiler.format.decode.columns import SampleColumns
from profiler.format.decode.decoder import load_capture
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter
from profiler.format.summary import summarize


def exact_samples(reader: CaptureReader) -> list[R.Sample]:
    return [r for r in reader.iter_records() if isinstance(r, R.Sample)]


def expected_cpu(reader: CaptureReader, frame_cpu: int, s: R.Sample) -> int:
    """A sample's CPU: its CPU field, else its frame's (format 3.0), else unknown (-1)."""
    if s.cpu is not None:
        return s.cpu
    return frame_cpu if reader.version >= (3, 0) and frame_cpu < reader.header["nr_cpus"] else -1


def assert_columns_match(reader: CaptureReader) -> None:
    data = load_capture(reader)
    with_cpu = sorted(((s, expected_cpu(reader, f.cpu, s)) for f, s in reader.iter_records_with_frames()
                       if isinstance(s, R.Sample)), key=lambda p: p[0].time or 0)
    exact = [s for s, _ in with_cpu]
    cols = data.samples
    assert len(cols) == len(exact)
    for i, (s, cpu) in enumerate(with_cpu):
        assert int(cols.ip[i]) == (s.ip or 0)
        assert int(cols.pid[i]) % 2**32 == (s.pid or 0) and int(cols.tid[i]) % 2**32 == (s.tid or 0)
        assert int(cols.time[i]) == (s.time or 0)
        assert int(cols.cpu[i]) == cpu
        assert int(cols.period[i]) == (s.period if s.period is not None else 1)
        assert int(cols.misc[i]) == s.misc
        assert tuple(int(x) for x in cols.chain(i)) == (s.callchain or ())
    start, flat = cols.flat_chains()
    assert len(start) == len(exact) + 1
    for i, s in enumerate(exact):
        assert tuple(int(x) for x in flat[start[i]:start[i + 1]]) == (s.callchain or ())
    assert_other_fields_match(reader, cols, exact)


def assert_other_fields_match(reader: CaptureReader, cols: SampleColumns, exact: list[R.Sample]) -> None:
    """Every field beyond the core columns: one-word ones in ``extra``, the others in their
    column objects (bytes as file offsets into the capture)."""
    view = reader.raw_view()
    w64 = np.frombuffer(view, dtype="<u8", count=len(view) // 8)
    for i, s in enumerate(exact):
        for name, column in cols.extra.items():
            assert int(column[i]) == (getattr(s, name) or 0), name
        if cols.read is not None:
            rd, where = cols.read, cols.read.counters(i)
            got = list(zip(rd.value[where].tolist(), rd.id[where].tolist(), rd.lost[where].tolist()))
            want = [(v, d or 0, lost or 0) for v, d, lost in s.read.values] if s.read else []
            assert got == want
            if s.read:
                assert int(rd.time_enabled[i]) == (s.read.time_enabled or 0)
                assert int(rd.time_running[i]) == (s.read.time_running or 0)
        for name, part in (("raw", cols.raw), ("aux", cols.aux), ("stack_user", cols.stack_user)):
            if part is not None:
                assert bytes(part.bytes_of(view, i)) == (getattr(s, name) or b""), name
        if cols.stack_user is not None:
            assert int(cols.stack_user.dyn_size[i]) == (s.stack_user_dyn_size or 0)
        if cols.branch_stack is not None:
            entries = [(e.from_ip, e.to_ip, e.flags) for e in s.branch_stack or ()]
            assert [tuple(e) for e in cols.branch_stack.entries(w64, i).tolist()] == entries
            assert int(cols.branch_stack.hw_idx[i]) == (s.branch_hw_idx or 0)
        for name, regs in (("regs_user", cols.regs_user), ("regs_intr", cols.regs_intr)):
            if regs is not None:
                assert int(regs.abi[i]) == (getattr(s, f"{name}_abi") or 0)
                values = list(getattr(s, name) or ()) or [0] * len(regs.registers)
                assert regs.regs[i].tolist() == values, name
    del view, w64


def test_small_capture(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    write_small_capture(path)
    with CaptureReader.open(path) as reader:
        assert_columns_match(reader)
        data = load_capture(reader)
        assert data.counts == {"SAMPLE": 20, "COMM": 1, "MMAP2": 1, "FORK": 1, "EXIT": 1}
        assert [type(o.record).__name__ for o in data.others] == ["Comm", "Mmap2", "Fork", "Exit"]
        # interleaving: the FORK at time 2101 follows the 10 samples at or before it
        times = data.samples.time
        for other, before in zip(data.others, data.others_before):
            assert all(times[:before] <= other.time)
            assert all(times[before:] >= other.time)


def test_big_endian_capture(tmp_path: Path) -> None:
    header = make_test_header(byte_order="big", arch="s390x")
    layout = R.SampleLayout.from_attr(header["events"][0]["attr"], "big")
    path = tmp_path / "be.prof"
    w = CaptureWriter.create(path, header)
    w.write_raw(0, b"".join(encode(R.Sample(ip=0x1000 + i, pid=5, tid=6, time=10 + i, cpu=0, res=0,
                                              period=3, callchain=(1, 2, i)), layout)
                            for i in range(50)))
    w.close()
    with CaptureReader.open(path) as reader:
        assert exact_samples(reader)[3].ip == 0x1003
        assert_columns_match(reader)


def test_several_events_by_identifier(tmp_path: Path) -> None:
    st_ = R.PERF_SAMPLE_IDENTIFIER | R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME
    a = cpu_clock_attr(st_ | R.PERF_SAMPLE_CALLCHAIN)
    b = cpu_clock_attr(st_ | R.PERF_SAMPLE_PERIOD)
    header = make_test_header([{"name": "cpu-clock", "attr": a, "ids": [11]},
                               {"name": "page-faults", "attr": b, "ids": [22, 23]}])
    la, lb = R.SampleLayout.from_attr(a), R.SampleLayout.from_attr(b)
    recs = []
    for i in range(30):
        if i % 3:
            recs.append(encode(R.Sample(identifier=11, ip=i, pid=1, tid=1, time=i, callchain=(i,) * (i % 4)), la))
        else:
            recs.append(encode(R.Sample(identifier=22 + i % 2, ip=i, pid=1, tid=1, time=i, period=7), lb))
    path = tmp_path / "two.prof"
    w = CaptureWriter.create(path, header)
    w.write_raw(0, b"".join(recs))
    w.close()
    with CaptureReader.open(path) as reader:
        data = load_capture(reader)
        assert len(data.samples) == 30
        ev = data.samples.event
        assert list(ev) == [0 if i % 3 else 1 for i in range(30)]
        assert list(data.samples.period[ev == 1]) == [7] * 10
        assert [len(data.samples.chain(i)) for i in range(30)] == [0 if i % 3 == 0 else i % 4 for i in range(30)]


def test_events_with_one_layout_still_split_by_identifier(tmp_path: Path) -> None:
    """-e task-clock,page-faults: the same sample layout, two events; each sample is its own."""
    st_ = R.PERF_SAMPLE_IDENTIFIER | R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_PERIOD
    attr = cpu_clock_attr(st_)
    header = make_test_header([{"name": "task-clock", "attr": attr, "ids": [11, 12]},
                               {"name": "page-faults", "attr": attr, "ids": [21]}])
    layout = R.SampleLayout.from_attr(attr)
    idents = [11, 21, 12, 21, 21, 11]
    recs = [encode(R.Sample(identifier=ident, ip=i, pid=1, tid=1, time=i, period=ident), layout)
            for i, ident in enumerate(idents)]
    path = tmp_path / "same.prof"
    w = CaptureWriter.create(path, header)
    w.write_raw(0, b"".join(recs))
    w.close()
    with CaptureReader.open(path) as reader:
        data = load_capture(reader)
    assert list(data.samples.event) == [0 if ident < 20 else 1 for ident in idents]
    assert list(data.samples.period) == idents


def test_damaged_callchain_sample_is_dropped(tmp_path: Path) -> None:
    header = make_test_header()
    layout = R.SampleLayout.from_attr(header["events"][0]["attr"])
    good = encode(R.Sample(ip=1, pid=1, tid=1, time=1, cpu=0, res=0, period=1, callchain=(5, 6)), layout)
    bad = bytearray(good)
    bad[48:56] = (1000).to_bytes(8, "little")  # nr: more frames than the record holds
    path = tmp_path / "d.prof"
    w = CaptureWriter.create(path, header)
    w.write_raw(0, good + bytes(bad) + good)
    w.close()
    with CaptureReader.open(path) as reader:
        data = load_capture(reader)
        assert len(data.samples) == 2
        assert data.damaged_samples == 1
        assert any("damaged samples" in w for w in data.warnings)


def test_record_body_that_looks_like_a_header_takes_the_exact_path(tmp_path: Path) -> None:
    """A callchain entry whose bytes look like a record header must not confuse the fast path."""
    header = make_test_header()
    layout = R.SampleLayout.from_attr(header["events"][0]["attr"])
    fake = 9 | (2 << 32) | (16 << 48)  # type SAMPLE, misc user, size 16
    recs = b"".join(encode(R.Sample(ip=i, pid=1, tid=1, time=i, cpu=0, res=0, period=1,
                                      callchain=(fake, i)), layout) for i in range(10))
    path = tmp_path / "f.prof"
    w = CaptureWriter.create(path, header)
    w.write_raw(0, recs)
    w.close()
    with CaptureReader.open(path) as reader:
        assert_columns_match(reader)
        assert len(load_capture(reader).samples) == 10


def test_frames_of_big_records_are_walked_record_by_record(tmp_path: Path) -> None:
    """Records of kilobytes (DWARF samples' stack copies; here long callchains) are found by
    following their sizes; a damaged size ends the frame there, with a warning."""
    header = make_test_header()
    layout = R.SampleLayout.from_attr(header["events"][0]["attr"])
    recs = [encode(R.Sample(ip=i, pid=1, tid=1, time=i, cpu=0, res=0, period=1,
                              callchain=tuple(range(1, 500))), layout) for i in range(12)]
    assert sum(map(len, recs)) >= 64 * views.WALK_BYTES_PER_RECORD  # the walk's threshold
    path = tmp_path / "big.prof"
    w = CaptureWriter.create(path, header)
    w.write_raw(0, b"".join(recs))
    damaged = bytearray(b"".join(recs))
    at = sum(map(len, recs[:5]))
    damaged[at + 6:at + 8] = (12).to_bytes(2, "little")  # record 5's size: not a multiple of 8
    w.write_raw(0, bytes(damaged))
    w.close()
    with CaptureReader.open(path) as reader:
        data = load_capture(reader)
        assert sorted(data.samples.ip.tolist()) == sorted([*range(12), *range(5)])
        assert any("damaged record" in m for m in data.warnings)


@st.composite
def sample_batches(draw: st.DrawFn) -> tuple[int, list[list[R.Sample]]]:
    extra = draw(st.sampled_from([0, R.PERF_SAMPLE_IDENTIFIER, R.PERF_SAMPLE_ADDR | R.PERF_SAMPLE_ID,
                                  R.PERF_SAMPLE_READ, R.PERF_SAMPLE_STREAM_ID]))
    base = draw(st.integers(0, 0x1FF)) & (R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME
                                          | R.PERF_SAMPLE_CPU | R.PERF_SAMPLE_PERIOD | R.PERF_SAMPLE_CALLCHAIN)
    sample_type = base | extra | R.PERF_SAMPLE_TIME
    frames = []
    t = 0
    for _ in range(draw(st.integers(1, 4))):
        batch = []
        for _ in range(draw(st.integers(0, 12))):
            t += draw(st.integers(0, 3))
            batch.append(R.Sample(
                ip=draw(st.integers(0, 2**64 - 1)), pid=draw(st.integers(0, 99)), tid=draw(st.integers(0, 99)),
                time=t, cpu=draw(st.integers(0, 3)), res=0, period=draw(st.integers(0, 10**9)),
                callchain=tuple(draw(st.lists(st.integers(0, 2**64 - 1), max_size=15))),
                misc=draw(st.sampled_from([1, 2])), read=R.ReadValues(values=((5, None, None),))))
        frames.append(batch)
    return sample_type, frames


def _normalise(s: R.Sample, sample_type: int) -> R.Sample:
    keep = {
        "ip": R.PERF_SAMPLE_IP, "pid": R.PERF_SAMPLE_TID, "tid": R.PERF_SAMPLE_TID, "time": R.PERF_SAMPLE_TIME,
        "cpu": R.PERF_SAMPLE_CPU, "res": R.PERF_SAMPLE_CPU, "period": R.PERF_SAMPLE_PERIOD,
        "callchain": R.PERF_SAMPLE_CALLCHAIN, "read": R.PERF_SAMPLE_READ,
    }
    for name, bit in keep.items():
        if not sample_type & bit:
            setattr(s, name, None)
    return s


@pytest.mark.slow  # make check leaves it out; make test runs it
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sample_batches(), st.sampled_from([(1, 1), (3, 0)]))
def test_bulk_matches_exact_property(tmp_path: Path, batch: tuple[int, list[list[R.Sample]]],
                                     version: tuple[int, int]) -> None:
    """... in both versions: 3.0 gives a sample without CPU field its frame's (CPUs 2 and 3
    are beyond the header's nr_cpus: -1), older ones -1."""
    sample_type, frames = batch
    attr = cpu_clock_attr(sample_type)
    header = make_test_header([{"name": "cpu-clock", "attr": attr, "ids": [1]}])
    layout = R.SampleLayout.from_attr(attr)
    path = tmp_path / "p.prof"
    w = CaptureWriter.create(path, header, version)
    for cpu, recs in enumerate(frames):
        w.write_raw(cpu, b"".join(encode(_normalise(s, sample_type), layout) for s in recs))
    w.close()
    with CaptureReader.open(path) as reader:
        assert_columns_match(reader)


u64 = st.integers(0, 2**64 - 1)


def _words(draw: st.DrawFn, n: int) -> tuple[int, ...]:
    return tuple(draw(st.lists(u64, min_size=n, max_size=n)))


@st.composite
def any_layout_samples(draw: st.DrawFn) -> tuple[dict[str, int], list[R.Sample]]:
    """Any subset of the PERF_SAMPLE_* fields, any read_format, register masks and branch
    format, and samples with every field filled (consistently with that layout)."""
    bits = [f.bit for f in R.SAMPLE_FIELDS]
    sample_type = R.PERF_SAMPLE_TIME
    for bit in bits:
        if draw(st.booleans()):
            sample_type |= bit
    if sample_type & R.PERF_SAMPLE_WEIGHT:  # the two weights share one slot: pick one
        sample_type &= ~(R.PERF_SAMPLE_WEIGHT_STRUCT if draw(st.booleans()) else R.PERF_SAMPLE_WEIGHT)
    read_format = draw(st.integers(0, 31))
    regs_user, regs_intr = draw(st.integers(0, 2**20 - 1)), draw(st.integers(0, 15))
    branch = draw(st.sampled_from([0, R.PERF_SAMPLE_BRANCH_HW_INDEX]))
    attr = cpu_clock_attr(sample_type, read_format=read_format, sample_regs_user=regs_user,
                          sample_regs_intr=regs_intr, branch_sample_type=branch)
    samples = []
    for k in range(draw(st.integers(1, 5))):
        nr = draw(st.integers(1, 3)) if read_format & R.PERF_FORMAT_GROUP else 1
        values = tuple((draw(u64), draw(u64) if read_format & R.PERF_FORMAT_ID else None,
                        draw(u64) if read_format & R.PERF_FORMAT_LOST else None) for _ in range(nr))
        abi_u, abi_i = draw(st.sampled_from([0, 2])), draw(st.sampled_from([0, 1]))
        stack = bytes(draw(st.lists(st.integers(0, 255), max_size=4))) * 8
        fields = {f.attrs[0]: draw(u64) for f in R.SAMPLE_FIELDS if f.kind == R.KIND_U64 and f.name != "time"}
        samples.append(R.Sample(
            **fields, pid=draw(st.integers(0, 99)), tid=draw(st.integers(0, 99)), time=k, cpu=0, res=0,
            read=R.ReadValues(draw(u64) if read_format & 1 else None, draw(u64) if read_format & 2 else None, values),
            callchain=_words(draw, draw(st.integers(0, 4))),
            raw=draw(st.binary(max_size=20)),
            branch_hw_idx=draw(u64) if branch else None,
            branch_stack=tuple(R.BranchEntry(*_words(draw, 3)) for _ in range(draw(st.integers(0, 3)))),
            regs_user_abi=abi_u, regs_user=_words(draw, bin(regs_user).count("1")) if abi_u else (),
            stack_user=stack, stack_user_dyn_size=draw(st.integers(0, len(stack))) if stack else 0,
            regs_intr_abi=abi_i, regs_intr=_words(draw, bin(regs_intr).count("1")) if abi_i else (),
            aux=bytes(draw(st.lists(st.integers(0, 255), max_size=2))) * 8,
            misc=2))
    return attr, samples


@pytest.mark.slow  # make check leaves it out; make test runs it
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(any_layout_samples())
def test_bulk_gives_every_field_of_any_layout(tmp_path: Path, case: tuple[dict[str, int], list[R.Sample]]) -> None:
    attr, samples = case
    layout = R.SampleLayout.from_attr(attr)
    path = tmp_path / "all.prof"
    w = CaptureWriter.create(path, make_test_header([{"name": "any", "attr": attr, "ids": [1]}]))
    w.write_raw(0, b"".join(encode(s, layout) for s in samples))
    w.close()
    with CaptureReader.open(path) as reader:
        assert_columns_match(reader)
        assert load_capture(reader).damaged_samples == 0


# --- fuzzing: damaged files never crash the reader ----------------------------------------

def _read_everything(data: bytes) -> None:
    try:
        reader = CaptureReader.from_bytes(data)
        list(reader.iter_records())
        load_capture(reader)
        summarize(reader)
    except ProfilerError:
        pass


@pytest.fixture(scope="module")
def small_capture_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("fuzz") / "c.prof"
    write_small_capture(path)
    return path.read_bytes()


@pytest.mark.slow  # make check leaves it out; make test runs it
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=8),
       st.integers(0, 2))
def test_fuzz_file_mutations(small_capture_bytes: bytes, edits: list[tuple[int, int]], mode: int) -> None:
    data = bytearray(small_capture_bytes)
    for pos, value in edits:
        pos %= len(data)
        if mode == 0:
            data[pos] = value
        elif mode == 1:
            data.insert(pos, value)
        else:
            del data[pos]
    _read_everything(bytes(data))


@pytest.mark.slow  # make check leaves it out; make test runs it
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**5), st.integers(0, 255)), min_size=1, max_size=12))
def test_fuzz_record_mutations_behind_valid_checksums(tmp_path: Path, edits: list[tuple[int, int]]) -> None:
    """Damage inside records, re-framed with correct checksums: decoders must cope."""
    header = make_test_header()
    layout = R.SampleLayout.from_attr(header["events"][0]["attr"])
    from tests.support.capture_factory import small_capture_records
    synth, frames = small_capture_records()
    payload = bytearray(b"".join(encode(r, layout) for r in synth + frames[0] + frames[1]))
    for pos, value in edits:
        payload[pos % len(payload)] = value
    path = tmp_path / "m.prof"
    w = CaptureWriter.create(path, header)
    w.write_raw(0, bytes(payload))
    w.close()
    tracemalloc.start()
    try:
        _read_everything(path.read_bytes())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"decoding {len(payload)} damaged bytes allocated {peak} bytes"


def test_numpy_columns_dtypes(tmp_path: Path) -> None:
    path = tmp_path / "c.prof"
    write_small_capture(path)
    with CaptureReader.open(path) as reader:
        cols = load_capture(reader).samples
        assert cols.ip.dtype == np.uint64 and cols.pid.dtype == np.int32
        assert cols.chain_id.dtype == np.int32 and len(cols.chains) == 6  # empty + 5 distinct
        assert set(cols.has) >= {"ip", "tid", "time", "cpu", "period", "callchain"}


def test_identical_chains_share_one_id_across_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = make_test_header()
    layout = R.SampleLayout.from_attr(header["events"][0]["attr"])
    chains = [(R.PERF_CONTEXT_USER, 0x10, 0x20), (R.PERF_CONTEXT_USER, 0x20, 0x10), (), (0x10,)]
    path = tmp_path / "c.prof"
    w = CaptureWriter.create(path, header)
    t = 0
    for frame in range(6):
        recs = []
        for i in range(40):
            t += 1
            recs.append(encode(R.Sample(ip=i, pid=0xFFFFFFFF if i == 3 else 7, tid=7, time=t, cpu=0, res=0,
                                          period=1, callchain=chains[(i + frame) % 4]), layout))
        w.write_raw(frame % 2, b"".join(recs))
    w.close()
    monkeypatch.setattr(decoder, "CHUNK_BYTES", 1)  # every frame is its own chunk
    with CaptureReader.open(path) as reader:
        cols = load_capture(reader).samples
        assert len(cols.chains) == 4  # the empty chain and three distinct ones
        by_chain: dict[tuple[int, ...], set[int]] = {}
        for i in range(len(cols)):
            by_chain.setdefault(tuple(int(x) for x in cols.chain(i)), set()).add(int(cols.chain_id[i]))
        assert set(by_chain) == {tuple(c) for c in chains}
        assert all(len(ids) == 1 for ids in by_chain.values())
        assert by_chain[()] == {0}
        assert int(cols.pid.min()) == -1  # pid -1 (u32 0xffffffff) stays -1
        assert_columns_match(reader)


def test_split_callchains_contexts() -> None:
    """Each address takes the last marker before it; before any marker, the sample's cpumode.
    Guest and hypervisor addresses keep their own context (never host user or kernel)."""
    K, U = R.PERF_CONTEXT_KERNEL, R.PERF_CONTEXT_USER
    GK, GU, G = R.PERF_CONTEXT_GUEST_KERNEL, R.PERF_CONTEXT_GUEST_USER, R.PERF_CONTEXT_GUEST
    chains = [
        [K, 0xFFFF_0001, U, 0x401000, 0x401100],  # host kernel, then host user
        [0x402000, 0x402100],  # no marker: the sample's cpumode (user)
        [G, GK, 0xFFFF_0002, GU, 0x403000],  # a guest's kernel and user
        [0xFFFF_0003],  # no marker, kernel cpumode
        [0x404000],  # no marker, guest-user cpumode
    ]
    modes = np.array([R.PERF_RECORD_MISC_KERNEL, R.PERF_RECORD_MISC_USER, R.PERF_RECORD_MISC_GUEST_KERNEL,
                      R.PERF_RECORD_MISC_KERNEL, R.PERF_RECORD_MISC_GUEST_USER], dtype=np.uint16)
    start = np.cumsum([0] + [len(c) for c in chains]).astype(np.int64)
    words = np.array([w for c in chains for w in c], dtype=np.uint64)
    e = split_callchains(start, words, modes)
    assert e.owner.tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 4]
    assert e.addr.tolist() == [0xFFFF_0001, 0x401000, 0x401100, 0x402000, 0x402100, 0xFFFF_0002, 0x403000,
                               0xFFFF_0003, 0x404000]
    assert e.context.tolist() == [K, U, U, U, U, GK, GU, K, GU]
    assert e.kernel.tolist() == [True, False, False, False, False, False, False, True, False]
    assert e.host.tolist() == [True] * 5 + [False, False, True, False]
    assert cpumode_context(modes).tolist() == [K, U, GK, K, GU]
