"""JIT perf maps: /tmp/perf-PID.map."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler.errors import ReportError
from profiler.symbols.perfmap import load_perf_map, parse_perf_map, perf_map_path

MAP = """\
7f0000001000 40 LazyCompile:~main /app/index.js:1
7f0000001040 20 Builtin:ArrayPush
0x7f0000002000 0x10 stub with spaces
not a line
7f0000003000 zz bad size
7f0000001040 30 Builtin:ArrayPushReplaced

7f0000004000 0 zero_sized
"""


def test_entries_names_and_sizes() -> None:
    table, bad = parse_perf_map(MAP)
    assert bad == 2
    assert table.lookup(0x7F0000001000) == ("LazyCompile:~main /app/index.js:1", 0)
    assert table.lookup(0x7F000000103F) == ("LazyCompile:~main /app/index.js:1", 0x3F)
    assert table.lookup(0x7F000000106F) == ("Builtin:ArrayPushReplaced", 0x2F)  # last writer wins
    assert table.lookup(0x7F0000001070) is None
    assert table.lookup(0x7F000000200F) == ("stub with spaces", 0xF)
    assert table.lookup(0x7F0000004FFF) == ("zero_sized", 0xFFF)
    assert table.lookup(0x7F0000005000) is None
    assert len(table) == 4


def test_load_from_file(tmp_path: Path) -> None:
    path = perf_map_path(4242, tmp_path)
    assert path.name == "perf-4242.map"
    path.write_text(MAP)
    assert load_perf_map(path).lookup(0x7F0000001001) == ("LazyCompile:~main /app/index.js:1", 1)
    with pytest.raises(ReportError, match="cannot read JIT symbol map"):
        load_perf_map(tmp_path / "perf-1.map")


def test_empty_map() -> None:
    table, bad = parse_perf_map("")
    assert len(table) == 0 and bad == 0 and table.lookup(1) is None
