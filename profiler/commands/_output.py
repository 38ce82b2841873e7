"""Opening the output stream of an exporting command (only the CLI opens files)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import BinaryIO, TextIO

from profiler.errors import ProfilerError


@contextlib.contextmanager
def open_output(path: str) -> Iterator[TextIO]:
    """``-`` is stdout; a file is written beside itself and renamed into place when complete,
    so a failed export never leaves half a file behind."""
    if path == "-":
        yield sys.stdout
        return
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        stream = open(tmp, "w", encoding="utf-8", newline="\n")
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


@contextlib.contextmanager
def open_binary_output(path: str) -> Iterator[BinaryIO]:
    """Like :func:`open_output`, for bytes (``-`` is stdout's buffer)."""
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        stream = open(tmp, "wb")
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
