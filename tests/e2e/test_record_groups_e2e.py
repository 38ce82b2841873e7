"""``record -e '{a,b}:S'`` (leader sampling) and ``report --event b`` on the real kernel,
against ``perf stat`` (the member's total) and ``perf report`` (where it happened)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]

PAGES = 20000


def run(cmd: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def capture(profiler_cmd: list[str], fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory,
            require_perf: None) -> Path:
    out = tmp_path_factory.mktemp("groups") / "g.prof"
    run(profiler_cmd, "record", "-q", "-o", str(out), "-e", "{cpu-clock,page-faults,context-switches}:S",
        "--", str(fixtures_dir / "workloads" / "statload"), "pages", str(PAGES))
    return out


def report_json(profiler_cmd: list[str], capture: Path, event: str) -> dict[str, object]:
    text = run(profiler_cmd, "report", "-i", str(capture), "--no-children", "-g", "none", "--sort", "sym",
               "--format", "json", "--event", event).stdout
    data = json.loads(text)
    assert isinstance(data, dict)
    return data


def test_every_sample_carries_the_group(profiler_cmd: list[str], capture: Path) -> None:
    info = run(profiler_cmd, "info", "-i", str(capture)).stdout
    assert re.search(r"event 0: cpu-clock .*\n.*\n.*sampling at 4000 Hz\n.*sample_type .*READ", info)
    assert "event 1: page-faults" in info and "sampling every 0 events" in info
    dump = run(profiler_cmd, "dump", "-i", str(capture)).stdout
    samples = [line for line in dump.splitlines() if line.lstrip().startswith("SAMPLE")]
    assert samples and all("read={values=[[" in line and line.count("],[") == 2 for line in samples)


def test_member_counts_add_up_to_perf_stat(profiler_cmd: list[str], capture: Path) -> None:
    """The member's periods sum to its count at the last sample: the workload's page faults
    (perf stat counts PAGES + about 50 for start-up on this workload, see test_stat.py; within
    3 %, as the faults after the last sample are not attributed)."""
    faults = report_json(profiler_cmd, capture, "page-faults")
    leader = report_json(profiler_cmd, capture, "cpu-clock")
    assert faults["event"] == "page-faults" and faults["total_samples"] == leader["total_samples"]
    total = float(faults["total_period"])  # type: ignore[arg-type]
    assert PAGES * 0.97 <= total <= PAGES * 1.03, faults


def test_member_attribution_agrees_with_perf_report(profiler_cmd: list[str], fixtures_dir: Path,
                                                    tmp_path: Path) -> None:
    """On a workload that faults in one function and computes in another, each leader sample
    carries the faults since the previous one: perf report --group's page-faults column and
    our --event page-faults put the same shares on the same symbols."""
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("perf is not installed")
    workload = [str(fixtures_dir / "workloads" / "statload"), "mixed", "400"]
    data = tmp_path / "perf.data"
    rec = subprocess.run([perf, "record", "-q", "-o", str(data), "-e", "{cpu-clock,page-faults}:S", "--",
                          *workload], capture_output=True, text=True)
    if rec.returncode != 0:
        pytest.skip(f"perf record does not work here: {rec.stderr.strip()[:200]}")
    text = subprocess.run([perf, "report", "-i", str(data), "--stdio", "--no-children", "--sort", "sym",
                           "--group"], capture_output=True, text=True).stdout
    theirs: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^\s+[\d.]+%\s+([\d.]+)%\s+\[[k.]\] (\S+)", line)
        if m:
            theirs[m.group(2)] = float(m.group(1))  # the page-faults column
    ours_capture = tmp_path / "ours.prof"
    run(profiler_cmd, "record", "-q", "-o", str(ours_capture), "-e", "{cpu-clock,page-faults}:S", "--", *workload)
    rows = report_json(profiler_cmd, ours_capture, "page-faults")["rows"]
    ours = {str(r["symbol"]): float(r["self"]) for r in rows}  # type: ignore[union-attr]
    # Both put the most page faults on the computing function (where most leader samples
    # land), not on the kernel's fault path. Two runs on this shared VM differ a lot in the
    # kernel's share (clear_page_erms measured at 6 % and at 31 % of ours in two runs), so
    # only the top symbol and its share within 20 points are compared.
    assert max(theirs, key=lambda k: theirs[k]) == "main" == max(ours, key=lambda k: ours[k]), (ours, theirs)
    assert ours["main"] == pytest.approx(theirs["main"], abs=20.0), (ours, theirs)


def test_plain_group_members_all_sample(profiler_cmd: list[str], fixtures_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "plain.prof"
    run(profiler_cmd, "record", "-q", "-o", str(out), "-e", "{cpu-clock,page-faults}", "-c", "1000",
        "--", str(fixtures_dir / "workloads" / "statload"), "pages", "20000")
    faults = json.loads(run(profiler_cmd, "report", "-i", str(out), "--format", "json", "--event",
                            "page-faults", "-g", "none", "--no-children").stdout)
    assert faults["total_samples"] >= 15  # every 1000 page faults


def _group_rows(text: str) -> dict[str, list[float]]:
    """``report --group --sort sym`` rows: symbol -> the percentages, one per event."""
    rows: dict[str, list[float]] = {}
    for line in text.splitlines():
        m = re.match(r"^\s+((?:[\d.]+%\s+)+)(?:\d+\s+)?\[[k.]\] (\S+)", line)
        if m:
            rows[m.group(2)] = [float(x) for x in re.findall(r"([\d.]+)%", m.group(1))]
    return rows


def test_group_view_puts_each_events_share_side_by_side(profiler_cmd: list[str], capture: Path) -> None:
    """--group: one percentage per event of the group in every row, each equal to that event's
    own report (--event) for the symbol; the header names the group as perf does."""
    text = run(profiler_cmd, "report", "-i", str(capture), "--no-children", "--sort", "sym", "--group").stdout
    assert "of events 'anon group { cpu-clock, page-faults, context-switches }'" in text
    rows = _group_rows(text)
    assert rows and all(len(v) == 3 for v in rows.values())
    for column, event in enumerate(("cpu-clock", "page-faults", "context-switches")):
        alone = {str(r["symbol"]): float(r["self"])  # type: ignore[index]
                 for r in report_json(profiler_cmd, capture, event)["rows"]}  # type: ignore[union-attr]
        for sym, shares in rows.items():
            assert shares[column] == pytest.approx(alone.get(sym, 0.0), abs=0.01), (event, sym)


def test_group_view_agrees_with_perf_report_group(profiler_cmd: list[str], fixtures_dir: Path,
                                                  tmp_path: Path) -> None:
    """The same workload under both tools: perf report --group and ours put the most of both
    events on the computing function, within 20 points (separate runs on a shared VM)."""
    workload = [str(fixtures_dir / "workloads" / "statload"), "mixed", "400"]
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-o", str(data), "-e", "{cpu-clock,page-faults}:S", "--", *workload],
                   capture_output=True, text=True, check=True)
    theirs = _group_rows(subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort",
                                         "sym", "--group"], capture_output=True, text=True, check=True).stdout)
    mine_capture = tmp_path / "ours.prof"
    run(profiler_cmd, "record", "-q", "-o", str(mine_capture), "-e", "{cpu-clock,page-faults}:S", "--", *workload)
    ours = _group_rows(run(profiler_cmd, "report", "-i", str(mine_capture), "--no-children", "--sort", "sym",
                           "--group").stdout)
    assert all(len(v) == 2 for v in theirs.values()) and all(len(v) == 2 for v in ours.values())
    for column in (0, 1):
        top_theirs = max(theirs, key=lambda k: theirs[k][column])
        top_ours = max(ours, key=lambda k: ours[k][column])
        assert top_theirs == top_ours == "main", (column, ours, theirs)
        assert ours["main"][column] == pytest.approx(theirs["main"][column], abs=20.0), (ours, theirs)


def test_leader_period_is_its_own_count_growth(profiler_cmd: list[str], capture: Path) -> None:
    """As perf does for ':S' groups, the leader's periods are the growth of its own count
    (cpu-clock: nanoseconds between samples), not the nominal sample period: they vary."""
    leader = report_json(profiler_cmd, capture, "cpu-clock")
    periods = {int(r["period"]) for r in leader["rows"]}  # type: ignore[union-attr, index]
    samples = int(leader["total_samples"])  # type: ignore[arg-type]
    assert int(leader["total_period"]) != samples * 250000  # type: ignore[arg-type]
    assert len(periods) > 1
