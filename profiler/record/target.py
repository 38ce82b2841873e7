"""What to record: a command we start, running processes or threads, or whole CPUs.

A command is forked at once but held on a pipe until its events exist; then it is released
and execs, so ``enable_on_exec`` starts counting exactly at the exec ("enable_on_exec: next
exec enables", perf_event.h) and nothing of the recorder's own fork is sampled. A failed exec
is reported back through a close-on-exec pipe, so a missing command is an error of ours
(exit 127, like a shell) rather than a silent child exit.
"""

from __future__ import annotations

import errno
import os
import signal
import struct
import time

from profiler.errors import CommandNotFoundError, PermissionDeniedError, RecordError, UsageError
from profiler.value import Frozen

PROC = "/proc"


def resolve_command(argv: tuple[str, ...]) -> str:
    """The executable ``argv[0]`` names, found like execvp would; or a one-sentence error."""
    name = argv[0]
    if "/" in name:
        if not os.path.exists(name):
            raise CommandNotFoundError(f"{name}: command not found.")
        if os.path.isdir(name) or not os.access(name, os.X_OK):
            raise CommandNotFoundError(f"{name}: permission denied (not an executable file).")
        return name
    found = find_on_path(name)
    if found is None:
        raise CommandNotFoundError(f"{name}: command not found.")
    return found


def find_on_path(name: str, path: str | None = None) -> str | None:
    """The first ``PATH`` entry (``path`` if given) holding an executable non-directory ``name``,
    joined to it; None if none does. What ``shutil.which`` answers on POSIX, without importing
    shutil (with bz2, lzma and fnmatch: ~2.5 ms of CPU at every recording's start)."""
    if path is None:
        path = os.environ.get("PATH")
        if path is None:
            try:
                path = os.confstr("CS_PATH")
            except (AttributeError, ValueError):
                path = os.defpath
    if not path:  # PATH='' matches nothing; PATH=':' looks in the current directory
        return None
    seen: set[str] = set()
    for entry in path.split(os.pathsep):
        if entry in seen:
            continue
        seen.add(entry)
        candidate = os.path.join(entry, name)
        if os.access(candidate, os.F_OK | os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


class Child:
    """A forked command waiting for ``release()`` before it execs; ``stdout_to_stderr`` gives
    it our standard error as its output too (the capture goes to our standard output); ``env``
    is its environment (None: the recorder's)."""

    def __init__(self, argv: tuple[str, ...], stdout_to_stderr: bool = False,
                 env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.stdout_to_stderr = stdout_to_stderr
        self.env = env  # None: ours
        self.path = resolve_command(argv)
        go_r, self._go_w = os.pipe()
        self._err_r, err_w = os.pipe()
        self.status: int | None = None
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            self._child_main(go_r, err_w)
        self.pid = pid
        os.close(go_r)
        os.close(err_w)

    def _child_main(self, go_r: int, err_w: int) -> None:
        try:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            os.close(self._go_w)
            os.close(self._err_r)
            if os.read(go_r, 1) != b"g":
                os._exit(127)  # the recorder gave up before starting us
            os.close(go_r)
            if self.stdout_to_stderr:
                os.dup2(2, 1)
            if self.env is None:
                os.execv(self.path, list(self.argv))
            os.execve(self.path, list(self.argv), self.env)
        except OSError as exc:
            try:
                os.write(err_w, struct.pack("=i", exc.errno or errno.ENOEXEC))
            finally:
                os._exit(127)
        except BaseException:
            pass
        os._exit(127)

    def release(self) -> None:
        """Let the child exec; raise if the exec failed."""
        os.write(self._go_w, b"g")
        os.close(self._go_w)
        self._go_w = -1
        data = os.read(self._err_r, 4)
        os.close(self._err_r)
        self._err_r = -1
        if data:
            (err,) = struct.unpack("=i", data.ljust(4, b"\0"))
            self.wait()
            raise CommandNotFoundError(f"{self.argv[0]}: cannot execute: {os.strerror(err)}.")

    def abandon(self) -> None:
        """The recorder failed before release: the child exits without running anything."""
        if self._go_w >= 0:
            os.close(self._go_w)
            self._go_w = -1
        if self._err_r >= 0:
            os.close(self._err_r)
            self._err_r = -1
        self.wait()

    def poll(self) -> bool:
        """True once the child has exited (its status is then in ``status``)."""
        if self.status is not None:
            return True
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            self.status = 0
            return True
        if pid == 0:
            return False
        self.status = status
        return True

    def wait(self) -> int:
        while self.status is None:
            try:
                _, self.status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.status = 0
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                continue
        return self.status

    def kill(self, sig: int) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self, grace: float = 5.0) -> None:
        """SIGTERM, then SIGKILL if the command is still there after ``grace`` seconds; reaped."""
        self.kill(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while not self.poll():
            if time.monotonic() >= deadline:
                self.kill(signal.SIGKILL)
                self.wait()
                return
            time.sleep(0.02)

    def exit_code(self) -> int:
        """The shell's view: the exit status, or 128 + the signal that killed it."""
        status = self.wait()
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status)


class Thread(Frozen):
    __slots__ = _fields = ("pid", "tid")

    def __init__(self, pid: int, tid: int) -> None:
        self.pid = pid  # thread group id
        self.tid = tid


def _check_process(pid: int, what: str) -> str:
    path = os.path.join(PROC, str(pid))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise RecordError(f"{what} {pid} does not exist.") from None
    euid = os.geteuid()
    if euid != 0 and st.st_uid != euid:
        raise PermissionDeniedError(
            f"{what} {pid} belongs to another user: profiling it needs root or CAP_PERFMON."
        )
    return path


def tgid_of(tid: int) -> int:
    try:
        with open(os.path.join(PROC, str(tid), "status")) as stream:
            lines = stream.read().splitlines()
        for line in lines:
            if line.startswith("Tgid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return tid


def threads_of_processes(pids: tuple[int, ...]) -> list[Thread]:
    """Every thread of each process (``-p``)."""
    out: list[Thread] = []
    for pid in pids:
        path = _check_process(pid, "process")
        if tgid_of(pid) != pid:
            raise UsageError(f"{pid} is a thread of process {tgid_of(pid)}, not a process: use -t {pid}.")
        try:
            tids = sorted(int(t) for t in os.listdir(os.path.join(path, "task")))
        except OSError:
            raise RecordError(f"process {pid} does not exist.") from None
        out.extend(Thread(pid, tid) for tid in tids)
    return out


def threads_by_id(tids: tuple[int, ...]) -> list[Thread]:
    """The listed threads only (``-t``)."""
    out = []
    for tid in tids:
        _check_process(tid, "thread")
        out.append(Thread(tgid_of(tid), tid))
    return out
