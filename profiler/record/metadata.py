"""Capture-time facts, so that a capture can be analysed on another machine.

The header (host, kernel, CPUs, page size, target, clocks), the kernel's build-id from
/sys/kernel/notes, /proc/modules, and the vdso image (copied from this process's own ``[vdso]``
mapping: the kernel maps the same image into every process of an ABI). Build-ids of mapped files
are ``profiler/record/mapped.py``'s; kernel symbols ``profiler/record/kallsyms.py``'s.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Iterable

from profiler.format.header import machine_facts
from profiler.format.buildid import kernel_build_id
from profiler.names import VDSO
from profiler.record.synth import parse_maps_line

MODULES = "/proc/modules"
KPTR_RESTRICT = "/proc/sys/kernel/kptr_restrict"
from profiler.record.cpus import ONLINE_CPUS as ONLINE_CPUS  # noqa: E402 - re-exported
from profiler.record.cpus import online_cpus as online_cpus  # noqa: E402
from profiler.record.cpus import parse_cpu_list as parse_cpu_list  # noqa: E402

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any


def perf_clock_ns(clockid: int = time.CLOCK_MONOTONIC) -> int:
    """The perf clock the recorder asks for (use_clockid with ``clockid``, -k)."""
    return time.clock_gettime_ns(clockid)


def build_header(
    *, target: dict[str, Any], events: list[dict[str, Any]], cmdline: list[str],
    clockid: int = time.CLOCK_MONOTONIC,
) -> dict[str, Any]:
    """The capture header: the format's machine facts, with the CPUs that are online now
    and the recorder's clock, target and events. ``start_time_ns`` (wall clock) and
    ``start_perf_clock_ns`` (the samples' clock) are read back to back: their difference puts
    any sample time on the wall clock (script -F tod, --time with dates)."""
    header = machine_facts()
    wall = time.time_ns()
    perf = perf_clock_ns(clockid)
    header.update({
        "online_cpus": online_cpus(),
        "cmdline": cmdline,
        "target": target,
        "start_time_ns": wall,
        "start_perf_clock_ns": perf,
        "clockid": clockid,
        "events": events,
    })
    return header


def _read_text(path: str | os.PathLike[str]) -> str:
    try:
        with open(path, errors="replace") as stream:
            return stream.read()
    except OSError:
        return ""


def kptr_restrict() -> int:
    try:
        with open(KPTR_RESTRICT) as stream:
            return int(stream.read().strip())
    except (OSError, ValueError):
        return -1


def read_modules() -> dict[str, Any]:
    return {"text": _read_text(MODULES)}


def kernel_info() -> dict[str, Any]:
    bid = kernel_build_id()
    return {"build_id": bid, "release": os.uname().release}


def vdso_image() -> dict[str, Any] | None:
    """The bytes of our own ``[vdso]`` mapping (readable memory of this process). Only its
    line of our maps is parsed: the recorder's own ~120 mappings are nothing to it."""
    text = _read_text(f"/proc/{os.getpid()}/maps")
    at = text.find(" [vdso]\n")
    if at < 0 and text.endswith(" [vdso]"):
        at = len(text) - len(" [vdso]")
    entry = parse_maps_line(text[text.rfind("\n", 0, at) + 1:at + len(" [vdso]")]) if at >= 0 else None
    if entry is None or entry.path != VDSO:
        return None
    image = ctypes.string_at(entry.start, entry.end - entry.start)
    return {"image": image, "arch": os.uname().machine}


def tracepoint_formats(names: Iterable[str]) -> dict[str, Any]:
    """The ``format`` file of each ``sys:name`` tracepoint, as text, for the
    ``tracepoint_formats`` metadata: another machine decodes the payloads with it."""
    from profiler.record.events import tracefs_root

    root = tracefs_root()
    entries = []
    for name in names:
        subsystem, _, event = name.partition(":")
        text = _read_text(os.path.join(root, "events", subsystem, event, "format")) if root else ""
        if text:
            entries.append({"event": name, "format": text})
    return {"entries": entries}
