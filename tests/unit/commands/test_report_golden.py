"""Golden outputs of the table, JSON, CSV, script, folded, speedscope and flame-graph outputs
on the committed capture
fixtures/captures/small.prof (made by fixtures/captures/make_small.py).

Re-bless after an intended change with ``PROFILER_BLESS=1 pytest tests/unit/commands/test_report_golden.py``
and review the diff of tests/golden/report/.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from profiler.cli import main

from tests.support.paths import ROOT

CAPTURE = ROOT / "fixtures" / "captures" / "small.prof"
GOLDEN = ROOT / "tests" / "golden" / "report"

CASES = {
    "table_children.txt": ["report"],
    "table_self_callee.txt": ["report", "--no-children", "-g", "callee"],
    "table_flat_pid_sort.txt": ["report", "--no-children", "-g", "none", "--sort", "pid,comm,dso,sym"],
    "report.json": ["report", "--format", "json", "-g", "caller"],
    "report.csv": ["report", "--format", "csv", "--no-children"],
    "script.txt": ["script"],
    "export.folded": ["export", "-f", "folded"],
    "export_pid_period.folded": ["export", "-f", "folded", "--with-pid", "--weight", "period"],
    "export.speedscope.json": ["export", "-f", "speedscope"],
    "flamegraph.html": ["flamegraph", "-o", "-"],
    # a real recording of fixtures/workloads/shares, archived: names come from its packed symbols
    "shares.folded": ["export", "-f", "folded", "-i", str(ROOT / "fixtures" / "captures" / "offline-shares.prof")],
    "shares_flat.txt": ["report", "--no-children", "-g", "none",
                        "-i", str(ROOT / "fixtures" / "captures" / "offline-shares.prof")],
}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        args = CASES[name]
        main(args if "-i" in args else [*args, "-i", str(CAPTURE)])
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    out = capsys.readouterr().out
    golden = GOLDEN / name
    if os.environ.get("PROFILER_BLESS") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(out)
    assert golden.exists(), f"{golden} is missing: run with PROFILER_BLESS=1 to create it"
    assert out == golden.read_text()
