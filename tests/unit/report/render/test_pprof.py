"""pprof export on hand-built captures: the protobuf read back with the generated module.

Checks the profile.proto invariants pprof relies on (string 0 empty, ids nonzero and unique,
every reference resolvable, one value per sample type) and that the numbers are the
capture's: per function, the samples and periods the flat report counts.
(tests/e2e/test_exports_e2e.py reads real exports with ``go tool pprof``.)
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.support.capture_factory import cpu_clock_attr
from tests.support.report_capture import comm, kallsyms_text, kernel_sample, mmap2, user_sample, write_capture

from profiler.report.pipeline import load_profile
from profiler.report.options import LoadOptions
from profiler.report.profile import stack_profile
from profiler.report.render.pprof import PprofInput, build_pprof, sample_types
from profiler.report.render.proto import profile_pb2 as pb

BID = "58c95b632be844d4be265bdf4a3659ffabaf5851"


def capture(tmp_path: Path, two_events: bool = False) -> Path:
    recs: list[Any] = [comm(100, 100, "demo", 0, exec=True), comm(100, 101, "worker", 1),
                       mmap2(100, 0x400000, 0x2000, 0, "/usr/bin/demo", 0)]
    for i in range(90):
        t = 1_000 + 10 * i
        tid = 100 if i % 2 else 101
        if i % 3 == 0:
            recs.append(kernel_sample(["k_leaf_a", "k_mid", "k_root"], t, tid=tid, period=250_000))
        else:
            recs.append(user_sample([0x400100 + i % 4, 0x400050], t, tid=tid, period=250_000))
    events = None
    if two_events:
        from profiler.format import records as R

        st = cpu_clock_attr()["sample_type"] | R.PERF_SAMPLE_IDENTIFIER
        events = [{"name": "cpu-clock", "attr": cpu_clock_attr(st), "ids": [7]},
                  {"name": "page-faults", "attr": {**cpu_clock_attr(st), "config": 2}, "ids": [8]}]
        for r in recs:
            if isinstance(r, R.Sample):
                r.identifier = 8 if r.time % 30 == 0 else 7
    return write_capture(tmp_path / "c.prof", recs, kallsyms=kallsyms_text(),
                         meta={"buildids": {"entries": [{"path": "/usr/bin/demo", "build_id": BID,
                                                         "source": "file"}]}}, events=events)


def export(path: Path, *args: str) -> Any:
    res = subprocess.run([sys.executable, "-m", "profiler", "export", "-i", str(path), "-f", "pprof",
                          "-o", "-", *args], capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr.decode()
    prof = pb.Profile()
    prof.ParseFromString(gzip.decompress(res.stdout))
    return prof


def check_valid(prof: Any) -> None:
    """The invariants of profile.proto (and pprof's own validation)."""
    s = prof.string_table
    assert s[0] == ""
    n = len(prof.sample_type)
    assert n >= 2 and all(len(smp.value) == n for smp in prof.sample)
    ids = {"mapping": {m.id for m in prof.mapping}, "location": {loc.id for loc in prof.location},
           "function": {f.id for f in prof.function}}
    for table, seen in ids.items():
        assert 0 not in seen and len(seen) == len(getattr(prof, table)), table
    for m in prof.mapping:
        assert 0 <= m.filename < len(s) and 0 <= m.build_id < len(s) and m.memory_start < m.memory_limit
    for loc in prof.location:
        assert loc.mapping_id == 0 or loc.mapping_id in ids["mapping"]
        m = next((m for m in prof.mapping if m.id == loc.mapping_id), None)
        assert m is None or m.memory_start <= loc.address < m.memory_limit
        assert loc.line and all(line.function_id in ids["function"] for line in loc.line)
    for f in prof.function:
        assert all(0 <= v < len(s) for v in (f.name, f.system_name, f.filename))
    for smp in prof.sample:
        assert smp.location_id and all(lid in ids["location"] for lid in smp.location_id)
        assert {s[lb.key] for lb in smp.label} == {"pid", "tid", "comm"}


def by_leaf_function(prof: Any, index: int) -> Counter[str]:
    s = prof.string_table
    func = {f.id: s[f.name] for f in prof.function}
    first_func = {loc.id: func[loc.line[0].function_id] for loc in prof.location}
    out: Counter[str] = Counter()
    for smp in prof.sample:
        out[first_func[smp.location_id[0]]] += smp.value[index]
    return out


def test_pprof_carries_the_captures_numbers(tmp_path: Path) -> None:
    prof = export(capture(tmp_path))
    check_valid(prof)
    s = prof.string_table
    assert [(s[t.type], s[t.unit]) for t in prof.sample_type] == [("samples", "count"), ("cpu", "nanoseconds")]
    assert s[prof.default_sample_type] == "cpu" and prof.period == 250_000  # 4000 Hz
    counts, periods = by_leaf_function(prof, 0), by_leaf_function(prof, 1)
    assert counts["k_leaf_a"] == 30 and sum(counts.values()) == 90
    assert periods["k_leaf_a"] == 30 * 250_000
    kernel = next(m for m in prof.mapping if s[m.filename] == "[kernel.kallsyms]")
    demo = next(m for m in prof.mapping if s[m.filename] == "/usr/bin/demo")
    assert s[demo.build_id] == BID and demo.has_functions and kernel.has_functions
    threads = {(lb.num) for smp in prof.sample for lb in smp.label if s[lb.key] == "tid"}
    assert threads == {100, 101}
    comms = {s[lb.str] for smp in prof.sample for lb in smp.label if s[lb.key] == "comm"}
    assert comms == {"demo", "worker"}
    # leaf first: a kernel sample's stack is k_leaf_a, k_mid, k_root
    func = {f.id: s[f.name] for f in prof.function}
    loc_func = {loc.id: func[loc.line[0].function_id] for loc in prof.location}
    kstacks = {tuple(loc_func[i] for i in smp.location_id) for smp in prof.sample
               if loc_func[smp.location_id[0]] == "k_leaf_a"}
    assert kstacks == {("k_leaf_a", "k_mid", "k_root")}


def test_every_event_has_its_own_values(tmp_path: Path) -> None:
    prof = export(capture(tmp_path, two_events=True))
    check_valid(prof)
    s = prof.string_table
    assert [s[t.type] for t in prof.sample_type] == ["samples", "cpu", "page-faults-samples", "page-faults"]
    totals = [sum(smp.value[i] for smp in prof.sample) for i in range(4)]
    assert totals[0] + totals[2] == 90 and totals[2] == 30  # every time divisible by 30
    one = export(tmp_path / "c.prof", "--event", "page-faults")
    assert [s2 for s2 in (one.string_table[t.type] for t in one.sample_type)] == ["samples", "page-faults"]


def test_sample_types_name_clock_and_other_events() -> None:
    assert sample_types(["cpu-clock"]) == [("samples", "count"), ("cpu", "nanoseconds")]
    assert sample_types(["cycles:u"]) == [("samples", "count"), ("cycles:u", "events")]
    assert sample_types(["task-clock", "cycles"])[2:] == [("cycles-samples", "count"), ("cycles", "events")]


def test_build_is_deterministic(tmp_path: Path) -> None:
    path = capture(tmp_path)
    profile = load_profile(LoadOptions(input=str(path)))
    data = PprofInput([stack_profile(profile, locations=True)])
    assert build_pprof(data).SerializeToString() == build_pprof(data).SerializeToString()


@pytest.mark.parametrize("fmt", ["pprof", "firefox"])
def test_a_capture_without_samples_is_one_sentence(tmp_path: Path, fmt: str) -> None:
    path = write_capture(tmp_path / "empty.prof", [comm(1, 1, "x", 0)])
    res = subprocess.run([sys.executable, "-m", "profiler", "export", "-i", str(path), "-f", fmt, "-o",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "no samples" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()


def _huge(tmp_path: Path, periods: list[int], times: list[int]) -> Path:
    recs: list[Any] = [comm(100, 100, "demo", 0, exec=True), mmap2(100, 0x400000, 0x2000, 0, "/usr/bin/demo", 0)]
    recs += [user_sample([0x400100], t, period=p) for p, t in zip(periods, times)]
    return write_capture(tmp_path / "huge.prof", recs)


@pytest.mark.slow  # make check leaves it out; make test runs it
def test_numbers_past_int64_are_refused_or_left_out(tmp_path: Path) -> None:
    # periods summing past 2^63 (pprof's values are int64): one sentence, nothing written
    path = _huge(tmp_path, [1 << 62, 1 << 62, 1 << 62], [1_000, 2_000, 3_000])
    res = subprocess.run([sys.executable, "-m", "profiler", "export", "-i", str(path), "-f", "pprof", "-o",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "past the signed 64-bit values of pprof" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "out").exists()
    # sample times 2^64 - 1 apart (a damaged capture): the duration is left out, the rest kept
    prof = export(_huge(tmp_path, [1000, 1000], [5, (1 << 64) - 1]))
    assert prof.duration_nanos == 0 and sum(s.value[1] for s in prof.sample) == 2000
