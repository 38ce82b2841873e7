"""Firefox Profiler export: the *processed* profile format, version 57.

What profiler.firefox.com opens with "Load a profile from file" (documented in the
firefox-devtools/profiler repository: docs-developer/processed-profile-format.md, the types
in src/types/profile.ts, the version history in docs-developer/CHANGELOG-formats.md):

* ``meta``: ``version`` / ``preprocessedProfileVersion``, the sampling interval, the start
  time (Unix epoch ms), categories ``Other`` (grey, the required default), ``User``,
  ``Kernel`` and ``JIT``, ``sampleUnits`` (``threadCPUDelta`` in ns for clock events: the
  CPU-usage graph), the machine and the command line;
* ``libs``: one per DSO with its path, ``breakpadId`` (the build-id as a GUID with the first
  three fields byte-swapped, plus age 0) and ``codeId`` (the whole build-id);
* ``shared.stringArray``: every string once;
* ``threads``: one per (event, thread id), each with its own ``samples`` over time
  (``timeDeltas`` in ms, ``stack``), ``stackTable`` (a prefix tree, root first),
  ``frameTable`` (library-relative addresses, the frame's category), ``funcTable``,
  ``resourceTable`` (one library resource per DSO), ``nativeSymbols`` and an empty
  ``markers`` table.

Samples are written as they are (one entry per sample: the timeline needs them) in chunks,
so the output grows with the samples but memory does not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import field
from typing import Any, TextIO

import numpy as np

from profiler import __version__
from profiler.dataclass import dataclass
from profiler.format.typed_header import CaptureHeader
from profiler.report.model import Location, ProfileMeta, SourceLine, StackSet, period_is_nanoseconds
from profiler.report.render import utf8
from profiler.names import UNKNOWN

PROCESSED_PROFILE_VERSION = 57
GECKO_PROFILE_VERSION = 31
CATEGORIES = [
    {"name": "Other", "color": "grey", "subcategories": ["Other"]},
    {"name": "User", "color": "yellow", "subcategories": ["Other"]},
    {"name": "Kernel", "color": "orange", "subcategories": ["Other"]},
    {"name": "JIT", "color": "green", "subcategories": ["Other"]},
    {"name": "Thread state", "color": "blue", "subcategories": ["Other"]},
    {"name": "Python", "color": "purple", "subcategories": ["Other"]},
]
CATEGORY_OF_KIND = {"user": 1, "kernel": 2, "jit": 3, "unknown": 0, "state": 4, "python": 5}
RESOURCE_LIBRARY = 1
CHUNK = 1 << 16  # samples formatted per write


@dataclass
class FirefoxInput:
    """One :class:`StackSet` per event, each with its locations and its timeline, and
    the machine facts of the capture's header (arch, kernel release, CPUs, command)."""

    profiles: Sequence[StackSet]
    header: CaptureHeader = field(default_factory=CaptureHeader)


def breakpad_id(build_id: str) -> str:
    """The breakpad id of an ELF build-id: its first 16 bytes as a GUID (the first three
    fields little-endian), uppercase, then the age 0."""
    raw = bytes.fromhex(build_id)[:16].ljust(16, b"\0")
    guid = raw[3::-1] + raw[5:3:-1] + raw[7:5:-1] + raw[8:]
    return guid.hex().upper() + "0"


class _Strings:
    def __init__(self) -> None:
        self.array: list[str] = []
        self._ids: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        text = utf8.text(text)
        found = self._ids.get(text)
        if found is None:
            found = len(self.array)
            self.array.append(text)
            self._ids[text] = found
        return found


class _Libs:
    def __init__(self, arch: str) -> None:
        self.arch = arch
        self.libs: list[dict[str, Any]] = []
        self._ids: dict[str, int] = {}

    def index(self, loc: Location) -> int | None:
        path = loc.mapping.path
        if loc.kind == "unknown" or path in ("", UNKNOWN):
            return None
        found = self._ids.get(path)
        if found is None:
            bid = loc.mapping.build_id
            name = os.path.basename(path) or path
            found = len(self.libs)
            self.libs.append({"arch": self.arch, "name": name, "path": path, "debugName": name,
                              "debugPath": path, "breakpadId": breakpad_id(bid) if bid else "",
                              "codeId": bid or None})
            self._ids[path] = found
        return found


def _table(**columns: list[Any]) -> dict[str, Any]:
    lengths = {len(v) for v in columns.values()}
    assert len(lengths) <= 1
    return {**columns, "length": lengths.pop() if lengths else 0}


class _Thread:
    """The tables of one thread, built from the distinct stacks its samples use."""

    def __init__(self, strings: _Strings, libs: _Libs) -> None:
        self.s = strings
        self.libs = libs
        self.funcs: dict[tuple[str, str], int] = {}
        self.func_cols: dict[str, list[Any]] = {k: [] for k in (
            "name", "isJS", "relevantForJS", "resource", "fileName", "lineNumber", "columnNumber")}
        self.frames: dict[tuple[Any, ...], int] = {}
        self.frame_cols: dict[str, list[Any]] = {k: [] for k in (
            "address", "inlineDepth", "category", "subcategory", "func", "nativeSymbol", "innerWindowID",
            "line", "column")}
        self.resources: dict[str, int] = {}
        self.res_cols: dict[str, list[Any]] = {"lib": [], "name": [], "host": [], "type": []}
        self.symbols: dict[tuple[str, int, int], int] = {}
        self.sym_cols: dict[str, list[Any]] = {"libIndex": [], "address": [], "name": [], "functionSize": []}
        self.stacks: dict[tuple[int, int], int] = {}
        self.stack_cols: dict[str, list[Any]] = {"frame": [], "prefix": []}

    def resource(self, path: str, lib: int | None) -> int:
        found = self.resources.get(path)
        if found is None:
            found = len(self.res_cols["lib"])
            self.res_cols["lib"].append(lib)
            self.res_cols["name"].append(self.s(os.path.basename(path) or path))
            self.res_cols["host"].append(None)
            self.res_cols["type"].append(RESOURCE_LIBRARY)
            self.resources[path] = found
        return found

    def func(self, line: SourceLine, loc: Location, lib: int | None) -> int:
        key = (line.label, loc.mapping.path)
        found = self.funcs.get(key)
        if found is None:
            found = len(self.func_cols["name"])
            c = self.func_cols
            c["name"].append(self.s(line.label))
            c["isJS"].append(False)
            c["relevantForJS"].append(False)
            c["resource"].append(-1 if lib is None else self.resource(loc.mapping.path, lib))
            c["fileName"].append(None)
            c["lineNumber"].append(None)
            c["columnNumber"].append(None)
            self.funcs[key] = found
        return found

    def symbol(self, name: str, lib: int, start: int) -> int:
        key = (name, lib, start)
        found = self.symbols.get(key)
        if found is None:
            found = len(self.sym_cols["name"])
            self.sym_cols["libIndex"].append(lib)
            self.sym_cols["address"].append(start)
            self.sym_cols["name"].append(self.s(name))
            self.sym_cols["functionSize"].append(None)
            self.symbols[key] = found
        return found

    def frame(self, loc: Location, line: SourceLine, depth: int) -> int:
        """The frame-table index of one line of a location at inline depth ``depth``."""
        key = (line.label, loc.mapping.path, loc.kind, loc.rel_address, depth, line.file, line.line)
        found = self.frames.get(key)
        if found is None:
            lib = self.libs.index(loc)
            c = self.frame_cols
            found = len(c["func"])
            func = self.func(line, loc, lib)
            if line.file is not None and (line.line is not None or loc.kind == "python") \
                    and self.func_cols["fileName"][func] is None:
                self.func_cols["fileName"][func] = self.s(line.file)  # the file the function's code is in
                self.func_cols["lineNumber"][func] = line.function_line
            c["address"].append(loc.rel_address if lib is not None else -1)
            c["inlineDepth"].append(depth)
            c["category"].append(CATEGORY_OF_KIND.get(loc.kind, 0))
            c["subcategory"].append(0)
            c["func"].append(func)
            c["nativeSymbol"].append(self.symbol(line.label, lib, loc.rel_address - loc.offset)
                                     if lib is not None and loc.resolved and depth == 0 else None)
            c["innerWindowID"].append(None)
            c["line"].append(line.line if line.file is not None else None)
            c["column"].append(None)
            self.frames[key] = found
        return found

    def stack(self, locations: Sequence[Location]) -> int:
        """The stack-table index of one stack (root first in the prefix tree). An address
        inside inlined code has the function holding it at inline depth 0, then the inlined
        functions at depths 1, 2, ..."""
        prefix: int | None = None
        for loc in locations:
            for depth, line in enumerate(reversed(loc.lines)):
                fr = self.frame(loc, line, depth)
                key = (-1 if prefix is None else prefix, fr)
                node = self.stacks.get(key)
                if node is None:
                    node = len(self.stack_cols["frame"])
                    self.stack_cols["frame"].append(fr)
                    self.stack_cols["prefix"].append(prefix)
                    self.stacks[key] = node
                prefix = node
        assert prefix is not None
        return prefix


def _interval_ms(meta: ProfileMeta) -> float:
    period = float(meta.sample_period)
    if meta.freq and period:
        return 1000.0 / period
    if period and period_is_nanoseconds(meta.event):
        return period / 1e6
    return 1.0


def _meta(data: FirefoxInput, arch: str, start_ms: float, end_ms: float, clock: bool) -> dict[str, Any]:
    h = data.header
    first = data.profiles[0].meta
    command = " ".join(h.target.command or h.cmdline)
    perf = h.perf_data
    meta: dict[str, Any] = {
        "interval": _interval_ms(first),
        "startTime": start_ms,
        "profilingStartTime": 0,
        "profilingEndTime": end_ms,
        "processType": 0,
        "product": f"{command or 'capture'} ({first.event})",
        "stackwalk": 1,
        "debug": False,
        "version": GECKO_PROFILE_VERSION,
        "preprocessedProfileVersion": PROCESSED_PROFILE_VERSION,
        "categories": CATEGORIES,
        "markerSchema": [],
        "platform": "X11",
        "oscpu": f"Linux {h.kernel_release} {arch}".strip(),
        "abi": arch,
        "importedFrom": f"profiler {__version__}",
        "arguments": command,
        "symbolicated": True,
        "usesOnlyOneStackType": True,
        "sourceCodeIsNotOnSearchfox": True,
        "keepProfileThreadOrder": True,
    }
    if h.nr_cpus is not None:
        meta["logicalCPUs"] = h.nr_cpus
    if perf.get("cpudesc"):
        meta["CPUName"] = perf["cpudesc"]
    if clock:
        meta["sampleUnits"] = {"time": "ms", "eventDelay": "ms", "threadCPUDelta": "ns"}
    return meta


def _empty_markers() -> dict[str, Any]:
    return _table(data=[], name=[], startTime=[], endTime=[], phase=[], category=[])


def write_firefox(data: FirefoxInput, out: TextIO) -> None:
    """Write the processed profile JSON to ``out``, the samples in chunks."""
    h = data.header
    arch = h.arch
    strings = _Strings()
    libs = _Libs(arch)
    sampled = [p.meta for p in data.profiles if p.timeline is not None and len(p.timeline)]
    origin_ns = min((m.first_time_ns for m in sampled), default=0)
    last_ns = max((m.last_time_ns for m in sampled), default=0)
    first = data.profiles[0].meta
    start_ms = (first.start_time_ns + (origin_ns - _perf_start(h, origin_ns))) / 1e6 if first.start_time_ns else 0.0
    threads = []
    for n, profile in enumerate(data.profiles):
        threads.extend(_threads_of(profile, strings, libs, origin_ns, n > 0))
    clock = period_is_nanoseconds(first.event)
    meta = _meta(data, arch, start_ms, (last_ns - origin_ns) / 1e6, clock)
    out.write('{"meta":')
    json.dump(meta, out, separators=(",", ":"))
    out.write(',"libs":')
    json.dump(libs.libs, out, separators=(",", ":"))
    out.write(',"threads":[')
    for n, (thread, samples) in enumerate(threads):
        if n:
            out.write(",")
        _write_thread(out, thread, samples, clock)
    out.write('],"shared":{"stringArray":')
    json.dump(strings.array, out, separators=(",", ":"))
    out.write("}}\n")


def _perf_start(h: CaptureHeader, fallback: int) -> int:
    return h.start_perf_clock_ns if h.start_perf_clock_ns is not None else fallback


@dataclass
class _Samples:
    stack: np.ndarray[Any, Any]  # thread-local stack index per sample
    time_ns: np.ndarray[Any, Any]
    period: np.ndarray[Any, Any]
    origin_ns: int


def _threads_of(profile: StackSet, strings: _Strings, libs: _Libs, origin_ns: int,
                name_event: bool) -> list[tuple[dict[str, Any], _Samples]]:
    """One thread per thread id of the profile (``name_event``: its event in its name)."""
    tl = profile.timeline
    if tl is None or not len(tl):
        return []
    stacks = profile.stacks
    tid_of = np.asarray([st.tid for st in stacks], dtype=np.int64)[tl.stack]
    pid_of = np.asarray([st.pid for st in stacks], dtype=np.int64)[tl.stack]
    process_start = {int(pid): int(tl.time_ns[pid_of == pid].min()) for pid in np.unique(pid_of).tolist()}
    names = dict(profile.meta.thread_names)
    out = []
    for tid in np.unique(tid_of).tolist():
        idx = np.flatnonzero(tid_of == tid)
        first = stacks[int(tl.stack[idx[0]])]
        pid = first.pid
        th = _Thread(strings, libs)
        used = np.unique(tl.stack[idx])
        lut = np.zeros(int(used.max()) + 1, dtype=np.int64)
        for k in used.tolist():
            lut[k] = th.stack(stacks[k].locations)
        comm = names.get(tid, first.comm)
        name = f"{comm} ({profile.meta.event})" if name_event else comm
        last = stacks[int(tl.stack[idx[-1]])]
        if last.cgroup is not None:  # --all-cgroups captures: the thread's cgroup at its last sample
            name = f"{name} [{last.cgroup}]"
        thread = {
            "processType": "default",
            "processStartupTime": (process_start[pid] - origin_ns) / 1e6,
            "processShutdownTime": None,
            "registerTime": (int(tl.time_ns[idx[0]]) - origin_ns) / 1e6,
            "unregisterTime": None,
            "pausedRanges": [],
            "name": name,
            "isMainThread": tid == pid,
            "processName": comm if tid == pid else first.comm,
            "pid": str(pid),
            "tid": int(tid),
            "markers": _empty_markers(),
            "stackTable": _table(**th.stack_cols),
            "frameTable": _table(**th.frame_cols),
            "funcTable": _table(**th.func_cols),
            "resourceTable": _table(**th.res_cols),
            "nativeSymbols": _table(**th.sym_cols),
        }
        out.append((thread, _Samples(lut[tl.stack[idx]], tl.time_ns[idx], tl.period[idx], origin_ns)))
    return out


def _write_thread(out: TextIO, thread: dict[str, Any], samples: _Samples, clock: bool) -> None:
    body = json.dumps(thread, separators=(",", ":"))
    out.write(body[:-1])
    n = len(samples.stack)
    out.write(',"samples":{"weight":null,"weightType":"samples","length":%d,"stack":' % n)
    _write_ints(out, samples.stack)
    out.write(',"timeDeltas":')
    us = (samples.time_ns.astype(np.int64) - samples.origin_ns) // 1000  # rounded once: no drift
    deltas = np.empty(n, dtype=np.int64)
    if n:
        deltas[0] = us[0]
        deltas[1:] = np.diff(us)
    _write_ms(out, deltas)
    if clock:
        out.write(',"threadCPUDelta":')
        _write_ints(out, samples.period.astype(np.int64))
    out.write("}}")


def _write_ints(out: TextIO, values: np.ndarray[Any, Any]) -> None:
    out.write("[")
    for at in range(0, len(values), CHUNK):
        if at:
            out.write(",")
        out.write(",".join(map(str, values[at:at + CHUNK].tolist())))
    out.write("]")


def _write_ms(out: TextIO, us: np.ndarray[Any, Any]) -> None:
    """Microseconds written as milliseconds (whole ones print without decimals)."""
    out.write("[")
    for at in range(0, len(us), CHUNK):
        if at:
            out.write(",")
        out.write(",".join(str(v // 1000) if v % 1000 == 0 else f"{v / 1000:.3f}".rstrip("0")
                           for v in us[at:at + CHUNK].tolist()))
    out.write("]")
