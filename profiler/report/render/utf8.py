"""The one rule for names that are not UTF-8, for every renderer and exporter.

Paths and comms come from the kernel as bytes; the reader decodes them as UTF-8 with
``surrogateescape``, so a byte that is not UTF-8 (``\\xff`` in ``w\\xffk``) is kept as the lone
surrogate U+DCFF. Then:

* **text outputs** (perf's table, ``script``, folded stacks, CSV) write the bytes as they were
  recorded, as perf does: the output streams are opened with ``surrogateescape``
  (``commands/_output.py``, and standard output);
* **outputs whose format is UTF-8 text** (JSON of every kind, speedscope, the Firefox Profiler,
  the flame graph's HTML, pprof's protobuf strings) show each such byte as the four characters
  ``\\xNN``: readable, distinct for distinct names, and valid UTF-8. :func:`text` does it to a
  value, :func:`json_text` to JSON already serialized (either ``ensure_ascii`` mode).

Any other lone surrogate (never made by the reader) becomes U+FFFD.
"""

from __future__ import annotations

import re

_RAW = re.compile("[\ud800-\udfff]")
_HIGH = "[dD][89abAB][0-9a-fA-F]{2}"
_LOW = "[dD][c-fC-F][0-9a-fA-F]{2}"
# an escaped surrogate that is not half of a pair (a pair encodes a character past U+FFFF)
_ESCAPED = re.compile(rf"(?<!\\u{_HIGH})(\\*)\\u({_LOW})|(\\*)\\u({_HIGH})(?!\\u{_LOW})")


def _byte(code: int) -> str:
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"


def text(value: str) -> str:
    """``value`` with every byte that was not UTF-8 as ``\\xNN``."""
    if value.isascii():
        return value
    return _RAW.sub(lambda m: _byte(ord(m.group())), value)


def json_text(serialized: str) -> str:
    """JSON text in which every string holds :func:`text` of what it held: surrogates written
    raw (``ensure_ascii=False``) or as ``\\uDCNN`` escapes (``ensure_ascii=True``) become a
    JSON-escaped ``\\xNN``."""
    if serialized.isascii():
        if "\\ud" not in serialized and "\\uD" not in serialized:
            return serialized
    else:
        serialized = _RAW.sub(lambda m: _byte(ord(m.group())).replace("\\", "\\\\"), serialized)
    return _ESCAPED.sub(_unescape, serialized)


def _unescape(m: re.Match[str]) -> str:
    slashes, code = (m.group(1), m.group(2)) if m.group(2) else (m.group(3), m.group(4))
    if len(slashes) % 2:  # the backslash before "u" is itself escaped: plain text
        return m.group(0)
    return slashes + _byte(int(code, 16)).replace("\\", "\\\\")
