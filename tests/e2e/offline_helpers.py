"""Report rows through the symbol-source chain, for the offline tests and the fixture script.

Until ``profiler report`` takes ``--symfs``/``--debug-dir``/``--kallsyms``, the reporter's
own pipeline (``load_profile``: decode, replay, dedupe, resolve) is run with its resolver
built on :class:`SymbolSources` — the wiring the lead will put into the reporter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

Row = tuple[str, tuple[tuple[str, str], ...], int]


@contextmanager
def _resolver_on_sources(sources_kwargs: dict[str, Any], collected: list[str]) -> Iterator[None]:
    from profiler.report import load as L
    from profiler.report.resolve import SymbolResolver
    from profiler.report.sources import ChainSource, SymbolSources

    def build(reader: Any, rep: Any, options: Any) -> SymbolResolver:
        sources = SymbolSources(reader, **sources_kwargs)
        ks, _, note = sources.kernel()
        resolver = SymbolResolver(dsos=rep.dsos, snapshots=rep.snapshots, sources=[ChainSource(sources)],
                                  kernel=ks, kernel_note=note,
                                  perf_map_dir=str(sources_kwargs.get("perf_map_dir", "/tmp")))
        collected.append(sources)  # type: ignore[arg-type]
        return resolver

    with mock.patch.object(L, "_resolver", build):
        yield


def profile_rows(capture: str | os.PathLike[str], **sources_kwargs: Any) -> tuple[list[Row], list[str]]:
    """Every distinct (comm, stack, samples) of the capture, frames as (dso, label) root first;
    and the warnings (the reporter's and the sources')."""
    from profiler.report.load import load_profile
    from profiler.report.options import LoadOptions

    collected: list[Any] = []
    with _resolver_on_sources(sources_kwargs, collected):
        profile = load_profile(LoadOptions(input=str(capture)))
    rows: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    for stack, comm in zip(profile.stack.tolist(), profile.comm.tolist()):
        fids = reversed(profile.stack_frame_ids(stack).tolist())
        frames = tuple((profile.frame(f).dso, profile.frame(f).label()) for f in fids)
        key = (profile.comm_names[comm], frames)
        rows[key] = rows.get(key, 0) + 1
    warnings = list(profile.warnings)
    for sources in collected:
        warnings.extend(sources.warnings)
    return sorted((c, f, n) for (c, f), n in rows.items()), warnings


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
