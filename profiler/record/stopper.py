"""The recorder's signals: SIGINT/SIGTERM stop the recording (and reach the command), SIGCHLD
and SIGUSR2 (``--switch-output=signal``) wake the poll loop through a pipe."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from profiler.record.target import Child

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any


class Stopper:
    """SIGINT/SIGTERM handlers that ask the loop to stop, wake poll() through a pipe, and
    pass the signal on to the command unless the terminal already sent it to the whole
    foreground process group (Ctrl-C reaches the command directly, as in a shell)."""

    def __init__(self, child: Child | None) -> None:
        self.child = child
        self.signal: int | None = None
        self.switch_requested = False  # SIGUSR2: --switch-output's signal
        self.read_fd = self.write_fd = -1
        self._saved: dict[int, Any] = {}

    _pending = False  # a signal came before the command was attached

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signal = signum
        if self.child is None:
            self._pending = True
        elif not _terminal_sent_it(signum):
            self.child.kill(signum)

    def attach(self, child: Child) -> None:
        """From now on a signal is passed on to ``child``; one that came before is passed now."""
        self.child = child
        if self._pending and self.signal is not None:
            self._pending = False
            if not _terminal_sent_it(self.signal):
                child.kill(self.signal)

    on_switch_signal = False  # --switch-output=signal: SIGUSR2 asks for a new file

    def _on_switch(self, signum: int, frame: FrameType | None) -> None:
        self.switch_requested = True

    @staticmethod
    def _on_child(signum: int, frame: FrameType | None) -> None:
        """Only here so that SIGCHLD writes to the wakeup pipe."""

    def install(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self.write_fd, False)
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved[sig] = signal.signal(sig, self._on_signal)
        self._saved[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, self._on_child)
        if self.on_switch_signal:
            self._saved[signal.SIGUSR2] = signal.signal(signal.SIGUSR2, self._on_switch)
        signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)

    def restore(self) -> None:
        signal.set_wakeup_fd(-1)
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()
        for fd in (self.read_fd, self.write_fd):
            os.close(fd)

    def clear(self) -> None:
        try:
            while os.read(self.read_fd, 256):
                pass
        except BlockingIOError:
            pass


def _terminal_sent_it(signum: int) -> bool:
    if signum != signal.SIGINT:
        return False
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False




@contextmanager
def installed(stopper: Stopper) -> Iterator[None]:
    stopper.install()
    try:
        yield
    finally:
        stopper.restore()
