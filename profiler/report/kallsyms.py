"""Kernel symbols from a ``/proc/kallsyms`` text snapshot.

Each line is ``<hex address> <type letter> <name>`` with a trailing ``\\t[module]`` for
module symbols. Only text symbols are kept (types ``T t W w``). Sizes are not given, so
each symbol covers up to the next one's start within the same table (the kernel, or one
module); the last symbol of a table covers up to the next page boundary.

When ``kernel.kptr_restrict`` hides addresses from the reader, every address reads as
zero: :attr:`KernelSymbols.all_zero` says so and the tables are empty, so the caller can
warn once ("kernel addresses are hidden") instead of naming every kernel sample wrongly.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from profiler.errors import FormatError, ReportError
from profiler.report.symtab import SymbolTable

KERNEL_DSO = "[kernel.kallsyms]"
TEXT_TYPES = frozenset("TtWw")
PAGE_SIZE = 4096


@dataclass(frozen=True)
class KernelSymbols:
    """The kernel's symbol table, one table per module, and the kptr_restrict flag."""

    kernel: SymbolTable
    modules: Mapping[str, SymbolTable]
    all_zero: bool = False
    _ranges: list[tuple[int, int, str]] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        spans = [(int(t.starts[0]), int(t.ends[-1]), name) for name, t in self.modules.items() if len(t)]
        self._ranges.extend(sorted(spans))

    def module_for(self, addr: int) -> str | None:
        """The module whose symbols span ``addr``, if any."""
        pos = bisect.bisect_right(self._ranges, (addr, 1 << 64, "")) - 1
        if pos >= 0 and self._ranges[pos][0] <= addr < self._ranges[pos][1]:
            return self._ranges[pos][2]
        return None

    def lookup(self, addr: int) -> tuple[str, str, int] | None:
        """``(dso, symbol, offset)``: dso is ``[kernel.kallsyms]`` or ``[module]``."""
        hit = self.kernel.lookup(addr)
        if hit is not None:
            return KERNEL_DSO, hit[0], hit[1]
        module = self.module_for(addr)
        if module is not None:
            hit = self.modules[module].lookup(addr)
            if hit is not None:
                return f"[{module}]", hit[0], hit[1]
        return None

    def to_packed(self) -> dict[str, Any]:
        """Plain data for msgpack."""
        return {
            "all_zero": self.all_zero,
            "kernel": self.kernel.to_packed(),
            "modules": {name: table.to_packed() for name, table in self.modules.items()},
        }

    @classmethod
    def from_packed(cls, packed: Mapping[str, Any]) -> KernelSymbols:
        """Inverse of :meth:`to_packed`; damaged data raises :class:`FormatError`."""
        try:
            modules = {str(k): SymbolTable.from_packed(v) for k, v in packed["modules"].items()}
            return cls(SymbolTable.from_packed(packed["kernel"]), modules, bool(packed["all_zero"]))
        except (KeyError, TypeError, AttributeError) as exc:
            raise FormatError(f"packed kernel symbols are damaged ({exc})") from exc


def parse_kallsyms(text: str) -> KernelSymbols:
    """Parse a ``/proc/kallsyms`` snapshot; malformed lines are skipped."""
    groups: dict[str, tuple[list[int], list[str]]] = {}
    seen_lines = 0
    nonzero = False
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        try:
            addr = int(parts[0], 16)
        except ValueError:
            continue
        seen_lines += 1
        nonzero = nonzero or addr != 0
        if parts[1] not in TEXT_TYPES:
            continue
        module = parts[3][1:-1] if len(parts) > 3 and parts[3].startswith("[") else ""
        addrs, names = groups.setdefault(module, ([], []))
        addrs.append(addr)
        names.append(parts[2])
    if seen_lines and not nonzero:
        return KernelSymbols(SymbolTable.empty(), {}, all_zero=True)
    tables = {module: _table(addrs, names) for module, (addrs, names) in groups.items()}
    kernel = tables.pop("", SymbolTable.empty())
    return KernelSymbols(kernel, tables, all_zero=False)


def load_kallsyms(path: str | os.PathLike[str] = "/proc/kallsyms") -> KernelSymbols:
    """Read and parse a kallsyms file; ReportError when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as stream:
            return parse_kallsyms(stream.read())
    except OSError as exc:
        raise ReportError(f"cannot read kernel symbols from {path}: {exc.strerror or exc}") from exc


def _table(addrs: list[int], names: list[str]) -> SymbolTable:
    """Symbols covering up to the next start; the highest one up to its page's end."""
    top = max(addrs)
    last_end = (top // PAGE_SIZE + 1) * PAGE_SIZE
    limits = [last_end] * len(addrs)
    return SymbolTable.from_symbols(addrs, [0] * len(addrs), names, limits)
