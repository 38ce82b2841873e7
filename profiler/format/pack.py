"""The msgpack encoding of the writer's header, metadata and trailer, without the msgpack
package.

Importing msgpack (with its datetime-based extension types) cost every recording ~2.5 ms of CPU
at start-up, for packing a few small maps. :func:`packb` writes the bytes
``msgpack.packb(obj, use_bin_type=True)`` writes (the reader still decodes with msgpack, within
its limits: profiler/format/bounded.py) for what the writer packs: None, bools, ints, floats,
str, bytes-like objects, lists and tuples (arrays), and dicts (maps, in their order). Anything
else is a TypeError, as msgpack's is.
"""

from __future__ import annotations

import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_U8, _U16, _U32, _U64 = struct.Struct(">B"), struct.Struct(">H"), struct.Struct(">I"), struct.Struct(">Q")
_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_F64 = struct.Struct(">d")


def packb(obj: Any) -> bytes:
    out: list[bytes] = []
    _pack(obj, out.append, 0)
    return b"".join(out)


def _length(n: int, fix: int, fix_limit: int, codes: tuple[int, int, int], what: str) -> bytes:
    """The header of a str / bin / array / map of ``n`` items (``fix`` the fix-form base, 0 for
    none; ``codes`` the 8-, 16- and 32-bit forms, 0 for a form that does not exist)."""
    if fix and n < fix_limit:
        return bytes((fix | n,))
    if codes[0] and n < 0x100:
        return bytes((codes[0], n))
    if n < 0x10000:
        return bytes((codes[1],)) + _U16.pack(n)
    if n < 0x100000000:
        return bytes((codes[2],)) + _U32.pack(n)
    raise ValueError(f"{what} is too large")


def _int(n: int) -> bytes:
    if 0 <= n < 0x80:
        return bytes((n,))
    if -32 <= n < 0:
        return bytes((n & 0xFF,))
    if n >= 0:
        if n < 0x100:
            return b"\xcc" + _U8.pack(n)
        if n < 0x10000:
            return b"\xcd" + _U16.pack(n)
        if n < 0x100000000:
            return b"\xce" + _U32.pack(n)
        if n < 0x10000000000000000:
            return b"\xcf" + _U64.pack(n)
        raise OverflowError("Integer value out of range")
    if n >= -0x80:
        return b"\xd0" + _I8.pack(n)
    if n >= -0x8000:
        return b"\xd1" + _I16.pack(n)
    if n >= -0x80000000:
        return b"\xd2" + _I32.pack(n)
    if n >= -0x8000000000000000:
        return b"\xd3" + _I64.pack(n)
    raise OverflowError("Integer value out of range")


_NEST_LIMIT = 511  # msgpack's default nesting limit


def _pack(obj: Any, put: Any, depth: int) -> None:
    if depth > _NEST_LIMIT:
        raise ValueError("recursion limit exceeded.")
    if obj is None:
        put(b"\xc0")
    elif obj is True:
        put(b"\xc3")
    elif obj is False:
        put(b"\xc2")
    elif isinstance(obj, int):
        put(_int(obj))
    elif isinstance(obj, float):
        put(b"\xcb" + _F64.pack(obj))
    elif isinstance(obj, str):
        data = obj.encode("utf-8")
        put(_length(len(data), 0xA0, 32, (0xD9, 0xDA, 0xDB), "str"))
        put(data)
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj) if not isinstance(obj, bytes) else obj
        put(_length(len(data), 0, 0, (0xC4, 0xC5, 0xC6), "bytes"))
        put(data)
    elif isinstance(obj, (list, tuple)):
        put(_length(len(obj), 0x90, 16, (0, 0xDC, 0xDD), "list"))
        for item in obj:
            _pack(item, put, depth + 1)
    elif isinstance(obj, dict):
        put(_length(len(obj), 0x80, 16, (0, 0xDE, 0xDF), "dict"))
        for key, value in obj.items():
            _pack(key, put, depth + 1)
            _pack(value, put, depth + 1)
    else:
        raise TypeError(f"can not serialize {type(obj).__name__!r} object")
