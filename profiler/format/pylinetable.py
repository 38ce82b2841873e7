"""CPython 3.11+ location tables (``co_linetable``): instruction offset → line number.

The table is a sequence of entries, each covering 1 to 8 code units (2 bytes each) of the
code object's bytecode. An entry's first byte has its top bit set; bits 3-6 are its *code*
and bits 0-2 its length in code units minus one. By code:

* 0-9: short form, the line of the previous entry (one byte of column data follows);
* 10-12: one-line form, the previous line plus ``code - 10`` (two column bytes follow);
* 13: no columns, the line moves by a signed varint;
* 14: long form, the line moves by a signed varint, then an end-line delta, start column
  and end column as unsigned varints;
* 15: no location (the instructions have no line: ``co_lines`` says None).

Varints are 6-bit chunks, least significant first, bit 6 set on all but the last; a signed
varint is the unsigned one with its sign in bit 0. The first entry's line is relative to
``co_firstlineno``. This module reads the table bytes a capture stores; it never trusts
them: a table that ends in the middle of an entry ends there.
"""

from __future__ import annotations

NO_LINE = -1
#: the most entries (and so line ranges) one table may give; a code object of a million
#: code units has at most that many entries
MAX_ENTRIES = 1 << 20


def _varint(table: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos``: (value, position after it). Past the end: (0, len)."""
    value = shift = 0
    end = len(table)
    while pos < end:
        byte = table[pos]
        pos += 1
        value |= (byte & 63) << shift
        shift += 6
        if not byte & 64 or shift > 60:
            return value, pos
    return value, pos


def _svarint(table: bytes, pos: int) -> tuple[int, int]:
    raw, pos = _varint(table, pos)
    return (-(raw >> 1) if raw & 1 else raw >> 1), pos


def line_ranges(table: bytes, firstlineno: int) -> list[tuple[int, int, int]]:
    """(start byte offset, end byte offset, line) of every entry, as ``code.co_lines()``
    gives them (``line`` :data:`NO_LINE` where the code has none); adjacent entries are not
    merged."""
    out: list[tuple[int, int, int]] = []
    line = firstlineno
    pos, offset, end = 0, 0, len(table)
    while pos < end and len(out) < MAX_ENTRIES:
        first = table[pos]
        pos += 1
        if not first & 128:
            break  # not an entry's first byte: damage
        code = (first >> 3) & 15
        length = ((first & 7) + 1) * 2
        here = NO_LINE
        if code == 15:
            pass
        elif code == 14:
            delta, pos = _svarint(table, pos)
            line += delta
            here = line
            for _ in range(3):
                _, pos = _varint(table, pos)
        elif code == 13:
            delta, pos = _svarint(table, pos)
            line += delta
            here = line
        elif code >= 10:
            line += code - 10
            here = line
            pos += 2
        else:
            here = line
            pos += 1
        out.append((offset, offset + length, here))
        offset += length
    return out


def line_at(ranges: list[tuple[int, int, int]], offset: int) -> int:
    """The line of the instruction at byte ``offset`` (:data:`NO_LINE` when none covers it)."""
    lo, hi = 0, len(ranges)
    while lo < hi:
        mid = (lo + hi) // 2
        start, end, line = ranges[mid]
        if offset < start:
            hi = mid
        elif offset >= end:
            lo = mid + 1
        else:
            return line
    return NO_LINE
