"""perf_event_open(2) through ctypes: the recorder's only leaf module that talks to the kernel.

It holds the syscall numbers, the ``PERF_EVENT_IOC_*`` ioctl numbers (computed the way the
kernel's ``_IO``/``_IOW``/``_IOR`` macros compute them), thin wrappers for the syscall and the
ioctls, and the translation of an errno into one sentence a user can act on. The attr layout
itself lives in :mod:`profiler.format.attr` (one layout for the writer and the reader).
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

from profiler.errors import EventError, PermissionDeniedError, RecordError
from profiler.format.attr import PERF_ATTR_SIZE_VER7, perf_event_attr

SYSCALL_NUMBERS: dict[str, int] = {"x86_64": 298, "aarch64": 241}
# sched_setattr(2) / sched_getattr(2), for the recorder's own scheduling slice
SCHED_SETATTR_NUMBERS: dict[str, int] = {"x86_64": 314, "aarch64": 274}
SCHED_GETATTR_NUMBERS: dict[str, int] = {"x86_64": 315, "aarch64": 275}
SCHED_OTHER = 0

# perf_event_open flags (linux/perf_event.h)
PERF_FLAG_FD_NO_GROUP = 1 << 0
PERF_FLAG_FD_OUTPUT = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3

# asm-generic/ioctl.h: nr 8 bits, type 8 bits, size 14 bits, dir 2 bits (x86_64 and aarch64).
_IOC_NRSHIFT, _IOC_TYPESHIFT, _IOC_SIZESHIFT, _IOC_DIRSHIFT = 0, 8, 16, 30
_IOC_NONE, _IOC_WRITE, _IOC_READ = 0, 1, 2


def _IOC(direction: int, type_char: str, nr: int, size: int) -> int:
    return (
        (direction << _IOC_DIRSHIFT)
        | (ord(type_char) << _IOC_TYPESHIFT)
        | (nr << _IOC_NRSHIFT)
        | (size << _IOC_SIZESHIFT)
    )


def _IO(type_char: str, nr: int) -> int:
    return _IOC(_IOC_NONE, type_char, nr, 0)


def _IOW(type_char: str, nr: int, size: int) -> int:
    return _IOC(_IOC_WRITE, type_char, nr, size)


def _IOR(type_char: str, nr: int, size: int) -> int:
    return _IOC(_IOC_READ, type_char, nr, size)


_U64 = 8
_PTR = ctypes.sizeof(ctypes.c_void_p)
PERF_EVENT_IOC_ENABLE = _IO("$", 0)
PERF_EVENT_IOC_DISABLE = _IO("$", 1)
PERF_EVENT_IOC_REFRESH = _IO("$", 2)
PERF_EVENT_IOC_RESET = _IO("$", 3)
PERF_EVENT_IOC_PERIOD = _IOW("$", 4, _U64)
PERF_EVENT_IOC_SET_OUTPUT = _IO("$", 5)
PERF_EVENT_IOC_SET_FILTER = _IOW("$", 6, _PTR)  # _IOW('$', 6, char *)
PERF_EVENT_IOC_PAUSE_OUTPUT = _IOW("$", 9, 4)  # _IOW('$', 9, __u32)
PERF_EVENT_IOC_ID = _IOR("$", 7, _PTR)  # _IOR('$', 7, __u64 *): the size is a pointer's

PARANOID_PATH = "/proc/sys/kernel/perf_event_paranoid"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.ioctl.restype = ctypes.c_int
_libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]


def syscall_number(machine: str | None = None) -> int:
    """perf_event_open has no libc wrapper; its number depends on the architecture."""
    machine = machine or os.uname().machine
    try:
        return SYSCALL_NUMBERS[machine]
    except KeyError:
        raise RecordError(
            f"recording is not supported on {machine}: no perf_event_open syscall number is known."
        ) from None


def perf_event_open(
    attr: perf_event_attr,
    pid: int,
    cpu: int,
    group_fd: int = -1,
    flags: int = PERF_FLAG_FD_CLOEXEC,
    *,
    event_name: str = "event",
) -> int:
    """``int perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
    unsigned long flags)``; returns the new fd or raises the error sentence for errno."""
    fd = int(
        _libc.syscall(
            ctypes.c_long(syscall_number()),
            ctypes.byref(attr),
            ctypes.c_int(pid),
            ctypes.c_int(cpu),
            ctypes.c_int(group_fd),
            ctypes.c_ulong(flags),
        )
    )
    if fd < 0:
        err = ctypes.get_errno()
        error = open_error(err, event_name, attr, pid=pid, cpu=cpu)
        error.errno = err
        raise error
    return fd


class sched_attr(ctypes.Structure):
    """``struct sched_attr`` (linux/sched/types.h), SCHED_ATTR_SIZE_VER1: 56 bytes."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("sched_policy", ctypes.c_uint32),
        ("sched_flags", ctypes.c_uint64),
        ("sched_nice", ctypes.c_int32),
        ("sched_priority", ctypes.c_uint32),
        ("sched_runtime", ctypes.c_uint64),  # for SCHED_OTHER (Linux >= 6.12): the slice, ns
        ("sched_deadline", ctypes.c_uint64),
        ("sched_period", ctypes.c_uint64),
        ("sched_util_min", ctypes.c_uint32),
        ("sched_util_max", ctypes.c_uint32),
    ]


def get_sched_attr() -> sched_attr | None:
    """The calling thread's scheduling attributes, or None where the syscall is unknown or fails."""
    number = SCHED_GETATTR_NUMBERS.get(os.uname().machine)
    if number is None:
        return None
    attr = sched_attr()
    if int(_libc.syscall(ctypes.c_long(number), 0, ctypes.byref(attr), ctypes.c_uint(ctypes.sizeof(attr)), 0)) != 0:
        return None
    return attr


def set_sched_attr(attr: sched_attr) -> bool:
    """Apply ``attr`` to the calling thread; False when the kernel refuses it."""
    number = SCHED_SETATTR_NUMBERS.get(os.uname().machine)
    if number is None:
        return False
    attr.size = ctypes.sizeof(attr)
    return int(_libc.syscall(ctypes.c_long(number), 0, ctypes.byref(attr), 0)) == 0


def _ioctl(fd: int, request: int, arg: int | ctypes.c_void_p | None = None) -> int:
    argp = ctypes.c_void_p(arg) if isinstance(arg, int) else arg
    result = int(_libc.ioctl(fd, request, argp))
    if result < 0:
        err = ctypes.get_errno()
        raise RecordError(f"ioctl {request:#x} on perf event fd {fd} failed: {os.strerror(err)}.")
    return result


def enable(fd: int) -> None:
    """PERF_EVENT_IOC_ENABLE."""
    _ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)


def disable(fd: int) -> None:
    """PERF_EVENT_IOC_DISABLE."""
    _ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)


def set_output(fd: int, target_fd: int) -> None:
    """PERF_EVENT_IOC_SET_OUTPUT: send ``fd``'s records to ``target_fd``'s ring buffer
    (both must be on the same CPU)."""
    _ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, target_fd)


def set_filter(fd: int, expr: str, event_name: str) -> None:
    """PERF_EVENT_IOC_SET_FILTER: the kernel keeps only the tracepoint's records that match
    ``expr``; a filter it cannot read is refused in perf's words."""
    text = ctypes.create_string_buffer(expr.encode())
    result = int(_libc.ioctl(fd, PERF_EVENT_IOC_SET_FILTER, ctypes.cast(text, ctypes.c_void_p)))
    if result < 0:
        err = ctypes.get_errno()
        raise RecordError(f'failed to set filter "{expr}" on event {event_name} with {err} ({os.strerror(err)}): '
                          f"its fields are in the event's format file under /sys/kernel/tracing/events.")


def pause_output(fd: int, paused: bool) -> None:
    """PERF_EVENT_IOC_PAUSE_OUTPUT: stop (or resume) writing into the fd's ring buffer."""
    _ioctl(fd, PERF_EVENT_IOC_PAUSE_OUTPUT, int(paused))


def event_id(fd: int) -> int:
    """PERF_EVENT_IOC_ID: the kernel's id for the event, as found in PERF_SAMPLE_ID."""
    value = ctypes.c_uint64(0)
    _ioctl(fd, PERF_EVENT_IOC_ID, ctypes.cast(ctypes.byref(value), ctypes.c_void_p))
    return int(value.value)


def read_paranoid() -> int | None:
    try:
        with open(PARANOID_PATH) as stream:
            return int(stream.read().strip())
    except (OSError, ValueError):
        return None


def open_error(
    err: int, event_name: str, attr: perf_event_attr, *, pid: int = -1, cpu: int = -1
) -> RecordError:
    """One sentence for a failed perf_event_open, per the ERRORS section of perf_event_open(2)."""
    if err in (errno.EACCES, errno.EPERM):
        level = read_paranoid()
        shown = "unknown" if level is None else str(level)
        return PermissionDeniedError(
            f"no permission to open '{event_name}' (kernel.perf_event_paranoid is {shown}): "
            "run as root, or lower it with 'sysctl -w kernel.perf_event_paranoid=1' "
            "(1: your own processes, 0: also system-wide, -1: everything)."
        )
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
        return EventError(f"this machine does not support the event '{event_name}'.")
    if err == errno.EINVAL:
        return EventError(
            f"the kernel rejected the event '{event_name}' (invalid or unsupported settings "
            f"for this machine, sample_type {attr.sample_type:#x})."
        )
    if err == errno.EMFILE:
        return RecordError(
            f"too many open files while opening '{event_name}': raise the limit with 'ulimit -n'."
        )
    if err == errno.E2BIG:
        return RecordError(
            f"the kernel does not accept a perf_event_attr of size {attr.size} "
            f"(this build uses {PERF_ATTR_SIZE_VER7}) for '{event_name}'."
        )
    if err == errno.ESRCH:
        return RecordError(f"process {pid} does not exist (it may have exited).")
    if err == errno.EBUSY:
        return EventError(f"the PMU for '{event_name}' is in exclusive use by another program.")
    return RecordError(f"perf_event_open for '{event_name}' failed: {os.strerror(err)}.")


@contextmanager
def drain_scheduling(slice_ns: int, boost: int) -> Iterator[tuple[bool, bool]]:
    """Run the calling thread with a scheduling slice of ``slice_ns`` and ``boost`` nice levels
    more weight inside the block, then put the previous attributes back; yields whether the
    kernel took the slice and the boost. Only a SCHED_OTHER thread is touched. Without the
    privilege to lower its nice value it keeps it; a kernel without the syscall or custom
    slices changes nothing. The command was forked before: it keeps its own."""
    saved = get_sched_attr()
    applied = sliced = boosted = False
    if saved is not None and saved.sched_policy == SCHED_OTHER:
        nice = max(-20, saved.sched_nice - boost)
        # both; the boost alone (a kernel that refuses the slice); the slice alone (no privilege)
        for runtime, wanted_nice in ((slice_ns, nice), (saved.sched_runtime, nice), (slice_ns, saved.sched_nice)):
            if (runtime, wanted_nice) == (saved.sched_runtime, saved.sched_nice):
                continue
            wanted = sched_attr.from_buffer_copy(saved)
            wanted.sched_runtime, wanted.sched_nice = runtime, wanted_nice
            if set_sched_attr(wanted):
                applied, sliced, boosted = True, runtime == slice_ns, wanted_nice < saved.sched_nice
                break
    try:
        yield sliced, boosted
    finally:
        if applied and saved is not None:
            set_sched_attr(saved)
