"""The ``profiler`` entry point.

``profiler record`` runs without importing click when its command line is one that
``profiler.commands.record_args.parse`` reads (the usual ones): every recording pays for its
imports in CPU time, and click's were about a fifth of them. Every other command line goes to
the click CLI (profiler/cli.py). Either way a ``ProfilerError`` becomes one sentence on stderr
and its exit code; tracebacks never reach the user.
"""

from __future__ import annotations

import os
import sys

from profiler.exits import run_mapped

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any


def main(argv: list[str] | None = None) -> Any:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] not in (["record"], ["stat"]):
        # numpy's OpenBLAS starts a thread per CPU when numpy loads; no command uses BLAS:
        # 0.05-0.1 s of CPU per command here. Not for record and stat: their workload
        # inherits the environment.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if args[:1] == ["record"]:
        from profiler.commands import record_args

        parsed = record_args.parse(args[1:])
        if parsed is not None:
            return run_mapped(lambda: record_args.run(**parsed))
    from profiler.cli import main as cli_main

    return cli_main(argv)
