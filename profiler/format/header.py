"""Building the capture header: the facts about the recording machine a reader needs."""

from __future__ import annotations

import os
import sys
import time

from profiler import __version__

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any


def machine_facts() -> dict[str, Any]:
    """Host, kernel, architecture, byte order, word size, CPUs and page size of this machine."""
    uname = os.uname()
    try:
        online = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        online = list(range(os.cpu_count() or 1))
    return {
        "tool_version": __version__,
        "hostname": uname.nodename,  # what socket.gethostname() returns
        "kernel_release": uname.release,
        "arch": uname.machine,
        "byte_order": sys.byteorder,
        "word_size": 8 if sys.maxsize > 2**32 else 4,
        "nr_cpus": os.cpu_count() or 1,
        "online_cpus": online,
        "page_size": os.sysconf("SC_PAGE_SIZE"),
    }


def make_header(events: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A complete header: machine facts, start times, ``events`` and any ``extra`` keys.

    Each event is ``{"name": str, "attr": attr_to_dict(...), "ids": [int, ...]}``.
    """
    header = machine_facts()
    header["start_time_ns"] = time.time_ns()
    header["start_perf_clock_ns"] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    header["cmdline"] = list(sys.argv)
    header["events"] = events
    header.update(extra)
    return header
