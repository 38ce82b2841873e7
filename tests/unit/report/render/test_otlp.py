"""OTLP profiles from hand-made stacks: the dictionary's zero values and single items, one
resource per process, observations with timestamps on the epoch, and the shapes without a
timeline or without the clock's origin."""

from __future__ import annotations

import io

import numpy as np
from opentelemetry.proto.profiles.v1development import profiles_pb2

from profiler.format.typed_header import CaptureHeader
from profiler.report.model import Frame, Location, Mapping, ProfileMeta, SourceLine, StackSample, StackSet, Timeline
from profiler.report.render.otlp import BUILD_ID_KEY, OtlpInput, build_otlp, write_otlp

HEADER = CaptureHeader(hostname="box", arch="x86_64", start_time_ns=1_700_000_000_000_000_000,
                       start_perf_clock_ns=5_000)


def loc(name: str, addr: int, path: str = "/bin/app", line: int | None = None) -> Location:
    return Location(addr, addr, Mapping(path, "ab" * 20 if path == "/bin/app" else None), path.rsplit("/", 1)[-1],
                    "user", (SourceLine(name, "app.c" if line else None, line),))


def stack(pid: int, tid: int, names: tuple[str, ...], samples: int, comm: str = "app") -> StackSample:
    locs = tuple(loc(n, 0x1000 + 16 * i, line=10 + i) for i, n in enumerate(names))
    return StackSample(comm, pid, tid, tuple(Frame(n, "app", "user") for n in names), samples, samples * 100, locs)


def meta(total: int) -> ProfileMeta:
    return ProfileMeta("app: cpu-clock", "./app", "cpu-clock", total, total * 100, True,
                       start_time_ns=HEADER.start_time_ns or 0, first_time_ns=6_000, last_time_ns=9_000)


def profiles() -> list[StackSet]:
    stacks = [stack(1, 1, ("main", "work"), 2), stack(1, 2, ("main", "work"), 1), stack(7, 7, ("main",), 1, "other")]
    tl = Timeline(np.array([0, 2, 1, 0], dtype=np.int64), np.array([6_000, 7_000, 8_000, 9_000], dtype=np.uint64),
                  np.array([100, 100, 100, 100], dtype=np.uint64))
    return [StackSet(meta(4), stacks, tl)]


def strings(data: profiles_pb2.ProfilesData, i: int) -> str:
    return str(data.dictionary.string_table[i])


def test_dictionary_resources_and_observations() -> None:
    data = build_otlp(OtlpInput(profiles(), HEADER))
    d = data.dictionary
    assert d.string_table[0] == "" and all(t[0].ByteSize() == 0 for t in (
        d.mapping_table, d.location_table, d.function_table, d.link_table, d.attribute_table, d.stack_table))
    assert len(d.stack_table) == 3 and len(d.function_table) == 3  # zero, main, work: each once
    pids = [{kv.key: kv.value for kv in rp.resource.attributes}["process.pid"].int_value
            for rp in data.resource_profiles]
    assert pids == [1, 7]
    (prof,) = data.resource_profiles[0].scope_profiles[0].profiles
    assert (strings(data, prof.sample_type.type_strindex), strings(data, prof.sample_type.unit_strindex)) \
        == ("cpu", "nanoseconds")
    first, second = prof.samples  # tid 1 (two observations), tid 2
    assert list(first.values) == [100, 100]
    offset = 1_700_000_000_000_000_000 - 5_000
    assert list(first.timestamps_unix_nano) == [6_000 + offset, 9_000 + offset]
    assert prof.time_unix_nano == 1_700_000_000_000_000_000 and prof.duration_nano == 9_000 - 5_000 + 1
    leaf = d.location_table[d.stack_table[first.stack_index].location_indices[0]]
    fn = d.function_table[leaf.lines[0].function_index]
    assert strings(data, fn.name_strindex) == "work" and strings(data, fn.filename_strindex) == "app.c"
    assert leaf.lines[0].line == 11
    mapping = d.mapping_table[leaf.mapping_index]
    attr = d.attribute_table[mapping.attribute_indices[0]]
    assert strings(data, attr.key_strindex) == BUILD_ID_KEY and attr.value.string_value == "ab" * 20
    tids = {d.attribute_table[i].value.int_value for i in second.attribute_indices
            if strings(data, d.attribute_table[i].key_strindex) == "thread.id"}
    assert tids == {2}


def test_without_a_timeline_or_a_clock_origin() -> None:
    plain = [StackSet(p.meta, p.stacks) for p in profiles()]
    data = build_otlp(OtlpInput(plain, HEADER))
    first = data.resource_profiles[0].scope_profiles[0].profiles[0].samples[0]
    assert list(first.values) == [200] and not first.timestamps_unix_nano  # the summed period
    data = build_otlp(OtlpInput(profiles(), CaptureHeader()))  # the clock's origin unknown
    first = data.resource_profiles[0].scope_profiles[0].profiles[0].samples[0]
    assert list(first.values) == [100, 100] and not first.timestamps_unix_nano
    out = io.BytesIO()
    assert write_otlp(OtlpInput(profiles(), HEADER), out, json=True) == len(out.getvalue())
    assert out.getvalue().startswith(b'{"resourceProfiles"')
