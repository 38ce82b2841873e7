"""A tracepoint payload as text, the way perf script prints it.

The ``print fmt`` line of a ``format`` file is a C printf format and C argument expressions
over the record (``REC->prev_pid``) and a few helpers the kernel's TRACE_EVENT macros use
(``__get_str``, ``__print_flags``, ``__print_symbolic``, ``__print_hex``, ``__print_array``).
This module parses that line once per event into an expression tree and evaluates it per
payload. A print format using something it does not know (an enum name the kernel left
unresolved, a helper it lacks) is printed in the generic layout instead: every field as
``name=value``, separated by spaces.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import field
from typing import Any

from profiler.dataclass import dataclass
from profiler.format.tracepoint import TraceFormat, Value, decode_field, dynamic_span

_TOKEN_RE = re.compile(
    r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*)"""
    r"""|(?P<id>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>->|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!~?:(),{}<>.\[\]]))"""
)
_TYPE_WORDS = {"unsigned", "signed", "long", "int", "char", "short", "void", "const", "bool", "u8", "u16",
               "u32", "u64", "s8", "s16", "s32", "s64", "size_t", "pid_t", "__u8", "__u16", "__u32",
               "__u64", "__s8", "__s16", "__s32", "__s64", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
               "int8_t", "int16_t", "int32_t", "int64_t", "gfp_t", "umode_t"}
_BINARY = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, "<=": 7, ">": 7, ">=": 7,
           "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}
_SPEC_RE = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\d+|\*)?(?:\.(?P<prec>\d+|\*))?"
                      r"(?P<len>hh|h|ll|l|z|L|j|t)?(?P<conv>[diouxXcspn%])(?P<ext>[A-Za-z0-9]*)?")


class PrintFormatError(Exception):
    """The print format uses something this module cannot evaluate."""


Node = tuple[Any, ...]


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN_RE.match(text, pos)
        if m is None or m.end() == pos:
            raise PrintFormatError(f"cannot read {text[pos:pos + 20]!r}")
        out.append(m.group(m.lastgroup or "op"))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.t = tokens
        self.i = 0

    def peek(self, k: int = 0) -> str:
        return self.t[self.i + k] if self.i + k < len(self.t) else ""

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if not tok or (want is not None and tok != want):
            raise PrintFormatError(f"expected {want!r}, found {tok!r}")
        self.i += 1
        return tok

    def args(self) -> list[Node]:
        out = [self.expr()]
        while self.peek() == ",":
            self.take(",")
            out.append(self.expr())
        return out

    def expr(self) -> Node:
        cond = self.binary(1)
        if self.peek() == "?":
            self.take("?")
            yes = self.expr()
            self.take(":")
            no = self.expr()
            return ("?", cond, yes, no)
        return cond

    def binary(self, level: int) -> Node:
        left = self.unary()
        while self.peek() in _BINARY and _BINARY[self.peek()] >= level:
            op = self.take()
            right = self.binary(_BINARY[op] + 1)
            left = ("bin", op, left, right)
        return left

    def _is_cast(self) -> bool:
        k = 1
        words = []
        while self.peek(k) not in ("", ")"):
            words.append(self.peek(k))
            k += 1
        names = [w for w in words if w != "*"]
        return bool(names) and names[0] in _TYPE_WORDS | {"struct", "enum"} and all(
            re.fullmatch(r"[A-Za-z_]\w*|\*", w) for w in words)

    def unary(self) -> Node:
        tok = self.peek()
        if tok in ("-", "!", "~"):
            self.take()
            return ("un", tok, self.unary())
        if tok == "(" and self._is_cast():
            self.take("(")
            words = []
            while self.peek() != ")":
                words.append(self.take())
            self.take(")")
            return ("cast", " ".join(words), self.unary())
        return self.postfix(self.primary())

    def postfix(self, node: Node) -> Node:
        while self.peek() == "[":
            self.take("[")
            index = self.expr()
            self.take("]")
            node = ("index", node, index)
        return node

    def primary(self) -> Node:
        tok = self.take()
        if tok == "(":
            node = self.expr()
            self.take(")")
            return node
        if tok == "{":
            items = self.args()
            self.take("}")
            return ("list", items)
        if tok.startswith('"'):
            text = _unescape(tok[1:-1])
            while self.peek().startswith('"'):
                text += _unescape(self.take()[1:-1])
            return ("str", text)
        if tok[0].isdigit():
            return ("num", int(tok.rstrip("uUlL"), 0))
        if tok == "REC":
            self.take("->")
            return ("field", self.take())
        if re.fullmatch(r"[A-Za-z_]\w*", tok):
            if self.peek() == "(":
                self.take("(")
                args = [] if self.peek() == ")" else self.args()
                self.take(")")
                return ("call", tok, args)
            raise PrintFormatError(f"unknown name {tok}")
        raise PrintFormatError(f"unexpected {tok!r}")


def _unescape(text: str) -> str:
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


@dataclass
class _Record:
    fmt: TraceFormat
    raw: bytes
    byte_order: str
    seen: dict[str, Value] = field(default_factory=dict)  # print formats name a field often

    def field(self, name: str) -> Value:
        value = self.seen.get(name)
        if value is not None:
            return value
        f = self.fmt.get(name)
        if f is None:
            raise PrintFormatError(f"no field {name}")
        value = decode_field(f, self.raw, self.byte_order)
        if value is None:
            raise PrintFormatError(f"field {name} runs past the payload")
        self.seen[name] = value
        return value


def _cast(type_: str, value: Any) -> Any:
    if not isinstance(value, int) or "*" in type_:
        return value & 0xFFFFFFFFFFFFFFFF if isinstance(value, int) else value
    words = type_.split()
    bits = 64 if ("long" in words or "64" in type_ or "size_t" in words) else 16 if (
        "short" in words or "16" in type_) else 8 if ("char" in words or "8" in type_ or "bool" in words) else 32
    value &= (1 << bits) - 1
    unsigned = "unsigned" in words or type_.startswith(("u", "__u")) or "bool" in words
    if not unsigned and value >> (bits - 1):
        value -= 1 << bits
    return value


_BIN_OPS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: int(a / b) if b else 0, "%": lambda a, b: a % b if b else 0,
    "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b, "&": lambda a, b: a & b,
    "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b), "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b), ">=": lambda a, b: int(a >= b),
}


def _eval(node: Node, rec: _Record) -> Any:
    kind = node[0]
    if kind in ("num", "str"):
        return node[1]
    if kind == "field":
        return rec.field(node[1])
    if kind == "cast":
        return _cast(node[1], _eval(node[2], rec))
    if kind == "un":
        v = _eval(node[2], rec)
        return -v if node[1] == "-" else int(not v) if node[1] == "!" else ~v
    if kind == "?":
        return _eval(node[2], rec) if _eval(node[1], rec) else _eval(node[3], rec)
    if kind == "bin":
        op = node[1]
        if op == "&&":
            return int(bool(_eval(node[2], rec)) and bool(_eval(node[3], rec)))
        if op == "||":
            return int(bool(_eval(node[2], rec)) or bool(_eval(node[3], rec)))
        a, b = _eval(node[2], rec), _eval(node[3], rec)
        if not isinstance(a, int) or not isinstance(b, int):
            raise PrintFormatError(f"operator {op} on a non-number")
        return _BIN_OPS[op](a, b)
    if kind == "index":
        seq, i = _eval(node[1], rec), _eval(node[2], rec)
        return seq[i]
    if kind == "call":
        return _call(node[1], node[2], rec)
    raise PrintFormatError(f"cannot evaluate {kind}")


def _pairs(nodes: list[Node], rec: _Record) -> list[tuple[int, str]]:
    out = []
    for n in nodes:
        if n[0] != "list" or len(n[1]) != 2:
            raise PrintFormatError("a flag list entry is not { value, \"name\" }")
        out.append((int(_eval(n[1][0], rec)), str(_eval(n[1][1], rec))))
    return out


def _call(name: str, args: list[Node], rec: _Record) -> Any:
    if name in ("__get_str", "__get_rel_str", "__get_dynamic_array", "__get_rel_dynamic_array",
                "__get_dynamic_array_len", "__get_rel_dynamic_array_len", "__get_bitmask"):
        if not args or args[0][0] not in ("call", "field") and args[0][0] != "num":
            raise PrintFormatError(f"{name} needs a field")
        fname = args[0][1] if args[0][0] == "field" else _name_of(args[0])
        f = rec.fmt.get(fname)
        if f is None:
            raise PrintFormatError(f"no field {fname}")
        if name.endswith("_len"):
            span = dynamic_span(f, rec.raw, rec.byte_order)
            return span[1] if span else 0
        return rec.field(fname)
    if name == "__print_flags":
        value, delim = int(_eval(args[0], rec)), str(_eval(args[1], rec))
        return _print_flags(value, delim, _pairs(args[2:], rec))
    if name == "__print_symbolic":
        value = int(_eval(args[0], rec))
        for v, text in _pairs(args[1:], rec):
            if v == value:
                return text
        return str(value)
    if name == "__print_hex" or name == "__print_hex_str":
        data = _bytes(_eval(args[0], rec))[: int(_eval(args[1], rec))]
        return ("" if name == "__print_hex_str" else " ").join(f"{b:02x}" for b in data)
    if name == "__print_array":
        data = _bytes(_eval(args[0], rec))
        count, size = int(_eval(args[1], rec)), int(_eval(args[2], rec))
        items = [int.from_bytes(data[i * size:(i + 1) * size], "big" if rec.byte_order == "big" else "little")
                 for i in range(min(count, len(data) // max(size, 1)))]
        return "{" + ",".join(f"0x{v:x}" for v in items) + "}"
    raise PrintFormatError(f"unknown helper {name}")


def _name_of(node: Node) -> str:
    raise PrintFormatError("a helper's argument is not a field name")


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, list):
        return bytes(v & 0xFF for v in value)
    raise PrintFormatError("not a byte array")


def _print_flags(value: int, delim: str, flags: list[tuple[int, str]]) -> str:
    parts = []
    for v, text in flags:
        if v == 0 and value == 0:
            return text
        if v and value & v == v:
            parts.append(text)
            value &= ~v
    if value:
        parts.append(f"0x{value:x}")
    return delim.join(parts)


# --- printf -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _specs(fmt: str) -> tuple[tuple[int, int, dict[str, str | None]], ...]:
    """The conversions of a format string, parsed once: (start, end, groups)."""
    return tuple((m.start(), m.end(), m.groupdict()) for m in _SPEC_RE.finditer(fmt))


def _printf(fmt: str, values: list[Any]) -> str:
    out: list[str] = []
    pos, k = 0, 0
    for begin, finish, g in _specs(fmt):
        out.append(fmt[pos:begin])
        pos = finish
        conv = g["conv"]
        if conv == "%":
            out.append("%")
            continue
        width, prec = g["width"], g["prec"]
        if width == "*":
            width, k = str(values[k]), k + 1
        if prec == "*":
            prec, k = str(values[k]), k + 1
        if k >= len(values):
            raise PrintFormatError("fewer arguments than conversions")
        value, k = values[k], k + 1
        spec = "%" + (g["flags"] or "") + (width or "") + (f".{prec}" if prec is not None else "")
        out.append(_convert(spec, str(conv), g["len"] or "", g["ext"] or "", value))
    out.append(fmt[pos:])
    return "".join(out)


def _convert(spec: str, conv: str, length: str, ext: str, value: Any) -> str:
    if conv == "s":
        text = (value if isinstance(value, str) else str(value) if isinstance(value, int)
                else _bytes(value).decode("utf-8", "replace"))
        return (spec + "s") % text + ext
    if conv == "p":
        if not isinstance(value, int):
            raise PrintFormatError("%p of a non-number")
        return (spec + "s") % f"0x{value & 0xFFFFFFFFFFFFFFFF:x}"
    if not isinstance(value, int):
        raise PrintFormatError(f"%{conv} of a non-number")
    if conv == "c":
        return (spec + "c") % chr(value & 0xFF) + ext
    bits = 64 if length in ("l", "ll", "z", "L", "j", "t") else 16 if length == "h" else 8 if length == "hh" else 32
    value &= (1 << bits) - 1
    if conv in "di" and value >> (bits - 1):
        value -= 1 << bits
    out: str = (spec + ("d" if conv in "diu" else conv)) % value
    return out + ext


# --- the public part ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TracePrinter:
    """The print format of one tracepoint, parsed once."""

    fmt: TraceFormat
    text: str | None
    args: tuple[Node, ...]

    @classmethod
    def of(cls, fmt: TraceFormat) -> TracePrinter:
        try:
            tokens = _tokens(fmt.print_fmt)
            if not tokens or not tokens[0].startswith('"'):
                raise PrintFormatError("no format string")
            parser = _Parser(tokens)
            text_node = parser.primary()
            args: list[Node] = []
            if parser.peek() == ",":
                parser.take(",")
                args = parser.args()
            if parser.peek():
                raise PrintFormatError(f"trailing {parser.peek()!r}")
            return cls(fmt, str(text_node[1]), tuple(args))
        except (PrintFormatError, ValueError, IndexError):
            return cls(fmt, None, ())

    def format(self, raw: bytes, byte_order: str = "little") -> str:
        """The payload as perf script prints it (the generic layout when the print format
        cannot be evaluated)."""
        if self.text is not None:
            rec = _Record(self.fmt, raw, byte_order)
            try:
                return _printf(self.text, [_eval(a, rec) for a in self.args])
            except (PrintFormatError, ValueError, IndexError, TypeError, KeyError, OverflowError):
                pass
        return generic_layout(self.fmt, raw, byte_order)


def generic_layout(fmt: TraceFormat, raw: bytes, byte_order: str = "little") -> str:
    parts = []
    for name, value in fmt.decode(raw, byte_order).items():
        if isinstance(value, bytes):
            value = value.hex()
        elif isinstance(value, list):
            value = "[" + ",".join(str(v) for v in value) + "]"
        parts.append(f"{name}={value}")
    return " ".join(parts)
