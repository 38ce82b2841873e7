"""Chunks of work computed beside each other: in worker processes (:func:`in_order`, the numpy
tally's pool) or two at a time in threads (:func:`two_at_a_time`, the compiled kernel's stream,
whose zstd and C steps release the GIL), results always in order; how many workers the machine
has room for (:func:`idle_cpus`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from profiler.errors import ProfilerError

MAX_JOBS = 4
PIPE_ROOM = 1 << 20  # bytes a worker may write ahead of what this process has read
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
T = TypeVar("T")


_POOLED = [False]  # a task of a pool is running in this process: it forks no pool of its own


def worker_count(jobs: int | None, chunks: int) -> int:
    """Workers for ``chunks`` chunks: ``jobs``, else ``PROFILER_JOBS``, else the idle CPUs;
    1 inside a task of a pool (a tally chunk that unwinds its samples forks no pool of its own:
    its siblings already use the CPUs)."""
    if _POOLED[0]:
        return 1
    if jobs is None:
        env = os.environ.get("PROFILER_JOBS", "")
        if env.isdigit() and int(env) > 0:
            jobs = int(env)
        else:
            jobs = idle_cpus()
    return max(1, min(jobs, chunks))


def idle_cpus() -> int:
    """The default number of workers: the CPUs this process may use (at most ``MAX_JOBS``)
    less the other threads running on the machine right now, at least 1. A worker on a CPU
    another program keeps busy gains no time and costs its share of the work again: with one
    of two CPUs busy the 1M-sample flat report took 1.09 s with two workers, 0.98 s with none.
    (Not the load average: it lags by a minute, and counts the reports just run.)"""
    allowed = len(os.sched_getaffinity(0))
    return max(1, min(allowed, MAX_JOBS, allowed - others_running()))


def others_running() -> int:
    """Threads running or runnable now besides this one (/proc/loadavg's fourth field)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            running = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, running - 1)


def in_order(task: Callable[[int], T], count: int, jobs: int) -> Iterator[T]:
    """``task(0)``, ``task(1)``, ... in order: in this process, or shared with ``jobs - 1``
    worker processes forked now (they inherit everything ``task`` needs; only their results are
    sent back, pickled, each worker through its own pipe). The tasks wait in one queue (a pipe
    of task numbers every process takes the next one from: :class:`_Queue`), so a process whose
    chunks went fast takes more of them; this process is one of the pool, and takes a task
    whenever the result it must give next is not there yet. A fixed share (task ``k`` to worker
    ``k % jobs``) left one process idle while the other finished a slower chunk: 0.05-0.08 s
    of a 0.52 s DWARF tally. Forking one worker fewer than there are processes saved a tenth of
    the unwinding time of a 76 K-sample DWARF capture (0.10-0.13 s against 0.13-0.14 s).

    A worker that dies (killed, out of memory) ends the report with one sentence: its pipe
    closes before it said it was done. An exception in a task is raised here, in order. Not
    ``concurrent.futures``: importing it and ``multiprocessing`` cost more than the whole pool."""
    if jobs <= 1:
        for k in range(count):
            yield task(k)
        return
    import gc
    import pickle
    import select

    try:
        queue = _Queue(count)
    except OSError:  # more tasks than a pipe holds (~262 K with Linux's default ceiling): no pool
        for k in range(count):
            yield task(k)
        return
    workers: dict[int, int] = {}  # result pipe -> worker pid
    pids: list[int] = []
    parent = os.getpid()
    done: dict[int, tuple[str, Any]] = {}
    collecting = gc.isenabled()
    gc.disable()  # no cycle collection while the pool runs (its tasks make few cycles): 3 % of its CPU time
    try:
        for _ in range(1, jobs):  # this process is one of the pool
            read_fd, write_fd = os.pipe()
            _widen(write_fd)
            pid = os.fork()
            if pid == 0:  # the worker: never returns
                os.close(read_fd)
                for fd in workers:
                    os.close(fd)
                serve(task, queue, write_fd, parent)
            os.close(write_fd)
            workers[read_fd] = pid
            pids.append(pid)
        for k in range(count):
            while k not in done:
                ready = select.select(list(workers), [], [], 0)[0] if workers else []
                mine = None if ready else queue.take()
                if mine is not None:
                    try:
                        done[mine] = ("ok", _pooled(task, mine))
                    except Exception as exc:  # noqa: BLE001  raised in order, below
                        done[mine] = ("error", exc)
                    continue
                if not ready:  # nothing left to take: wait for the workers
                    ready = select.select(list(workers), [], [])[0] if workers else []
                    if not ready:
                        raise ProfilerError(f"the worker pool lost task {k}.")
                for fd in ready:
                    message = _receive(fd, pickle)
                    if message is None:
                        raise ProfilerError("a worker process reading the capture died (killed, or out of memory?); "
                                            "PROFILER_JOBS=1 reads it in one process.")
                    if message[0] != "ok":  # a worker ends after its "done", or its first error
                        os.close(fd)
                        del workers[fd]
                    if message[0] != "done":
                        done[message[1]] = (message[0], message[2])
            kind, value = done.pop(k)
            if kind == "error":
                raise value
            yield value
    finally:
        if collecting:
            gc.enable()
        queue.close()
        for fd in workers:
            os.close(fd)  # a worker still writing gets EPIPE and ends
        for pid in pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)


class _Queue:
    """Task numbers ``0 .. count - 1`` in a pipe every process of a pool reads from: a read of
    one 4-byte number takes it (the pipe's lock makes each read whole and each number taken
    once); an empty pipe (non-blocking) means no task is left."""

    ITEM = 4

    def __init__(self, count: int) -> None:
        import fcntl

        self.read_fd, write_fd = os.pipe()
        try:
            fcntl.fcntl(write_fd, 1031, max(count * self.ITEM, 4096))  # F_SETPIPE_SZ: all of them fit
            data = b"".join(k.to_bytes(self.ITEM, "little") for k in range(count))
            written = 0
            os.set_blocking(write_fd, False)
            while written < len(data):
                written += os.write(write_fd, data[written:])
        except OSError:
            os.close(self.read_fd)
            raise
        finally:
            os.close(write_fd)
        os.set_blocking(self.read_fd, False)

    def take(self) -> int | None:
        """The next task's number, or None when none is left."""
        try:
            got = os.read(self.read_fd, self.ITEM)
        except BlockingIOError:
            return None
        return int.from_bytes(got, "little") if len(got) == self.ITEM else None

    def close(self) -> None:
        try:
            os.close(self.read_fd)
        except OSError:
            pass


def _receive(fd: int, pickle: Any) -> tuple[str, int, Any] | None:
    """One message from a worker's pipe (length-prefixed pickle); None when the pipe closed."""
    head = _read_exactly(fd, 8)
    if head is None:
        return None
    body = _read_exactly(fd, int.from_bytes(head, "little"))
    if body is None:
        return None
    message: tuple[str, int, Any] = pickle.loads(body)
    return message


def _read_exactly(fd: int, n: int) -> bytes | None:
    parts: list[bytes] = []
    while n:
        got = os.read(fd, n)
        if not got:
            return None
        parts.append(got)
        n -= len(got)
    return b"".join(parts)


def _pooled(task: Callable[[int], T], k: int) -> T:
    """``task(k)`` run as one of a pool's tasks (see :func:`worker_count`)."""
    _POOLED[0] = True
    try:
        return task(k)
    finally:
        _POOLED[0] = False


def _widen(fd: int) -> None:
    """A worker's pipe made room for a few results (1 MiB, Linux's default ceiling), so that the
    worker runs ahead while this process computes its own share."""
    import fcntl

    try:
        fcntl.fcntl(fd, 1031, PIPE_ROOM)  # F_SETPIPE_SZ
    except OSError:
        pass


def serve(task: Callable[[int], Any], queue: _Queue, write_fd: int, parent: int) -> None:
    """A worker's life: tasks taken from ``queue`` until none is left, each one's result (or
    exception) sent down the pipe as ("ok" or "error", task number, value), then ("done",) and
    exit without the parent's exit handlers or buffered output. It dies with the parent (a
    report killed by a timeout, or kill -9, leaves no worker computing for nobody)."""
    import ctypes
    import pickle

    code = 0
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, 9)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)
        _POOLED[0] = True
        message: tuple[Any, ...] = ("done", -1, None)
        while (k := queue.take()) is not None:
            try:
                message = ("ok", k, task(k))
            except BaseException as exc:  # noqa: BLE001  the parent raises it
                message = ("error", k, exc)
            _send(write_fd, message, pickle)
            if message[0] == "error":
                break
        if message[0] != "error":
            _send(write_fd, ("done", -1, None), pickle)
    except BaseException:  # noqa: BLE001  the parent went away (EPIPE) or we were interrupted
        code = 1
    finally:
        os._exit(code)


def _send(fd: int, message: tuple[Any, ...], pickle: Any) -> None:
    try:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001  an exception that does not pickle
        data = pickle.dumps(("error", message[1], ProfilerError(str(message[2]))))
    data = len(data).to_bytes(8, "little") + data
    while data:
        data = data[os.write(fd, data):]


def two_at_a_time(task: Callable[[int], T], count: int) -> Iterator[T]:
    """``task(0)``, ``task(1)``, ... in order, two at a time: this thread computes the even
    ones while a helper thread computes the odd ones. For the compressed stream's chunks
    (:class:`FrameStream`): zstd and the compiled kernel release the GIL, so a chunk's
    inflating and tallying run beside the next one's on a second CPU (each thread inflates
    into its own buffer). The helper is one chunk ahead at most; an exception in it is
    raised here, in order."""
    import threading

    done: dict[int, tuple[bool, Any]] = {}
    turn = threading.Condition()
    started = [0]  # the chunks this thread has started: the helper may compute up to the next

    def helper() -> None:
        for k in range(1, count, 2):
            with turn:
                turn.wait_for(lambda k=k: started[0] >= k or started[0] < 0)  # type: ignore[misc]
                if started[0] < 0:
                    return
            try:
                out: tuple[bool, Any] = (True, task(k))
            except BaseException as exc:  # noqa: BLE001  raised in order by the consumer
                out = (False, exc)
            with turn:
                done[k] = out
                turn.notify_all()

    thread = threading.Thread(target=helper, name="tally-helper", daemon=True)
    thread.start()
    try:
        for k in range(count):
            if k % 2 == 0:
                with turn:
                    started[0] = k + 1
                    turn.notify_all()
                yield task(k)
                continue
            with turn:
                turn.wait_for(lambda k=k: k in done)  # type: ignore[misc]
                ok, value = done.pop(k)
            if not ok:
                raise value
            yield value
    finally:
        with turn:
            started[0] = -1
            turn.notify_all()
