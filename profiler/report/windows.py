"""A capture's samples in time order, window by window, in memory bounded by a window: the
time-ordered outputs (``profiler script``) without the whole capture in memory.

The first pass is the tally's (:func:`profiler.report.tally.prepare`): record offsets, the
non-sample records replayed, and each chunk's earliest and latest sample time. The chunks are
then decoded in file order. After chunk k, no sample still to come is earlier than the
earliest time of the chunks after k, so every sample held up to that time is final: those
are sorted by (time, file position), resolved and handed out as one window of
:class:`~profiler.report.profile.Profile` s (one per event). A sample at exactly that time comes
from an earlier position in the file than any still to come, so it is final too.

How much a window holds depends on how far the kernel's per-CPU buffers drifted apart in the
file: a few chunks for our captures (all buffers are drained in each pass) and perf's. It is
never wrong: in the worst case one window holds everything.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.format.decode.chains import ChainStore
from profiler.format.decode.columns import ChainTable, SampleColumns
from profiler.report.assemble import Counts, Selected, assemble, entry_mask, make_resolver
from profiler.report.capture import Capture
from profiler.report.options import LoadOptions
from profiler.report.profile import Profile
from profiler.report.replay import ReplayState, name_unknown, place_samples
from profiler.report.resolver import SymbolResolver
from profiler.report.tally import Prepared, kept_samples, prepare, sample_positions, sample_time_word

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

WINDOW_SAMPLES = 50_000  # a window is cut once this many samples are held (and at the end)
_COLUMNS = ("event", "ip", "pid", "tid", "time", "cpu", "period", "misc", "seq", "chain_id")


@dataclass
class Totals:
    """What the whole stream held: samples per event before and after the filters."""

    recorded: dict[int, int] = field(default_factory=dict)
    shown: dict[int, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Held:
    """Samples decoded but not yet handed out (columns, map generation, comm)."""

    parts: list[tuple[SampleColumns, I64, I64]] = field(default_factory=list)

    def count(self) -> int:
        return sum(len(s) for s, _, _ in self.parts)

    def take_until(self, safe: int | None) -> tuple[dict[str, Any], I64, I64] | None:
        """The held samples with time <= ``safe`` (all with None), sorted by (time, position)."""
        if not self.parts:
            return None
        cols: dict[str, Any] = {k: np.concatenate([getattr(s, k) for s, _, _ in self.parts]) for k in _COLUMNS}
        gen = np.concatenate([g for _, g, _ in self.parts])
        comm = np.concatenate([c for _, _, c in self.parts])
        order = np.lexsort((cols["seq"], cols["time"]))
        if safe is None:
            out, rest = order, order[:0]
        else:
            ready = cols["time"][order] <= np.uint64(safe)
            out, rest = order[ready], order[~ready]
        template = self.parts[0][0]
        self.parts = []
        if len(rest):
            kept = _columns({k: v[rest] for k, v in cols.items()}, template.chains, template.has)
            self.parts.append((kept, gen[rest], comm[rest]))
        if not len(out):
            return None
        return {k: v[out] for k, v in cols.items()}, gen[out], comm[out]


def windows(options: LoadOptions, capture: Capture, events: list[int],
            totals: Totals) -> Iterator[list[Profile]] | None:
    """Windows of ``events``' samples in time order (see the module docstring): per window,
    one :class:`Profile` per event (possibly empty). None when the capture cannot be read
    window by window (the pipeline decodes it whole then); ``totals`` is filled as the
    windows go. The caller checked that no event needs a whole decode."""
    prepared = prepare(capture.reader, options.filters, options.callchains, keep_cpu=True, jobs=1)
    if prepared is None or sample_time_word(prepared.plan.decoder) is None:
        return None
    return _windows(options, capture, events, prepared, totals)


def _windows(options: LoadOptions, capture: Capture, events: list[int], prepared: Prepared,
             totals: Totals) -> Iterator[list[Profile]]:
    plan = prepared.plan
    decoder, state = plan.decoder, plan.state
    reader = capture.reader
    # after chunk k, no later sample is earlier than suffix[k + 1]
    firsts = [t[0] if t[0] >= 0 else None for t in prepared.chunk_times]
    suffix: list[int | None] = [None] * (len(firsts) + 1)
    for k in range(len(firsts) - 1, -1, -1):
        later = suffix[k + 1]
        first = firsts[k]
        suffix[k] = first if later is None else (later if first is None else min(first, later))
    resolver = make_resolver(capture, state, options)
    store = ChainStore()
    held = _Held()
    has: set[str] = set()
    wanted = np.asarray(events, dtype=np.int64)
    damaged = 0
    totals.warnings = list(reader.warnings) + list(prepared.warnings)
    if prepared.failed:
        totals.warnings.append(f"{prepared.failed} damaged non-sample records were skipped.")
    for k, (frames, seq0) in enumerate(plan.chunks):
        chunk = decoder.records(frames, seq0, [])
        s, bad = decoder.samples(chunk, options.callchains, lean=True)
        decoder.release(frames)
        damaged += bad
        for e, n in zip(*np.unique(s.event, return_counts=True)):
            totals.recorded[int(e)] = totals.recorded.get(int(e), 0) + int(n)
        s = s.take(np.isin(s.event, wanted) & kept_samples(plan, s))
        positions = sample_positions(plan.other_time, plan.other_seq, s.time, s.seq)
        gen, comm = place_samples(state, s.pid, s.tid, positions)
        name_unknown(state, s.tid, comm)
        ok = entry_mask(s.pid, s.tid, comm, state.comm_names, options.filters)
        s, gen, comm = s.take(ok), gen[ok], comm[ok]
        if len(s.chains) > 1:
            ids = store.add(s.chains.words, s.chains.start[:-1], s.chains.lengths).astype(np.int32)
            s.chain_id = ids[s.chain_id]
        held.parts.append((s, gen, comm))
        last = k == len(plan.chunks) - 1
        has |= s.has
        if not last and held.count() < WINDOW_SAMPLES:
            continue  # each window resolves and renders its stacks anew: not too many windows
        ready = held.take_until(None if last else suffix[k + 1])
        if ready is not None:
            yield _window_profiles(options, capture, resolver, state, store.table(), frozenset(has), ready, events,
                                   totals)
    if damaged:
        totals.warnings.append(f"{damaged} damaged samples (callchain longer than the record) were skipped.")


def _columns(cols: dict[str, Any], chains: ChainTable, has: frozenset[str]) -> SampleColumns:
    return SampleColumns(event=cols["event"], ip=cols["ip"], pid=cols["pid"], tid=cols["tid"], time=cols["time"],
                         cpu=cols["cpu"], period=cols["period"], misc=cols["misc"], seq=cols["seq"],
                         chain_id=cols["chain_id"], chains=chains, has=has)


def _window_profiles(options: LoadOptions, capture: Capture, resolver: SymbolResolver,
                     state: ReplayState, chains: ChainTable, has: frozenset[str],
                     ready: tuple[dict[str, Any], I64, I64], events: list[int],
                     totals: Totals) -> list[Profile]:
    """One window's samples as a :class:`Profile` per event (stacks resolved by the shared
    ``resolver``, so frame ids mean the same in every window)."""
    cols, gen_all, comm_all = ready
    out = []
    for index in events:
        sel = np.flatnonzero(cols["event"] == index)
        rows = Selected(_columns({k: v[sel] for k, v in cols.items()}, chains, has), gen_all[sel], comm_all[sel])
        profile = assemble(options, capture, index, rows, state, resolver, Counts())
        totals.shown[index] = totals.shown.get(index, 0) + profile.total_samples
        out.append(profile)
    return out
