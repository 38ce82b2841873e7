"""The one kallsyms line reader and alias rule (profiler.format.kallsyms), and what both sides
do with a snapshot whose addresses are wider than 64 bits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from profiler.errors import FormatError
from profiler.format import kallsyms as K
from profiler.record import kallsyms as record_kallsyms
from profiler.symbols.kallsyms import parse_kallsyms
from tests.support.paths import ROOT
from tests.support.report_capture import comm, kallsyms_text, kernel_sample, write_capture

WIDE = "1ffffffff81000000"  # 17 hex digits: 65 bits


@pytest.mark.parametrize(("line", "parsed"), [
    (b"ffffffff81000000 T _text", (0xFFFFFFFF81000000, ord("T"), b"_text", b"")),
    (b"ffffffffc0000000 t nf_hook\t[nf_tables]", (0xFFFFFFFFC0000000, ord("t"), b"nf_hook", b"nf_tables")),
    (b"ffffffff81000000\tW\tweak_one \t", (0xFFFFFFFF81000000, ord("W"), b"weak_one", b"")),
    (b"0000000000000000 A fixed_percpu_data", (0, ord("A"), b"fixed_percpu_data", b"")),
    (b" ffffffff81000000 T indented", None),
    (b"ffffffff8100000g T not_hex", None),
    (b"ffffffff81000000 TT two_letters", None),
    (b"ffffffff81000000 T name\r", None),
    (b"ffffffff81000000 T name module_without_brackets", None),
    (b"ffffffff81000000 T", None),
    (b"", None),
])
def test_a_line_is_read_one_way(line: bytes, parsed: tuple[int, int, bytes, bytes] | None) -> None:
    assert K.parse_line(line) == parsed


def test_an_address_wider_than_64_bits_is_damage() -> None:
    assert K.parse_line(b"ffffffffffffffff T top")[0] == (1 << 64) - 1  # type: ignore[index]
    with pytest.raises(FormatError, match="wider than 64 bits"):
        K.parse_line(f"{WIDE} T too_wide".encode())


def test_the_last_listed_alias_wins_whatever_its_type() -> None:
    text = (b"ffffffff81000000 T first\nffffffff81000000 t second\nffffffff81000000 W third\n"
            b"ffffffff81000100 T next\n")
    assert [name for _, _, _, name in K.iter_text_symbols(text)] == [b"first", b"second", b"third", b"next"]
    assert K.last_listed([5, 5, 5, 9]) == [2, 3]
    assert parse_kallsyms(text.decode()).lookup(0xFFFFFFFF81000010)[1:] == ("third", 0x10)  # type: ignore[index]
    subset = record_kallsyms.subset(text, [0xFFFFFFFF81000010])
    assert subset["kernel"]["names"] == b"third"


def test_hidden_addresses_are_every_address_zero() -> None:
    assert K.all_zero(b"0000000000000000 T _text\n0000000000000000 t foo\n")
    assert not K.all_zero(b"0000000000000000 A percpu\nffffffff81000000 T _text\n")
    assert not K.all_zero(b"")


def test_the_report_refuses_a_wide_snapshot_with_a_format_error() -> None:
    with pytest.raises(FormatError, match="wider than 64 bits"):
        parse_kallsyms(f"ffffffff81000000 T _text\n{WIDE} T too_wide\n")


def test_a_capture_with_a_wide_kallsyms_snapshot_ends_in_one_sentence(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the report died of an OverflowError traceback in symbols/kallsyms.py."""
    recs = [comm(100, 100, "alpha", 1), kernel_sample(("k_leaf_a", "k_root"), 1_000_000)]
    text = kallsyms_text() + f"{WIDE} T too_wide\n"
    path = write_capture(tmp_path / "wide.prof", recs, kallsyms=text)  # type: ignore[arg-type]
    env = {"PROFILER_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "profiler", "report", "-i", str(path)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("profiler: ") and "wider than 64 bits" in lines[-1], done.stderr
