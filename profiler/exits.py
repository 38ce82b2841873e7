"""How a command ends: a ``ProfilerError`` becomes its one sentence on stderr and its exit
code, Ctrl-C a short notice, a closed pipe a quiet exit; tracebacks never reach the user. Used
by the click CLI (profiler/cli.py) and by the entry point's own path for ``profiler record``
(profiler/main.py), which imports no click.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from profiler.errors import ProfilerError

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any


def run_mapped(call: Callable[[], Any]) -> Any:
    """Run ``call``, mapping project errors to one sentence and an exit code."""
    bytes_as_recorded()
    try:
        return call()
    except ProfilerError as exc:
        print(f"profiler: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(141)
    except KeyboardInterrupt:
        print("profiler: interrupted.", file=sys.stderr)
        sys.exit(130)


def bytes_as_recorded() -> None:
    """Names from a capture are decoded with ``surrogateescape`` (a path is bytes, not always
    UTF-8): print them as the bytes they were, never fail on them."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="surrogateescape" if stream is sys.stdout else "backslashreplace")
            except (ValueError, OSError):
                pass
