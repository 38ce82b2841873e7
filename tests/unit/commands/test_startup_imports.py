"""What the everyday commands import at start-up (issue #28, item 5): each command loads the
modules of the features it uses, not those of the others, nor the standard library modules
only those pull in. Behaviour tests on ``sys.modules`` in a fresh interpreter; the times are
benchmarks/bench_startup.py's (``make bench-startup``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.report_capture import comm, kallsyms_text, kernel_sample, write_capture

from profiler.format import records as R

RUN = """
import contextlib, io, sys
from profiler.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        assert not exc.code, exc.code
print(" ".join(sys.modules))
"""

# Only --debuginfod/$DEBUGINFOD_URLS (tempfile, random, shutil, bz2), MiniDebugInfo (lzma), a
# JSON or CSV report, JIT code, tracepoint events, --trace-filter, source lines or DWARF stacks
# need these.
NOT_FOR_A_TABLE = {
    "tempfile", "random", "shutil", "bz2", "lzma", "json", "csv",
    "profiler.symbols.jitdump", "profiler.symbols.jitsources",
    "profiler.report.render.jsonout", "profiler.report.render.csvout",
    "profiler.format.tracepoint", "profiler.report.tracefilter", "profiler.symbols.srcline",
    "profiler.unwind.arch", "profiler.format.regs", "profiler.report.unwind_samples",
}


def loaded(tmp_path: Path, *argv: str) -> set[str]:
    env = {"PROFILER_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "DEBUGINFOD_URLS": ""}
    res = subprocess.run([sys.executable, "-c", RUN, *argv], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return set(res.stdout.split())


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    recs: list[R.Record] = [comm(100, 100, "app", 1)]
    recs += [kernel_sample(("k_leaf_a", "k_mid", "k_root"), 1000 + i) for i in range(20)]
    return write_capture(tmp_path / "c.prof", recs, kallsyms=kallsyms_text())


def test_a_flat_report_loads_only_what_it_uses(tmp_path: Path, capture: Path) -> None:
    mods = loaded(tmp_path, "report", "-i", str(capture), "--no-children", "-g", "none")
    assert {"numpy", "profiler.report.pipeline", "profiler.report.render.table"} <= mods
    assert mods & NOT_FOR_A_TABLE == set()


def test_a_call_graph_report_loads_no_unwinder(tmp_path: Path, capture: Path) -> None:
    mods = loaded(tmp_path, "report", "-i", str(capture))
    assert "profiler.report.callgraph" in mods
    assert mods & NOT_FOR_A_TABLE == set()


def test_a_json_report_loads_json_not_csv(tmp_path: Path, capture: Path) -> None:
    mods = loaded(tmp_path, "report", "-i", str(capture), "--format", "json")
    assert "profiler.report.render.jsonout" in mods
    assert "csv" not in mods and "profiler.report.render.csvout" not in mods


def test_help_loads_no_report_code(tmp_path: Path) -> None:
    mods = loaded(tmp_path, "--help")
    assert "click" in mods
    assert not {m for m in mods if m == "numpy" or m.startswith(("profiler.report", "profiler.format.records"))}


def test_a_flame_graph_reads_its_assets_without_importlib_resources(tmp_path: Path, capture: Path) -> None:
    mods = loaded(tmp_path, "flamegraph", "-i", str(capture), "-o", str(tmp_path / "f.html"))
    assert "profiler.report.render.flamegraph" in mods
    assert not mods & {"importlib.resources", "zipfile", "tempfile"}
    assert "</html>" in (tmp_path / "f.html").read_text()  # the page, its assets inlined
