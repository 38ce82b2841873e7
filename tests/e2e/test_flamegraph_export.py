"""End-to-end: record the known-share fixture, then flamegraph / export agree with report."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]


def run(profiler_cmd: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*profiler_cmd, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def shares_capture(profiler_cmd: list[str], fixtures_dir: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fg") / "shares.prof"
    result = run(profiler_cmd, "record", "-q", "-g", "-o", str(out), "--",
                 str(fixtures_dir / "workloads" / "shares"), "0.5")
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def flat_self(profiler_cmd: list[str], shares_capture: Path) -> dict[str, int]:
    result = run(profiler_cmd, "report", "-i", str(shares_capture), "--no-children", "-g", "none",
                 "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    return {row["symbol"]: row["samples"] for row in doc["rows"]}


def test_folded_totals_match_flat_report(profiler_cmd: list[str], shares_capture: Path,
                                         flat_self: dict[str, int]) -> None:
    result = run(profiler_cmd, "export", "-f", "folded", "-i", str(shares_capture))
    assert result.returncode == 0, result.stderr
    leaf: Counter[str] = Counter()
    total = 0
    for line in result.stdout.splitlines():
        stack, count = line.rsplit(" ", 1)
        name = stack.split(";")[-1]
        leaf[name.removesuffix("_[k]")] += int(count)
        total += int(count)
    assert total == sum(flat_self.values())
    for sym in ("work_a", "work_b", "work_c"):
        assert leaf[sym] == flat_self[sym]
    # the designed call chain is there, outermost first
    assert any(line.startswith("shares;") and ";main;work;run;work_a " in line
               for line in result.stdout.splitlines())


def test_speedscope_totals_match_report(profiler_cmd: list[str], shares_capture: Path, tmp_path: Path,
                                        flat_self: dict[str, int]) -> None:
    out = tmp_path / "p.speedscope.json"
    result = run(profiler_cmd, "export", "-f", "speedscope", "--weight", "samples", "-i",
                 str(shares_capture), "-o", str(out))
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    total = 0
    leaf: Counter[str] = Counter()
    for prof in doc["profiles"]:
        assert prof["type"] == "sampled"
        assert len(prof["samples"]) == len(prof["weights"])
        for stack, weight in zip(prof["samples"], prof["weights"]):
            leaf[frames[stack[-1]]["name"]] += weight
            total += weight
    assert total == sum(flat_self.values())
    assert leaf["work_a"] == flat_self["work_a"]


def test_flamegraph_html(profiler_cmd: list[str], shares_capture: Path, tmp_path: Path) -> None:
    out = tmp_path / "fg.html"
    result = run(profiler_cmd, "flamegraph", "-i", str(shares_capture), "-o", str(out))
    assert result.returncode == 0, result.stderr
    html = out.read_text()
    for name in ("work_a", "work_b", "work_c", "cpu-clock"):
        assert name in html
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html


def test_flamegraph_without_callchains_says_so_once(profiler_cmd: list[str], fixtures_dir: Path,
                                                    tmp_path: Path) -> None:
    cap = tmp_path / "flat.prof"
    assert run(profiler_cmd, "record", "-q", "-o", str(cap), "--",
               str(fixtures_dir / "workloads" / "shares"), "0.2").returncode == 0
    out = tmp_path / "fg.html"
    result = run(profiler_cmd, "flamegraph", "-i", str(cap), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("no call chains") == 1
    assert out.exists() and "work_a" in out.read_text()


def test_flamegraph_bad_output_path(profiler_cmd: list[str], shares_capture: Path, tmp_path: Path) -> None:
    result = run(profiler_cmd, "flamegraph", "-i", str(shares_capture), "-o", str(tmp_path / "no" / "x.html"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"profiler: cannot write {tmp_path / 'no' / 'x.html'}: No such file or directory."]


def test_unknown_export_format_lists_the_valid_ones(profiler_cmd: list[str], shares_capture: Path) -> None:
    result = run(profiler_cmd, "export", "-f", "svgz", "-i", str(shares_capture))
    assert result.returncode == 2
    assert "'folded', 'speedscope'" in result.stderr
    assert "Traceback" not in result.stderr
