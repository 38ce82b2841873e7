"""Where profiler keeps derived data between runs (parsed kallsyms tables, debuginfod
downloads, compiled unwind tables, the recorder's kernel lines of this boot). Cache trouble is
never an error: callers fall back to doing the work again."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$PROFILER_CACHE_DIR``, else ``$XDG_CACHE_HOME/profiler``, else ``~/.cache/profiler``."""
    env = os.environ.get("PROFILER_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "profiler"
