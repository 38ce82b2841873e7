"""Tracepoint payloads: the kernel's ``format`` files and the fields of PERF_SAMPLE_RAW.

A tracepoint's ``format`` file (``/sys/kernel/tracing/events/<sys>/<name>/format``) lists
each field of the record the kernel writes into PERF_SAMPLE_RAW::

    field:char prev_comm[16];	offset:8;	size:16;	signed:0;
    field:__data_loc char[] filename;	offset:8;	size:4;	signed:0;

and ends with ``print fmt: "...", args``. The recorder stores the text as it read it (the
``tracepoint_formats`` metadata, docs/format.md), so any machine decodes the payloads.
``__data_loc`` fields hold a u32: the low 16 bits are the data's offset in the payload, the
high 16 bits its length (``__rel_loc``: the offset counts from the end of the field).
"""

from __future__ import annotations

import re
from dataclasses import field

from profiler.dataclass import dataclass
from profiler.errors import FormatError

Value = int | str | bytes | list[int]

_FIELD_RE = re.compile(
    r"^\s*field:(?P<decl>[^;]+);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);\s*(?:signed:(?P<signed>\d+);)?"
)
_DECL_RE = re.compile(r"^(?P<type>.*?)\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:\[(?P<len>[^\]]*)\])?\s*$")
_MAX_PAYLOAD = 1 << 16


@dataclass(frozen=True)
class TraceField:
    """One field of a tracepoint's format."""

    name: str
    type: str  # as declared, without the name and array suffix (``char``, ``__data_loc char[]``)
    offset: int
    size: int
    signed: bool
    array_len: int | None = None  # ``[16]``; None for scalars and dynamic arrays

    @property
    def dynamic(self) -> bool:
        return self.type.startswith(("__data_loc", "__rel_loc"))

    @property
    def is_string(self) -> bool:
        base = self.type.replace("__data_loc", "").replace("__rel_loc", "").replace("const", "").strip()
        return base.startswith("char") and (self.dynamic or self.array_len is not None)

    @property
    def common(self) -> bool:
        return self.name.startswith("common_")


@dataclass(frozen=True)
class TraceFormat:
    """One tracepoint's record layout and print format."""

    system: str
    name: str
    id: int
    fields: tuple[TraceField, ...]
    print_fmt: str = ""
    by_name: dict[str, TraceField] = field(default_factory=dict, compare=False, hash=False)

    @property
    def event(self) -> str:
        return f"{self.system}:{self.name}"

    def get(self, name: str) -> TraceField | None:
        return self.by_name.get(name)

    def decode(self, raw: bytes, byte_order: str = "little") -> dict[str, Value]:
        """Every non-common field of one payload by name; a field running past the payload is
        left out (never read out of bounds)."""
        out: dict[str, Value] = {}
        for f in self.fields:
            if not f.common:
                value = decode_field(f, raw, byte_order)
                if value is not None:
                    out[f.name] = value
        return out


def parse_format(text: str, system: str = "") -> TraceFormat:
    """A ``format`` file's text as a :class:`TraceFormat`; FormatError when it is not one."""
    name, ident, print_fmt = "", -1, ""
    fields: list[TraceField] = []
    for line in text.splitlines():
        if line.startswith("name:"):
            name = line[5:].strip()
        elif line.startswith("ID:"):
            try:
                ident = int(line[3:].strip())
            except ValueError:
                raise FormatError(f"tracepoint format has a bad ID line {line!r}.") from None
        elif line.startswith("print fmt:"):
            print_fmt = line[len("print fmt:"):].strip()
        else:
            m = _FIELD_RE.match(line)
            if m:
                fields.append(_field(m))
    if not name or not fields:
        raise FormatError("tracepoint format text has no name or no fields.")
    return TraceFormat(system, name, ident, tuple(fields), print_fmt, {f.name: f for f in fields})


def _field(m: re.Match[str]) -> TraceField:
    decl = m.group("decl").strip()
    d = _DECL_RE.match(decl.replace("[]", "[]").rstrip())
    if decl.startswith(("__data_loc", "__rel_loc")):
        # "__data_loc char[] filename": the name is the last word
        type_, _, name = decl.rpartition(" ")
        return TraceField(name, type_.strip(), int(m.group("offset")), int(m.group("size")),
                          m.group("signed") == "1")
    if d is None:
        raise FormatError(f"tracepoint format has a field it cannot read: {decl!r}.")
    length = d.group("len")
    array_len = None
    if length is not None:
        array_len = int(length, 0) if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", length.strip()) else 0
    return TraceField(d.group("name"), d.group("type").strip(), int(m.group("offset")),
                      int(m.group("size")), m.group("signed") == "1", array_len)


def _int(raw: bytes, offset: int, size: int, signed: bool, byte_order: str) -> int | None:
    if size not in (1, 2, 4, 8) or offset < 0 or offset + size > len(raw):
        return None
    return int.from_bytes(raw[offset:offset + size], "little" if byte_order == "little" else "big",
                          signed=signed)


def dynamic_span(f: TraceField, raw: bytes, byte_order: str = "little") -> tuple[int, int] | None:
    """(offset, length) of a ``__data_loc`` / ``__rel_loc`` field's data, inside ``raw``."""
    loc = _int(raw, f.offset, 4, False, byte_order)
    if loc is None:
        return None
    start, length = loc & 0xFFFF, loc >> 16
    if f.type.startswith("__rel_loc"):
        start += f.offset + f.size
    if start + length > len(raw):
        return None
    return start, length


def decode_field(f: TraceField, raw: bytes, byte_order: str = "little") -> Value | None:
    """One field's value: str for char arrays and strings, list for other arrays, else int."""
    if f.dynamic:
        span = dynamic_span(f, raw, byte_order)
        if span is None:
            return None
        data = raw[span[0]:span[0] + span[1]]
        return _text(data) if f.is_string else data
    if f.offset + f.size > len(raw):
        return None
    if f.array_len is not None:
        data = raw[f.offset:f.offset + f.size]
        if f.is_string:
            return _text(data)
        n = f.array_len or 1
        elem = f.size // n if n else f.size
        if elem not in (1, 2, 4, 8):
            return data
        return [v for v in (_int(raw, f.offset + i * elem, elem, f.signed, byte_order) for i in range(n))
                if v is not None]
    value = _int(raw, f.offset, f.size, f.signed, byte_order)
    return raw[f.offset:f.offset + f.size] if value is None else value


def _text(data: bytes) -> str:
    nul = data.find(b"\0")
    return (data if nul < 0 else data[:nul]).decode("utf-8", "replace")


def formats_from_meta(entries: list[object]) -> dict[str, TraceFormat]:
    """``event name -> TraceFormat`` from the ``tracepoint_formats`` metadata; entries that do
    not parse are left out (their events then print without fields)."""
    out: dict[str, TraceFormat] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        text, event = entry.get("format"), entry.get("event")
        if not isinstance(text, str) or not isinstance(event, str) or len(text) > _MAX_PAYLOAD:
            continue
        try:
            out[event] = parse_format(text, event.partition(":")[0])
        except FormatError:
            continue
    return out


