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

from profiler.unwind.arch import AARCH64_COLUMNS, X86_64_COLUMNS, ArchColumns
from profiler.unwind.table import FLAG_SIGNAL
from profiler.unwind.unwinder import (
    ACTIVE,
    LOC_FRAME_POINTER,
    LOC_NO_CFI,
    LOC_NO_MAP,
    LOC_TABLE,
    REASONS,
    StackCopies,
    _State,
    _step,
    step_kernel,
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
    size = rng.choice([0, 5, 8, 64, 100, 256, 512], m).astype(np.int64)
    offset = np.zeros(m, dtype=np.int64)
    pos = 0
    for i in range(m):
        pos += int(rng.integers(0, 8))
        offset[i] = pos
        pos += int(size[i])
    buf = rng.integers(0, 256, pos + 3).astype(np.uint8)
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
