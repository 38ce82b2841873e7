"""Bounded decoding of untrusted msgpack and zlib: what a capture costs to read is bounded by
its size, never by what it claims.

* zlib: a metadata frame inflates within what is left of the reader's budget (32 MiB plus
  four times the file's size, for all metadata together); a stream that goes past it, or
  that does not end, is damage. A kallsyms snapshot inflates about 5x, symbol tables less.
* msgpack: no array or map may claim more than ``MAX_ARRAY`` / ``MAX_MAP`` entries (checked
  by msgpack at the container's header, before anything is allocated), and the objects of a
  reader's msgpack documents together hold at most ``MAX_ITEMS`` entries (counted as each
  array or map completes, so a bomb stops within one container). Strings and byte strings
  are bounded by the input, which is bounded by the zlib budget.
"""

from __future__ import annotations

import zlib

import msgpack

from profiler.errors import FormatError

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

MAX_ARRAY = 1 << 20
MAX_MAP = 1 << 18
MAX_ITEMS = 1 << 20  # entries of every array and map a reader decodes, together
INFLATE_BASE = 32 << 20
INFLATE_PER_BYTE = 4  # inflated metadata allowed per byte of the file
PEEK_BYTES = 256


class Budget:
    """What a reader may still spend: inflated bytes and msgpack entries."""

    def __init__(self, file_size: int) -> None:
        self.inflate = INFLATE_BASE + INFLATE_PER_BYTE * file_size
        self.items = MAX_ITEMS

    def take_items(self, n: int) -> None:
        self.items -= n
        if self.items < 0:
            raise _TooMany()


class _TooMany(Exception):
    pass


def unpack(data: bytes | memoryview, what: str, budget: Budget | None = None) -> Any:
    """msgpack ``data`` as Python objects, within the limits; FormatError naming ``what``."""
    spend = budget if budget is not None else Budget(len(data))

    def on_list(items: list[Any]) -> list[Any]:
        spend.take_items(len(items) + 1)
        return items

    def on_map(mapping: dict[Any, Any]) -> dict[Any, Any]:
        spend.take_items(len(mapping) + 1)
        return mapping

    try:
        return msgpack.unpackb(
            data, raw=False, strict_map_key=False, max_array_len=MAX_ARRAY, max_map_len=MAX_MAP,
            list_hook=on_list, object_hook=on_map,
        )
    except _TooMany:
        raise FormatError(f"the {what} holds more entries than the reader allows ({MAX_ITEMS}).") from None
    except (ValueError, TypeError, OverflowError, RecursionError, msgpack.ExtraData, msgpack.FormatError,
            msgpack.StackError) as exc:
        raise FormatError(f"the {what} is not valid msgpack ({_short(exc)}).") from None


def inflate(data: bytes | memoryview, what: str, budget: Budget | None = None) -> bytes:
    """zlib ``data``, within the budget (which it spends)."""
    limit = budget.inflate if budget is not None else INFLATE_BASE + INFLATE_PER_BYTE * len(data)
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, max(limit, 0) + 1)
    except zlib.error as exc:
        raise FormatError(f"the {what} is damaged ({exc}).") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise FormatError(f"the {what} inflates past what the reader allows for this file "
                          f"({limit} bytes left).")
    if not inflater.eof:
        raise FormatError(f"the {what} is damaged (its compressed stream is cut).")
    if budget is not None:
        budget.inflate -= len(out)
    return out


def peek_kind(payload: bytes | memoryview, compressed: bool) -> str | None:
    """The ``kind`` of a metadata payload ``{"kind": str, "data": ...}`` from its first bytes
    (inflating at most ``PEEK_BYTES``), so a kind nobody asks for is never inflated. None when
    the first bytes do not say."""
    try:
        if compressed:
            head = zlib.decompressobj().decompress(payload, PEEK_BYTES)
        else:
            head = bytes(payload[:PEEK_BYTES])
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=PEEK_BYTES * 2, max_array_len=4, max_map_len=4,
                                    max_str_len=PEEK_BYTES, max_bin_len=PEEK_BYTES, max_ext_len=PEEK_BYTES)
        unpacker.feed(head)
        if unpacker.read_map_header() < 1:
            return None
        if unpacker.unpack() != "kind":
            return None
        kind = unpacker.unpack()
    except (zlib.error, ValueError, TypeError, msgpack.OutOfData, msgpack.FormatError, msgpack.StackError,
            msgpack.ExtraData):
        return None
    return kind if isinstance(kind, str) else None


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 80 else text[:77] + "..."
