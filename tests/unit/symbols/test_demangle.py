"""demangle() (LLVM's demanglers through pycxxfilt) against binutils' c++filt.

C++ names are compared after normalising the documented style differences between LLVM's
and GNU's output (``>>``, standard abbreviations, clone suffixes); Rust names exactly
(``c++filt --format=rust --no-verbose`` prints what rustfilt prints).
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from profiler.symbols.demangle import demangle, demangle_rust_legacy
from profiler.symbols.elf import ElfFile

needs_cxxfilt = pytest.mark.skipif(shutil.which("c++filt") is None, reason="binutils not installed")


def cxxfilt(names: list[str], *flags: str) -> list[str]:
    out = subprocess.run(["c++filt", *flags], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def fixture_names(fixtures_dir: Path) -> list[str]:
    table = ElfFile(fixtures_dir / "elf" / "cxx_prog").symbol_table()
    return [table.name(i) for i in range(len(table))]


_GNU_LONG = [
    ("std::basic_string<char, std::char_traits<char>, std::allocator<char> >", "std::string"),
    ("std::basic_istream<char, std::char_traits<char> >", "std::istream"),
    ("std::basic_ostream<char, std::char_traits<char> >", "std::ostream"),
    ("std::basic_iostream<char, std::char_traits<char> >", "std::iostream"),
]


def style(name: str) -> str:
    """GNU and LLVM spellings of the same demangled name made equal."""
    name = re.sub(r" \[clone (\.[^]]+)\]", r" (\1)", name)
    name = name.replace("decltype(nullptr)", "std::nullptr_t").replace("<< <", "<<<").replace(">> <", ">><")
    for _ in range(4):
        name = name.replace("> >", ">>")
    for long, short in _GNU_LONG:
        name = name.replace(long.replace("> >", ">>"), short)
    return name


@needs_cxxfilt
def test_cxx_names_match_cxxfilt(fixtures_dir: Path) -> None:
    names = [n for n in fixture_names(fixtures_dir) if n.startswith("_Z")]
    assert len(names) >= 8
    plain = [n.partition("@")[0] for n in names]
    expected = [e + n[len(p) :] for n, p, e in zip(names, plain, cxxfilt(plain))]
    assert [style(demangle(n)) for n in names] == [style(e) for e in expected]
    shown = {demangle(n) for n in names}
    for wanted in ("outer::inner::overloaded(int)", "outer::inner::overloaded(double)",
                   "outer::inner::Box<int>::twice() const", "operator+(Vec2 const&, Vec2 const&)"):
        assert wanted in shown


LIBSTDCXX = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")


@needs_cxxfilt
@pytest.mark.skipif(not LIBSTDCXX.exists(), reason="libstdc++ is not installed")
def test_libstdcxx_exports_match_cxxfilt() -> None:
    """Thousands of real names: all agree with c++filt but for the transactional-memory
    clones (_ZGTt), which LLVM does not demangle and which stay as they are."""
    syms = ElfFile(LIBSTDCXX).dynamic_symbol_names()
    assert syms is not None
    entries, strtab = syms
    names = sorted({strtab[o : strtab.index(b"\0", o)].decode() for o in entries["st_name"].tolist()})
    names = [n for n in names if n.startswith("_Z")]
    assert len(names) > 3000
    ours = [demangle(n) for n in names]
    differ = [(n, o, e) for n, o, e in zip(names, ours, cxxfilt(names)) if style(o) != style(e)]
    assert differ and all(n.startswith("_ZGTt") and o == n for n, o, _ in differ)


def rust_legacy(path: list[str], hash_digits: str) -> str:
    return "_ZN" + "".join(f"{len(p)}{p}" for p in path + ["h" + hash_digits]) + "E"


@needs_cxxfilt
def test_rust_legacy_names_match_cxxfilt_without_hash() -> None:
    rng = random.Random(7)
    paths = [
        ["core", "fmt", "write"],
        ["std", "rt", "lang_start", "_$u7b$$u7b$closure$u7d$$u7d$"],
        ["_$LT$alloc..vec..Vec$LT$T$C$A$GT$$u20$as$u20$core..ops..drop..Drop$GT$", "drop"],
        ["my_crate", "Thing$LP$u8$RP$", "new"],
    ]
    names = [rust_legacy(p, "".join(rng.choice("0123456789abcdef") for _ in range(16))) for p in paths]
    assert [demangle(n) for n in names] == cxxfilt(names, "--format=rust", "--no-verbose")


def test_rust_legacy_examples() -> None:
    assert demangle(rust_legacy(["a", "b"], "0123456789abcdef")) == "a::b"
    assert demangle(rust_legacy(["a", "b"], "0123456789abcdef") + ".llvm.12345") == "a::b"
    assert demangle_rust_legacy(rust_legacy(["a"], "zzzz456789abcdef")) is None  # not a hash
    assert demangle_rust_legacy("_ZN3foo3barEv") is None  # C++


def test_names_that_are_not_mangled_stay() -> None:
    for name in ("main", "_start", "__libc_start_main", "_Z!oops", "_Rbogus", "?bogus", ""):
        assert demangle(name) == name


@needs_cxxfilt
def test_rust_v0_names_match_cxxfilt() -> None:
    names = ["_RNvCs15kBYyAo9fc_7mycrate4main", "_RNvNtCs1234_7mycrate3foo3bar",
             "_RINvCs1234_7mycrate3fooNtB2_3BarE"]
    assert [demangle(n) for n in names] == cxxfilt(names, "--no-verbose")


def test_symbol_version_and_plt_suffix_are_kept() -> None:
    base = demangle("_ZN3foo3barEv")
    assert demangle("_ZN3foo3barEv@plt") == base + "@plt"
    assert demangle("_ZN3foo3barEv@@LIB_1.0") == base + "@@LIB_1.0"


def test_results_are_cached() -> None:
    demangle.cache_clear()
    demangle("_ZN3foo3barEv")
    demangle("_ZN3foo3barEv")
    info = demangle.cache_info()
    assert (info.hits, info.misses) == (1, 1)


def test_demangler_frees_and_survives_many_calls() -> None:
    demangle.cache_clear()
    names = [f"_ZN2ns{len(str(i)) + 1}f{i}Ev" for i in range(3000)]
    out = [demangle(n) for n in names]
    assert all(re.fullmatch(r"ns::f\d+\(\)", o) for o in out)
