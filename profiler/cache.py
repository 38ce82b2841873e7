"""Where profiler keeps derived data between runs (parsed kallsyms tables, debuginfod
downloads, compiled unwind tables, the recorder's kernel lines of this boot). Cache trouble is
never an error: callers fall back to doing the work again."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # pathlib costs every recording ~4 ms of start-up: the recorder uses cache_root
if TYPE_CHECKING:
    from pathlib import Path


def cache_dir() -> Path:
    """``$PROFILER_CACHE_DIR``, else ``$XDG_CACHE_HOME/profiler``, else ``~/.cache/profiler``."""
    from pathlib import Path

    return Path(cache_root())


def cache_root() -> str:
    """:func:`cache_dir` as a string."""
    env = os.environ.get("PROFILER_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "profiler")
