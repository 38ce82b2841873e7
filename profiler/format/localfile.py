"""Opening files named by an untrusted capture: regular files only.

A recorded path may name anything on the reading machine by the time a report runs: a FIFO
(whose open blocks until a writer comes), a device, a directory. Every file a reader opens
because a capture named it goes through :func:`open_regular`, which opens without blocking
and refuses what is not a regular file with an ``OSError`` (which callers already treat as
"not found").

Outputs go the other way: a file we write is written beside its name and renamed over it, so a
reader of the previous file is unharmed; :func:`written_in_place` tells the outputs that must
be written where they are instead (``/dev/null``, ``/dev/stdout``, a FIFO).
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False  # the recorder imports this module: typing costs it ~5 ms (profiler/value.py)
if TYPE_CHECKING:
    from typing import BinaryIO


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``open(path, "rb")`` for a regular file; OSError (EINVAL) for anything else."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def is_regular(path: str | os.PathLike[str]) -> bool:
    """A regular file (following symlinks) that exists; no open, so nothing can block."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def written_in_place(path: str | os.PathLike[str]) -> bool:
    """Whether an output at ``path`` is opened and written where it is rather than replaced
    by a new file: anything but a regular file (a device, a FIFO, also behind a symlink), and
    a regular file behind one of the system's links (``/dev/stdout`` or ``/proc/self/fd/1``
    redirected to a file); renaming over those would replace ``/dev/null`` or ``/dev/stdout``
    themselves. A missing path, a regular file or any other symlink to one (or to nothing)
    is replaced, the link not followed. An ``OSError`` other than a missing file is the
    caller's to word."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(mode):
        return True
    if not os.path.islink(path):
        return False
    parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    return parent == "/dev" or parent.startswith("/proc/")


def contained(root: str | os.PathLike[str], recorded: str) -> str | None:
    """``recorded`` (an absolute path from a capture) under ``root``, or None when it would
    resolve outside ``root`` (``/../outside``, or a symlink under root pointing out)."""
    base = os.path.realpath(root)
    candidate = os.path.realpath(os.path.join(base, recorded.lstrip("/")))
    if candidate != base and not candidate.startswith(base.rstrip("/") + "/"):
        return None
    return os.path.join(root, recorded.lstrip("/"))
