"""speedscope export: the schema's required fields and types, totals, units, grouping, order.

The checks follow https://www.speedscope.app/file-format-schema.json: a File needs
``$schema``, ``shared`` (with ``frames``, each with a ``name``) and ``profiles``; a
SampledProfile needs type, name, unit, startValue, endValue, samples and weights.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pytest

from profiler.report.model import Timeline, Frame, ProfileMeta, StackSet, StackSample
from profiler.report.render.speedscope import (
    SCHEMA_URL,
    SpeedscopeOptions,
    build_speedscope,
    render_speedscope,
    write,
)

UNITS = {"bytes", "microseconds", "milliseconds", "nanoseconds", "none", "seconds"}
META = ProfileMeta("shares: cpu-clock", "./shares", "cpu-clock", 10, 2_500_000, True)


def user(name: str, dso: str = "shares") -> Frame:
    return Frame(name, dso, "user")


def kernel(name: str) -> Frame:
    return Frame(name, "[kernel.kallsyms]", "kernel")


def stacks() -> list[StackSample]:
    main = (user("_start"), user("main"))
    return [
        StackSample("shares", 10, 10, (*main, user("heavy")), 5, 1_250_000),
        StackSample("shares", 10, 10, (*main, user("light")), 2, 500_000),
        StackSample("worker", 10, 11, (*main, user("heavy")), 2, 500_000),
        StackSample("other", 20, 20, (user("spin"), kernel("clear_page")), 1, 250_000),
    ]


def check_schema(doc: dict[str, Any]) -> None:
    """The required fields and types of FileFormat.File and FileFormat.SampledProfile."""
    assert doc["$schema"] == SCHEMA_URL
    frames = doc["shared"]["frames"]
    assert isinstance(frames, list)
    for frame in frames:
        assert isinstance(frame["name"], str)
        assert set(frame) <= {"name", "file", "line", "col"}
    assert isinstance(doc.get("name", ""), str) and isinstance(doc.get("exporter", ""), str)
    assert isinstance(doc["activeProfileIndex"], int)
    assert 0 <= doc["activeProfileIndex"] < max(1, len(doc["profiles"]))
    for profile in doc["profiles"]:
        assert profile["type"] == "sampled"
        assert isinstance(profile["name"], str) and profile["unit"] in UNITS
        assert profile["startValue"] <= profile["endValue"]
        assert len(profile["samples"]) == len(profile["weights"])
        for sample in profile["samples"]:
            assert all(isinstance(i, int) and 0 <= i < len(frames) for i in sample)
        assert all(isinstance(w, (int, float)) for w in profile["weights"])


def names(doc: dict[str, Any], sample: list[int]) -> list[str]:
    return [doc["shared"]["frames"][i]["name"] for i in sample]


def test_one_profile_per_thread_with_totals_matching_the_input() -> None:
    doc = build_speedscope(stacks(), META, SpeedscopeOptions(weight="samples"))
    check_schema(doc)
    profiles = doc["profiles"]
    assert [p["name"] for p in profiles] == [
        "shares (pid 10, tid 10)", "worker (pid 10, tid 11)", "other (pid 20, tid 20)"]
    assert [p["endValue"] for p in profiles] == [7, 2, 1]
    assert [sum(p["weights"]) for p in profiles] == [7, 2, 1]
    assert all(p["unit"] == "none" and p["startValue"] == 0 for p in profiles)
    assert doc["activeProfileIndex"] == 0


def test_samples_are_root_first_and_frames_carry_the_dso() -> None:
    doc = build_speedscope(stacks(), META, SpeedscopeOptions(weight="samples"))
    first = doc["profiles"][0]
    assert [names(doc, s) for s in first["samples"]] == [
        ["_start", "main", "heavy"], ["_start", "main", "light"]]
    assert first["weights"] == [5, 2]
    assert {"name": "clear_page", "file": "[kernel.kallsyms]"} in doc["shared"]["frames"]
    keys = [(f["name"], f.get("file")) for f in doc["shared"]["frames"]]
    assert len(keys) == len(set(keys)) == 6


def test_per_process_merges_threads_and_names_the_main_thread() -> None:
    doc = build_speedscope(stacks(), META, SpeedscopeOptions(per="process", weight="samples"))
    check_schema(doc)
    first = doc["profiles"][0]
    assert first["name"] == "shares (pid 10)"
    assert [names(doc, s)[-1] for s in first["samples"]] == ["heavy", "light"]
    assert first["weights"] == [7, 2] and first["endValue"] == 9


def test_process_without_its_main_thread_is_named_after_its_heaviest_comm() -> None:
    only_threads = [StackSample("b", 5, 6, (user("f"),), 1, 1),
                    StackSample("a", 5, 7, (user("f"),), 3, 3)]
    doc = build_speedscope(only_threads, META, SpeedscopeOptions(per="process"))
    assert doc["profiles"][0]["name"] == "a (pid 5)"


@pytest.mark.parametrize(("event", "weight", "unit"), [
    ("cpu-clock", "period", "nanoseconds"),
    ("task-clock:u", "period", "nanoseconds"),
    ("page-faults", "period", "none"),
    ("cpu-clock", "samples", "none"),
])
def test_units(event: str, weight: str, unit: str) -> None:
    meta = ProfileMeta("t", "c", event, 10, 2_500_000, True)
    doc = build_speedscope(stacks(), meta, SpeedscopeOptions(weight=weight))  # type: ignore[arg-type]
    assert {p["unit"] for p in doc["profiles"]} == {unit}
    expected = sum(s.samples if weight == "samples" else s.period for s in stacks())
    assert sum(p["endValue"] for p in doc["profiles"]) == expected


def test_timeline_keeps_every_sample_in_order() -> None:
    data = stacks()
    pairs = [(0, 250_000), (1, 250_000), (0, 260_000), (3, 250_000), (2, 240_000), (0, 0)]
    timeline = Timeline(np.array([s for s, _ in pairs], np.int64), np.arange(len(pairs), dtype=np.uint64),
                        np.array([w for _, w in pairs], np.uint64))
    doc = build_speedscope(data, META, SpeedscopeOptions(), timeline=timeline)
    check_schema(doc)
    main, worker, other = doc["profiles"]
    assert [names(doc, s)[-1] for s in main["samples"]] == ["heavy", "light", "heavy"]
    assert main["weights"] == [250_000, 250_000, 260_000] and main["endValue"] == 760_000
    assert worker["weights"] == [240_000] and other["weights"] == [250_000]
    assert doc["activeProfileIndex"] == 0
    by_count = build_speedscope(data, META, SpeedscopeOptions(weight="samples"), timeline=timeline)
    assert by_count["profiles"][0]["weights"] == [1, 1, 1, 1]


def test_empty_input_is_still_a_valid_file() -> None:
    doc = build_speedscope([], META)
    check_schema(doc)
    assert doc["profiles"] == [] and doc["shared"]["frames"] == []


def test_rendered_json_is_compact_deterministic_and_round_trips() -> None:
    outputs = []
    for order in (stacks(), list(reversed(stacks()))):
        out = io.StringIO()
        write(StackSet(META, order), out)
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1] and outputs[0].endswith("}\n") and "\n" not in outputs[0][:-1]
    doc = json.loads(outputs[0])
    check_schema(doc)
    assert doc["name"] == "shares: cpu-clock" and doc["exporter"].startswith("profiler ")
    again = io.StringIO()
    render_speedscope(doc, again)
    assert again.getvalue() == outputs[0]
