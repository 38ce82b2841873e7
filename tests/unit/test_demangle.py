"""demangle() against binutils' c++filt on the C++ fixture's names and on Rust names."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from profiler.report import demangle as demangle_module
from profiler.report.demangle import cxx_demangler_available, demangle, demangle_rust_legacy
from profiler.report.elf import ElfFile

needs_cxxfilt = pytest.mark.skipif(shutil.which("c++filt") is None, reason="binutils not installed")


def cxxfilt(names: list[str], *flags: str) -> list[str]:
    out = subprocess.run(["c++filt", *flags], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def fixture_names(fixtures_dir: Path) -> list[str]:
    table = ElfFile(fixtures_dir / "elf" / "cxx_prog").symbol_table()
    return [table.name(i) for i in range(len(table))]


@needs_cxxfilt
def test_cxx_names_match_cxxfilt(fixtures_dir: Path) -> None:
    assert cxx_demangler_available()
    names = [n for n in fixture_names(fixtures_dir) if n.startswith("_Z")]
    assert len(names) >= 8
    plain = [n.partition("@")[0] for n in names]
    expected = [e + n[len(p) :] for n, p, e in zip(names, plain, cxxfilt(plain))]
    assert [demangle(n) for n in names] == expected
    shown = {demangle(n) for n in names}
    for wanted in ("outer::inner::overloaded(int)", "outer::inner::overloaded(double)",
                   "outer::inner::Box<int>::twice() const", "operator+(Vec2 const&, Vec2 const&)"):
        assert wanted in shown


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
    for name in ("main", "_start", "__libc_start_main", "_Zoops", "_RNvCs15kBYyAo9fc_7mycrate4main", ""):
        assert demangle(name) == name


def test_symbol_version_and_plt_suffix_are_kept() -> None:
    base = demangle("_ZN3foo3barEv")
    assert demangle("_ZN3foo3barEv@plt") == base + "@plt"
    assert demangle("_ZN3foo3barEv@@LIB_1.0") == base + "@@LIB_1.0"


def test_without_libstdcxx_names_are_returned_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demangle_module, "_CXA", None)
    demangle.cache_clear()
    try:
        assert demangle("_ZN3foo3barEv") == "_ZN3foo3barEv"
        assert demangle(rust_legacy(["a", "b"], "0123456789abcdef")) == "a::b"
    finally:
        demangle.cache_clear()


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
