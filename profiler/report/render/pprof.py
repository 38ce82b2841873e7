"""pprof export: a gzipped ``perftools.profiles.Profile`` (``profile.proto``).

The format of ``go tool pprof``, Pyroscope (``/ingest?format=pprof``) and Parca. Built from
loaded profiles (one per event of the capture), aggregated first, so its size grows with the
distinct (stack, thread) pairs, not with the samples:

* ``sample_type``: two values per event, its sample count and its period sum; a clock event
  (cpu-clock, task-clock) counts ``cpu``/``nanoseconds``, the Go convention Pyroscope maps to
  a CPU profile; other events count their own name in ``events``. With one event the types
  are ``samples``/``count`` and ``cpu``/``nanoseconds`` (or the event's name);
* ``Sample``: leaf-first location ids, the values, and labels ``pid``, ``tid`` (numbers)
  and ``comm`` (string);
* ``Mapping``: one per DSO, its path and build-id (hex), ``has_functions``;
* ``Location``: one per (DSO, address, function); the address is the one ``perf script``
  prints (in the DSO's own address space for user code, absolute for the kernel), inside
  its mapping's range; one ``Line`` per frame, and for an address inside inlined code one
  Line per inlined function, innermost first, then the function that holds them;
* ``Function``: the demangled name, the symbol as stored (``system_name``) and the file (the
  source file where DWARF gave a line, else the DSO's path); an unresolved frame is named as
  the reports name it (its address). Lines carry the line number where DWARF gave one.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from profiler import __version__
from profiler.errors import ReportError
from profiler.format.decode.decoder import period_total
from profiler.report.model import period_is_nanoseconds

if TYPE_CHECKING:
    from profiler.report.load import Profile

KERNEL_DSO = "[kernel.kallsyms]"
NO_MAPPING = ("[unknown]", "")


@dataclass
class PprofInput:
    """What the pprof writer needs: the loaded profile of each event, and capture facts."""

    profiles: Sequence[Profile]
    attrs: Sequence[dict[str, Any]]  # perf_event_attr of each profile's event
    build_ids: dict[str, str] = field(default_factory=dict)  # DSO path -> hex
    kernel_build_id: str | None = None
    start_time_ns: int = 0
    comments: Sequence[str] = ()


class _Strings:
    def __init__(self) -> None:
        self.table: list[str] = [""]
        self._ids: dict[str, int] = {"": 0}

    def __call__(self, text: str) -> int:
        found = self._ids.get(text)
        if found is None:
            found = len(self.table)
            self.table.append(text)
            self._ids[text] = found
        return found


class _Builder:
    def __init__(self, pb: Any, data: PprofInput) -> None:
        self.pb = pb
        self.prof = pb.Profile()
        self.s = _Strings()
        self.data = data
        self.mappings: dict[str, Any] = {}
        self.functions: dict[tuple[str, str, str], int] = {}
        self.sourced: list[bool] = []  # per function (id - 1): its filename is a source file
        self.locations: dict[tuple[int, int, tuple[tuple[int, int], ...]], int] = {}
        self.samples: dict[tuple[tuple[int, ...], int, int, str], list[int]] = {}

    def mapping(self, path: str, kind: str, address: int) -> int:
        if path in NO_MAPPING or kind == "unknown":
            return 0
        m = self.mappings.get(path)
        if m is None:
            m = self.prof.mapping.add(id=len(self.mappings) + 1, memory_start=0, memory_limit=1,
                                      filename=self.s(path), has_functions=True)
            bid = self.data.kernel_build_id if path == KERNEL_DSO else self.data.build_ids.get(path)
            if bid:
                m.build_id = self.s(bid)
            self.mappings[path] = m
        m.memory_limit = max(m.memory_limit, address + 1)
        return int(m.id)

    def function(self, name: str, system_name: str, dso_path: str, source: str | None = None,
                 start_line: int | None = None) -> int:
        """The Function of a symbol of one DSO: ``filename`` its source file once a line
        names it (the DSO's path before), ``start_line`` the line it starts at."""
        key = (name, system_name, dso_path)
        fid = self.functions.get(key)
        if fid is None:
            fid = len(self.functions) + 1
            self.prof.function.add(id=fid, name=self.s(name), system_name=self.s(system_name),
                                   filename=self.s(dso_path))
            self.functions[key] = fid
            self.sourced.append(False)
        if source is not None and not self.sourced[fid - 1]:
            self.sourced[fid - 1] = True
            fn = self.prof.function[fid - 1]
            fn.filename = self.s(source)
            if start_line:
                fn.start_line = start_line
        return fid

    def location(self, mapping_id: int, address: int, lines: tuple[tuple[int, int], ...]) -> int:
        """A Location with its Lines, (function id, line number) innermost first."""
        key = (mapping_id, address, lines)
        lid = self.locations.get(key)
        if lid is None:
            lid = len(self.locations) + 1
            loc = self.prof.location.add(id=lid, mapping_id=mapping_id, address=address)
            for function_id, line in lines:
                loc.line.add(function_id=function_id, line=line)
            self.locations[key] = lid
        return lid

    def line_of(self, profile: Profile, frame_id: int, srcline: int, entry: int) -> tuple[int, int]:
        """(function id, line number) of one stack entry (``entry``: its index in the
        profile's stack table)."""
        f = profile.frames[frame_id]
        label = function_name(f, profile.demangle)
        source, line = None, 0
        if 0 <= srcline < len(profile.srclines):
            where, _, number = profile.srclines[srcline].rpartition(":")
            if where and number.isdigit():
                source, line = where, int(number)
        start = profile.function_line(entry) if source is not None else None
        return self.function(label, f.symbol if f.symbol is not None else label, f.dso_path, source, start), line

    def stack_locations(self, profile: Profile) -> list[tuple[int, ...]]:
        """Location ids (leaf first) of every distinct stack of ``profile``: the entries of
        one address (inlined functions, innermost first, then the function that holds them)
        make one Location with several Lines."""
        table = profile.stack_table
        start = table.start.tolist()
        frames, shown, addrs = table.frames.tolist(), table.shown.tolist(), table.addrs.tolist()
        lines = table.srclines.tolist() if table.srclines is not None else [-1] * len(frames)
        inlined = [profile.frames[i].inlined for i in range(len(profile.frames))]
        out = []
        for k in range(len(start) - 1):
            ids: list[int] = []
            j, end = start[k], start[k + 1]
            while j < end:
                first = j
                while j + 1 < end and inlined[frames[j]] and addrs[j + 1] == addrs[first]:
                    j += 1  # inlined frames, then the function at the same address
                group = tuple(self.line_of(profile, frames[i], lines[i], i) for i in range(first, j + 1))
                f = profile.frames[frames[j]]
                ids.append(self.location(self.mapping(f.dso_path, f.kind, shown[j]), shown[j], group))
                j += 1
            out.append(tuple(ids))
        return out

    def add_event(self, index: int, n_events: int, profile: Profile) -> None:
        s = profile.samples
        if not len(s):
            return
        stacks = self.stack_locations(profile)
        stack, tid, pid, comm = profile.stack, s.tid.astype(np.int64), s.pid.astype(np.int64), profile.comm
        order = np.lexsort((comm, tid, stack))
        st, td, cm = stack[order], tid[order], comm[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = (st[1:] != st[:-1]) | (td[1:] != td[:-1]) | (cm[1:] != cm[:-1])
        starts = np.flatnonzero(first)
        counts = np.diff(np.append(starts, len(order)))
        if period_total(s.period) >= INT64_LIMIT:
            raise ReportError(f"the periods of event '{profile.event}' add up to 2^63 or more, past the signed "
                              f"64-bit values of pprof: this capture cannot be exported to pprof.")
        periods = np.add.reduceat(s.period[order].astype(np.int64), starts)
        names = profile.comm_names
        for j, pos in enumerate(starts.tolist()):
            key = (stacks[int(st[pos])], int(td[pos]), int(pid[order[pos]]), names[int(cm[pos])])
            values = self.samples.get(key)
            if values is None:
                values = self.samples[key] = [0] * (2 * n_events)
            values[2 * index] += int(counts[j])
            values[2 * index + 1] += int(periods[j])

    def finish(self) -> Any:
        s, prof = self.s, self.prof
        k_pid, k_tid, k_comm = s("pid"), s("tid"), s("comm")
        for (locs, tid, pid, comm), values in sorted(self.samples.items(), key=lambda kv: kv[0]):
            smp = prof.sample.add(location_id=locs, value=values)
            smp.label.add(key=k_pid, num=pid)
            smp.label.add(key=k_tid, num=tid)
            smp.label.add(key=k_comm, str=s(comm))
        return prof


def function_name(f: Any, demangle: bool) -> str:
    """A frame's function as the reports name it, without the "(inlined)" mark: the
    exports say it with their own structure (several Lines, inline depths)."""
    label: str = f.label(demangle)
    return label.removesuffix(" (inlined)") if f.inlined else label


def sample_types(events: Sequence[str]) -> list[tuple[str, str]]:
    """(type, unit) of each value: count and period of every event."""
    out = []
    for i, event in enumerate(events):
        clock = period_is_nanoseconds(event)
        if i == 0:
            out += [("samples", "count"), ("cpu", "nanoseconds") if clock else (event, "events")]
        else:
            out += [(f"{event}-samples", "count"), (f"{event}-cpu" if clock else event,
                                                   "nanoseconds" if clock else "events")]
    return out


def build_pprof(data: PprofInput) -> Any:
    """The ``profile_pb2.Profile`` message of ``data``."""
    from profiler.report.render.proto import profile_pb2 as pb

    b = _Builder(pb, data)
    events = [p.event for p in data.profiles]
    types = sample_types(events)
    for t, u in types:
        b.prof.sample_type.add(type=b.s(t), unit=b.s(u))
    main = _main_binary(data.profiles)
    if main is not None:
        b.mapping(main, "user", 0)  # mapping[0] is the main binary, by pprof's convention
    for i, profile in enumerate(data.profiles):
        b.add_event(i, len(data.profiles), profile)
    prof = b.finish()
    first = data.profiles[0]
    prof.default_sample_type = b.s(types[1][0])
    prof.period_type.type, prof.period_type.unit = b.s(types[1][0]), b.s(types[1][1])
    prof.period = _period(data.attrs[0], first.event)
    times = [p.samples.time for p in data.profiles if len(p.samples)]
    if data.start_time_ns and int(data.start_time_ns) < INT64_LIMIT:
        prof.time_nanos = int(data.start_time_ns)
    if times:
        duration = max(int(t.max()) for t in times) - min(int(t.min()) for t in times)
        if duration < INT64_LIMIT:  # sample times of a damaged capture can be any u64
            prof.duration_nanos = duration
    for text in (f"profiler {__version__}", *data.comments):
        prof.comment.append(b.s(text))
    prof.string_table.extend(b.s.table)
    return prof


def _main_binary(profiles: Sequence[Profile]) -> str | None:
    """The user-space executable (not a shared library) with the most leaf samples."""
    hits: dict[str, int] = {}
    for p in profiles:
        if not len(p.samples) or not p.num_stacks:
            continue
        leaf = p.leaf_frames()[p.stack]
        for fid, n in enumerate(np.bincount(leaf, minlength=len(p.frames)).tolist()):
            f = p.frames[fid]
            if n and f.kind == "user" and f.dso_path.startswith("/") and ".so" not in f.dso:
                hits[f.dso_path] = hits.get(f.dso_path, 0) + n
    return max(sorted(hits), key=lambda k: hits[k]) if hits else None


INT64_LIMIT = 1 << 63  # pprof's numbers are int64


def _period(attr: dict[str, Any], event: str) -> int:
    period = int(attr.get("sample_period", 0) or 0)
    if attr.get("freq") and period:
        return 1_000_000_000 // period if period_is_nanoseconds(event) else 0
    return period if period < INT64_LIMIT else 0  # not a number pprof can hold: unknown


def write_pprof(data: PprofInput, stream: BinaryIO) -> int:
    """Write the gzipped profile to ``stream``; returns the bytes written."""
    raw = build_pprof(data).SerializeToString()
    blob = gzip.compress(raw, compresslevel=6, mtime=0)
    stream.write(blob)
    return len(blob)
