"""OTLP profiles export: OpenTelemetry's profiles signal (``v1development``), as protobuf or as
OTLP/JSON, through the generated classes of PyPI's ``opentelemetry-proto``.

What a backend that ingests OTLP profiles (Pyroscope's ``/v1development/profiles``, the OTel
Collector) receives from an eBPF profiler is build-ids and offsets; here every native frame
is already named (function, file and line where DWARF gave them), with the build-id kept on
its mapping so a backend can still symbolize again. Built from the frame model, like the
pprof export (:mod:`profiler.report.render.pprof`), with each event's timeline:

* one ``ProfilesData`` message (the bytes of an ``ExportProfilesServiceRequest``, what
  OTLP/HTTP posts) with one shared ``ProfilesDictionary``: every table starts with its zero
  value, as the format requires, and holds each item once;
* one ``ResourceProfiles`` per process (resource attributes ``process.pid``,
  ``process.executable.name``, ``host.name``, ``host.arch``, ``os.version``), one
  ``ScopeProfiles`` (``profiler`` and its version), one ``Profile`` per event: sample type
  ``cpu``/``nanoseconds`` for a clock event, else the event's name in ``events`` (pprof's
  types); ``time_unix_nano`` and ``duration_nano`` from the recording's wall-clock start;
* one ``Sample`` per distinct stack of a thread (attributes ``thread.id``, ``thread.name``),
  holding every observation in time order: ``timestamps_unix_nano`` (the sample clock mapped
  to the epoch by the capture's start) with each observation's period in ``values``; so a
  sample's count is its number of values and its pprof period their sum;
* ``Stack``: location indices, leaf first; ``Location``: mapping, the address ``perf script``
  prints, one ``Line`` per frame of the address (inlined functions innermost first);
  ``Mapping``: the DSO's path and, as attribute ``process.executable.build_id.gnu``, its
  build-id; ``Function``: name, symbol as stored, source file (else the DSO's path) and start
  line.

Without a timeline (a capture with no per-sample rows) a sample carries its summed period as
one value and no timestamp.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any, BinaryIO

from profiler import __version__
from profiler.dataclass import dataclass
from profiler.format.typed_header import CaptureHeader
from profiler.report.model import Location, StackSet
from profiler.report.render import utf8
from profiler.report.render.pprof import INT64_LIMIT, NO_MAPPING, function_of, sample_types

BUILD_ID_KEY = "process.executable.build_id.gnu"


@dataclass
class OtlpInput:
    """One :class:`StackSet` per event, with locations and (when the profile has them) its
    timeline, and the capture's header (clock origin, host facts)."""

    profiles: Sequence[StackSet]
    header: CaptureHeader = field(default_factory=CaptureHeader)


class _Dictionary:
    """The ``ProfilesDictionary`` being filled: each table's zero value first, items once."""

    def __init__(self, pb: Any, common: Any) -> None:
        self.pb, self.common = pb, common
        self.msg = pb.ProfilesDictionary()
        self.msg.string_table.append("")
        self.msg.mapping_table.add()
        self.msg.location_table.add()
        self.msg.function_table.add()
        self.msg.link_table.add()
        self.msg.attribute_table.add()
        self.msg.stack_table.add()
        self._strings: dict[str, int] = {"": 0}
        self._attrs: dict[tuple[str, object], int] = {}
        self._mappings: dict[str, int] = {}
        self._functions: dict[tuple[str, str, str], int] = {}
        self._sourced: set[int] = set()
        self._locations: dict[tuple[int, int, tuple[tuple[int, int], ...]], int] = {}
        self._stacks: dict[tuple[int, ...], int] = {}

    def s(self, text: str) -> int:
        text = utf8.text(text)  # protobuf strings are UTF-8
        found = self._strings.get(text)
        if found is None:
            found = self._strings[text] = len(self.msg.string_table)
            self.msg.string_table.append(text)
        return found

    def attribute(self, key: str, value: int | str) -> int:
        found = self._attrs.get((key, value))
        if found is None:
            found = self._attrs[(key, value)] = len(self.msg.attribute_table)
            kv = self.msg.attribute_table.add(key_strindex=self.s(key))
            if isinstance(value, int):
                kv.value.int_value = value
            else:
                kv.value.string_value = utf8.text(value)
        return found

    def mapping(self, path: str, address: int, build_id: str | None) -> int:
        if path in NO_MAPPING:
            return 0
        index = self._mappings.get(path)
        if index is None:
            index = self._mappings[path] = len(self.msg.mapping_table)
            self.msg.mapping_table.add(memory_start=0, memory_limit=1, filename_strindex=self.s(path))
        m = self.msg.mapping_table[index]
        if build_id and not m.attribute_indices:
            m.attribute_indices.append(self.attribute(BUILD_ID_KEY, build_id))
        m.memory_limit = max(m.memory_limit, address + 1)
        return index

    def function(self, name: str, system_name: str, dso_path: str, source: str | None,
                 start_line: int | None) -> int:
        """One function of one DSO: its file is the source file once a line names it."""
        key = (name, system_name, dso_path)
        index = self._functions.get(key)
        if index is None:
            index = self._functions[key] = len(self.msg.function_table)
            self.msg.function_table.add(name_strindex=self.s(name), system_name_strindex=self.s(system_name),
                                        filename_strindex=self.s(dso_path))
        if source is not None and index not in self._sourced:
            self._sourced.add(index)
            fn = self.msg.function_table[index]
            fn.filename_strindex = self.s(source)
            if start_line:
                fn.start_line = start_line
        return index

    def location(self, loc: Location) -> int:
        lines = tuple((self.function(*function_of(line, loc)), line.line or 0) for line in loc.lines)
        mapping = self.mapping(loc.mapping.path, loc.rel_address, loc.mapping.build_id)
        key = (mapping, loc.rel_address, lines)
        index = self._locations.get(key)
        if index is None:
            index = self._locations[key] = len(self.msg.location_table)
            entry = self.msg.location_table.add(mapping_index=mapping, address=loc.rel_address)
            for function_index, line in lines:
                entry.lines.add(function_index=function_index, line=line)
        return index

    def stack(self, locations: Sequence[Location]) -> int:
        """The stack of ``locations`` (root first in the model; leaf first here)."""
        ids = tuple(self.location(loc) for loc in reversed(locations))
        index = self._stacks.get(ids)
        if index is None:
            index = self._stacks[ids] = len(self.msg.stack_table)
            self.msg.stack_table.add(location_indices=ids)
        return index


def _clock_offset(header: CaptureHeader) -> int | None:
    """What to add to a sample-clock time to get ns since the epoch (None: unknown)."""
    if header.start_time_ns is None or header.start_perf_clock_ns is None:
        return None
    return header.start_time_ns - header.start_perf_clock_ns


def _resource(common: Any, resource_pb: Any, pid: int, comm: str, header: CaptureHeader) -> Any:
    attrs: list[tuple[str, int | str]] = [
             ("process.pid", pid), ("process.executable.name", comm), ("host.name", header.hostname),
             ("host.arch", header.arch), ("os.version", header.kernel_release)]
    res = resource_pb.Resource()
    for key, value in attrs:
        if value == "":
            continue
        kv = res.attributes.add(key=key)
        if isinstance(value, int):
            kv.value.int_value = value
        else:
            kv.value.string_value = utf8.text(value)
    return res


def build_otlp(data: OtlpInput) -> Any:
    """The ``ProfilesData`` message of ``data``."""
    from opentelemetry.proto.common.v1 import common_pb2 as common
    from opentelemetry.proto.profiles.v1development import profiles_pb2 as pb
    from opentelemetry.proto.resource.v1 import resource_pb2

    d = _Dictionary(pb, common)
    out = pb.ProfilesData()
    offset = _clock_offset(data.header)
    types = sample_types([p.meta.event for p in data.profiles])
    by_pid: dict[int, Any] = {}
    for index, profile in enumerate(data.profiles):
        kind, unit = types[2 * index + 1]  # the period's type, as pprof's second value
        made: dict[int, Any] = {}  # pid -> this event's Profile message
        for st in profile.stacks:
            scope = by_pid.get(st.pid)
            if scope is None:
                rp = out.resource_profiles.add()
                rp.resource.CopyFrom(_resource(common, resource_pb2, st.pid, st.comm, data.header))
                scope = by_pid[st.pid] = rp.scope_profiles.add()
                scope.scope.name, scope.scope.version = "profiler", __version__
            prof = made.get(st.pid)
            if prof is None:
                prof = made[st.pid] = scope.profiles.add()
                prof.sample_type.type_strindex, prof.sample_type.unit_strindex = d.s(kind), d.s(unit)
                prof.period_type.CopyFrom(prof.sample_type)
                _times(prof, profile, offset)
            sample = prof.samples.add(stack_index=d.stack(st.locations))
            sample.attribute_indices.extend((d.attribute("thread.id", st.tid), d.attribute("thread.name", st.comm)))
            if profile.timeline is None:
                sample.values.append(min(st.period, INT64_LIMIT - 1))
        if profile.timeline is not None:
            _observations(made, profile, offset)
    out.dictionary.CopyFrom(d.msg)
    return out


def _times(prof: Any, profile: StackSet, offset: int | None) -> None:
    meta = profile.meta
    if meta.start_time_ns and meta.start_time_ns < INT64_LIMIT:
        prof.time_unix_nano = meta.start_time_ns
    if meta.total_samples and offset is not None and meta.start_time_ns:
        end = meta.last_time_ns + offset
        if 0 <= end - meta.start_time_ns < INT64_LIMIT:
            prof.duration_nano = end - meta.start_time_ns + 1


def _observations(made: dict[int, Any], profile: StackSet, offset: int | None) -> None:
    """Every sample of the timeline appended, in time order, to its stack's Sample: a value
    (its period) and, when the clock's origin is known, its timestamp."""
    timeline = profile.timeline
    assert timeline is not None
    # the Sample of stack k is the k-th sample added to its pid's Profile, in stack order
    position: list[Any] = []
    seen: dict[int, int] = {}
    for st in profile.stacks:
        n = seen.get(st.pid, 0)
        position.append(made[st.pid].samples[n])
        seen[st.pid] = n + 1
    stacks = timeline.stack.tolist()
    periods = timeline.period.tolist()
    times = timeline.time_ns.tolist()
    for k, period, t in zip(stacks, periods, times):
        sample = position[k]
        sample.values.append(min(period, INT64_LIMIT - 1))
        if offset is not None:
            stamp = t + offset
            if 0 <= stamp < 1 << 64:
                sample.timestamps_unix_nano.append(stamp)
    for sample in position:  # a sample that lost a timestamp keeps none: the arrays must agree
        if len(sample.timestamps_unix_nano) != len(sample.values):
            del sample.timestamps_unix_nano[:]


def to_json(message: Any) -> str:
    """OTLP/JSON: lowerCamelCase field names, enums as numbers, 64-bit integers as decimal
    strings (protobuf's JSON mapping, which OTLP/JSON accepts)."""
    from google.protobuf import json_format

    return str(json_format.MessageToJson(message, use_integers_for_enums=True, indent=None)) + "\n"


def write_otlp(data: OtlpInput, stream: BinaryIO, json: bool = False) -> int:
    """Write the profiles (protobuf, or OTLP/JSON) to ``stream``; returns the bytes written."""
    message = build_otlp(data)
    blob = to_json(message).encode() if json else message.SerializeToString()
    stream.write(blob)
    return len(blob)
