"""The committed format-2.0 capture (fixtures/captures/make_recorded_capture.py: a real
`--call-graph dwarf` recording of fixtures/dwarf/dwarf_mix, archived): read, inflated and
unwound from its packed rule tables alone, with no binaries and an empty CFI cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from profiler.cli import cli
from profiler.format.container.layout import FRAME_RAW
from profiler.format.container.reader import CaptureReader

from tests.support.paths import CAPTURES

CAPTURE = CAPTURES / "format-2.0.prof"


def test_version_and_inflated_frames() -> None:
    with CaptureReader.open(CAPTURE) as reader:
        assert reader.version == (2, 0)
        raw = [f for f in reader.iter_frames() if f.kind == FRAME_RAW]
        assert raw and reader.size == CAPTURE.stat().st_size
        assert sum(len(f.payload) for f in raw) > reader.size  # inflated


def test_unwinds_from_packed_tables_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))
    empty = tmp_path / "root"
    empty.mkdir()
    result = CliRunner().invoke(cli, ["report", "-i", str(CAPTURE), "--symfs", str(empty), "--format", "json",
                                      "--no-children"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    unwind = doc["unwind"]
    assert set(unwind["tables"].values()) == {"packed"}
    assert unwind["reached_root"] >= 0.95 * unwind["samples"]
    rows = {r["symbol"]: r for r in doc["rows"]}
    tree = rows["leaf"]["callgraph"][0]  # callee order: the leaf, then its callers
    assert tree["symbol"] == "leaf"
    assert [c["symbol"] for c in tree["children"]] == ["middle"]  # the frameless leaf's caller
