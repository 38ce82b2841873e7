"""The command ``profiler stat`` measures, started without forking the Python process.

perf forks itself and holds the child on a pipe until the counters exist. Forking a Python
interpreter costs the child copy-on-write faults and a large address space to tear down at
exec, which perf stat's "seconds time elapsed" would then include. Instead the command is
started with posix_spawn (vfork-like) as ``/bin/sh -c 'read _ <&9; exec "$@"' sh ARGV``: the
shell is already exec'd when the counters are opened on it, waits on fd 9, and its ``exec``
of the command is the exec that ``enable_on_exec`` waits for, so nothing of the shell is
counted. ``release()`` writes one line to the pipe; closing it unwritten makes the shell exit.
"""

from __future__ import annotations

import os
import signal

from profiler.record.target import resolve_command

SHELL = "/bin/sh"
HOLD_FD = 9
HOLD = f'read -r _ <&{HOLD_FD} || exit 127; exec {HOLD_FD}<&-; exec "$@"'
DEFAULT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD)


class HeldCommand:
    """A command started and held before its exec; ``pid`` is its process id throughout."""

    def __init__(self, argv: tuple[str, ...]) -> None:
        self.argv = argv
        resolve_command(argv)  # a missing command is our one-sentence error (exit 127)
        hold_r, self._hold_w = os.pipe()  # both close-on-exec; fd 9 in the child is not
        self.status: int | None = None
        try:
            self.pid = os.posix_spawn(
                SHELL, [SHELL, "-c", HOLD, "sh", *argv], os.environ,
                file_actions=[(os.POSIX_SPAWN_DUP2, hold_r, HOLD_FD)],
                setsigdef=DEFAULT_SIGNALS,
            )
        finally:
            os.close(hold_r)

    def release(self) -> None:
        """Let the command exec (its counters start there)."""
        os.write(self._hold_w, b"\n")
        self._close()

    def abandon(self) -> None:
        """Counting failed before release: the shell exits without running the command."""
        self._close()
        self.wait()

    def _close(self) -> None:
        if self._hold_w >= 0:
            os.close(self._hold_w)
            self._hold_w = -1

    def wait(self) -> int:
        while self.status is None:
            try:
                _, self.status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.status = 0
        return self.status

    def exit_code(self) -> int:
        """The shell's view: the exit status, or 128 + the signal that killed it."""
        status = self.wait()
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status)
