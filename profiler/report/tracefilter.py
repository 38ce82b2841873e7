"""``--trace-filter``: select tracepoint samples by payload field with the kernel's
event-filter syntax (``Documentation/trace/events.rst``): ``FIELD OP VALUE`` clauses, ``OP``
one of ``== != < <= > >=`` for numbers and ``== != ~`` for strings (``~`` a glob), joined by
``&&`` and ``||`` (``&&`` binds first)::

    --trace-filter 'prev_comm == "sh" && next_pid != 0'

Imported only when the option is given (the payloads are :mod:`profiler.report.tracepoints`').
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.errors import UsageError

if TYPE_CHECKING:
    from profiler.format.tracepoint import TraceFormat, Value

_CLAUSE_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(==|!=|<=|>=|<|>|~)\s*(.+?)\s*$")


@dataclass(frozen=True)
class Clause:
    """One ``FIELD OP VALUE`` clause of ``--trace-filter``."""

    field: str
    op: str
    value: str


@dataclass(frozen=True)
class TraceFilter:
    """An OR of ANDs of clauses, as written."""

    text: str
    any_of: tuple[tuple[Clause, ...], ...]

    @property
    def fields(self) -> set[str]:
        return {c.field for group in self.any_of for c in group}

    def check(self, fmt: TraceFormat) -> None:
        unknown = sorted(f for f in self.fields if fmt.get(f) is None)
        if unknown:
            names = ", ".join(f.name for f in fmt.fields if not f.common)
            raise UsageError(f"--trace-filter: {fmt.event} has no field {unknown[0]!r} (it has: {names}).")

    def matches(self, values: dict[str, Value]) -> bool:
        return any(all(_clause(c, values.get(c.field)) for c in group) for group in self.any_of)


def parse_trace_filter(text: str) -> TraceFilter:
    groups = []
    for alternative in text.split("||"):
        clauses = []
        for part in alternative.split("&&"):
            m = _CLAUSE_RE.match(part)
            if m is None:
                raise UsageError(f"--trace-filter {text!r}: write FIELD OP VALUE clauses joined by && or ||, "
                                 "OP one of == != < <= > >= ~.")
            value = m.group(3)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            clauses.append(Clause(m.group(1), m.group(2), value))
        groups.append(tuple(clauses))
    return TraceFilter(text, tuple(groups))


def _clause(c: Clause, value: Value | None) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        if c.op == "~":
            return fnmatch.fnmatchcase(value, c.value)
        if c.op in ("==", "!="):
            return (value == c.value) == (c.op == "==")
        return False
    if isinstance(value, int):
        try:
            want = int(c.value, 0)
        except ValueError:
            return False
        return {"==": value == want, "!=": value != want, "<": value < want, "<=": value <= want,
                ">": value > want, ">=": value >= want}.get(c.op, False)
    return False


def filter_mask(fmt: TraceFormat, flt: TraceFilter, payloads: npt.NDArray[Any],
                byte_order: str) -> npt.NDArray[np.bool_]:
    flt.check(fmt)
    return np.fromiter((flt.matches(fmt.decode(raw, byte_order)) for raw in payloads.tolist()),
                       dtype=bool, count=len(payloads))
