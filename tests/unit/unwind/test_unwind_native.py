"""The compiled unwind step (profiler/native/compiled.c) against the numpy step it replaces
(unwinder._step_numpy): the same registers, validity, return addresses, signal flags and
reasons to stop, on random rule rows of every CFA kind (register, dereference, PLT, none,
unsupported) and every register rule (same, undefined, at CFA+N, value CFA+N, at register+N,
unsupported), signal frames, registers known or not, stack copies of any size at unaligned
places, addresses inside, across and outside them, and every kind of code location (table, no
map, no CFI, frame pointer) — so every stop reason — on both architectures."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from profiler.report.unwind_samples import SnapshotCodeMap, _sub_stacks, _Subset
from profiler.unwind.arch import AARCH64_COLUMNS, RA, SP, X86_64_COLUMNS, ArchColumns
from profiler.unwind.table import FLAG_SIGNAL, RuleTable
from profiler.unwind.unwinder import (
    ACTIVE,
    LOC_FRAME_POINTER,
    LOC_NO_CFI,
    LOC_NO_MAP,
    LOC_TABLE,
    REASONS,
    CombinedTables,
    StackCopies,
    _State,
    _step,
    step_kernel,
    unwind,
)

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

needs_kernel = pytest.mark.skipif(step_kernel() is None, reason="the compiled kernels are not built")


@dataclass
class RandomTables:
    """The arrays of unwinder.CombinedTables, random; the last row is the frame-pointer rule."""

    cfa_kind: Any
    cfa_reg: Any
    cfa_off: Any
    plt: Any
    rule_kind: Any
    rule_arg: Any
    rule_reg: Any
    flags: Any
    fp_index: int
    lookup_rows: Any = None
    lookup_ok: Any = None

    @property
    def cfa_off_u64(self) -> U64:
        out: U64 = self.cfa_off.view(np.uint64)
        return out

    @property
    def rule_arg_u64(self) -> U64:
        out: U64 = self.rule_arg.view(np.uint64)
        return out

    def rows(self, slot: I64, addr: U64) -> tuple[I64, Any]:
        return self.lookup_rows[slot], self.lookup_ok[slot]


class RandomCode:
    def __init__(self, kinds: Any) -> None:
        self.kinds = kinds

    def locate(self, sample: I64, pc: U64) -> tuple[I64, U64, Any]:
        return sample.copy(), pc.copy(), self.kinds[sample]


def random_copies(rng: np.random.Generator, sizes: list[int], m: int) -> tuple[I64, I64, Any]:
    """``m`` stack copies of sizes drawn from ``sizes``, of random bytes, at unaligned offsets
    in one buffer: (size, offset, buffer)."""
    size = rng.choice(sizes, m).astype(np.int64)
    offset = np.zeros(m, dtype=np.int64)
    pos = 0
    for i in range(m):
        pos += int(rng.integers(0, 8))
        offset[i] = pos
        pos += int(size[i])
    return size, offset, rng.integers(0, 256, pos + 3).astype(np.uint8)


def random_case(rng: np.random.Generator, cols: ArchColumns, m: int = 300, nrows: int = 24) -> tuple[Any, ...]:
    t = cols.count
    sp_base = np.uint64(0x7FFF_0000_0000)
    tables = RandomTables(
        cfa_kind=rng.choice([0, 1, 1, 1, 2, 3, 4], nrows).astype(np.uint8),
        cfa_reg=rng.integers(-1, t, nrows).astype(np.int64),
        cfa_off=rng.choice([-16, -8, -3, 0, 8, 16, 24, 40, 64, 1 << 20], nrows).astype(np.int64),
        plt=rng.integers(0, 16, nrows).astype(np.uint64),
        rule_kind=rng.choice([0, 0, 0, 0, 1, 2, 2, 3, 4, 5], (nrows, t)).astype(np.uint8),
        rule_arg=rng.choice([-24, -16, -8, -5, 0, 8, 16], (nrows, t)).astype(np.int64),
        rule_reg=rng.integers(-1, t, (nrows, t)).astype(np.int64),
        flags=rng.choice([0, 0, 0, FLAG_SIGNAL], nrows).astype(np.uint8),
        fp_index=nrows - 1)
    # stack copies: random sizes (some not a multiple of 8, some empty) at unaligned offsets
    size, offset, buf = random_copies(rng, [0, 5, 8, 64, 100, 256, 512], m)
    # words in the copies that point back into them: CFA dereferences and saved sps land inside
    sp0 = (sp_base + rng.integers(0, 1 << 16, m).astype(np.uint64) * np.uint64(16)).astype(np.uint64)
    for i in range(m):
        for k in range(0, int(size[i]) - 8, 16):
            if rng.random() < 0.5:
                value = int(sp0[i]) + int(rng.integers(-16, int(size[i]) + 16))
                buf[offset[i] + k:offset[i] + k + 8] = np.frombuffer(value.to_bytes(8, "little"), dtype=np.uint8)
    regs = rng.integers(0, 1 << 62, (m, t), dtype=np.uint64)
    near = rng.random((m, t)) < 0.7
    regs[near] = (np.repeat(sp0[:, None], t, axis=1) + rng.integers(0, 600, (m, t)).astype(np.uint64))[near]
    regs[rng.random((m, t)) < 0.05] = 0
    valid = rng.random((m, t)) < 0.85
    pc = rng.choice([0, 0x1000, 0x1007, 0x100F, 0x401234], m).astype(np.uint64)
    kinds = rng.choice([LOC_TABLE] * 6 + [LOC_NO_MAP, LOC_NO_CFI, LOC_FRAME_POINTER], m).astype(np.int8)
    tables.lookup_rows = rng.integers(0, nrows, m).astype(np.int64)
    tables.lookup_ok = rng.random(m) < 0.9
    state = _State(np.arange(m, dtype=np.int64), pc, regs, valid, rng.random(m) < 0.2, offset, size, sp0)
    return tables, RandomCode(kinds), StackCopies(buf, offset, size, sp0), state


@needs_kernel
@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_step_is_the_numpy_step(arch: str, seed: int) -> None:
    cols = X86_64_COLUMNS if arch == "x86_64" else AARCH64_COLUMNS
    rng = np.random.default_rng(seed)
    tables, code, stacks, state = random_case(rng, cols)
    reasons: set[int] = set()
    for depth in (0, 1, 5):
        a, b = copy.deepcopy(state), copy.deepcopy(state)
        want = _step(cols, a, depth, stacks.buf, code, tables, None)  # type: ignore[arg-type]
        got = _step(cols, b, depth, stacks.buf, code, tables, step_kernel())  # type: ignore[arg-type]
        assert got.tolist() == want.tolist()
        assert b.pc.tolist() == a.pc.tolist()
        assert b.regs.tolist() == a.regs.tolist()
        assert b.valid.tolist() == a.valid.tolist()
        assert b.after_signal.tolist() == a.after_signal.tolist()
        reasons |= set(want.tolist())
    assert reasons >= set(REASONS) - {6, 7} | {ACTIVE}  # every reason a step gives (not MAX_DEPTH, NO_REGS)


def test_real_rule_tables_unwind_alike_with_the_kernel_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hand-written CFI cases of test_unwind_vectorised on the numpy step (as on a machine
    without a compiler): the same frames and reasons that test asserts with the kernel."""
    from tests.unit.unwind.test_unwind_vectorised import test_all_kinds_of_frames_unwound_together

    monkeypatch.setenv("PROFILER_NO_NATIVE", "1")
    assert step_kernel() is None
    test_all_kinds_of_frames_unwound_together()


def random_code_map(rng: np.random.Generator, n: int) -> SnapshotCodeMap:
    """A SnapshotCodeMap's arrays, random but well formed: three map generations (ranks) of
    the same layout with per-rank shifts — a DSO with rules (slot 0, two parts at different
    biases, a hole between them), frame-pointer memory (partly JIT code with rules of its own,
    slot 2), a DSO without CFI, a second DSO with rules (slot 1) — and gaps between them."""
    code = object.__new__(SnapshotCodeMap)
    code.rank = rng.integers(0, 3, n).astype(np.uint64)
    code.jit_rank = rng.integers(0, 2, n).astype(np.uint64)
    keys, ends, dsos, pkeys, pends, pslots, pbias = [], [], [], [], [], [], []
    for r in range(3):
        base = np.uint64(r) << np.uint64(48)
        for start, end, dso in ((0x1000, 0x2000, 0), (0x2000, 0x3000, 1), (0x3000, 0x3800, 2), (0x4000, 0x5000, 3)):
            keys.append(base | np.uint64(start + 0x100 * r))
            ends.append(start + 0x100 * r + (end - start))
            dsos.append(dso)
        for start, end, slot, bias in ((0x1000, 0x1800, 0, -0x1000), (0x1900, 0x2000, 0, -0x1100),
                                       (0x4000, 0x5000, 1, -0x4000)):
            pkeys.append(base | np.uint64(start + 0x100 * r))
            pends.append(start + 0x100 * r + (end - start))
            pslots.append(slot)
            pbias.append(bias - 0x100 * r)
    code.key, code.end = np.asarray(keys, dtype=np.uint64), np.asarray(ends, dtype=np.uint64)
    code.dso = np.asarray(dsos, dtype=np.int64)
    code.kind_of_dso = np.asarray([LOC_TABLE, LOC_FRAME_POINTER, LOC_NO_CFI, LOC_TABLE], dtype=np.int8)
    code.slot_of_dso = np.asarray([0, -1, -1, 1], dtype=np.int64)
    code.part_key, code.part_end = np.asarray(pkeys, dtype=np.uint64), np.asarray(pends, dtype=np.uint64)
    code.part_slot = np.asarray(pslots, dtype=np.int64)
    code.part_bias = np.asarray(pbias, dtype=np.int64).astype(np.uint64)
    code.jit_key = np.asarray([0x2100, (1 << 48) | 0x2400], dtype=np.uint64)
    code.jit_end = np.asarray([0x2200, 0x2500], dtype=np.uint64)
    code.jit_slot = np.asarray([2, 2], dtype=np.int64)
    return code


def random_rule_table(rng: np.random.Generator, cols: ArchColumns, rows: int) -> RuleTable:
    """Rows at random addresses below 0x1000: most of them an ordinary frame (CFA = sp + N,
    the return address at CFA - 8), the rest anything (every CFA and register rule kind)."""
    t = cols.count
    start = np.unique(rng.integers(0, 0x1000, rows)).astype(np.uint64)
    rows = len(start)
    sane = rng.random(rows) < 0.7
    rule_kind = np.where(sane[:, None], rng.choice([0, 0, 0, 2], (rows, t)),
                         rng.choice([0, 0, 1, 2, 3, 4, 5], (rows, t))).astype(np.uint8)
    rule_arg = rng.choice([-24, -16, -8, 0, 8], (rows, t)).astype(np.int64)
    rule_kind[sane, RA], rule_arg[sane, RA] = 2, -8
    rule_kind[sane, SP] = 0
    return RuleTable(
        arch=cols.arch, start=start,
        cfa_kind=np.where(sane, 1, rng.choice([0, 1, 2, 3, 4], rows)).astype(np.uint8),
        cfa_reg=np.where(sane, SP, rng.integers(-1, t, rows)).astype(np.int8),
        cfa_off=np.where(sane, rng.choice([16, 24, 32, 48], rows),
                         rng.choice([-8, 0, 0, 8, 16, 64], rows)).astype(np.int64),
        plt_threshold=rng.integers(0, 16, rows).astype(np.uint8), rule_kind=rule_kind, rule_arg=rule_arg,
        rule_reg=rng.integers(-1, t, (rows, t)).astype(np.int8),
        flags=rng.choice([0, 0, 0, 0, FLAG_SIGNAL], rows).astype(np.uint8))


@needs_kernel
@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_compiled_unwinder_is_the_numpy_unwinder(arch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """unwind_all (the lookup and every depth of one sample at a time) against the numpy
    unwinder (a depth at a time, the lookup in numpy): the same frames and reasons, on random
    map layouts (JIT code, parts with different biases, gaps), rule tables and stacks whose
    words point at code and back into the stack, so that samples go several frames deep."""
    cols = X86_64_COLUMNS if arch == "x86_64" else AARCH64_COLUMNS
    reasons: set[int] = set()
    for seed in range(4):
        reasons |= _compare_unwinders(cols, np.random.default_rng(200 + seed), monkeypatch)
    assert reasons >= set(REASONS) - {7}  # every reason, max depth included


def _compare_unwinders(cols: ArchColumns, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> set[int]:
    n, t = 600, cols.count
    code = random_code_map(rng, n)
    rows = [r for r in (random_rule_table(rng, cols, k) for k in (60, 40, 20)) if len(r)]
    tables = CombinedTables(rows, cols)
    # mostly code with rules, some JIT and frame-pointer code, no CFI, no map, 0
    code_pcs = np.asarray([0x1300, 0x1400, 0x1500, 0x1600, 0x1A80, 0x4400, 0x4600, 0x4800] * 4
                          + [0x1000, 0x2150, 0x2480, 0x2600, 0x3100, 0x6000, 0], dtype=np.uint64)
    size, offset, buf = random_copies(rng, [0, 5, 256, 1024, 2048, 2048], n)
    sp0 = (np.uint64(0x7FFF_0000_0000) + rng.integers(0, 1 << 16, n).astype(np.uint64) * np.uint64(16))
    for i in range(n):
        for k in range(0, int(size[i]) - 8, 8):
            u = rng.random()
            if u < 0.7:
                value = int(rng.choice(code_pcs)) + int(rng.integers(0, 0x80))
            elif u < 0.9:
                value = int(sp0[i]) + int(rng.integers(-16, int(size[i]) + 16))
            else:
                continue
            buf[offset[i] + k:offset[i] + k + 8] = np.frombuffer(value.to_bytes(8, "little"), dtype=np.uint8)
    regs = rng.integers(0, 1 << 62, (n, t), dtype=np.uint64)
    near = rng.random((n, t)) < 0.5
    regs[near] = (np.repeat(sp0[:, None], t, axis=1) + rng.integers(0, 600, (n, t)).astype(np.uint64))[near]
    regs[:, SP] = sp0 + (rng.random(n) < 0.1).astype(np.uint64) * np.uint64(3)  # a few unaligned
    valid = rng.random((n, t)) < 0.9
    valid[:, SP] = rng.random(n) < 0.97
    pc = (rng.choice(code_pcs, n) + rng.integers(0, 0x80, n).astype(np.uint64)).astype(np.uint64)
    stacks = StackCopies(buf, offset, size, sp0)
    subset = np.sort(rng.choice(n, n // 2, replace=False)).astype(np.int64)
    sub_code = _Subset(code, subset)
    reasons: set[int] = set()
    for depth in (3, 12):
        got = unwind(cols, regs, valid, pc, stacks, code, tables, depth)
        got_sub = unwind(cols, regs[subset], valid[subset], pc[subset], _sub_stacks(stacks, subset), sub_code,
                         tables, depth)
        with monkeypatch.context() as m:
            m.setenv("PROFILER_NO_NATIVE", "1")
            want = unwind(cols, regs, valid, pc, stacks, code, tables, depth)
            want_sub = unwind(cols, regs[subset], valid[subset], pc[subset], _sub_stacks(stacks, subset), sub_code,
                              tables, depth)
        for a, b in ((got, want), (got_sub, want_sub)):
            assert a.start.tolist() == b.start.tolist()
            assert a.pcs.tolist() == b.pcs.tolist()
            assert a.reason.tolist() == b.reason.tolist()
        reasons |= set(want.reason.tolist())
    assert (np.diff(want.start) >= 3).sum() > 15  # the case goes deep, not one frame each
    return reasons


def _frames_of(rng: np.random.Generator, size: I64, offset: I64, buf: Any, frames: int) -> tuple[Any, ...]:
    """Split frames holding every sample's stack copy (``size`` bytes at ``offset`` in ``buf``)
    as FLAG_STACKS frames' parts: lean records (a SAMPLE header per sample, COMM records between)
    in one image, and each frame's stack fields, one per sample, not compressed yet.
    (image, each sample's record offset, each frame's (start, length), its fields, each sample's frame)."""
    n = len(size)
    cuts = np.sort(rng.choice(np.arange(1, n), frames - 1, replace=False)).tolist()
    image = bytearray(b"\0" * 8)
    rec = np.zeros(n, dtype=np.int64)
    spans, fields, frame_of = [], [], np.zeros(n, dtype=np.int64)
    for f, (lo, hi) in enumerate(zip([0, *cuts], [*cuts, n])):
        start = len(image)
        fields.append([])
        for i in range(lo, hi):
            if rng.random() < 0.3:
                image += (3).to_bytes(4, "little") + bytes(2) + (16).to_bytes(2, "little") + bytes(8)
            rec[i] = len(image)
            image += (9).to_bytes(4, "little") + bytes(2) + (8).to_bytes(2, "little")
            s = int(size[i])
            padded = -(-s // 8) * 8  # a copy's size is whole words; dyn_size says how much is real
            data = bytes(buf[offset[i]:offset[i] + s]) + bytes(padded - s)
            fields[f].append(padded.to_bytes(8, "little") + (data + s.to_bytes(8, "little") if padded else b""))
            frame_of[i] = f
        spans.append((start, len(image) - start))
    return bytes(image), rec, spans, fields, frame_of


@pytest.mark.parametrize("seed", range(3))
def test_the_frame_unwinder_is_unwind_all_on_random_frames(seed: int) -> None:
    """unwind_frames (each frame's fields inflated by libzstd, walked and matched to the frame's
    SAMPLE records in C) gives what unwind_all gives on the same copies; a sample without a copy
    and every sample of a damaged frame (cut, one byte too many, a field short, another declared
    size) stop at once with no user registers, and their frames are marked damaged."""
    import zstandard

    from profiler.native import kernels
    from profiler.unwind.unwinder import unwind_frames

    module = kernels()
    if module is None or not hasattr(module, "unwind_frames"):
        pytest.skip("the compiled kernels are not built")
    cols, rng = X86_64_COLUMNS, np.random.default_rng(900 + seed)
    n = 400
    code = random_code_map(rng, n)
    tables = CombinedTables([random_rule_table(rng, cols, k) for k in (60, 40)], cols)
    size, offset, buf = random_copies(rng, [0, 5, 256, 1024, 2048], n)
    code_pcs = np.asarray([0x1300, 0x1400, 0x1500, 0x4400, 0x4600, 0x2150, 0], dtype=np.uint64)
    sp0 = np.uint64(0x7FFF_0000_0000) + rng.integers(0, 1 << 16, n).astype(np.uint64) * np.uint64(16)
    for i in range(n):
        for k in range(0, int(size[i]) - 8, 8):
            value = int(rng.choice(code_pcs)) + int(rng.integers(0, 0x80)) if rng.random() < 0.7 else \
                int(sp0[i]) + int(rng.integers(0, max(int(size[i]), 1)))
            buf[offset[i] + k:offset[i] + k + 8] = np.frombuffer(value.to_bytes(8, "little"), dtype=np.uint8)
    regs = rng.integers(0, 1 << 62, (n, cols.count), dtype=np.uint64)
    regs[:, SP] = sp0
    valid = rng.random((n, cols.count)) < 0.9
    pc = (rng.choice(code_pcs, n) + rng.integers(0, 0x80, n).astype(np.uint64)).astype(np.uint64)
    image, rec, spans, parts, frame_of = _frames_of(rng, size, offset, buf, 16)
    parts[4] = parts[4][:-1]  # a field short of the frame's SAMPLE records
    raw = [b"".join(p) for p in parts]
    fields = [zstandard.ZstdCompressor().compress(r) for r in raw]
    declared = [len(r) for r in raw]
    fields[1] = fields[1][:-3]  # cut
    fields[3] = fields[3] + b"\0"  # one byte after the zstd frame
    declared[5] += 8  # not the size the frame declares
    damaged = [1, 3, 4, 5]
    chosen = np.sort(rng.choice(n, 3 * n // 4, replace=False)).astype(np.int64)  # the others: another event's
    count = np.bincount(frame_of[chosen], minlength=len(spans))
    frames = np.column_stack([np.asarray(spans, dtype=np.int64), declared, np.cumsum(count) - count, count])
    none = (size[chosen] == 0) | np.isin(frame_of[chosen], damaged)
    assert none.any() and (~none).sum() > n // 3
    for depth in (3, 12):
        got = unwind_frames(module, image, rec[chosen], frames, tuple(fields), cols, regs[chosen], valid[chosen],
                            pc[chosen], sp0[chosen], code.lookup_arrays(chosen), tables, depth)
        assert got is not None
        res, status = got
        assert np.flatnonzero(status).tolist() == damaged
        want = unwind(cols, regs[chosen], valid[chosen], pc[chosen],
                      StackCopies(buf, offset[chosen], size[chosen], sp0[chosen]), _Subset(code, chosen), tables,
                      depth)
        lens, want_lens = np.diff(res.start), np.diff(want.start)
        assert (lens[none] == 0).all() and (res.reason[none] == 7).all()
        assert lens[~none].tolist() == want_lens[~none].tolist()
        assert res.reason[~none].tolist() == want.reason[~none].tolist()
        assert res.pcs.tolist() == want.pcs[np.repeat(~none, want_lens)].tolist()
        assert (want_lens[~none] >= 3).sum() > 10  # samples went deep
