"""The interpreter's frames between two Python frames are hidden; a C extension's stay, and so do
the frames above the innermost Python frame and below the outermost (profiler/report/pyframes.py)."""

from __future__ import annotations

import numpy as np

from profiler.report.profile import StackTable
from profiler.report.pyframes import hide_interpreter_glue
from profiler.report.resolver import FrameInfo, FrameTable, python_frame

LIB = "/usr/lib/libpython3.12.so.1.0"


def table_of(stacks: list[list[FrameInfo]]) -> tuple[StackTable, FrameTable]:
    frames = FrameTable()
    ids = [[frames.intern(f) for f in s] for s in stacks]
    start = np.cumsum([0] + [len(s) for s in ids]).astype(np.int64)
    flat = np.asarray([i for s in ids for i in s], dtype=np.int64)
    n = len(flat)
    addrs = np.arange(n, dtype=np.uint64)
    return StackTable(start, flat, addrs, addrs, addrs, np.arange(n, dtype=np.int64)), frames


def native(name: str, path: str = LIB) -> FrameInfo:
    return FrameInfo(name, path.rsplit("/", 1)[-1], path, "user")


def names(table: StackTable, frames: FrameTable) -> list[list[str]]:
    return [[frames[int(f)].name() for f in table.frames[a:b]] for a, b in zip(table.start, table.start[1:])]


def test_glue_between_python_frames_goes_and_the_rest_stays() -> None:
    leaf, mid, main = (python_frame(f"py::{n}:/app.py") for n in ("leaf", "mid", "main"))
    assert (leaf.symbol, leaf.dso_path, leaf.kind) == ("leaf", "/app.py", "python")
    ext = native("call_back", "/ext/cext.so")
    kernel = FrameInfo("do_syscall_64", "[kernel.kallsyms]", "[kernel.kallsyms]", "kernel")
    unresolved = FrameInfo(None, "libpython3.12.so.1.0", LIB, "user", 0x1234)
    stacks = [
        [kernel, native("_PyObject_Free"), native("_PyEval_EvalFrameDefault"), leaf, native("_PyEval_EvalFrameDefault"),
         native("PyObject_Vectorcall"), unresolved, native("py_trampoline_evaluator"), mid,
         native("_PyEval_EvalFrameDefault"), native("py_trampoline_evaluator"), main, native("Py_RunMain"),
         native("_start", "/usr/bin/python3.12")],
        [leaf, native("_PyEval_EvalFrameDefault"), ext, native("_PyEval_EvalFrameDefault"), mid],
        [native("memcpy", "/lib/libc.so.6"), native("main", "/bin/prog")],
    ]
    table, frames = table_of(stacks)
    out = hide_interpreter_glue(table, frames)
    assert names(out, frames) == [
        ["do_syscall_64", "_PyObject_Free", "_PyEval_EvalFrameDefault", "leaf", "mid", "main", "Py_RunMain", "_start"],
        ["leaf", "call_back", "mid"],
        ["memcpy", "main"],
    ]
    # the per-entry columns move with their frames
    assert out.srclines is not None and out.srclines[:4].tolist() == [0, 1, 2, 3] and out.srclines[4] == 8


def test_stacks_without_python_are_left_alone() -> None:
    table, frames = table_of([[native("a"), native("b")], []])
    assert hide_interpreter_glue(table, frames) is table
