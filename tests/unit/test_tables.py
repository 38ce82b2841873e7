"""``--format markdown|github|simple`` (profiler/tables.py, through tabulate) on report, buildids
and diff: the Markdown forms parse back, with a real Markdown parser, into exactly the cells of
the command's own layout."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from profiler.tables import table_text
from tests.support.markdown import markdown_cells
from tests.support.paths import CAPTURES

CAPTURE = CAPTURES / "offline-shares.prof"
HOSTILE = ["a|b", "*x*", "_y_", "[k] z", "<t>", "back\\slash", "`c`"]


@pytest.mark.parametrize("fmt", ["markdown", "github"])
def test_cells_that_mean_something_in_markdown_read_back_whole(fmt: str) -> None:
    rows = [[c, str(i)] for i, c in enumerate(HOSTILE)]
    assert markdown_cells(table_text(["name", "n"], rows, fmt, [False, True])) == [["name", "n"], *rows]


def test_simple_is_plain_aligned_text() -> None:
    lines = table_text(["name", "n"], [["a|b", "1"], ["long name", "22"]], "simple", [False, True]).splitlines()
    assert lines[0].split() == ["name", "n"] and lines[2].split() == ["a|b", "1"]
    assert len({len(line) for line in lines}) == 1  # aligned columns


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "profiler", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow  # make check leaves it out; make test runs it
@pytest.mark.parametrize("fmt", ["markdown", "github"])
def test_report_tables_hold_the_stdio_tables_cells(fmt: str) -> None:
    args = ["report", "-i", str(CAPTURE), "--no-children", "-g", "none", "--sort", "comm,dso,sym"]
    stdio = [re.split(r"  +", line.strip()) for line in run(*args).splitlines() if line and not line.startswith("#")]
    cells = markdown_cells(run(*args, "--format", fmt))
    assert cells[0] == ["Overhead", "Samples", "Period", "Command", "Shared Object", "Symbol"]
    assert cells[1:] == stdio


@pytest.mark.slow  # make check leaves it out; make test runs it
def test_buildids_tables_hold_the_json_values() -> None:
    rows = json.loads(run("buildids", "-i", str(CAPTURE), "--json"))
    cells = markdown_cells(run("buildids", "-i", str(CAPTURE), "--format", "markdown"))
    assert cells[0] == ["build-id", "samples", "source", "dso"]
    assert cells[1:] == [[r["build_id"] or "-", str(r["samples"]), r["source"], r["path"]] for r in rows]
