"""Two hand-built captures to compare (``flamegraph --diff``, ``export --diff``): kernel
stacks named by the captures' own kallsyms snapshot, so every frame resolves anywhere."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from typing import Any

from tests.support.report_capture import comm, kallsyms_text, kernel_sample, write_capture

from profiler.format import records as R

#: (leaf-first kernel frames) -> samples. BASE: k_leaf_a 60 %, k_leaf_b 30 %, k_other 10 %.
BASE_STACKS: dict[tuple[str, ...], int] = {
    ("k_leaf_a", "k_mid", "k_root"): 60,
    ("k_leaf_b", "k_mid", "k_root"): 30,
    ("k_other", "k_root"): 10,
}
#: NEW: k_leaf_a shrank to 20 %, k_leaf_b grew to 70 %, k_other is gone, k_recurse is new.
NEW_STACKS: dict[tuple[str, ...], int] = {
    ("k_leaf_a", "k_mid", "k_root"): 40,
    ("k_leaf_b", "k_mid", "k_root"): 140,
    ("k_recurse", "k_root"): 20,
}


def write_kernel_capture(path: Path, stacks: Mapping[tuple[str, ...], int], name: str = "app",
                         events: list[dict[str, Any]] | None = None, **header: Any) -> Path:
    """A capture of one thread of command ``name`` whose samples are ``stacks`` (period 1000
    each); ``events``: the header's event table (default: cpu-clock); ``header``: header
    fields to replace (``arch``...)."""
    records: list[R.Record] = [comm(100, 100, name, 1)]
    time = 10
    for frames, count in stacks.items():
        for _ in range(count):
            records.append(kernel_sample(frames, time))
            time += 10
    return write_capture(path, records, kallsyms=kallsyms_text(), events=events, header=header)


def write_pair(folder: Path) -> tuple[Path, Path]:
    """BASE and NEW (see :data:`BASE_STACKS`, :data:`NEW_STACKS`) in ``folder``."""
    return (write_kernel_capture(folder / "base.prof", BASE_STACKS),
            write_kernel_capture(folder / "new.prof", NEW_STACKS))
