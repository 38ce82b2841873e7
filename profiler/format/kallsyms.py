"""A ``/proc/kallsyms`` snapshot: the one reader of its lines and the one alias rule, shared
by the recorder (which keeps the symbols a capture needs, ``profiler.record.kallsyms``) and
the reporter (which names kernel addresses, ``profiler.symbols.kallsyms``).

* A line is ``ADDRESS TYPE NAME``, with ``\\t[MODULE]`` after a module's symbols: a hex
  address at the line's start, a one-letter type, blanks (spaces or tabs) between and after.
  Any other line (other white space included) is malformed and skipped. An address wider
  than 64 bits is not a kernel's: the snapshot is damaged (:class:`~profiler.errors.FormatError`).
* Only text symbols name code: types ``T t W w`` (:data:`TEXT_TYPES`). There is one table
  for the kernel and one per module.
* The alias rule: of several text symbols at one address in one table, the last listed wins
  (perf ends each kallsyms symbol at the next one's start, so all but the last are empty);
  a symbol covers up to the next text symbol's start in its table, the last one of a table up
  to the next page boundary (:func:`table_end`).
* Every address zero (``kernel.kptr_restrict``, or no privilege) means the addresses are
  hidden (:func:`all_zero`).

Imported by the recorder: no numpy, no re, no typing at run time.
"""

from __future__ import annotations

from profiler.errors import FormatError

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from collections.abc import Iterator

TEXT_TYPES = frozenset(b"TtWw")
PAGE_SIZE = 4096
U64_MAX = (1 << 64) - 1
_HEX = b"0123456789abcdefABCDEF"
_BLANKS = b" \t"


def parse_line(line: bytes) -> tuple[int, int, bytes, bytes] | None:
    """``(address, type, name, module)`` of one line (``type`` a byte value, ``module``
    without its brackets, empty for the kernel's own symbols), or None when it is malformed.
    FormatError when the address is wider than 64 bits."""
    if not line or line[:1] in (b" ", b"\t") or line.translate(None, b"\r\x0b\x0c") != line:
        return None
    fields = [f for f in line.replace(b"\t", b" ").split(b" ") if f]
    if len(fields) not in (3, 4) or len(fields[1]) != 1 or not fields[1].isalpha():
        return None
    address = fields[0]
    if address.strip(_HEX):
        return None
    module = b""
    if len(fields) == 4:
        if not (fields[3].startswith(b"[") and fields[3].endswith(b"]")) or len(fields[3]) < 3:
            return None
        module = fields[3][1:-1]
    value = int(address, 16)
    if value > U64_MAX:
        raise FormatError(f"the kallsyms snapshot is damaged: the address {address[:40].decode()} of "
                          f"{fields[2][:80].decode('utf-8', 'replace')} is wider than 64 bits.")
    return value, fields[1][0], fields[2], module


def is_text(kind: int) -> bool:
    """Whether a symbol of this type (a byte value) names code."""
    return kind in TEXT_TYPES


def iter_text_symbols(text: bytes) -> Iterator[tuple[bytes, int, int, bytes]]:
    """``(module, address, type, name)`` of every well-formed text line, in listed order."""
    for line in text.split(b"\n"):
        parsed = parse_line(line)
        if parsed is not None and parsed[1] in TEXT_TYPES:
            yield parsed[3], parsed[0], parsed[1], parsed[2]


def last_listed(addresses: list[int]) -> list[int]:
    """The alias rule: the indexes (ascending) of the symbols that name their address, the
    last listed of each run of equal addresses, given one table's symbols in listed order."""
    last: dict[int, int] = {}
    for i, address in enumerate(addresses):
        last[address] = i
    return sorted(last.values())


def table_end(top: int) -> int:
    """Where the last symbol of a table (at ``top``) ends: the next page boundary."""
    return min((top // PAGE_SIZE + 1) * PAGE_SIZE, U64_MAX)


def all_zero(lines: bytes) -> bool:
    """Whether the addresses are hidden: every well-formed line of ``lines`` has address zero
    (and there is one)."""
    seen = False
    for line in lines.split(b"\n"):
        fields = line.replace(b"\t", b" ").split(None, 2)
        if len(fields) < 3 or line[:1] in (b" ", b"\t") or fields[0].strip(_HEX):
            continue
        if fields[0].strip(b"0"):
            return False
        seen = True
    return seen
