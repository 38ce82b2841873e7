"""Kernel symbols from a ``/proc/kallsyms`` text snapshot.

Lines are read, and symbols chosen, by :mod:`profiler.format.kallsyms` (the recorder's rules
too): each line is ``<hex address> <type letter> <name>`` with a trailing ``\\t[module]`` for
module symbols; only text symbols are kept (types ``T t W w``); of several symbols at one
address the last listed wins, whatever their types (as in perf report). Sizes are not given,
so each symbol covers up to the next one's start within the same table (the kernel, or one
module); the last symbol of a table covers up to the next page boundary. A snapshot with an
address wider than 64 bits is damaged: :class:`~profiler.errors.FormatError`.

When ``kernel.kptr_restrict`` hides addresses from the reader, every address reads as
zero: :attr:`KernelSymbols.all_zero` says so and the tables are empty, so the caller can
warn once ("kernel addresses are hidden") instead of naming every kernel sample wrongly.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Mapping
from dataclasses import field
from typing import Any

import msgpack
import numpy as np

from profiler.dataclass import dataclass
from profiler.errors import FormatError, ReportError
from profiler.cache import cache_dir
from profiler.format.kallsyms import all_zero, iter_text_symbols, last_listed, table_end
from profiler.names import KERNEL_DSO
from profiler.symbols.table import RANK_GLOBAL, RANK_LOCAL, RANK_WEAK, SymbolTable

_RANKS = {"T": RANK_GLOBAL, "W": RANK_WEAK, "w": RANK_WEAK, "t": RANK_LOCAL}


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


def parse_kallsyms(text: str | bytes) -> KernelSymbols:
    """Parse a ``/proc/kallsyms`` snapshot; malformed lines are skipped, an address wider than
    64 bits is :class:`~profiler.errors.FormatError`."""
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    if all_zero(data):
        return KernelSymbols(SymbolTable.empty(), {}, all_zero=True)
    groups: dict[str, tuple[list[int], list[str], list[int]]] = {}
    for module, addr, kind, name in iter_text_symbols(data):
        addrs, names, ranks = groups.setdefault(module.decode("utf-8", "surrogateescape"), ([], [], []))
        addrs.append(addr)
        names.append(name.decode("utf-8", "surrogateescape"))
        ranks.append(_RANKS[chr(kind)])
    tables = {module: _table(*group) for module, group in groups.items()}
    kernel = tables.pop("", SymbolTable.empty())
    return KernelSymbols(kernel, tables, all_zero=False)


def load_kallsyms(path: str | os.PathLike[str] = "/proc/kallsyms") -> KernelSymbols:
    """Read and parse a kallsyms file; ReportError when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as stream:
            return parse_kallsyms(stream.read())
    except OSError as exc:
        raise ReportError(f"cannot read kernel symbols from {path}: {exc.strerror or exc}") from exc


def _table(addrs: list[int], names: list[str], ranks: list[int]) -> SymbolTable:
    """Symbols covering up to the next start; the highest one up to its page's end. Of
    several names at one address the last listed wins
    (:func:`profiler.format.kallsyms.last_listed`)."""
    keep = last_listed(addrs)
    if len(keep) < len(addrs):
        addrs = [addrs[i] for i in keep]
        names = [names[i] for i in keep]
        ranks = [ranks[i] for i in keep]
    starts = np.array(addrs, dtype=np.uint64)  # every address fits: parse_line checked
    limits = np.full(starts.shape, table_end(max(addrs)), dtype=np.uint64)
    return SymbolTable.from_symbols(starts, np.zeros(starts.shape, np.uint64), names, limits, ranks)


KALLSYMS_RULES = "r2"  # bumped when parse_kallsyms names symbols differently (r2: last alias wins)


def cached_kernel_symbols(text: str) -> KernelSymbols:
    """``parse_kallsyms(text)``, kept on disk keyed by the snapshot's SHA-1 (parsing a 5 MB
    snapshot costs ~0.2 s, loading the packed tables ~5 ms). Cache trouble is never an error."""
    import hashlib  # only for a capture with a kernel snapshot (hashlib: ~3 ms of start-up)

    digest = hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()
    path = cache_dir() / "kallsyms" / f"{digest}-{KALLSYMS_RULES}.msgpack"
    try:
        packed = msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)
        return KernelSymbols.from_packed(packed)
    except (OSError, ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, FormatError):
        pass
    ks = parse_kallsyms(text)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(msgpack.packb(ks.to_packed(), use_bin_type=True))
        os.replace(tmp, path)
    except OSError:
        pass
    return ks
