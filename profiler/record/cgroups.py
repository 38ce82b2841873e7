"""``-G/--cgroup PATH``: record only the tasks of one cgroup, system-wide, as perf does.

perf_event_open(2): "PERF_FLAG_PID_CGROUP: This flag activates per-container system-wide
monitoring. [...] the pid argument [is] a file descriptor opened on the cgroup's directory in
the cgroupfs filesystem [...] cgroup monitoring is available only for system-wide events" — so
each event is opened once per CPU (``-a`` or ``-C``), with the group's directory as its pid;
the kernel counts (and samples, and writes side-band records for) only the tasks of that group
and its descendants while they run on that CPU. The hierarchy is cgroup2's (``perf_event`` is
implicit there); on a hybrid hierarchy it is mounted at ``/sys/fs/cgroup/unified``.

``PATH`` is a directory of the hierarchy (``/sys/fs/cgroup/unified/mygroup``) or, as perf takes
it, a path from the hierarchy's root (``mygroup``, ``/mygroup``).
"""

from __future__ import annotations

import os

from profiler.errors import UsageError
from profiler.record.synth import cgroup2_root


def cgroup_directory(path: str, root: str | None = None) -> str:
    """The group's directory, or a :class:`UsageError` sentence naming what was tried."""
    root = cgroup2_root() if root is None else root
    tried = []
    if os.path.isabs(path) and os.path.isfile(os.path.join(path, "cgroup.procs")):
        return path
    tried.append(path)
    if root is not None:
        inside = os.path.normpath(os.path.join(root, path.lstrip("/")))
        if (inside == root or inside.startswith(root.rstrip("/") + "/")) and \
                os.path.isfile(os.path.join(inside, "cgroup.procs")):
            return inside
        tried.append(inside)
    where = f"a cgroup2 hierarchy at {root}" if root else "no cgroup2 hierarchy mounted"
    raise UsageError(f"-G {path}: no such cgroup ({' nor '.join(tried)} is one; {where}).")


def open_cgroup(path: str) -> int:
    """A descriptor of the group's directory, for perf_event_open's pid argument."""
    directory = cgroup_directory(path)
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"-G {path}: cannot open {directory} ({exc.strerror}).") from None
