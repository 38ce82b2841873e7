"""Demangling of C++ (Itanium ABI, MSVC) and Rust (legacy and v0) symbol names.

The demanglers are LLVM's, through ``pycxxfilt`` (a wheel with no system dependency, so a
laptop reading a capture needs no libstdc++ or binutils):

* C++ ``_Z...`` names: LLVM's Itanium demangler. Its style differs from GNU c++filt's (and
  so from perf's) in a few documented ways: ``>>`` for ``> >``, the standard abbreviations
  kept (``std::string`` for ``Ss``), ``(.cold)`` for ``[clone .cold]``, ``'lambda'()`` for
  ``{lambda()#1}``; transactional-memory clones (``_ZGTt``) stay mangled.
* Rust v0 names (``_R...``): LLVM's Rust demangler, crate disambiguators left out as
  ``rustfilt`` and ``c++filt --no-verbose`` print them.
* Rust legacy names (``_ZN`` ... ``17h<16 hex digits>E``) are Itanium names whose path
  segments carry rustc's escapes: after LLVM's demangler, the trailing ``::h<hash>`` is
  dropped and ``$LT$``-style escapes and ``..`` are undone, as rustc's own demangler prints.
* A suffix after ``@`` (``@plt``, ``@@GLIBC_2.2.5``) is kept as it is; a name no
  demangler accepts is returned unchanged.

Results are cached; the caller decides whether to demangle at all (``--no-demangle``).
"""

from __future__ import annotations

import re
from functools import lru_cache

import pycxxfilt

_RUST_LEGACY = re.compile(r"_ZN.*17h[0-9a-f]{16}E")
_RUST_HASH_TAIL = re.compile(r"::h[0-9a-f]{16}$")
_RUST_ESCAPE = re.compile(r"\$([A-Z]+|u[0-9a-f]{1,6})\$|\.\.")
_RUST_NAMED = {"SP": "@", "BP": "*", "RF": "&", "LT": "<", "GT": ">", "LP": "(", "RP": ")", "C": ","}
_SEGMENT_UNDERSCORE = re.compile(r"(^|::)_\$")
_LLVM_SUFFIX = re.compile(r"\.llvm\.[0-9A-Za-z]+$")


def _llvm(name: str) -> str | None:
    """LLVM's demangling of ``name``, None when it is not a mangled name it accepts."""
    try:
        return pycxxfilt.demangle(name)
    except (ValueError, UnicodeError):
        return None


@lru_cache(maxsize=1 << 16)
def demangle(name: str) -> str:
    """The human-readable form of ``name``, or ``name`` itself when it is not mangled."""
    base, at, suffix = name.partition("@")
    if not base.startswith(("_Z", "_R", "?")):
        return name
    core = _LLVM_SUFFIX.sub("", base)
    if _RUST_LEGACY.fullmatch(core):
        rust = demangle_rust_legacy(core)
        if rust is not None:
            return rust + at + suffix
    out = _llvm(base)
    return name if out is None else out + at + suffix


def demangle_rust_legacy(name: str) -> str | None:
    """A legacy Rust name (``_ZN...17h<hash>E``) without its hash, None if it is not one."""
    if not _RUST_LEGACY.fullmatch(name):
        return None
    itanium = _llvm(name)
    if itanium is None or not _RUST_HASH_TAIL.search(itanium):
        return None
    return _unescape_rust(_RUST_HASH_TAIL.sub("", itanium))


def _unescape_rust(path: str) -> str | None:
    """Undo rustc's legacy escapes (None for an escape it does not define); a segment
    starting with ``_$`` loses the ``_`` rustc added before its first escape."""
    path = _SEGMENT_UNDERSCORE.sub(r"\1$", path)
    out: list[str] = []
    pos = 0
    for match in _RUST_ESCAPE.finditer(path):
        out.append(path[pos : match.start()])
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
    out.append(path[pos:])
    if "$" in _RUST_ESCAPE.sub("", path):
        return None
    return "".join(out)
