"""Golden bytes: one SAMPLE record with every PERF_SAMPLE_* field, written word by word by hand
from perf_event.h's layout (not by our encoder), decoded by the exact decoder and by the
columnar one at hand-checked word positions; and the same for the sample_id trailer.

A round trip cannot catch a field order that the encoder and the decoder share; these can.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
from tests.support.capture_factory import make_test_header

from profiler.format import records as R

from profiler.format.encode import encode
from profiler.format.attr import attr_to_dict, new_attr
from profiler.format.decode.decoder import load_capture
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter

ALL_BITS = (
    R.PERF_SAMPLE_IDENTIFIER | R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME
    | R.PERF_SAMPLE_ADDR | R.PERF_SAMPLE_READ | R.PERF_SAMPLE_CALLCHAIN | R.PERF_SAMPLE_ID
    | R.PERF_SAMPLE_CPU | R.PERF_SAMPLE_PERIOD | R.PERF_SAMPLE_STREAM_ID | R.PERF_SAMPLE_RAW
    | R.PERF_SAMPLE_BRANCH_STACK | R.PERF_SAMPLE_REGS_USER | R.PERF_SAMPLE_STACK_USER
    | R.PERF_SAMPLE_WEIGHT | R.PERF_SAMPLE_DATA_SRC | R.PERF_SAMPLE_TRANSACTION
    | R.PERF_SAMPLE_REGS_INTR | R.PERF_SAMPLE_PHYS_ADDR | R.PERF_SAMPLE_AUX | R.PERF_SAMPLE_CGROUP
    | R.PERF_SAMPLE_DATA_PAGE_SIZE | R.PERF_SAMPLE_CODE_PAGE_SIZE
)
READ_FORMAT = (R.PERF_FORMAT_GROUP | R.PERF_FORMAT_ID | R.PERF_FORMAT_LOST
               | R.PERF_FORMAT_TOTAL_TIME_ENABLED | R.PERF_FORMAT_TOTAL_TIME_RUNNING)
REGS_USER_MASK = (1 << 0) | (1 << 2) | (1 << 7)  # three registers: 0, 2, 7
REGS_INTR_MASK = 0b11
RAW = b"rawdata12345"  # 12 bytes: with its u32 size, exactly two words
STACK = bytes(range(16))
AUX = b"auxbytes"

KERNEL_IP = 0xFFFF_FFFF_8100_0010
# (word index, value, what): word 0 is perf_event_header, every other word written by hand.
WORDS: list[tuple[int, int, str]] = [
    (1, 0x1D, "IDENTIFIER"),
    (2, KERNEL_IP, "IP"),
    (3, 10 | (11 << 32), "TID: pid, tid"),
    (4, 123456, "TIME"),
    (5, 0xADD0, "ADDR"),
    (6, 0x1D2, "ID"),
    (7, 0x5E, "STREAM_ID"),
    (8, 3 | (0 << 32), "CPU: cpu, res"),
    (9, 4000, "PERIOD"),
    (10, 2, "READ: nr (GROUP)"),
    (11, 1000, "READ: time_enabled"),
    (12, 900, "READ: time_running"),
    (13, 111, "READ: values[0].value"),
    (14, 21, "READ: values[0].id"),
    (15, 0, "READ: values[0].lost"),
    (16, 222, "READ: values[1].value"),
    (17, 22, "READ: values[1].id"),
    (18, 1, "READ: values[1].lost"),
    (19, 3, "CALLCHAIN: nr"),
    (20, R.PERF_CONTEXT_USER, "CALLCHAIN: ips[0]"),
    (21, 0x401000, "CALLCHAIN: ips[1]"),
    (22, 0x401100, "CALLCHAIN: ips[2]"),
    (23, len(RAW) | (int.from_bytes(RAW[:4], "little") << 32), "RAW: u32 size, data[0:4]"),
    (24, int.from_bytes(RAW[4:12], "little"), "RAW: data[4:12]"),
    (25, 2, "BRANCH_STACK: nr"),
    (26, 1, "BRANCH_STACK: hw_idx (BRANCH_HW_INDEX)"),
    (27, 0x400010, "BRANCH_STACK: [0].from"),
    (28, 0x400020, "BRANCH_STACK: [0].to"),
    (29, 0x1, "BRANCH_STACK: [0].flags"),
    (30, 0x400030, "BRANCH_STACK: [1].from"),
    (31, 0x400040, "BRANCH_STACK: [1].to"),
    (32, 0x2, "BRANCH_STACK: [1].flags"),
    (33, 2, "REGS_USER: abi (64-bit)"),
    (34, 0xA0, "REGS_USER: reg 0"),
    (35, 0xA2, "REGS_USER: reg 2"),
    (36, 0xA7, "REGS_USER: reg 7"),
    (37, len(STACK), "STACK_USER: size"),
    (38, int.from_bytes(STACK[:8], "little"), "STACK_USER: data[0:8]"),
    (39, int.from_bytes(STACK[8:], "little"), "STACK_USER: data[8:16]"),
    (40, 12, "STACK_USER: dyn_size"),
    (41, 300, "WEIGHT"),
    (42, 0x1234, "DATA_SRC"),
    (43, 9, "TRANSACTION"),
    (44, 2, "REGS_INTR: abi"),
    (45, 0xB0, "REGS_INTR: reg 0"),
    (46, 0xB1, "REGS_INTR: reg 1"),
    (47, 0x1000, "PHYS_ADDR"),
    (48, 4242, "CGROUP"),
    (49, 4096, "DATA_PAGE_SIZE"),
    (50, 2 << 20, "CODE_PAGE_SIZE"),
    (51, len(AUX), "AUX: size"),
    (52, int.from_bytes(AUX, "little"), "AUX: data"),
]
NWORDS = 53


def golden_sample() -> bytes:
    assert [w for w, _, _ in WORDS] == list(range(1, NWORDS))  # every word, in order, once
    head = struct.pack("<IHH", R.PERF_RECORD_SAMPLE, R.PERF_RECORD_MISC_KERNEL, 8 * NWORDS)
    return head + b"".join(struct.pack("<Q", value) for _, value, _ in WORDS)


def golden_attr() -> dict[str, int]:
    attr = new_attr(type=1, config=0, sample_type=ALL_BITS, read_format=READ_FORMAT, sample_period=4000,
                    sample_regs_user=REGS_USER_MASK, sample_regs_intr=REGS_INTR_MASK,
                    branch_sample_type=R.PERF_SAMPLE_BRANCH_HW_INDEX, sample_stack_user=16)
    return attr_to_dict(attr)


def test_the_golden_sample_sets_every_bit_the_table_knows() -> None:
    table = {f.bit for f in R.SAMPLE_FIELDS}
    assert all(ALL_BITS & bit for bit in table if bit != R.PERF_SAMPLE_WEIGHT | R.PERF_SAMPLE_WEIGHT_STRUCT)
    assert ALL_BITS & R.PERF_SAMPLE_WEIGHT  # WEIGHT_STRUCT shares its slot: see the next test


def test_table_covers_every_sample_bit_once() -> None:
    covered = 0
    for f in R.SAMPLE_FIELDS:
        assert covered & f.bit == 0, f.name
        covered |= f.bit
    assert covered == R.PERF_SAMPLE_MAX - 1  # a new kernel bit needs a table entry (and a test)


def test_exact_decoder_reads_every_field_at_its_word() -> None:
    layout = R.SampleLayout.from_attr(golden_attr())
    s = R.decode_record(golden_sample(), 0, layout)
    assert isinstance(s, R.Sample)
    assert (s.identifier, s.ip, s.pid, s.tid, s.time, s.addr, s.id, s.stream_id, s.cpu, s.res, s.period) == (
        0x1D, KERNEL_IP, 10, 11, 123456, 0xADD0, 0x1D2, 0x5E, 3, 0, 4000)
    assert s.read == R.ReadValues(time_enabled=1000, time_running=900, values=((111, 21, 0), (222, 22, 1)))
    assert s.callchain == (R.PERF_CONTEXT_USER, 0x401000, 0x401100)
    assert s.raw == RAW
    assert s.branch_hw_idx == 1
    assert s.branch_stack == (R.BranchEntry(0x400010, 0x400020, 1), R.BranchEntry(0x400030, 0x400040, 2))
    assert (s.regs_user_abi, s.regs_user) == (2, (0xA0, 0xA2, 0xA7))
    assert (s.stack_user, s.stack_user_dyn_size) == (STACK, 12)
    assert (s.weight, s.data_src, s.transaction) == (300, 0x1234, 9)
    assert (s.regs_intr_abi, s.regs_intr) == (2, (0xB0, 0xB1))
    assert (s.phys_addr, s.cgroup, s.data_page_size, s.code_page_size) == (0x1000, 4242, 4096, 2 << 20)
    assert s.aux == AUX
    assert encode(s, layout) == golden_sample()  # and the encoder writes the same words


def test_weight_struct_uses_the_weight_slot() -> None:
    attr = attr_to_dict(new_attr(sample_type=R.PERF_SAMPLE_IP | R.PERF_SAMPLE_WEIGHT_STRUCT | R.PERF_SAMPLE_DATA_SRC))
    words = [0x401000, (7 << 48) | (5 << 32) | 300, 0x42]  # ip, weight (var3, var2, var1), data_src
    data = struct.pack("<IHH", R.PERF_RECORD_SAMPLE, 2, 32) + struct.pack("<3Q", *words)
    s = R.decode_record(data, 0, R.SampleLayout.from_attr(attr))
    assert isinstance(s, R.Sample) and (s.ip, s.weight, s.data_src) == tuple(words)


def write_golden_capture(path: Path, attr: dict[str, int], records: bytes) -> int:
    """The capture, and the file offset of ``records``."""
    w = CaptureWriter.create(path, make_test_header([{"name": "golden", "attr": attr, "ids": [0x1D2]}]))
    w.write_raw(0, records)
    w.close()
    found = path.read_bytes().find(records)
    assert found > 0 and found % 8 == 0
    return found


def test_columnar_decoder_reads_every_field_at_its_word(tmp_path: Path) -> None:
    record = golden_sample()
    at = write_golden_capture(tmp_path / "g.prof", golden_attr(), record)
    word = at // 8  # the record's first word in the file
    with CaptureReader.open(tmp_path / "g.prof") as reader:
        data = load_capture(reader)
        view = reader.raw_view()
        s = data.samples
        assert len(s) == 1 and data.damaged_samples == 0
        assert (int(s.ip[0]), int(s.pid[0]), int(s.tid[0]), int(s.time[0]), int(s.cpu[0]), int(s.period[0])) == (
            KERNEL_IP, 10, 11, 123456, 3, 4000)
        assert {k: int(v[0]) for k, v in s.extra.items()} == {
            "identifier": 0x1D, "addr": 0xADD0, "id": 0x1D2, "stream_id": 0x5E, "weight": 300,
            "data_src": 0x1234, "transaction": 9, "phys_addr": 0x1000, "cgroup": 4242,
            "data_page_size": 4096, "code_page_size": 2 << 20}
        assert s.column("addr")[0] == 0xADD0 and s.column("ip")[0] == KERNEL_IP
        assert [int(x) for x in s.chain(0)] == [R.PERF_CONTEXT_USER, 0x401000, 0x401100]

        rd = s.read
        assert rd is not None
        assert rd.start.tolist() == [0, 2]
        assert (int(rd.time_enabled[0]), int(rd.time_running[0])) == (1000, 900)
        assert (rd.value.tolist(), rd.id.tolist(), rd.lost.tolist()) == ([111, 222], [21, 22], [0, 1])

        assert s.raw is not None
        assert int(s.raw.offset[0]) == (word + 23) * 8 + 4 and int(s.raw.size[0]) == len(RAW)
        assert bytes(s.raw.bytes_of(view, 0)) == RAW

        br = s.branch_stack
        assert br is not None
        assert (int(br.nr[0]), int(br.hw_idx[0]), int(br.offset[0])) == (2, 1, (word + 27) * 8)
        w64 = np.frombuffer(view, dtype="<u8", count=len(view) // 8)
        assert br.entries(w64, 0).tolist() == [[0x400010, 0x400020, 1], [0x400030, 0x400040, 2]]

        ru = s.regs_user
        assert ru is not None
        assert ru.registers == (0, 2, 7) and int(ru.abi[0]) == 2
        assert ru.regs.shape == (1, 3) and ru.regs[0].tolist() == [0xA0, 0xA2, 0xA7]
        assert int(ru.register(7)[0]) == 0xA7

        st = s.stack_user
        assert st is not None
        assert (int(st.offset[0]), int(st.size[0]), int(st.dyn_size[0])) == ((word + 38) * 8, 16, 12)
        assert bytes(st.bytes_of(view, 0)) == STACK

        ri = s.regs_intr
        assert ri is not None and ri.registers == (0, 1) and ri.regs[0].tolist() == [0xB0, 0xB1]

        assert s.aux is not None
        assert (int(s.aux.offset[0]), int(s.aux.size[0])) == ((word + 52) * 8, len(AUX))
        assert bytes(s.aux.bytes_of(view, 0)) == AUX
        del view, w64


SAMPLE_ID_BITS = (R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_ID | R.PERF_SAMPLE_STREAM_ID
                  | R.PERF_SAMPLE_CPU | R.PERF_SAMPLE_IDENTIFIER | R.PERF_SAMPLE_IP | R.PERF_SAMPLE_PERIOD)


def test_sample_id_trailer_golden() -> None:
    """``struct sample_id``: { pid, tid; time; id; stream_id; cpu, res; id (IDENTIFIER) }, the
    last words of a non-sample record (IP and PERIOD have no place in it)."""
    layout = R.SampleLayout(sample_type=SAMPLE_ID_BITS, sample_id_all=True)
    body = [1 | (2 << 32), int.from_bytes(b"bash\0\0\0\0", "little")]  # COMM: pid, tid; "bash"
    trailer = [7 | (8 << 32), 555, 0x1D2, 0x5E, 1 | (0 << 32), 0x1D]
    data = struct.pack("<IHH", R.PERF_RECORD_COMM, 0, 8 * (1 + len(body) + len(trailer)))
    data += struct.pack(f"<{len(body) + len(trailer)}Q", *body, *trailer)
    rec = R.decode_record(data, 0, layout)
    assert isinstance(rec, R.Comm) and (rec.pid, rec.tid, rec.comm) == (1, 2, "bash")
    assert rec.sample_id == R.SampleId(pid=7, tid=8, time=555, id=0x1D2, stream_id=0x5E, cpu=1, res=0,
                                       identifier=0x1D)
    assert layout.trailer_size == 8 * len(trailer)
    assert encode(rec, layout) == data
