"""The recorder's kernel symbols: the head of /proc/kallsyms, the kernel addresses of the
samples, and the packed subset, which must name every address as the full table does."""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

import pytest

from profiler.format import records as R
from profiler.record import kallsyms as K
from profiler.record.session import StreamStats
from profiler.symbols.kallsyms import KernelSymbols, parse_kallsyms

TEXT = """\
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81000000 d data_at_text
ffffffff81000040 t do_one_initcall
ffffffff81000100 W arch_weak_hook
ffffffff81000100 t weak_alias_listed_last
ffffffff81000180 D some_data
ffffffff81000200 T schedule
ffffffff81000300 r rodata_after_the_last_text
ffffffffc0a00100 t ext4_read_super\t[ext4]
ffffffffc0a00000 t ext4_init_fs\t[ext4]
ffffffffc0a00080 d ext4_data\t[ext4]
ffffffffc0b00000 t nf_hook_slow\t[nf_tables]
ffffffffc0b00000 T nf_hook_slow_alias\t[nf_tables]
ffffffffc0c00000 t bpf_prog_1234_x\t[bpf]
garbage line
"""


def probes(text: str) -> list[int]:
    """Every symbol start, one byte before, a few bytes after, and around the page ends."""
    out = {0, 5, (1 << 64) - 5}
    for line in text.splitlines():
        try:
            a = int(line.split()[0], 16)
        except (ValueError, IndexError):
            continue
        out.update(a + d for d in (-1, 0, 1, 0x3F, 0x40, 0x7F, 0xFFF, 0x1000))
    return sorted(x for x in out if 0 <= x < 1 << 64)


def assert_same_names(text: str, addresses: list[int]) -> KernelSymbols:
    full = parse_kallsyms(text)
    packed = K.subset(text.encode(), addresses)
    small = KernelSymbols.from_packed(packed)
    for a in addresses:
        assert small.lookup(a) == full.lookup(a), hex(a)
    for a in addresses[:300]:  # alone, so that no neighbour's symbol stands in for a missing one
        alone = KernelSymbols.from_packed(K.subset(text.encode(), [a]))
        assert alone.lookup(a) == full.lookup(a), hex(a)
    return small


def test_subset_names_every_address_as_the_full_table() -> None:
    small = assert_same_names(TEXT, probes(TEXT))
    assert small.lookup(0xFFFFFFFF81000003) == ("[kernel.kallsyms]", "_text", 3)  # the last listed alias
    assert small.lookup(0xFFFFFFFF81000101) == ("[kernel.kallsyms]", "weak_alias_listed_last", 1)
    assert small.lookup(0xFFFFFFFF81000FFF) == ("[kernel.kallsyms]", "schedule", 0xDFF)  # to its page's end
    assert small.lookup(0xFFFFFFFFC0A00050) == ("[ext4]", "ext4_init_fs", 0x50)  # module lines are unsorted
    assert small.lookup(0xFFFFFFFFC0B00001) == ("[nf_tables]", "nf_hook_slow_alias", 1)
    assert small.lookup(0xFFFFFFFFC0C00010) == ("[bpf]", "bpf_prog_1234_x", 0x10)


def test_subset_keeps_only_the_symbols_that_cover_the_addresses() -> None:
    packed = K.subset(TEXT.encode(), [0xFFFFFFFF81000041, 0xFFFFFFFF81000042, 0xFFFFFFFFC0A00101, 0x1234])
    assert K.count(packed) == 2 and list(packed["modules"]) == ["ext4"]
    kernel = packed["kernel"]
    assert struct.unpack("<QQ", kernel["starts"] + kernel["sizes"]) == (0xFFFFFFFF81000040, 0xC0)
    assert kernel["names"] == b"do_one_initcall"
    assert K.count(K.subset(TEXT.encode(), [])) == 0
    assert K.count(K.subset(b"", [0xFFFFFFFF81000041])) == 0


def test_unsorted_kernel_lines_are_sorted_first() -> None:
    lines = [f"{0xFFFFFFFF81000000 + 0x40 * i:016x} {'Tt'[i % 2]} f{i}" for i in range(2000)]
    random.Random(3).shuffle(lines)
    text = "\n".join(lines) + "\n"
    assert_same_names(text, probes(text))


def test_random_addresses_over_a_large_table() -> None:
    rng = random.Random(7)
    starts = sorted(rng.sample(range(0xFFFFFFFF81000000, 0xFFFFFFFF82000000, 16), 5000))
    kinds = "TtWwdDrb"
    lines = [f"{a:016x} {rng.choice(kinds)} s{i}" for i, a in enumerate(starts)]
    lines += [f"{a:016x} t m{i}\t[mod{i % 3}]"
              for i, a in enumerate(rng.sample(range(0xFFFFFFFFC0000000, 0xFFFFFFFFC0100000, 8), 300))]
    text = "\n".join(lines) + "\n"
    addresses = [rng.randrange(0xFFFFFFFF80FFF000, 0xFFFFFFFFC0101000) for _ in range(3000)]
    addresses += [rng.randrange(0xFFFFFFFFC0000000, 0xFFFFFFFFC0101000) for _ in range(3000)]
    assert_same_names(text, addresses)


@pytest.mark.skipif(not Path("/proc/kallsyms").exists(), reason="no /proc/kallsyms")
def test_live_kallsyms_subset() -> None:
    text = Path("/proc/kallsyms").read_bytes()
    full = parse_kallsyms(text.decode("utf-8", "surrogateescape"))
    if full.all_zero or not len(full.kernel):
        pytest.skip("kernel addresses are hidden")
    rng = random.Random(11)
    first, last = int(full.kernel.starts[0]), int(full.kernel.ends[-1])
    addresses = [rng.randrange(first, last) for _ in range(500)]
    small = KernelSymbols.from_packed(K.subset(text, addresses))
    assert all(small.lookup(a) == full.lookup(a) for a in addresses)


def test_head_finds_text_and_hidden_addresses(tmp_path: Path) -> None:
    path = tmp_path / "kallsyms"
    filler = "".join(f"ffffffff8000{i:04x} t pad{i}\n" for i in range(8000))  # _text beyond the first chunk
    path.write_text(filler + "ffffffff81000000 T _stext\nffffffff81000000 T _text\n")
    head = K.read_head(path)
    assert head.text_address == 0xFFFFFFFF81000000 and not head.hidden
    path.write_text("0000000000000000 T _text\n0000000000000000 t foo\t[mod]\n")
    head = K.read_head(path)
    assert head.hidden and head.text_address is None and b"_text" in head.lines
    assert K.read_head(tmp_path / "missing") == K.Head(None, False, b"")
    assert K.read_subset([0xFFFFFFFF81000000], path) is None  # hidden at the end too


def sample(misc: int, ip: int, chain: list[int], sample_type: int) -> bytes:
    body = b""
    for f in R.SampleLayout(sample_type).sample_fields:
        if f.bit == R.PERF_SAMPLE_IP:
            body += struct.pack("=Q", ip)
        elif f.bit == R.PERF_SAMPLE_CALLCHAIN:
            body += struct.pack(f"=Q{len(chain)}Q", len(chain), *chain)
        elif f.bit == R.PERF_SAMPLE_RAW:
            body += struct.pack("=I", 12) + struct.pack("=QI", 0xFFFFFFFF81234567, 0)
        else:
            body += struct.pack("=Q", 0xFFFFFFFF89999999)  # tid/time/...: never looked at with a span
    return struct.pack("=IHH", R.PERF_RECORD_SAMPLE, misc, 8 + len(body)) + body


@pytest.mark.skipif(sys.byteorder != "little", reason="records built in this machine's order")
def test_kernel_addresses_of_kernel_mode_samples_only() -> None:
    st = (R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_CPU
                              | R.PERF_SAMPLE_PERIOD | R.PERF_SAMPLE_CALLCHAIN | R.PERF_SAMPLE_RAW)
    stats = StreamStats()
    stats.kernel_floor = K.kernel_floor()
    stats.span = K.SampleSpan.of([R.SampleLayout(st)])
    assert stats.span == K.SampleSpan(8, 48)
    kernel = R.PERF_RECORD_MISC_KERNEL
    user = R.PERF_RECORD_MISC_USER
    ctx_k, ctx_u = (1 << 64) - 128, (1 << 64) - 512
    data = (sample(kernel, 0xFFFFFFFF81000010, [ctx_k, 0xFFFFFFFF81000010, 0xFFFFFFFF81000020, ctx_u, 0x401000], st)
            + sample(user, 0x401010, [ctx_u, 0x401010, 0x401020], st)
            + sample(kernel, 0xFFFFFFFFC0A00005, [], st))
    stats.scan(0, data)
    assert stats.kernel_code_addresses() == {0xFFFFFFFF81000010, 0xFFFFFFFF81000020, 0xFFFFFFFFC0A00005}
    assert stats.samples == 3
    # without a span (events disagree): every word of a kernel-mode sample, still only kernel ones
    stats = StreamStats(kernel_floor=K.kernel_floor())
    stats.scan(0, data)
    assert 0xFFFFFFFF81000020 in stats.kernel_code_addresses() and 0x401000 not in stats.kernel_code_addresses()
    # not collected unless asked
    stats = StreamStats()
    stats.scan(0, data)
    assert not stats.kernel_addresses and not stats.kernel_code_addresses()


@pytest.mark.skipif(sys.byteorder != "little", reason="records built in this machine's order")
@pytest.mark.parametrize("n", [8, 40, 300])
def test_kernel_samples_inside_a_run_of_same_size_samples_are_collected(n: int) -> None:
    """The drain's header walk counts runs of same-size samples without a step per record
    (session._sample_run): the kernel-mode ones among them still give their addresses."""
    st = R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_CPU | R.PERF_SAMPLE_PERIOD
    stats = StreamStats(kernel_floor=K.kernel_floor())
    stats.span = K.SampleSpan.of([R.SampleLayout(st)])
    expected = set()
    data = b""
    for i in range(n):
        if i % 7 == 3:
            ip = 0xFFFFFFFF81000000 + 16 * i
            expected.add(ip)
            data += sample(R.PERF_RECORD_MISC_KERNEL, ip, [], st)
        else:
            data += sample(R.PERF_RECORD_MISC_USER, 0x401000 + i, [], st)
    stats.scan(0, data)
    assert stats.samples == n
    assert stats.kernel_code_addresses() == expected


def test_span_of_disagreeing_or_variable_layouts() -> None:
    base = R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_CALLCHAIN
    assert K.SampleSpan.of([R.SampleLayout(base), R.SampleLayout(base | R.PERF_SAMPLE_IDENTIFIER)]) is None
    assert K.SampleSpan.of([R.SampleLayout(base | R.PERF_SAMPLE_READ)]) is None
    assert K.SampleSpan.of([R.SampleLayout(R.PERF_SAMPLE_TID | R.PERF_SAMPLE_IP)]) == K.SampleSpan(8, -1)


def test_the_kernel_lines_are_kept_for_this_boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    boot = tmp_path / "boot_id"
    boot.write_text("0f3c2a1e-1111-2222-3333-444455556666\n")
    monkeypatch.setattr(K, "BOOT_ID", boot)
    source = tmp_path / "kallsyms"
    source.write_text(TEXT)
    kept = K.cache_file("ab" * 20, tmp_path / "cache")
    assert kept is not None
    cache = Path(kept)
    assert cache.name == f"kernel-{'ab' * 20}-0f3c2a1e-1111-2222-3333-444455556666.txt"
    stale = cache.with_name("kernel-cd-earlier-boot.txt")
    stale.parent.mkdir(parents=True)
    stale.write_text("x")
    head = K.read_head(source)
    in_kernel, in_module = [0xFFFFFFFF81000041], [0xFFFFFFFF81000041, 0xFFFFFFFFC0A00001]
    first = K.read_subset(in_kernel, source, head=head, cache=cache)
    assert cache.read_bytes() == TEXT.encode()[: TEXT.index("ffffffffc0a00100")]  # the kernel's own lines
    assert cache.stat().st_mode & 0o777 == 0o600 and not stale.exists()
    source.unlink()  # from now on only the kept lines can name kernel addresses
    assert K.read_subset(in_kernel, source, head=head, cache=cache) == first
    assert K.read_subset(in_module, source, head=head, cache=cache) is None  # a module: the file is read
    other = K.Head(head.text_address, False, head.lines.replace(b"_stext", b"_other"))
    assert K.read_subset(in_kernel, source, head=other, cache=cache) is None  # another kernel's lines
    assert K.cache_file(None, tmp_path) is None and K.cache_file("../x", tmp_path) is None


def test_the_recorder_writes_what_the_reader_reads() -> None:
    from profiler.symbols import table

    assert K.PACKED_VERSION == table.PACKED_VERSION


_TEXT_RE = rb"^([0-9a-fA-F]+)[ \t]+[A-Za-z][ \t]+_s?text[ \t]*$"  # what a _text line is


@pytest.mark.parametrize("data", [
    b"ffffffff81000000 T _text\n",
    b"0000000000000000 A fixed_percpu_data\nffffffff81000000 T _stext\nffffffff81000000 T _text\n",
    b"ffffffff81000010 t _etext\nffffffff81000000 T _text",  # no newline at the end
    b"ffffffff81000000 T _text \t\n",
    b"ffffffff81000000\tT\t_text\n",
    b" ffffffff81000000 T _text\n",  # not at the line's start
    b"ffffffff81000000 TT _text\n",
    b"ffffffff8100000g T _text\n",
    b"ffffffff81000000 T _texts\nffffffff81000000 T __text\nffffffff81000000 T _text\t[mod]\n",
    b"ffffffff81000000 1 _text\nffffffff81000000 T x_text\n",
    b"ffffffff81000000 T text\n",
    b"ffffffff81000000 T\n_text\n",
    b"ffffffff81000000 T _text\r\n",
    b"",
])
def test_text_line_is_found_as_the_pattern_says(data: bytes) -> None:
    import re

    match = re.search(_TEXT_RE, data, re.MULTILINE)
    assert K._find_text(data) == (None if match is None else int(match.group(1), 16))


def test_text_line_in_random_kallsyms_heads() -> None:
    import re

    rng = random.Random(15)
    names = [b"_text", b"_stext", b"_etext", b"text", b"x", b"_text\t[m]", b"_sinittext"]
    for _ in range(300):
        lines = []
        for _ in range(rng.randrange(1, 8)):
            address = b"%016x" % rng.randrange(1 << 64) if rng.random() < 0.9 else b"zz"
            sep = rng.choice([b" ", b"\t", b"  ", b""])
            kind = rng.choice([b"T", b"t", b"W", b"1", b"TT"])
            lines.append(rng.choice([b"", b" "]) + address + sep + kind + rng.choice([b" ", b"\t"])
                         + rng.choice(names) + rng.choice([b"", b" ", b"\t"]))
        data = b"\n".join(lines) + rng.choice([b"", b"\n"])
        match = re.search(_TEXT_RE, data, re.MULTILINE)
        assert K._find_text(data) == (None if match is None else int(match.group(1), 16)), data


@pytest.mark.parametrize(("build_id", "boot", "kept"), [
    ("ab" * 20, "0f3c2a1e-1111-2222-3333-444455556666", True),
    ("AB", "0123456-", True),
    ("a", "0f3c2a1e-1111-2222-3333-444455556666", False),  # too short
    ("ab" * 65, "0f3c2a1e-1111-2222-3333-444455556666", False),  # too long
    ("ab/cd", "0f3c2a1e-1111-2222-3333-444455556666", False),
    ("abcd", "0123456", False),
    ("abcd", "0f3c2a1e-1111-2222-3333-44445555666g", False),
    ("abcd", "0" * 65, False),
])
def test_the_cache_file_names_only_hex_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build_id: str,
                                          boot: str, kept: bool) -> None:
    (tmp_path / "boot_id").write_text(boot + "\n")
    monkeypatch.setattr(K, "BOOT_ID", tmp_path / "boot_id")
    assert (K.cache_file(build_id, tmp_path) is not None) == kept
