"""Firefox Profiler export: validated against the processed format's documentation
(firefox_schema.py; profiler.firefox.com cannot be loaded offline), and its numbers checked
against the capture: per thread the samples in time order, stacks root first."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.support.firefox_schema import Invalid, validate
from tests.support.report_capture import comm, kallsyms_text, kernel_sample, mmap2, user_sample, write_capture

from profiler.report.render.firefox import breakpad_id

BID = "58c95b632be844d4be265bdf4a3659ffabaf5851"


def capture(tmp_path: Path) -> Path:
    recs: list[Any] = [comm(100, 100, "demo", 0, exec=True), comm(100, 101, "worker", 1),
                       mmap2(100, 0x400000, 0x2000, 0, "/usr/bin/demo", 0)]
    for i in range(90):
        t = 1_000_000 + 250_000 * i
        tid = 100 if i % 2 else 101
        if i % 3 == 0:
            recs.append(kernel_sample(["k_leaf_a", "k_mid", "k_root"], t, tid=tid, period=250_000))
        else:
            recs.append(user_sample([0x400100 + i % 4, 0x400050], t, tid=tid, period=250_000))
    return write_capture(tmp_path / "c.prof", recs, kallsyms=kallsyms_text(),
                         meta={"buildids": {"entries": [{"path": "/usr/bin/demo", "build_id": BID,
                                                         "source": "file"}]}})


def export(path: Path) -> dict[str, Any]:
    res = subprocess.run([sys.executable, "-m", "profiler", "export", "-i", str(path), "-f", "firefox",
                          "-o", "-"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def stacks_of(thread: dict[str, Any], strings: list[str]) -> list[tuple[str, ...]]:
    """Each sample's stack as function names, root first."""
    st, fr, fn = thread["stackTable"], thread["frameTable"], thread["funcTable"]
    out = []
    for k in thread["samples"]["stack"]:
        names = []
        while k is not None:
            names.append(strings[fn["name"][fr["func"][st["frame"][k]]]])
            k = st["prefix"][k]
        out.append(tuple(reversed(names)))
    return out


def test_export_is_a_valid_processed_profile_with_the_captures_samples(tmp_path: Path) -> None:
    prof = export(capture(tmp_path))
    validate(prof)
    strings = prof["shared"]["stringArray"]
    threads = {t["tid"]: t for t in prof["threads"]}
    assert set(threads) == {100, 101}
    assert threads[100]["isMainThread"] and not threads[101]["isMainThread"]
    assert threads[100]["pid"] == "100" and threads[101]["name"] == "worker"
    assert sum(t["samples"]["length"] for t in prof["threads"]) == 90
    stacks = stacks_of(threads[101], strings)
    assert stacks.count(("k_root", "k_mid", "k_leaf_a")) == 15
    deltas = threads[101]["samples"]["timeDeltas"]
    assert deltas[1:] == [0.5] * (len(deltas) - 1)  # every other sample of 250 µs
    assert threads[101]["samples"]["threadCPUDelta"] == [250_000] * 45
    assert prof["meta"]["interval"] == 0.25 and prof["meta"]["sampleUnits"]["threadCPUDelta"] == "ns"
    kernel_frames = [c for c in threads[101]["frameTable"]["category"]]
    names = [c["name"] for c in prof["meta"]["categories"]]
    assert names[kernel_frames[0]] in ("Kernel", "User")
    assert {names[c] for c in kernel_frames} == {"Kernel", "User"}
    demo = next(lib for lib in prof["libs"] if lib["path"] == "/usr/bin/demo")
    assert demo["codeId"] == BID and demo["breakpadId"] == breakpad_id(BID)


def test_breakpad_id_swaps_the_guid_fields() -> None:
    # the first 16 bytes as a GUID: u32, u16, u16 little-endian, then 8 bytes as they are, age 0
    assert breakpad_id("00112233445566778899aabbccddeeff01020304") == "33221100554477668899AABBCCDDEEFF0"
    assert breakpad_id("0011") == "00001100000000000000000000000000" + "0"


@pytest.mark.parametrize("damage", [
    lambda p: p["meta"].update(preprocessedProfileVersion=12),
    lambda p: p["threads"][0]["stackTable"]["prefix"].__setitem__(0, 5),
    lambda p: p["threads"][0]["frameTable"]["func"].__setitem__(0, 10_000),
    lambda p: p["threads"][0]["samples"]["stack"].append(0),
    lambda p: p["meta"]["categories"].__setitem__(0, {"name": "x", "color": "pink", "subcategories": []}),
    lambda p: p["shared"].__setitem__("stringArray", [1]),
])
def test_the_validator_catches_damage(tmp_path: Path, damage: Any) -> None:
    prof = export(capture(tmp_path))
    bad = copy.deepcopy(prof)
    damage(bad)
    with pytest.raises(Invalid):
        validate(bad)
