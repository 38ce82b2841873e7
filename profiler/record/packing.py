"""The end of a recording's mapped-file metadata: ``buildids``, the symbols (and, for DWARF
captures, unwind tables) of files reachable only through a namespace, and the JIT maps of
processes in other namespaces (``profiler/record/perfmaps.py``).

A file a container mapped from its own mount namespace is gone when the container stops, and
another machine never had it: ``profiler/record/mapped.py`` keeps such a file open from the
moment it is first seen through the process's view, and here, after the last drain, its whole
symbol table is packed as a ``symbols`` metadata entry (the layout ``profiler archive`` writes,
``source`` ``"namespace"``, ``coverage`` ``"all"``: the recorder does not parse samples, so it
cannot tell which symbols they hit). DWARF captures get its compiled unwind rule table too
(``unwind`` metadata). The size cost is measured in docs/containers.md.

The symbol reader and the CFI compiler are imported only when there is such a file: a
recording of host processes pays nothing.
"""

from __future__ import annotations

import os
import time

from profiler.record.mapped import MappedFile, MappedFiles

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

    from profiler.format.container.writer import CaptureWriter

SOURCE = "namespace"
#: CPU seconds the end of a DWARF recording may spend compiling namespace-only files' unwind
#: tables (measured: 0.9 s for libc, 1.6 s for an 8.6 MiB program, 35 s for a 105 MiB libLLVM);
#: the files after it get symbols only, and unwinding stops in them on another machine.
UNWIND_BUDGET_S = 5.0


def write_mapped_metadata(writer: CaptureWriter, mapped: MappedFiles, dwarf: bool = False,
                          pack: bool = True) -> list[str]:
    """``buildids``, then (``pack``: not ``--no-namespace-symbols``) the namespace-only files
    and JIT maps; returns the paths that could not be packed. The kept files are closed."""
    mapped.finish()
    writer.write_meta("buildids", {"entries": mapped.entries()})
    failed = []
    budget = [UNWIND_BUDGET_S]
    if (mapped.kept or mapped.perf_maps.roots) and pack or mapped.perf_maps.host:
        # numpy loads for the symbol tables: without this OpenBLAS starts a thread per CPU
        # (0.05-0.1 s of CPU). The command was started long ago with the user's environment.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    for key, fd in sorted(mapped.kept.items() if pack else ()):
        found = mapped.files.get(key)
        if found is None:
            continue
        payloads = namespace_payloads(found, fd, dwarf, budget)
        if not payloads:
            failed.append(found.path)
        for kind, payload in payloads:
            writer.write_meta(kind, payload)
    for payload in mapped.perf_maps.payloads(namespaced=pack):
        writer.write_meta("symbols", payload)
    mapped.close()
    return failed


def namespace_payloads(found: MappedFile, fd: int, dwarf: bool,
                       budget: list[float] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The ``symbols`` (and ``unwind``) metadata of one namespace-only file open at ``fd``.
    ``budget``: seconds left for compiling unwind tables (spent here)."""
    from profiler.symbols.dso import load_dso_symbols

    through = f"/proc/self/fd/{fd}"
    syms = load_dso_symbols(through, found.build_id, (), search_debug_files=False)
    if not syms.ok:
        return []
    payload: dict[str, Any] = {
        "kind": "elf", "path": found.path, "build_id": found.build_id,
        "layout": None if syms.layout is None else syms.layout.to_packed(),
        "symtab": syms.table.to_packed(), "count": len(syms.table), "coverage": "all", "source": SOURCE,
    }
    if found.content is not None:
        payload["content"] = dict(found.content)
    out: list[tuple[str, dict[str, Any]]] = [("symbols", payload)]
    if dwarf and (budget is None or budget[0] > 0):
        started = time.monotonic()
        table = _unwind_table(through)
        if budget is not None:
            budget[0] -= time.monotonic() - started
        if table is not None:
            out.append(("unwind", {"path": found.path, "build_id": found.build_id, "arch": table.arch,
                                   "table": table.to_bytes()}))
    return out


def _unwind_table(path: str) -> Any:
    from profiler.unwind.arch import columns_for
    from profiler.unwind.cfi import CfiError, compile_path

    cols = columns_for(os.uname().machine)
    if cols is None:
        return None
    try:
        return compile_path(path, cols, None)
    except (CfiError, OSError):
        return None
