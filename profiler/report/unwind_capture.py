"""Unwinding a whole decoded capture in place (every DWARF event), for the commands that
look at all samples rather than one event's profile: ``profiler archive`` (which DSOs the
unwound stacks pass through, and their rule tables to pack) and ``profiler buildids``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any

import numpy as np

from profiler.arrays import ranges
from profiler.dataclass import dataclass
from profiler.format.decode.columns import CaptureData
from profiler.format.container.reader import CaptureReader
from profiler.report.replay import replay
from profiler.report.unwind_samples import chains_with_user_frames, unwind_event_samples
from profiler.symbols.jitsources import JitSymbols
from profiler.unwind.jitcode import JitCodeOf
from profiler.unwind.sources import TableSources
from profiler.unwind.table import RuleTable
from profiler.unwind.unwinder import UnwindResult
from profiler.unwind.userdata import has_user_stacks


@dataclass
class CaptureUnwind:
    events: int = 0  # DWARF events unwound
    tables: dict[tuple[str, str | None], RuleTable] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def unwind_capture(reader: CaptureReader, data: CaptureData, sources: TableSources | None,
                   jit_symbols: Callable[[int], JitSymbols | None] | None = None) -> CaptureUnwind:
    """Replace the callchains of every DWARF event's samples by their unwound stacks;
    ``jit_symbols``: each process's JIT files (:meth:`SymbolSources.jit_symbols`), for code
    with unwind rules of its own (CPython's trampolines)."""
    out = CaptureUnwind()
    s = data.samples
    events = [ev for ev in data.events.events if has_user_stacks(ev.layout)]
    if sources is None or not events or not len(s):
        return out
    rep = replay(data.others, data.others_before, s.pid, s.tid, reader.build_ids())
    jit = None if jit_symbols is None else JitCodeOf(jit_symbols, sources.cols, rep.state.parent)
    n = len(s)
    counts = np.zeros(n, dtype=np.int64)
    parts: list[tuple[Any, UnwindResult]] = []
    for ev in events:
        idx = np.flatnonzero(s.event == ev.index)
        if not len(idx):
            continue
        res, stats = unwind_event_samples(reader, ev.layout, s.take(idx), rep.sample_gen[idx],
                                          rep.snapshots, rep.dsos, sources, sources.cols, jit=jit)
        counts[idx] = np.diff(res.start)
        parts.append((idx, res))
        out.events += 1
        out.warnings.extend(stats.warnings)
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    pcs = np.zeros(int(start[-1]), dtype=np.uint64)
    for idx, res in parts:
        pcs[ranges(start[idx], np.diff(res.start))] = res.pcs
    full = UnwindResult(start, pcs, np.zeros(n, dtype=np.uint8))
    s.chain_id, s.chains = chains_with_user_frames(s, full)
    s.has = s.has | {"callchain"}
    out.tables = dict(sources.loaded)
    return out
