"""The optional compiled kernels (``compiled.c``, built by ``setup.py`` when a C compiler is
there) and the one switch that decides whether they are used: :func:`kernels` gives the module,
or None when it was not built or ``PROFILER_NO_NATIVE=1``; the numpy code is then the one run
(it is also the reference the kernels are tested against)."""

from __future__ import annotations

import os
from types import ModuleType


def kernels() -> ModuleType | None:
    """The compiled kernels, or None (not built, or ``PROFILER_NO_NATIVE=1``)."""
    if os.environ.get("PROFILER_NO_NATIVE", "") not in ("", "0"):
        return None
    try:
        from profiler.native import compiled  # type: ignore[attr-defined]
    except ImportError:
        return None
    module: ModuleType = compiled
    return module
