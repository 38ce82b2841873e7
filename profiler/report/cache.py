"""Where the reporter keeps derived data between runs (parsed kallsyms tables, debuginfod
downloads): :func:`profiler.cache.cache_dir`, shared with the recorder. Cache trouble is never
an error: callers fall back to doing the work again."""

from __future__ import annotations

from profiler.cache import cache_dir as cache_dir
