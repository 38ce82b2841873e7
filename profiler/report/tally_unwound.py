"""A tally whose samples' user stacks are unwound first (``--call-graph dwarf``): the default
report of a DWARF capture, chunk by chunk in the tally's worker processes.

Each chunk's samples are decoded with their registers (:func:`~profiler.report.tally.placed_samples`),
unwound (:func:`~profiler.report.unwind_samples.unwind_event_samples`, each split frame's stack
fields inflated as its samples are unwound) and given the callchains perf would show
(:func:`~profiler.report.userchains.chains_with_user_frames`); the chunk is then tallied like
any other (:func:`~profiler.report.tally.tallied`). Decoding, unwinding and making the chains
thus run in every worker at once, and only distinct rows leave a worker; decoding the whole
capture in one process first (``PROFILER_TALLY=0``, and the commands that need every sample)
gives the same report.

A sample's unwind stop reason is kept in its row (``misc`` above the 16 bits of the sample's
own misc, which ``Tally.samples`` keeps), so the report header's unwinding figures
(:class:`~profiler.report.unwind_samples.UnwindStats`) are the rows' counts: :meth:`TallyUnwind.stats`.
"""

from __future__ import annotations

from collections.abc import Callable
import numpy as np
import numpy.typing as npt

from profiler.errors import ProfilerError
from profiler.format.container.inflate import StackFrame
from profiler.format.container.layout import FRAME_HEADER_SIZE, FRAME_RAW
from profiler.format.container.reader import CaptureReader
from profiler.format.container.scan import FileFrame
from profiler.format.decode.chains import ChainStore
from profiler.format.decode.views import RecordViews
from profiler.report.replay import ReplayState
from profiler.report.tally import Placed, Plan, ChunkResult, placed_samples, tallied
from profiler.report.tally_native import check_skimmed, scan_view
from profiler.report.unwind_stats import UnwindStats
from profiler.report.unwind_samples import (
    Image,
    dso_tables,
    table_sources,
    unwind_event_samples,
    used_dsos,
)
from profiler.report.userchains import chains_with_user_frames
from profiler.symbols.jitsources import JitSymbols
from profiler.unwind.arch import ArchColumns
from profiler.unwind.jitcode import JitCodeOf
from profiler.unwind.sources import TableSources

I64 = npt.NDArray[np.int64]

REASON_SHIFT = 16  # a row's unwind stop reason, in its misc key above the sample's own misc
UNWIND_CHUNK_BYTES = 4 << 20  # record bytes per chunk: a chunk's unwinding pays a fixed cost (its code map)


class TallyUnwind:
    """The user-stack unwinding of a tally (``tally.Unwinding``): the events whose samples are
    unwound, the architecture's register columns, where rule tables and JIT code come from."""

    chunk_bytes = UNWIND_CHUNK_BYTES

    def __init__(self, events: tuple[int, ...], cols: ArchColumns, symfs: str | None,
                 debug_dirs: tuple[str, ...] | None,
                 jit_symbols: Callable[[int], JitSymbols | None] | None = None) -> None:
        self.events = events
        self.cols = cols
        self.symfs = symfs
        self.debug_dirs = debug_dirs
        self.jit_symbols = jit_symbols
        self.sources: TableSources | None = None
        self.jit: JitCodeOf | None = None

    def ready(self, reader: CaptureReader, state: ReplayState) -> None:
        """Once the records are replayed, in the parent (the workers inherit it)."""
        self.sources = table_sources(reader, self.symfs, self.debug_dirs)
        if self.jit_symbols is not None:
            self.jit = JitCodeOf(self.jit_symbols, self.cols, state.parent)

    def tally_chunk(self, plan: Plan, index: int) -> ChunkResult:
        """Chunk ``index``'s samples unwound, then tallied; each row's misc carries its stop reason.
        A compressed capture's chunk (``plan.stream``) is inflated here, in the worker: its lean
        records into the worker's buffer, its stack fields frame by frame as they are unwound."""
        late: list[str] = []
        image = None
        if plan.stream is None:
            p = placed_samples(plan, index, lean=False)
        else:
            frames, views, image, late = self._inflated(plan, index)
            p = placed_samples(plan, index, False, (frames, views))
        reason, warnings = self._unwind(plan, p, image)
        misc = p.s.misc.astype(np.int64) | (reason << REASON_SHIFT)
        p.s.regs_user = p.s.stack_user = None  # the widest columns: not needed to tally
        result = tallied(plan, p, misc, warnings)
        result.late = late
        return result

    @staticmethod
    def _inflated(plan: Plan, index: int) -> tuple[list[FileFrame], RecordViews, Image, list[str]]:
        """Stream chunk ``index`` inflated into this process's buffer: its frames as views there,
        views over the buffer, the image the unwinder reads (with each split frame's stack
        fields, still compressed) and, for a chunk the first pass skimmed, its warnings."""
        assert plan.stream is not None and plan.native is not None
        chunk = plan.stream_chunks[index]
        views, start, length = plan.stream.view_of(chunk)
        late: list[str] = []
        if chunk.skimmed:
            scan = scan_view(plan.native.module, plan.decoder, views, start, length, chunk.frames, None)
            if scan is None:
                raise ProfilerError("the compiled kernel refused a chunk of its own buffer.")
            late = check_skimmed(scan, chunk)
        frames: list[FileFrame] = []
        apart: list[StackFrame] = []
        for frame, at, n in zip(chunk.frames, start.tolist(), length.tolist()):
            frames.append(FileFrame(FRAME_RAW, frame.cpu, frame.seq, at - FRAME_HEADER_SIZE, views.view[at:at + n]))
            fields = plan.stream.fields_of(frame)
            if fields is not None:
                apart.append(StackFrame(frame.seq, at, n, *fields))
        return frames, views, Image(views.view, apart), late

    def _unwind(self, plan: Plan, p: Placed, image: Image | None) -> tuple[I64, list[str]]:
        """Unwind the samples of ``p`` whose event this unwinds, in place (their callchains); per
        sample its stop reason (0 for the others), and the warnings."""
        assert self.sources is not None
        s = p.s
        reason = np.zeros(len(s), dtype=np.int64)
        warnings: list[str] = []
        store = ChainStore()
        ids = None
        for ev in self.events:
            sel = np.flatnonzero(s.event == ev)
            if not len(sel):
                continue
            whole = len(sel) == len(s)
            sub = s if whole else s.take(sel)
            layout = plan.decoder.events.events[ev].layout
            result, stats = unwind_event_samples(plan.decoder.reader, layout, sub, p.gen if whole else p.gen[sel],
                                                 plan.state.snapshots, plan.state.dsos, self.sources, self.cols,
                                                 jit=self.jit, source_warnings=False, image=image)
            warnings.extend(stats.warnings)
            s.has = s.has | {"callchain"}
            chain_id, chains = chains_with_user_frames(sub, result)
            if whole:
                s.chain_id, s.chains = chain_id, chains
                reason[:] = result.reason
                break
            if ids is None:
                ids = store.add(s.chains.words, s.chains.start[:-1], s.chains.lengths).astype(np.int64)[s.chain_id]
            new = store.add(chains.words, chains.start[:-1], chains.lengths).astype(np.int64)
            ids[sel] = new[chain_id]
            reason[sel] = result.reason
        if ids is not None:
            s.chain_id, s.chains = ids.astype(np.int32), store.table()
        return reason, warnings

    def stats(self, misc: I64, count: I64, gen: I64, state: ReplayState, warnings: list[str]) -> UnwindStats:
        """The unwinding figures of some rows of an event this unwinds (their misc keys, sample
        counts and map generations in the tally's ``state``), as unwinding their samples one by
        one gives them: stop reasons, rule-table origins, then the chunks' warnings and the
        table sources'."""
        assert self.sources is not None
        stats = UnwindStats(samples=int(count.sum()))
        dso_tables(state.dsos, self.sources, used_dsos(gen, state.snapshots), stats)
        stats.reason = (misc >> REASON_SHIFT).astype(np.uint8)
        stats.weight = count
        stats.warnings = list(warnings) + list(self.sources.warnings)
        return stats

