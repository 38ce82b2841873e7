"""The 3.11+ location table reader against the interpreters' own ``co_lines()``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.format.pylinetable import NO_LINE, line_at, line_ranges

PYENV = Path("/root/.pyenv/versions")
VERSIONS = ("3.11.7", "3.12.1", "3.13.0")

# Code objects of every function of a few standard modules (long forms, negative deltas,
# lines without columns, instructions without a line), dumped by the interpreter itself.
_DUMP = r"""
import json, sys, types, inspect, textwrap, dis, json as J, argparse
def walk(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from walk(c)
out = []
for mod in (dis, J.decoder, argparse, textwrap, inspect):
    src = open(mod.__file__).read()
    for co in walk(compile(src, mod.__file__, "exec")):
        out.append([co.co_linetable.hex(), co.co_firstlineno,
                    [[s, e, -1 if l is None else l] for s, e, l in co.co_lines()], len(co.co_code)])
json.dump(out, sys.stdout)
"""


def _dump(python: str) -> list[list[object]]:
    text = subprocess.run([python, "-c", _DUMP], capture_output=True, text=True, check=True).stdout
    return json.loads(text)  # type: ignore[no-any-return]


def _merged(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Adjacent ranges of one line merged, as ``co_lines`` gives them."""
    out: list[tuple[int, int, int]] = []
    for start, end, line in ranges:
        if out and out[-1][2] == line and out[-1][1] == start:
            out[-1] = (out[-1][0], end, line)
        else:
            out.append((start, end, line))
    return out


def _interpreters() -> list[str]:
    found = [str(PYENV / v / "bin" / "python3") for v in VERSIONS if (PYENV / v / "bin" / "python3").exists()]
    found.append(sys.executable)  # the project needs 3.11+
    return found


@pytest.mark.parametrize("python", _interpreters())
def test_line_ranges_match_co_lines(python: str) -> None:
    codes = _dump(python)
    assert len(codes) > 200
    for table_hex, first, lines, size in codes:
        assert isinstance(table_hex, str) and isinstance(first, int) and isinstance(lines, list)
        ranges = line_ranges(bytes.fromhex(table_hex), first)
        assert _merged(ranges) == _merged([(s, e, ln) for s, e, ln in lines])
        assert ranges[-1][1] == size if ranges else size == 0


def test_line_at_and_damage() -> None:
    ranges = [(0, 4, 10), (4, 6, NO_LINE), (6, 10, 12)]
    assert [line_at(ranges, o) for o in (0, 2, 4, 6, 8, 10)] == [10, 10, NO_LINE, 12, 12, NO_LINE]
    assert line_ranges(b"", 5) == []
    assert line_ranges(b"\x00\x01", 5) == []  # no entry starts with a byte below 0x80
    assert line_ranges(bytes([0x80 | (14 << 3), 0x7F]), 1)[0][2] != NO_LINE  # cut inside a varint: no crash
    assert line_ranges(bytes([0x80 | (13 << 3) | 7, 3]), 1) == [(0, 16, 0)]
