"""The frame model: locations expand into frames (inlining), stacks carry their locations on
request, and importing the model (or the loader) loads no renderer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.report_capture import comm, kaddr, kallsyms_text, kernel_sample, write_capture

from profiler.report.pipeline import load_profile
from profiler.report.model import Frame, Location, Mapping, SourceLine
from profiler.report.options import LoadOptions
from profiler.names import KERNEL_DSO


def test_one_address_expands_into_its_inlined_frames() -> None:
    loc = Location(address=0x401234, rel_address=0x1234, mapping=Mapping("/usr/bin/app", "ab" * 20),
                   dso="app", kind="user",
                   lines=(SourceLine("leaf_inlined", "a.h", 3), SourceLine("mid_inlined", "a.c", 10),
                          SourceLine("outer", "a.c", 40)))
    assert loc.frames() == (Frame("outer", "app", "user", 0), Frame("mid_inlined (inlined)", "app", "user", 1),
                            Frame("leaf_inlined (inlined)", "app", "user", 2))
    assert [f.inlined for f in loc.frames()] == [False, True, True]


def test_frames_group_by_function_not_by_address() -> None:
    a = Location(1, 1, Mapping("/x"), "x", "user", (SourceLine("f", "f.c", 1),))
    b = Location(2, 2, Mapping("/x"), "x", "user", (SourceLine("f", "f.c", 9),))
    assert a.frames() == b.frames() and a != b


def test_stack_samples_carry_their_locations(tmp_path: Path) -> None:
    recs = [comm(100, 100, "app", 1)] + [kernel_sample(("k_leaf_a", "k_mid", "k_root"), 1000 + i) for i in range(3)]
    bid = "0123456789abcdef0123456789abcdef01234567"
    path = write_capture(tmp_path / "c.prof", recs, kallsyms=kallsyms_text(),
                         meta={"kernel": {"build_id": bid, "release": "6.0.0-test"}})
    profile = load_profile(LoadOptions(input=str(path)))
    plain = profile.stack_samples()
    (stack,) = profile.stack_samples(locations=True)
    assert stack.frames == plain[0].frames  # the same frames, derived from the locations
    assert [loc.address for loc in stack.locations] == [kaddr("k_root"), kaddr("k_mid"), kaddr("k_leaf_a")]
    assert [loc.lines[0].function for loc in stack.locations] == ["k_root", "k_mid", "k_leaf_a"]
    assert {loc.mapping for loc in stack.locations} == {Mapping(KERNEL_DSO, bid)}
    assert plain[0].locations == ()


def modules_after_import(module: str) -> list[str]:
    code = f"import sys, {module}; print(' '.join(m for m in sys.modules if m.startswith('profiler.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.split()


def test_importing_the_model_or_the_loader_loads_no_renderer() -> None:
    for module in ("profiler.report.model", "profiler.report.pipeline", "profiler.report.profile"):
        loaded = modules_after_import(module)
        assert module in loaded
        assert [m for m in loaded if m.startswith("profiler.report.render.")] == [], module
