"""pprof export: a gzipped ``perftools.profiles.Profile`` (``profile.proto``).

The format of ``go tool pprof``, Pyroscope (``/ingest?format=pprof``) and Parca. Built from
the frame model (:mod:`profiler.report.model`: one :class:`StackSet` per event of the
capture, its stacks with their :class:`Location` s), so its size grows with the distinct
(stack, thread) pairs, not with the samples:

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
from typing import Any, BinaryIO

from profiler.dataclass import dataclass
from profiler.report.render import utf8
from profiler import __version__
from profiler.errors import ReportError
from profiler.report.model import Location, StackSet, period_is_nanoseconds, time_type
from profiler.names import UNKNOWN

NO_MAPPING = (UNKNOWN, "")


@dataclass
class PprofInput:
    """What the pprof writer needs: the stacks of each event (with locations), and notes."""

    profiles: Sequence[StackSet]
    comments: Sequence[str] = ()


class _Strings:
    def __init__(self) -> None:
        self.table: list[str] = [""]
        self._ids: dict[str, int] = {"": 0}

    def __call__(self, text: str) -> int:
        text = utf8.text(text)  # protobuf strings are UTF-8
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
        self.samples: dict[tuple[tuple[int, ...], int, int, str, str], list[int]] = {}

    def mapping(self, path: str, kind: str, address: int, build_id: str | None = None) -> int:
        if path in NO_MAPPING:
            return 0
        m = self.mappings.get(path)
        if m is None:
            m = self.prof.mapping.add(id=len(self.mappings) + 1, memory_start=0, memory_limit=1,
                                      filename=self.s(path), has_functions=True)
            self.mappings[path] = m
        if build_id and not m.build_id:
            m.build_id = self.s(build_id)
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

    def stack_locations(self, locations: Sequence[Location]) -> tuple[int, ...]:
        """Location ids, leaf first, of one stack (its model locations are root first): the
        lines of one address (inlined functions, innermost first, then the function that
        holds them) make one Location with several Lines."""
        ids = []
        for loc in reversed(locations):
            lines = tuple((self.function(*function_of(line, loc)), line.line or 0) for line in loc.lines)
            mapping = self.mapping(loc.mapping.path, loc.kind, loc.rel_address, loc.mapping.build_id)
            ids.append(self.location(mapping, loc.rel_address, lines))
        return tuple(ids)

    def add_event(self, index: int, n_events: int, profile: StackSet) -> None:
        if profile.meta.total_period >= INT64_LIMIT:
            raise ReportError(f"the periods of event '{profile.meta.event}' add up to 2^63 or more, past the "
                              f"signed 64-bit values of pprof: this capture cannot be exported to pprof.")
        built: dict[tuple[Location, ...], tuple[int, ...]] = {}
        for st in profile.stacks:
            locs = built.get(st.locations)
            if locs is None:
                locs = built[st.locations] = self.stack_locations(st.locations)
            key = (locs, st.tid, st.pid, st.comm, st.cgroup or "")
            values = self.samples.get(key)
            if values is None:
                values = self.samples[key] = [0] * (2 * n_events)
            values[2 * index] += st.samples
            values[2 * index + 1] += st.period

    def finish(self) -> Any:
        s, prof = self.s, self.prof
        k_pid, k_tid, k_comm = s("pid"), s("tid"), s("comm")
        for (locs, tid, pid, comm, cgroup), values in sorted(self.samples.items(), key=lambda kv: kv[0]):
            smp = prof.sample.add(location_id=locs, value=values)
            smp.label.add(key=k_pid, num=pid)
            smp.label.add(key=k_tid, num=tid)
            smp.label.add(key=k_comm, str=s(comm))
            if cgroup:  # --all-cgroups captures: the sample's cgroup path
                smp.label.add(key=s("cgroup"), str=s(cgroup))
        return prof


def function_of(line: Any, loc: Location) -> tuple[str, str, str, str | None, int | None]:
    """The Function of one line of a location: (name, system name, the DSO's path, source
    file, start line); an unresolved frame is named as the reports name it (its address)."""
    system = line.system_name or line.function
    name = system if line.function == UNKNOWN else line.function
    return name, system, loc.mapping.path, line.file if line.line else None, line.function_line


def sample_types(events: Sequence[str]) -> list[tuple[str, str]]:
    """(type, unit) of each value: count and period of every event."""
    out = []
    for i, event in enumerate(events):
        clock = period_is_nanoseconds(event)
        if i == 0:
            out += [("samples", "count"), (time_type(event), "nanoseconds") if clock else (event, "events")]
        else:
            out += [(f"{event}-samples", "count"), (f"{event}-{time_type(event)}" if clock else event,
                                                   "nanoseconds" if clock else "events")]
    return out


def build_pprof(data: PprofInput) -> Any:
    """The ``profile_pb2.Profile`` message of ``data``."""
    from profiler.report.render.proto import profile_pb2 as pb

    b = _Builder(pb, data)
    metas = [p.meta for p in data.profiles]
    types = sample_types([m.event for m in metas])
    for t, u in types:
        b.prof.sample_type.add(type=b.s(t), unit=b.s(u))
    main = _main_binary(data.profiles)
    if main is not None:
        b.mapping(*main)  # mapping[0] is the main binary, by pprof's convention
    for i, profile in enumerate(data.profiles):
        b.add_event(i, len(data.profiles), profile)
    prof = b.finish()
    first = metas[0]
    prof.default_sample_type = b.s(types[1][0])
    prof.period_type.type, prof.period_type.unit = b.s(types[1][0]), b.s(types[1][1])
    prof.period = _period(first.sample_period, first.freq, first.event)
    if first.start_time_ns and first.start_time_ns < INT64_LIMIT:
        prof.time_nanos = first.start_time_ns
    sampled = [m for m in metas if m.total_samples]
    if sampled:
        duration = max(m.last_time_ns for m in sampled) - min(m.first_time_ns for m in sampled)
        if 0 <= duration < INT64_LIMIT:  # sample times of a damaged capture can be any u64
            prof.duration_nanos = duration
    for text in (f"profiler {__version__}", *data.comments):
        prof.comment.append(b.s(text))
    prof.string_table.extend(b.s.table)
    return prof


def _main_binary(profiles: Sequence[StackSet]) -> tuple[str, str, int, str | None] | None:
    """The user-space executable (not a shared library) with the most leaf samples: its
    mapping's (path, kind, address 0, build-id)."""
    hits: dict[str, int] = {}
    build_ids: dict[str, str | None] = {}
    for p in profiles:
        for st in p.stacks:
            if not st.locations:
                continue
            leaf = st.locations[-1]
            path = leaf.mapping.path
            if leaf.kind == "user" and path.startswith("/") and ".so" not in leaf.dso:
                hits[path] = hits.get(path, 0) + st.samples
                build_ids[path] = leaf.mapping.build_id
    if not hits:
        return None
    main = max(sorted(hits), key=lambda k: hits[k])
    return main, "user", 0, build_ids[main]


INT64_LIMIT = 1 << 63  # pprof's numbers are int64


def _period(period: int, freq: bool, event: str) -> int:
    if freq and period:
        return 1_000_000_000 // period if period_is_nanoseconds(event) else 0
    return period if period < INT64_LIMIT else 0  # not a number pprof can hold: unknown


def write_pprof(data: PprofInput, stream: BinaryIO) -> int:
    """Write the gzipped profile to ``stream``; returns the bytes written."""
    raw = build_pprof(data).SerializeToString()
    blob = gzip.compress(raw, compresslevel=6, mtime=0)
    stream.write(blob)
    return len(blob)
