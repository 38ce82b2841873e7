"""OTLP profiles export of a real recording, read back with ``opentelemetry-proto``'s own
generated classes: every sample agrees with the pprof export of the same capture (count and
period per stack and thread), the per-function leaf counts equal ``report``'s, timestamps lie in
the profile's time range, mappings carry build-ids, and OTLP/JSON parses back into the same
message."""

from __future__ import annotations

import gzip
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.profiles.v1development import profiles_pb2 as otlp
from tests.e2e.test_exports_e2e import _env, our_flat

from profiler.report.render.proto import profile_pb2 as pprof

pytestmark = pytest.mark.e2e

Key = tuple[tuple[str, ...], int]  # (function names leaf first, tid)


@pytest.fixture(scope="module")
def recording(require_perf: None, fixtures_dir: Path, profiler_cmd: list[str],
              tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("otlp") / "syscalls.prof"
    res = subprocess.run([*profiler_cmd, "record", "-q", "-g", "-F", "4000", "-o", str(out), "--",
                          str(fixtures_dir / "workloads" / "syscalls"), "0.6"],
                         capture_output=True, text=True, timeout=120, env=_env())
    assert res.returncode == 0, res.stderr
    return out


def export(profiler_cmd: list[str], capture: Path, *args: str) -> bytes:
    res = subprocess.run([*profiler_cmd, "export", "-i", str(capture), "-o", "-", *args],
                         capture_output=True, timeout=120, env=_env())
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout


def otlp_samples(data: otlp.ProfilesData) -> tuple[Counter[Key], Counter[Key]]:
    """(count, period) per key, from OTLP's shared dictionary."""
    d = data.dictionary
    counts: Counter[Key] = Counter()
    periods: Counter[Key] = Counter()
    for rp in data.resource_profiles:
        for sp in rp.scope_profiles:
            for prof in sp.profiles:
                for s in prof.samples:
                    names = tuple(d.string_table[d.function_table[line.function_index].name_strindex]
                                  for li in d.stack_table[s.stack_index].location_indices
                                  for line in d.location_table[li].lines)
                    attrs = {d.string_table[d.attribute_table[i].key_strindex]: d.attribute_table[i].value
                             for i in s.attribute_indices}
                    key = (names, attrs["thread.id"].int_value)
                    counts[key] += len(s.values)
                    periods[key] += sum(s.values)
    return counts, periods


def pprof_samples(prof: pprof.Profile) -> tuple[Counter[Key], Counter[Key]]:
    st = prof.string_table
    functions = {f.id: st[f.name] for f in prof.function}
    locations = {loc.id: [functions[line.function_id] for line in loc.line] for loc in prof.location}
    counts: Counter[Key] = Counter()
    periods: Counter[Key] = Counter()
    for s in prof.sample:
        names = tuple(n for lid in s.location_id for n in locations[lid])
        tid = next(label.num for label in s.label if st[label.key] == "tid")
        counts[(names, tid)] += s.value[0]
        periods[(names, tid)] += s.value[1]
    return counts, periods


def test_otlp_agrees_with_pprof_sample_for_sample_and_with_report(recording: Path, profiler_cmd: list[str]) -> None:
    data = otlp.ProfilesData.FromString(export(profiler_cmd, recording, "-f", "otlp"))
    prof = pprof.Profile.FromString(gzip.decompress(export(profiler_cmd, recording, "-f", "pprof")))
    counts, periods = otlp_samples(data)
    want_counts, want_periods = pprof_samples(prof)
    assert sum(counts.values()) > 500
    assert counts == want_counts and periods == want_periods
    # --no-inline: each leaf is then the function report names (an inlined function would be
    # the innermost Line of its location, as in pprof)
    plain, _ = otlp_samples(otlp.ProfilesData.FromString(export(profiler_cmd, recording, "-f", "otlp", "--no-inline")))
    leaf: Counter[str] = Counter()
    for (names, _), n in plain.items():
        leaf[names[0]] += n
    flat = our_flat(profiler_cmd, recording)
    assert {k: v for k, v in leaf.items()} == {k: v for k, v in flat.items() if v}


def test_timestamps_mappings_and_resources(recording: Path, profiler_cmd: list[str]) -> None:
    data = otlp.ProfilesData.FromString(export(profiler_cmd, recording, "-f", "otlp"))
    d = data.dictionary
    for table in (d.mapping_table, d.location_table, d.function_table, d.stack_table, d.attribute_table):
        assert table[0].ByteSize() == 0  # the zero value first, as the format requires
    assert d.string_table[0] == ""
    (rp,) = data.resource_profiles  # one process
    res = {kv.key: kv.value for kv in rp.resource.attributes}
    assert res["process.executable.name"].string_value == "syscalls" and res["process.pid"].int_value > 0
    (prof,) = rp.scope_profiles[0].profiles
    assert (d.string_table[prof.sample_type.type_strindex], d.string_table[prof.sample_type.unit_strindex]) \
        == ("cpu", "nanoseconds")
    start, end = prof.time_unix_nano, prof.time_unix_nano + prof.duration_nano
    assert start > 1_600_000_000 * 10**9
    stamps = [t for s in prof.samples for t in s.timestamps_unix_nano]
    assert stamps and all(start <= t < end for t in stamps)
    assert all(len(s.timestamps_unix_nano) == len(s.values) for s in prof.samples)
    build_ids = {d.string_table[m.filename_strindex]: d.attribute_table[m.attribute_indices[0]].value.string_value
                 for m in d.mapping_table[1:] if m.attribute_indices}
    exe = next(p for p in build_ids if p.endswith("/syscalls"))
    readelf = subprocess.run(["readelf", "-n", exe], capture_output=True, text=True).stdout
    assert build_ids[exe] in readelf.replace(" ", "")
    text = export(profiler_cmd, recording, "-f", "otlp", "--json").decode()
    assert json_format.Parse(text, otlp.ProfilesData()) == data


def test_json_is_for_otlp_only(recording: Path, profiler_cmd: list[str]) -> None:
    res = subprocess.run([*profiler_cmd, "export", "-i", str(recording), "-f", "pprof", "--json"],
                         capture_output=True, text=True, timeout=60, env=_env())
    assert res.returncode == 2 and "--json is for -f otlp" in res.stderr and "Traceback" not in res.stderr
