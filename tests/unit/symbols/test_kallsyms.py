"""Kernel symbols from /proc/kallsyms text."""

from __future__ import annotations

import msgpack
import pytest

from profiler.errors import ReportError
from profiler.names import KERNEL_DSO
from profiler.symbols.kallsyms import KernelSymbols, load_kallsyms, parse_kallsyms

SAMPLE = """\
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81000040 t do_one_initcall
ffffffff81000100 W arch_weak_hook
ffffffff81000180 D some_data
ffffffff81000200 T schedule
ffffffffc0a00000 t ext4_init_fs\t[ext4]
ffffffffc0a00100 t ext4_read_super\t[ext4]
ffffffffc0b00000 t nf_hook_slow\t[nf_tables]
garbage line
ffffffff810002zz T broken
"""


def test_kernel_symbols_cover_up_to_the_next_one() -> None:
    syms = parse_kallsyms(SAMPLE)
    assert not syms.all_zero
    assert syms.kernel.lookup(0xFFFFFFFF81000003) == ("_text", 3)  # aliases: the last listed, like perf
    assert syms.kernel.lookup(0xFFFFFFFF8100003F) == ("_text", 0x3F)
    assert syms.kernel.lookup(0xFFFFFFFF81000041) == ("do_one_initcall", 1)
    # data symbols are not kept: arch_weak_hook runs up to schedule
    assert syms.kernel.lookup(0xFFFFFFFF81000190) == ("arch_weak_hook", 0x90)
    # the last symbol ends at its page's end
    assert syms.kernel.lookup(0xFFFFFFFF81000FFF) == ("schedule", 0xDFF)
    assert syms.kernel.lookup(0xFFFFFFFF81001000) is None
    assert len(syms.kernel) == 4  # _stext and _text are one entry


def test_module_symbols_are_separate_tables() -> None:
    syms = parse_kallsyms(SAMPLE)
    assert sorted(syms.modules) == ["ext4", "nf_tables"]
    assert syms.modules["ext4"].lookup(0xFFFFFFFFC0A000FF) == ("ext4_init_fs", 0xFF)
    assert syms.lookup(0xFFFFFFFFC0A00104) == ("[ext4]", "ext4_read_super", 4)
    assert syms.lookup(0xFFFFFFFFC0B00001) == ("[nf_tables]", "nf_hook_slow", 1)
    assert syms.lookup(0xFFFFFFFF81000201) == (KERNEL_DSO, "schedule", 1)
    assert syms.module_for(0xFFFFFFFFC0A00050) == "ext4"
    assert syms.lookup(0x1000) is None


def test_hidden_addresses_are_reported_as_all_zero() -> None:
    hidden = "0000000000000000 T _text\n0000000000000000 t foo\t[mod]\n"
    syms = parse_kallsyms(hidden)
    assert syms.all_zero and len(syms.kernel) == 0 and not syms.modules
    assert syms.lookup(0) is None
    assert not parse_kallsyms("").all_zero


def test_packed_round_trip() -> None:
    syms = parse_kallsyms(SAMPLE)
    again = KernelSymbols.from_packed(msgpack.unpackb(msgpack.packb(syms.to_packed()), raw=False))
    for addr in (0xFFFFFFFF81000041, 0xFFFFFFFFC0A00104, 0xFFFFFFFF81000FFF, 0xFFFFFFFF81001000):
        assert again.lookup(addr) == syms.lookup(addr)


def test_unreadable_file_raises_report_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ReportError, match="cannot read kernel symbols"):
        load_kallsyms(tmp_path / "missing")


def test_live_kallsyms_when_visible() -> None:
    try:
        text = open("/proc/kallsyms").read()
    except OSError:
        pytest.skip("no /proc/kallsyms")
    syms = parse_kallsyms(text)
    if syms.all_zero:
        pytest.skip("kernel addresses hidden (kptr_restrict)")
    line = next(x for x in text.splitlines() if x.split()[1] in "Tt" and x.split()[2] == "schedule")
    addr = int(line.split()[0], 16)
    hit = syms.kernel.lookup(addr + 1)
    assert hit is not None and hit[1] == 1
    assert hit[0] == "schedule" or int(text.split(hit[0])[0].splitlines()[-1].split()[0], 16) == addr


def test_aliases_the_last_listed_wins_like_perf() -> None:
    """perf ends each kallsyms symbol at the next one's start: of several names at one
    address only the last listed covers anything (perf 6.1 shows __pi_memcpy, not memcpy)."""
    text = ("ffffffff81000000 T memcpy\nffffffff81000000 T __pi_memcpy\nffffffff81000010 T b\n"
            "ffffffff81000020 T __pi___x86_indirect_thunk_rax\nffffffff81000020 t thunk_rax\n"
            "ffffffff81000030 T c\n")
    ks = parse_kallsyms(text).kernel
    assert ks.lookup(0xFFFFFFFF81000001) == ("__pi_memcpy", 1)
    assert ks.lookup(0xFFFFFFFF81000021) == ("thunk_rax", 1)
