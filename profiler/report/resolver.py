"""Turning addresses into frames: (pid, map generation, address, kernel?) -> frame id.

Only unique addresses reach this module, grouped so that each step is one numpy call:
per map generation, the maps are searched with ``searchsorted``; per DSO, file offsets
become ELF virtual addresses through the ``PT_LOAD`` segment that holds them and then
symbols with one ``lookup_many``.

Where symbols come from is one ordered list, :attr:`SymbolResolver.sources`: each source
is asked for a DSO in turn and the first that has its symbols wins. The reporter gives it
one source, the offline chain :class:`profiler.symbols.sources.SymbolSources` (packed in the
capture, ``--symfs``, debug directories, the local file only when its build-id matches),
and the same chain as :attr:`SymbolResolver.chain` for JIT maps and for its warnings. A DSO
that no source can symbolize gets one warning and its frames show as ``[unknown]`` in that
DSO with their offset, as perf shows them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from profiler.arrays import distinct
from profiler.dataclass import dataclass
from profiler.errors import FormatError
from profiler.report.maps import Dso, DsoTable, MapSnapshot
from profiler.symbols.sources import SymbolSources
from profiler.symbols.demangle import demangle
from profiler.symbols.dso import DsoSymbols, SymbolStatus
from profiler.symbols.kallsyms import KernelSymbols
from profiler.names import KERNEL_DSO, PYTHON_PREFIX
from profiler.symbols.perfmap import parse_perf_map, perf_map_path
from profiler.symbols.table import SymbolTable
from profiler.symbols.unnamed import is_unnamed
from profiler.names import UNKNOWN

if TYPE_CHECKING:
    from profiler.symbols.srcline import LineTable

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]



@dataclass(frozen=True)
class FrameInfo:
    """One distinct frame of the report.

    ``symbol`` is the raw (mangled) name, or None when unresolved; then ``addr`` is what perf
    prints instead: the offset in the DSO, or the address itself when no map covered it.
    ``kind`` is "user", "kernel", "jit", "python" or "unknown" (the flame-graph model's kinds).
    A Python function (CPython's ``py::QUALNAME:FILE`` JIT entries) has its qualified name as
    ``symbol`` and its source file as ``dso`` and ``dso_path``.
    """

    symbol: str | None
    dso: str  # short name ("libc.so.6", "[kernel.kallsyms]", "[unknown]")
    dso_path: str
    kind: str
    addr: int = 0
    inlined: bool = False  # a function inlined into the one the symbol table names (DWARF)

    @property
    def resolved(self) -> bool:
        return self.symbol is not None

    @property
    def is_kernel(self) -> bool:
        return self.kind == "kernel"

    @property
    def unnamed(self) -> bool:
        """A function found without a symbol (from ``.eh_frame``), named ``DSO+0xSTART``."""
        return is_unnamed(self.symbol, self.dso)

    def name(self, demangled: bool = True) -> str:
        """The symbol's display name; ``[unknown]`` when unresolved."""
        if self.symbol is None:
            return UNKNOWN
        name = demangle(self.symbol) if demangled else self.symbol
        return f"{name} (inlined)" if self.inlined else name

    def label(self, demangled: bool = True) -> str:
        """perf report's Symbol text: the name, or the hex address when unresolved."""
        if self.symbol is not None:
            return self.name(demangled)
        if self.dso == UNKNOWN:
            return f"{self.addr:016x}"
        return f"0x{self.addr:016x}"


def python_frame(entry: str) -> FrameInfo:
    """The frame of a CPython perf-support entry ``py::QUALNAME:FILE`` (a qualified name has no
    colon; the file may)."""
    qualname, _, file = entry[len(PYTHON_PREFIX):].partition(":")
    return FrameInfo(qualname or entry, file or UNKNOWN, file or UNKNOWN, "python")


class FrameTable:
    """Interns frames: identical (dso, symbol) or (dso, unresolved address) share an id."""

    def __init__(self) -> None:
        self.frames: list[FrameInfo] = []
        self._ids: dict[tuple[str, str, str | None, int], int] = {}

    def intern(self, frame: FrameInfo) -> int:
        key = (frame.dso_path, frame.kind + ("+inlined" if frame.inlined else ""), frame.symbol,
               0 if frame.symbol is not None else frame.addr)
        found = self._ids.get(key)
        if found is None:
            found = len(self.frames)
            self.frames.append(frame)
            self._ids[key] = found
        return found

    def __getitem__(self, frame_id: int) -> FrameInfo:
        return self.frames[frame_id]

    def __len__(self) -> int:
        return len(self.frames)


@dataclass
class Resolved:
    """Per address: frame id, offset into its symbol, and the address perf script shows
    (in the DSO's own address space for user code, absolute for kernel and unmapped)."""

    frame: I64
    offset: U64
    shown: U64
    srcline: I64 = field(default_factory=lambda: np.zeros(0, np.int64))  # id in SymbolResolver.srclines, -1
    # i -> (frame, srcline), innermost first
    inlined: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.srcline.shape[0] != self.frame.shape[0]:
            self.srcline = np.full(self.frame.shape[0], -1, np.int64)

    @classmethod
    def empty(cls, n: int) -> Resolved:
        return cls(np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.uint64),
                   np.zeros(n, dtype=np.uint64))

    def put(self, where: I64, part: Resolved) -> None:
        self.frame[where] = part.frame
        self.offset[where] = part.offset
        self.shown[where] = part.shown
        self.srcline[where] = part.srcline
        for i, chain in part.inlined.items():
            self.inlined[int(where[i])] = chain


class SymbolSource(Protocol):
    """Something that may know the symbols of a DSO (None: ask the next source)."""

    def load(self, dso: Dso) -> DsoSymbols | None: ...


@dataclass
class SymbolResolver:
    """Resolves unique addresses to frame ids, warning once per DSO it cannot symbolize.

    ``chain`` (optional) is the report's :class:`SymbolSources`: JIT maps are asked of it
    (packed in the capture, else ``perf-PID.map`` files) and each warning it raises is
    copied into :attr:`warnings` once, as soon as the call that raised it returns.
    """

    dsos: DsoTable
    snapshots: Sequence[MapSnapshot]
    sources: list[SymbolSource]
    kernel: KernelSymbols | None = None
    kernel_note: str = ""
    use_perf_maps: bool = True
    perf_map_dir: str = "/tmp"
    chain: SymbolSources | None = None
    parents: dict[int, int] = field(default_factory=dict)  # pid -> the pid it forked from
    lines: bool = False  # look source lines up (DWARF, packed line tables)
    inline: bool = False  # and expand inlined functions into their own frames
    line_cache_dir: Path | None = None
    frames: FrameTable = field(default_factory=FrameTable)
    warnings: list[str] = field(default_factory=list)
    srclines: list[str] = field(default_factory=list)
    _srcline_ids: dict[str, int] = field(default_factory=dict)
    _line_tables: dict[int, LineTable | None] = field(default_factory=dict)
    _loaded: dict[int, DsoSymbols | None] = field(default_factory=dict)
    _returns: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, np.bool_))
    _perf_maps: dict[int, SymbolTable | None] = field(default_factory=dict)
    _kernel_warned: bool = False
    _chain_seen: int = 0

    def __post_init__(self) -> None:
        self._take_chain_warnings()

    def _take_chain_warnings(self) -> None:
        """Copy the chain's new warnings (it only ever appends) into this resolver's."""
        if self.chain is not None:
            new = self.chain.warnings[self._chain_seen:]
            self._chain_seen += len(new)
            self.warnings.extend(new)

    # --- DSOs -------------------------------------------------------------------------------

    def dso_symbols(self, dso_id: int) -> DsoSymbols | None:
        """Symbols of a DSO from the first source that has them (cached); warns once."""
        if dso_id in self._loaded:
            return self._loaded[dso_id]
        dso = self.dsos[dso_id]
        best: DsoSymbols | None = None
        for source in self.sources:
            got = source.load(dso)
            if got is None:
                continue
            if got.ok:
                best = got
                break
            if best is None or got.status is SymbolStatus.BUILD_ID_MISMATCH:
                best = got
        self._take_chain_warnings()
        if best is not None and not best.ok and best.status is not SymbolStatus.NO_SYMBOLS:
            note = best.message if dso.path in best.message else f"{dso.path}: {best.message}"
            self.warnings.append(f"no symbols: {note}; its frames show as [unknown].")
        self._loaded[dso_id] = best if best is not None and best.ok else None
        return self._loaded[dso_id]

    # --- resolution -------------------------------------------------------------------------

    def resolve(self, pid: I64, gen: I64, addr: U64, kernel: npt.NDArray[np.bool_],
                returns: npt.NDArray[np.bool_] | None = None) -> Resolved:
        """Resolve each (pid, generation, address, kernel?) — all arrays the same length.

        ``returns`` marks addresses that are only ever return addresses (callers' entries of
        callchains): their source line and inline chain are those of the call instruction,
        looked up at the address minus one, as debuggers do."""
        self._returns = np.zeros(len(addr), np.bool_) if returns is None else returns
        n = len(addr)
        out = Resolved(np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.uint64), addr.copy())
        k = np.flatnonzero(kernel)
        if len(k):
            out.put(k, self._resolve_kernel(addr[k]))
        u = np.flatnonzero(~kernel)
        if len(u):
            out.put(u, self._resolve_user(pid[u], gen[u], addr[u], self._returns[u]))
        return out

    def _resolve_kernel(self, addrs: U64) -> Resolved:
        res = Resolved.empty(len(addrs))
        res.shown[:] = addrs
        out = res.frame
        ks = self.kernel
        if ks is None or len(ks.kernel) == 0:
            if not self._kernel_warned:
                self._kernel_warned = True
                self.warnings.append(self.kernel_note or "the capture has no kernel symbols: "
                                     "kernel frames show as [unknown].")
            for i, a in enumerate(addrs.tolist()):
                out[i] = self.frames.intern(FrameInfo(None, KERNEL_DSO, KERNEL_DSO, "kernel", a))
            return res
        idx, offs = ks.kernel.lookup_many(addrs)
        res.offset[:] = offs
        for i, (a, j) in enumerate(zip(addrs.tolist(), idx.tolist())):
            if j >= 0:
                out[i] = self.frames.intern(FrameInfo(ks.kernel.name(j), KERNEL_DSO, KERNEL_DSO, "kernel"))
                continue
            hit = ks.lookup(a)
            if hit is not None:
                out[i] = self.frames.intern(FrameInfo(hit[1], hit[0], hit[0], "kernel"))
                res.offset[i] = hit[2]
            else:
                out[i] = self.frames.intern(FrameInfo(None, KERNEL_DSO, KERNEL_DSO, "kernel", a))
        return res

    def _resolve_user(self, pid: I64, gen: I64, addr: U64, returns: npt.NDArray[np.bool_]) -> Resolved:
        n = len(addr)
        dso = np.full(n, -1, dtype=np.int64)
        offset = addr.copy()
        for g in distinct(gen).tolist():
            sel = np.flatnonzero(gen == g)
            d, o = self.snapshots[g].lookup_many(addr[sel])
            dso[sel], offset[sel] = d, o
        out = Resolved.empty(n)
        used = [d for d in distinct(dso).tolist() if d >= 0 and not self.dsos[d].is_anon]
        if self.chain is not None:  # one parallel round of debuginfod fetches, if any
            self.chain.prefetch((self.dsos[d].path, self.dsos[d].build_id) for d in used
                                if d not in self._loaded)
            self._take_chain_warnings()
        for d in distinct(dso).tolist():
            sel = np.flatnonzero(dso == d)
            if d < 0 or self.dsos[d].is_anon:
                out.put(sel, self._resolve_unmapped(d, pid[sel], addr[sel], offset[sel]))
            else:
                out.put(sel, self._resolve_in_dso(d, offset[sel], returns[sel]))
        return out

    def _resolve_in_dso(self, dso_id: int, offsets: U64, returns: npt.NDArray[np.bool_] | None = None) -> Resolved:
        dso = self.dsos[dso_id]
        short, path = dso.short_name, dso.path
        syms = self.dso_symbols(dso_id)
        res = Resolved.empty(len(offsets))
        res.shown[:] = offsets
        out = res.frame
        if syms is None:
            for i, off in enumerate(offsets.tolist()):
                out[i] = self.frames.intern(FrameInfo(None, short, path, "user", off))
            return res
        if syms.layout is not None and syms.layout.load_segments:
            vaddrs, found = syms.layout.file_offsets_to_vaddrs(offsets)
        else:
            vaddrs, found = offsets, np.ones(len(offsets), dtype=bool)
        idx, offs = syms.table.lookup_many(vaddrs)
        idx = np.where(found, idx, -1)
        shown = np.where(found, vaddrs, offsets)
        res.shown[:] = shown
        res.offset[:] = offs
        for i, (j, a) in enumerate(zip(idx.tolist(), shown.tolist())):
            if j >= 0:
                out[i] = self.frames.intern(FrameInfo(syms.table.name(j), short, path, "user"))
            else:
                out[i] = self.frames.intern(FrameInfo(None, short, path, "user", a))
        if self.lines or self.inline:
            table = self._line_table(dso_id, syms)
            if table is not None:
                at = vaddrs - (returns & (vaddrs > 0)).astype(np.uint64) if returns is not None else vaddrs
                self._add_lines(res, table, at, found & (idx >= 0), short, path)
        return res

    # --- source lines and inlined frames ------------------------------------------------------

    def srcline_id(self, text: str | None) -> int:
        """The id of a ``file:line`` text in :attr:`srclines` (-1 for None)."""
        if text is None:
            return -1
        found = self._srcline_ids.get(text)
        if found is None:
            found = self._srcline_ids[text] = len(self.srclines)
            self.srclines.append(text)
        return found

    def dso_id_of(self, path: str) -> int | None:
        """The id of the DSO recorded at ``path`` (the first, if it was mapped with several build-ids)."""
        return next((i for i, d in enumerate(self.dsos.dsos) if d.path == path), None)

    def line_table(self, dso_id: int) -> LineTable | None:
        """The DSO's source lines (DWARF or packed), or None."""
        syms = self.dso_symbols(dso_id)
        return None if syms is None else self._line_table(dso_id, syms)

    def _line_table(self, dso_id: int, syms: DsoSymbols) -> LineTable | None:
        if dso_id not in self._line_tables:
            from profiler.symbols.srcline import line_table_of  # only for source lines (--sort srcline, annotate)

            table: LineTable | None = None
            try:
                table = line_table_of(syms, self.dsos[dso_id].build_id, self.line_cache_dir)
            except FormatError as exc:
                self.warnings.append(f"the packed source lines of {syms.path} are damaged ({exc}); ignored.")
            self._line_tables[dso_id] = table
        return self._line_tables[dso_id]

    def _add_lines(self, res: Resolved, table: LineTable, vaddrs: U64, ok: npt.NDArray[np.bool_],
                   short: str, path: str) -> None:
        """Each address's source line and, with ``inline``, the inlined functions around it."""
        for i in np.flatnonzero(ok).tolist():
            chain = table.lookup(int(vaddrs[i]))
            if not chain:
                continue
            if not self.inline or len(chain) == 1:
                res.srcline[i] = self.srcline_id(chain[0].srcline)
                continue
            res.srcline[i] = self.srcline_id(chain[-1].srcline)  # the call site in the real function
            res.inlined[i] = tuple(
                (self.frames.intern(FrameInfo(fr.function, short, path, "user", inlined=True)),
                 self.srcline_id(fr.srcline)) for fr in chain[:-1])

    def _resolve_unmapped(self, dso_id: int, pid: I64, addr: U64, offset: U64) -> Resolved:
        """Addresses in anonymous memory or in no map: JIT symbols from /tmp/perf-PID.map."""
        res = Resolved.empty(len(addr))
        res.shown[:] = addr
        out = res.frame
        dso = self.dsos[dso_id] if dso_id >= 0 else None
        for i, (p, a, off) in enumerate(zip(pid.tolist(), addr.tolist(), offset.tolist())):
            owner, hit = self._jit_lookup(p, a)
            if hit is not None and hit[0].startswith(PYTHON_PREFIX):
                res.offset[i] = hit[1]
                out[i] = self.frames.intern(python_frame(hit[0]))
            elif hit is not None:
                name = f"perf-{owner}.map"
                res.offset[i] = hit[1]
                out[i] = self.frames.intern(FrameInfo(hit[0], name, str(perf_map_path(owner, self.perf_map_dir)),
                                                      "jit"))
            elif dso is not None:
                out[i] = self.frames.intern(FrameInfo(None, dso.short_name, dso.path, "user", off))
            else:
                out[i] = self.frames.intern(FrameInfo(None, UNKNOWN, UNKNOWN, "unknown", a))
        return res

    def _jit_lookup(self, pid: int, addr: int) -> tuple[int, tuple[str, int] | None]:
        """The JIT symbol at ``addr`` in the process's map, else in the map of the process it
        forked from (a forked child runs its parent's JIT code but starts an empty map)."""
        from profiler.symbols.jitsources import lineage  # JIT modules load only for JIT code

        for p in lineage(pid, self.parents):
            table = self._perf_map(p)
            hit = table.lookup(addr) if table is not None else None
            if hit is not None:
                return p, hit
        return pid, None

    def _perf_map(self, pid: int) -> SymbolTable | None:
        if not self.use_perf_maps:
            return None
        if self.chain is not None:
            jit, _ = self.chain.jit(pid)
            self._take_chain_warnings()
            return jit
        if pid not in self._perf_maps:
            path = perf_map_path(pid, self.perf_map_dir)
            table: SymbolTable | None = None
            try:
                text = path.read_text(encoding="utf-8", errors="surrogateescape")
                table, bad = parse_perf_map(text)
                if bad:
                    self.warnings.append(f"{path}: skipped {bad} malformed lines.")
            except FileNotFoundError:
                table = None
            except OSError as exc:
                self.warnings.append(f"cannot read JIT symbols {path}: {exc.strerror}.")
            self._perf_maps[pid] = table
        return self._perf_maps[pid]
