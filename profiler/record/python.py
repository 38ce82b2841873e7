"""``--python``: CPython's perf support, turned on for the command and everything it starts.

CPython 3.12+ can name each Python function for a native profiler: ``PYTHONPERFSUPPORT=1``
(``-X perf``) runs every function through a small trampoline listed in
``/tmp/perf-PID.map`` as ``py::QUALNAME:FILE``; 3.13+ ``PYTHON_PERF_JIT_SUPPORT=1`` (``-X
perf_jit``) writes the same trampolines to ``/tmp/jit-PID.dump`` with their unwind
information. Both are environment variables, so children inherit them; older interpreters
and other programs ignore them.

Modes: ``auto`` (the default) sets ``PYTHONPERFSUPPORT`` when call graphs are recorded of a
command we start; ``perf`` and ``jit`` set one of them, call graphs or not; ``off`` sets none. A
variable the user set already is left as it is. ``auto`` takes the perf map on 3.13 too: a forked
child makes new trampolines, and 3.13.0 buffers its jitdump, so a child that ends with
``os._exit`` (as ``multiprocessing``'s do) leaves an empty one and its frames go unnamed (and
perf inject fails on it); its perf map is written as it goes. The report unwinds both alike.

The interpreters are built without frame pointers (pyenv's, Debian's), so ``-g`` cannot walk
them: when the command is a Python interpreter, ``-g`` records what DWARF unwinding needs
instead, with :data:`PYTHON_STACK_SIZE` bytes of stack, and says so (:func:`python_call_graph`).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

PYTHON_MODES = ("auto", "perf", "jit", "off")
PERF_VAR, JIT_VAR = "PYTHONPERFSUPPORT", "PYTHON_PERF_JIT_SUPPORT"
# Bytes of user stack per sample for a Python command: each Python call takes ~520 bytes of C
# stack in 3.12.1 and ~600 in 3.13.0 (measured: docs/python.md), so 32 KiB holds 55-62 nested
# Python calls under the interpreter's start-up frames; perf's 8 KiB default holds 14-15.
PYTHON_STACK_SIZE = 32768


def python_environment(mode: str, callgraph: bool, base: Mapping[str, str]) -> dict[str, str] | None:
    """The command's environment with CPython's perf support on, or None to leave it as is."""
    wanted = {"auto": (PERF_VAR,) if callgraph else (), "perf": (PERF_VAR,), "jit": (JIT_VAR,),
              "off": ()}[mode]
    missing = [v for v in wanted if v not in base]
    if not missing:
        return None
    env = dict(base)
    env.update((v, "1") for v in missing)
    return env


def is_python_command(command: tuple[str, ...], path: str | None) -> bool:
    """Whether the command runs a Python interpreter: named ``python``, ``python3``,
    ``python3.12`` (the file, or what a link of that name resolves to)."""
    if not command:
        return False
    names = [os.path.basename(command[0])]
    if path is not None:
        try:
            names.append(os.path.basename(os.path.realpath(path)))
        except OSError:
            pass
    return any(_is_python_name(n) for n in names)


def _is_python_name(name: str) -> bool:
    """``python``, ``python3``, ``python3.12``, with a debug build's ``d`` (no ``re``: every
    recording pays for its imports)."""
    rest = name.removeprefix("python").removesuffix("d")
    if rest == name:
        return False
    major, _, minor = rest.partition(".")
    return rest == "" or major == "3" and (not minor or minor.isdigit())


def python_call_graph(mode: str, command: tuple[str, ...], path: str | None, dwarf: int | None,
                      size_given: bool) -> tuple[int | None, str | None]:
    """The DWARF stack size to record for a Python command (None: frame pointers), and the
    one line that says why, when it differs from what was asked."""
    if mode == "off" or not is_python_command(command, path):
        return dwarf, None
    if dwarf is None:
        return PYTHON_STACK_SIZE, (f"{os.path.basename(command[0])} has no frame pointers: -g records "
                                   f"--call-graph dwarf,{PYTHON_STACK_SIZE} for complete Python stacks "
                                   "(docs/python.md).")
    if not size_given and dwarf < PYTHON_STACK_SIZE:
        return PYTHON_STACK_SIZE, (f"a Python stack needs more than {dwarf} bytes: recording "
                                   f"--call-graph dwarf,{PYTHON_STACK_SIZE} (docs/python.md).")
    return dwarf, None
