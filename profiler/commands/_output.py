"""Opening the output stream of an exporting command (only the CLI opens files)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any, BinaryIO, TextIO, TypeVar

from profiler.errors import ProfilerError
from profiler.format.localfile import written_in_place

Stream = TypeVar("Stream", bound=IO[Any])


@contextlib.contextmanager
def open_output(path: str) -> Iterator[TextIO]:
    """``-`` is stdout; a file is written beside itself and renamed into place when complete,
    so a failed export never leaves half a file behind. Names from a capture that are not
    UTF-8 (decoded with ``surrogateescape``) are written as the bytes they were, as on stdout
    (profiler.exits.bytes_as_recorded): a file and ``-o -`` hold the same bytes."""
    if path == "-":
        yield sys.stdout
        return
    with _replacing(path, lambda tmp: open(tmp, "w", encoding="utf-8", errors="surrogateescape",
                                           newline="\n")) as stream:
        yield stream


@contextlib.contextmanager
def open_binary_output(path: str) -> Iterator[BinaryIO]:
    """Like :func:`open_output`, for bytes (``-`` is stdout's buffer)."""
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    with _replacing(path, lambda tmp: open(tmp, "wb")) as stream:
        yield stream


@contextlib.contextmanager
def _replacing(path: str, opener: Callable[[str], Stream]) -> Iterator[Stream]:
    """A stream ``opener`` makes on a temporary name beside ``path``, renamed to ``path``
    once the block completes and removed if it fails (a device or FIFO at ``path`` is
    written in place); an OSError is one sentence."""
    try:
        if written_in_place(path):  # /dev/null, /dev/stdout, a FIFO: never replaced
            stream = opener(path)
            with stream:
                yield stream
            return
    except OSError as exc:
        raise ProfilerError(f"cannot write {path}: {exc.strerror}.") from None
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        stream = opener(tmp)
    except OSError as exc:
        raise ProfilerError(f"cannot write {path}: {exc.strerror}.") from None
    try:
        with stream:
            yield stream
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise ProfilerError(f"cannot write {path}: {exc.strerror}.") from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
