"""CPU lists: the kernel's ``0-3,8`` syntax (also what ``-C`` accepts) and the online CPUs.

A leaf module, so that ``profiler stat`` can use it without importing the recorder's
metadata and synthesis code.
"""

from __future__ import annotations

import os

ONLINE_CPUS = "/sys/devices/system/cpu/online"


def parse_cpu_list(text: str) -> list[int]:
    """A kernel CPU list such as ``0-3,8,10-11`` (also what ``-C`` accepts)."""
    cpus: list[int] = []
    for part in filter(None, (p.strip() for p in text.strip().split(","))):
        lo, dash, hi = part.partition("-")
        first, last = int(lo), int(hi) if dash else int(lo)
        if first < 0 or last < first:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.extend(c for c in range(first, last + 1) if c not in cpus)
    return cpus


def online_cpus() -> list[int]:
    try:
        with open(ONLINE_CPUS) as stream:
            return parse_cpu_list(stream.read())
    except (OSError, ValueError):
        return list(range(os.cpu_count() or 1))
