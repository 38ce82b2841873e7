"""The frame model on a real recording of inlined code: every stack's frames are its
locations' frames, an address inside inlined code is one location with several lines
(innermost first, file and line from DWARF), and mappings carry the binary's build-id."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from profiler.report.pipeline import load_profile
from tests.support.offline_helpers import record
from profiler.report.options import Filters, LoadOptions
from profiler.symbols.dso import clear_symbol_cache
from profiler.symbols.srcline import clear_line_tables

pytestmark = pytest.mark.e2e


def readelf_build_id(path: Path) -> str:
    out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True).stdout
    return next(line.split()[-1] for line in out.splitlines() if "Build ID" in line)


def test_locations_of_inlined_code(fixtures_dir: Path, tmp_path: Path, require_perf: None) -> None:
    clear_symbol_cache()
    clear_line_tables()
    binary = tmp_path / "inline"
    shutil.copy(fixtures_dir / "workloads" / "inline", binary)
    capture = tmp_path / "inline.prof"
    record(capture, [str(binary), "0.5"])
    profile = load_profile(LoadOptions(input=str(capture), srclines=True,
                                       filters=Filters(comms=("inline",))))
    stacks = profile.stack_samples(locations=True)
    assert stacks
    for stack in stacks:
        assert stack.frames == tuple(f for loc in stack.locations for f in loc.frames())
    ours = [loc for st in stacks for loc in st.locations if loc.mapping.path == str(binary)]
    assert ours and {loc.mapping.build_id for loc in ours} == {readelf_build_id(binary)}
    inlined = [loc for loc in ours if len(loc.lines) > 1]
    assert inlined, "no sampled address inside inlined code"
    for loc in inlined:
        assert loc.lines[-1].function == "drive"  # the function the code belongs to
        assert all(line.file and line.file.endswith("inline.c") and line.line for line in loc.lines)
        frames = loc.frames()
        assert [f.inline_depth for f in frames] == list(range(len(loc.lines)))
        assert frames[0].name == "drive" and all(f.name.endswith(" (inlined)") for f in frames[1:])
    assert {"mix", "fold", "step"} & {line.function for loc in inlined for line in loc.lines}
