"""The capture header as the reading side sees it: one typed :class:`CaptureHeader`, built once
when a capture is opened (``CaptureReader.info``), after ``validate.check_header`` has refused a
damaged header. Readers use its fields instead of ``.get`` on the header map; the map itself
(``CaptureReader.header``) stays what the file holds, for ``report --header``, ``import`` and
the stripped copy.

A field the file does not have (an older version, another tool's file) is its default: no
field raises here. docs/format.md lists what each key means.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from profiler.dataclass import dataclass


@dataclass(frozen=True)
class Target:
    """What was recorded: a command, processes or threads, or the whole system."""

    command: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    tids: tuple[int, ...] = ()
    system_wide: bool = False
    cpus: tuple[int, ...] | None = None

    def describe(self, cmdline: tuple[str, ...] = ()) -> str:
        """The command, ``system-wide``, ``pid 1,2``, else the recorder's command line."""
        if self.command:
            return " ".join(self.command)
        if self.system_wide:
            return "system-wide"
        if self.pids or self.tids:
            return "pid " + ",".join(str(p) for p in self.pids or self.tids)
        return " ".join(cmdline) or "capture"


@dataclass(frozen=True)
class CaptureHeader:
    """The header's fields, typed (see the module docstring)."""

    events: tuple[Mapping[str, Any], ...] = ()  # {"name", "attr", "ids"} per event, as stored
    arch: str = ""
    byte_order: str = "little"  # "little" or "big"
    word_size: int = 8
    page_size: int | None = None
    nr_cpus: int | None = None
    online_cpus: tuple[int, ...] = ()
    hostname: str = ""
    kernel_release: str = ""
    tool_version: str = ""
    cmdline: tuple[str, ...] = ()
    target: Target = field(default_factory=Target)
    start_time_ns: int | None = None  # wall clock at the start, ns since the epoch (None: unknown)
    start_perf_clock_ns: int | None = None  # the sample clock at the start (None: unknown)
    clockid: int | None = None
    perf_data: Mapping[str, Any] = field(default_factory=dict)  # what a perf.data file's features said
    imported_from: Mapping[str, Any] | None = None  # set by `profiler import`

    @classmethod
    def from_map(cls, header: Mapping[str, Any]) -> CaptureHeader:
        """The typed view of a header map (checked by ``validate.check_header`` for our files;
        built by the reader itself for perf.data)."""
        return cls(
            events=tuple(e for e in _list(header.get("events")) if isinstance(e, Mapping)),
            arch=_text(header.get("arch")),
            byte_order="big" if header.get("byte_order") == "big" else "little",
            word_size=4 if header.get("word_size") == 4 else 8,
            page_size=_positive(header.get("page_size")),
            nr_cpus=_positive(header.get("nr_cpus")),
            online_cpus=tuple(c for c in _list(header.get("online_cpus")) if _is_int(c)),
            hostname=_text(header.get("hostname")),
            kernel_release=_text(header.get("kernel_release")),
            tool_version=_text(header.get("tool_version")),
            cmdline=tuple(str(c) for c in _list(header.get("cmdline"))),
            target=_target(header.get("target")),
            start_time_ns=_positive(header.get("start_time_ns")),
            start_perf_clock_ns=_positive(header.get("start_perf_clock_ns")),
            clockid=header.get("clockid") if _is_int(header.get("clockid")) else None,
            perf_data=_map(header.get("perf_data")),
            imported_from=_map(header.get("imported_from")) if isinstance(header.get("imported_from"), Mapping)
            else None,
        )

    def event_attr(self, name: str) -> Mapping[str, Any]:
        """The perf_event_attr of the event called ``name`` ({} when there is none)."""
        for event in self.events:
            if event.get("name") == name:
                return _map(event.get("attr"))
        return {}

    def describe_target(self) -> str:
        """What was recorded, for titles: the command, ``system-wide``, ``pid N``."""
        return self.target.describe(self.cmdline)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive(value: Any) -> int | None:
    return value if _is_int(value) and value > 0 else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _target(value: Any) -> Target:
    if not isinstance(value, Mapping):
        return Target()
    cpus = value.get("cpus")
    return Target(
        command=tuple(str(c) for c in _list(value.get("command"))),
        pids=tuple(p for p in _list(value.get("pids")) if _is_int(p)),
        tids=tuple(t for t in _list(value.get("tids")) if _is_int(t)),
        system_wide=value.get("system_wide") is True,
        cpus=tuple(c for c in cpus if _is_int(c)) if isinstance(cpus, list) else None,
    )
