"""How a report's DWARF unwinding went (:class:`UnwindStats`): the figures its header and JSON
show, counted per sample (the whole decode) or per tally row with its sample count."""

from __future__ import annotations

from collections import Counter
from dataclasses import field
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.arrays import distinct
from profiler.dataclass import dataclass
from profiler.unwind.unwinder import END_OF_STACK, REASONS

I64 = npt.NDArray[np.int64]


@dataclass
class UnwindStats:
    """How unwinding went: samples unwound, how many reached a root, why the others stopped,
    where the tables came from."""

    samples: int = 0
    reached_root: int = 0
    reasons: Counter[str] = field(default_factory=Counter)  # of the samples short of a root
    tables: dict[str, str] = field(default_factory=dict)  # DSO path -> origin
    warnings: list[str] = field(default_factory=list)
    reason: npt.NDArray[np.uint8] = field(default_factory=lambda: np.zeros(0, dtype=np.uint8))
    weight: I64 | None = None  # per entry of ``reason``, the samples it stands for (a tally's rows); None: 1

    @property
    def root_share(self) -> float:
        return self.reached_root / self.samples if self.samples else 0.0

    def header_lines(self, top: int = 3) -> list[str]:
        """What the report header says about unwinding."""
        if not self.samples:
            return []
        lines = [f"# DWARF unwinding: {100.0 * self.root_share:.1f}% of {self.samples} samples reach "
                 "a root (_start, __libc_start_main, clone, a thread start)"]
        if self.reasons:
            parts = [f"{100.0 * n / self.samples:.1f}% {why}" for why, n in
                     sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
            lines.append("# stopped early: " + ", ".join(parts))
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "reached_root": self.reached_root,
                "stopped": dict(sorted(self.reasons.items())), "tables": dict(sorted(self.tables.items()))}

    def count_roots(self, outer_is_root: npt.NDArray[np.bool_]) -> None:
        """Per sample (the ones unwound): whether its outermost frame is a root function. A
        sample reaches a root when that is so, or when the CFI itself ended the stack."""
        reached = outer_is_root | (self.reason == END_OF_STACK)
        weight = np.ones(len(reached), dtype=np.int64) if self.weight is None else self.weight
        self.reached_root = int(weight[reached].sum())
        self.reasons = Counter()
        stopped = self.reason[~reached]
        counts = np.bincount(stopped, weights=weight[~reached], minlength=len(REASONS)).astype(np.int64)
        for r, c in enumerate(counts.tolist()[: len(REASONS)]):
            if c:
                self.reasons[REASONS[r] if r != END_OF_STACK else "end of stack before a root"] += c


def outer_is_root(stack: I64, stack_start: I64, stack_frames: I64, frames: Any,
                  roots: frozenset[str]) -> npt.NDArray[np.bool_]:
    """Per sample: is the outermost frame of its stack a root function (by symbol name)?"""
    k = len(stack_start) - 1
    if k <= 0:
        return np.zeros(len(stack), dtype=bool)
    nonempty = stack_start[1:] > stack_start[:-1]
    outer = np.where(nonempty, stack_frames[np.maximum(stack_start[1:] - 1, 0)], -1)
    is_root = np.zeros(k, dtype=bool)
    for f in distinct(outer[outer >= 0]).tolist():
        name = frames[f].symbol or ""
        if name.split("@", 1)[0] in roots:
            is_root[outer == f] = True
    out: npt.NDArray[np.bool_] = is_root[stack]
    return out


ROOTS = frozenset({"_start", "__libc_start_main", "__libc_start_call_main", "clone", "clone3",
                   "start_thread", "__clone", "__clone3", "thread_start", "__thread_start"})
