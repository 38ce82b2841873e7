"""Demangling of C++ (Itanium ABI) and Rust symbol names.

* C++ ``_Z...`` names go to ``__cxa_demangle`` of the system's libstdc++ through ctypes
  (no extra Python dependency); the returned buffer is released with libc ``free``. When
  libstdc++ cannot be loaded, or it rejects a name, the name is returned unchanged.
* Rust legacy names (``_ZN`` + length-prefixed path segments + ``17h<16 hex digits>E``)
  are decoded here: ``$LT$``-style escapes are undone, ``..`` becomes ``::`` and the
  trailing ``::h<hash>`` segment is dropped, as rustc's own demangler prints them.
* Rust v0 names (``_R...``) are returned unchanged (documented limitation).
* A suffix after ``@`` (``@plt``, ``@@GLIBC_2.2.5``) is kept as it is.

Results are cached; the caller decides whether to demangle at all (``--no-demangle``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from collections.abc import Callable
from functools import lru_cache

_Demangler = Callable[[bytes], str | None]

_RUST_HASH = re.compile(r"h[0-9a-f]{16}")
_RUST_ESCAPE = re.compile(r"\$([A-Z]+|u[0-9a-f]{1,6})\$|\.\.")
_RUST_NAMED = {"SP": "@", "BP": "*", "RF": "&", "LT": "<", "GT": ">", "LP": "(", "RP": ")", "C": ","}
_LLVM_SUFFIX = re.compile(r"\.llvm\.[0-9A-Za-z]+$")


def _load_cxa_demangle() -> _Demangler | None:
    """Bind ``__cxa_demangle`` and ``free``; None when libstdc++ is not available."""
    try:
        libstdcxx = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        cxa = libstdcxx.__cxa_demangle
        free = libc.free
    except (OSError, AttributeError):
        return None
    cxa.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    cxa.restype = ctypes.c_void_p
    free.argtypes = [ctypes.c_void_p]
    free.restype = None

    def demangle_cxx(mangled: bytes) -> str | None:
        # "status: 0 on success, -1 memory failure, -2 not a valid name, -3 bad argument"
        status = ctypes.c_int(0)
        out = cxa(mangled, None, None, ctypes.byref(status))
        if not out:
            return None
        try:
            result = ctypes.string_at(out) if status.value == 0 else None
        finally:
            free(out)
        return None if result is None else result.decode("utf-8", "backslashreplace")

    return demangle_cxx


_CXA: _Demangler | None = _load_cxa_demangle()


def cxx_demangler_available() -> bool:
    """True when libstdc++'s ``__cxa_demangle`` could be loaded."""
    return _CXA is not None


@lru_cache(maxsize=1 << 16)
def demangle(name: str) -> str:
    """The human-readable form of ``name``, or ``name`` itself when it is not mangled."""
    base, at, suffix = name.partition("@")
    if base.startswith("_ZN"):
        rust = demangle_rust_legacy(base)
        if rust is not None:
            return rust + at + suffix
    if base.startswith("_Z") and _CXA is not None:
        try:
            cxx = _CXA(base.encode("utf-8", "surrogateescape"))
        except ValueError:  # an embedded NUL
            cxx = None
        if cxx is not None:
            return cxx + at + suffix
    return name


def demangle_rust_legacy(name: str) -> str | None:
    """Decode a legacy Rust name (``_ZN...17h<hash>E``), None if ``name`` is not one."""
    core = _LLVM_SUFFIX.sub("", name)
    parts = _length_prefixed(core)
    if parts is None or len(parts) < 2 or not _RUST_HASH.fullmatch(parts[-1]):
        return None
    decoded = [_unescape_rust(p) for p in parts[:-1]]
    return None if None in decoded else "::".join(d for d in decoded if d is not None)


def _length_prefixed(name: str) -> list[str] | None:
    """``_ZN 3foo 3bar E`` -> ``["foo", "bar"]``; None unless exactly that shape."""
    if not name.startswith("_ZN") or not name.endswith("E"):
        return None
    parts: list[str] = []
    pos, end = 3, len(name) - 1
    while pos < end:
        digits = pos
        while digits < end and name[digits].isdigit():
            digits += 1
        if digits == pos or name[pos] == "0":
            return None
        size = int(name[pos:digits])
        if digits + size > end:
            return None
        parts.append(name[digits : digits + size])
        pos = digits + size
    return parts


def _unescape_rust(segment: str) -> str | None:
    """Undo rustc's legacy escapes in one path segment (None for an unknown escape)."""
    if segment.startswith("_$"):
        segment = segment[1:]
    out: list[str] = []
    pos = 0
    for match in _RUST_ESCAPE.finditer(segment):
        out.append(segment[pos : match.start()])
        token = match.group(1)
        if token is None:
            out.append("::")
        elif token in _RUST_NAMED:
            out.append(_RUST_NAMED[token])
        elif token.startswith("u"):
            out.append(chr(int(token[1:], 16)))
        else:
            return None
        pos = match.end()
    out.append(segment[pos:])
    literal = _RUST_ESCAPE.sub("", segment)
    return None if "$" in literal else "".join(out)
