"""Plain input data for the renderers (folded stacks, HTML flame graph, speedscope).

The reporter aggregates a capture into these frozen records; the renderers never see the
capture itself. A stack is stored root first (outermost caller) and leaf last, the order
flame graphs draw it in; perf's callchains arrive leaf first, so the reporter reverses them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: How a frame was resolved. ``"unknown"`` is an address no map or symbol covered.
FrameKind = Literal["user", "kernel", "jit", "unknown"]
FRAME_KINDS: tuple[str, ...] = ("user", "kernel", "jit", "unknown")

#: What a stack's weight is: the number of samples, or the sum of their periods.
Weight = Literal["samples", "period"]

UNKNOWN = "[unknown]"


@dataclass(frozen=True)
class Frame:
    """One resolved frame of a stack."""

    name: str  # symbol name, or "[unknown]"
    dso: str  # short DSO name: "libc.so.6", "[kernel.kallsyms]", "[vdso]", "[unknown]", "[jit]"
    kind: str  # one of FRAME_KINDS

    @property
    def is_unknown(self) -> bool:
        """True when no symbol resolved this frame."""
        return self.name in ("", UNKNOWN)


@dataclass(frozen=True)
class StackSample:
    """One distinct stack of one thread, with the samples that hit it (already aggregated)."""

    comm: str
    pid: int
    tid: int
    frames: tuple[Frame, ...]  # outermost (root) first, leaf last
    samples: int
    period: int

    def weight(self, by: Weight) -> int:
        """This stack's weight under ``by``."""
        return self.samples if by == "samples" else self.period


@dataclass(frozen=True)
class ProfileMeta:
    """What the capture was: shown in titles and carried into exports."""

    title: str
    command: str
    event: str
    total_samples: int
    total_period: int
    has_callchains: bool


#: Events whose sample period is a time in nanoseconds (perf's software clocks).
NANOSECOND_EVENTS: frozenset[str] = frozenset({"cpu-clock", "task-clock"})


def period_is_nanoseconds(event: str) -> bool:
    """True when ``event`` (maybe with ``:u``-style modifiers) counts time in nanoseconds."""
    return event.split(":", 1)[0].strip() in NANOSECOND_EVENTS


#: One sample in time order for timeline exports: (index into the stacks list, its period).
TimelineSample = tuple[int, int]
