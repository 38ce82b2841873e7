"""Python stacks: the interpreter's own frames between two Python functions, hidden.

With CPython's perf support every Python call shows in a native stack as the interpreter's
call machinery, the trampoline (a Python frame, kind ``python``: :func:`resolver.python_frame`)
and the evaluation loop::

    leaf [python] · _PyEval_EvalFrameDefault · PyObject_Vectorcall · py_trampoline_evaluator · mid [python] · ...

By default a report shows ``leaf · mid · main`` instead, as a Python user reads them: the
frames between two Python frames that belong to the interpreter are dropped. The interpreter
is whatever file the frames next to Python frames are in (``libpython3.12.so.1.0`` or the
``python3.12`` binary itself), so a C extension's functions between two Python frames stay:
``leaf · ext_work [ext.so] · mid``, where Python called C which called back into Python. The
frames above the innermost Python frame (the interpreter running it, and what it calls: the
allocator, a C function) and below the outermost (the interpreter's start-up) stay too.
``--python-frames=all`` keeps everything.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from profiler.report.profile import StackTable
from profiler.report.resolver import FrameTable

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

PYTHON_FRAMES = ("python", "all")  # --python-frames


def hide_interpreter_glue(table: StackTable, frames: FrameTable) -> StackTable:
    """``table`` without the interpreter's frames between two Python frames of a stack."""
    if not any(f.kind == "python" for f in frames.frames) or not len(table.frames):
        return table
    paths: dict[str, int] = {}
    dso = np.asarray([paths.setdefault(f.dso_path, len(paths)) for f in frames.frames], dtype=np.int64)
    python = np.asarray([f.kind == "python" for f in frames.frames], dtype=bool)
    native = np.asarray([f.kind in ("user", "unknown") for f in frames.frames], dtype=bool)
    py = python[table.frames]
    nat = native[table.frames]
    lens = np.diff(table.start)
    owner = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    same = owner[1:] == owner[:-1]
    beside = np.zeros(len(py), dtype=bool)  # native entries right next to a Python entry
    beside[:-1] |= py[1:] & same
    beside[1:] |= py[:-1] & same
    interpreter = np.zeros(len(paths), dtype=bool)
    interpreter[dso[table.frames[beside & nat]]] = True
    cum = np.cumsum(py)
    before = cum - py - np.repeat(np.concatenate([[0], cum])[table.start[:-1]], lens)  # Python entries leaf-side
    after = np.repeat(cum[np.maximum(table.start[1:] - 1, 0)], lens) - cum  # ... and root-side
    drop = nat & interpreter[dso[table.frames]] & (before > 0) & (after > 0)
    if not drop.any():
        return table
    keep = ~drop
    start = np.zeros(len(table.start), dtype=np.int64)
    np.cumsum(np.bincount(owner[keep], minlength=len(lens)), out=start[1:])
    return StackTable(start, table.frames[keep], table.offsets[keep], table.shown[keep], table.addrs[keep],
                      None if table.srclines is None else table.srclines[keep], table.leaf)
