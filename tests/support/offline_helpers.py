"""Report rows through the reporter's own pipeline, for the offline tests and the fixture script.

``profile_rows`` runs ``load_profile`` (decode, replay, dedupe, resolve on the symbol-source
chain) with the symbol options the CLI passes: ``symfs``, ``debug_dirs``, ``kallsyms``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

Row = tuple[str, tuple[tuple[str, str], ...], int]


def profile_rows(capture: str | os.PathLike[str], *, symfs: str | os.PathLike[str] | None = None,
                 debug_dirs: Any = None, kallsyms: str | os.PathLike[str] | None = None,
                 ) -> tuple[list[Row], list[str]]:
    """Every distinct (comm, stack, samples) of the capture, frames as (dso, label) root first;
    and the report's warnings (the symbol-source chain's included)."""
    from profiler.report.pipeline import load_profile
    from profiler.report.options import LoadOptions

    options = LoadOptions(input=str(capture), symfs=None if symfs is None else str(symfs),
                          debug_dirs=None if debug_dirs is None else tuple(str(d) for d in debug_dirs),
                          kallsyms=None if kallsyms is None else str(kallsyms))
    profile = load_profile(options)
    rows: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    for stack, comm, n in zip(profile.stack.tolist(), profile.comm.tolist(), profile.sample_weights().tolist()):
        fids = reversed(profile.stack_frame_ids(stack).tolist())
        frames = tuple((profile.frame(f).dso, profile.frame(f).label()) for f in fids)
        key = (profile.comm_names[comm], frames)
        rows[key] = rows.get(key, 0) + n
    return sorted((c, f, n) for (c, f), n in rows.items()), list(profile.warnings)


def rows_to_json(rows: list[Row]) -> list[Any]:
    return [[c, [list(fr) for fr in f], n] for c, f, n in rows]


def rows_from_json(data: list[Any]) -> list[Row]:
    return sorted((str(c), tuple((str(d), str(s)) for d, s in f), int(n)) for c, f, n in data)


def record(capture: Path, argv: list[str], *extra: str) -> None:
    """``profiler record -g -o capture [extra] -- argv`` (fails the caller on error)."""
    cmd = [sys.executable, "-m", "profiler", "record", "-g", "-q", "-o", str(capture), *extra, "--", *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"record failed ({done.returncode}): {done.stderr}")
