"""--namespaces and report --sort cgroup_id end to end, against perf 6.1 (docs/containers.md).

A holder process (``unshare -C sleep``) keeps a cgroup namespace alive; the workloads enter it
with ``nsenter -C`` (a setns: the kernel sends a NAMESPACES record) or run outside it, so
the truth is known: the holder's ``/proc/PID/ns/cgroup`` and this test's own. Both tools
record the same workloads one after the other, never the same process at once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from profiler.record.synth import encode_dev

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("nsenter") is None,
                                reason="needs util-linux unshare and nsenter")

PROFILER = [sys.executable, "-m", "profiler"]
TOLERANCE = 4.0  # percentage points between the tools' shares of one row


def ns_text(pid: int | str) -> str:
    """perf's cgroup_id text of a process's cgroup namespace."""
    st = os.stat(f"/proc/{pid}/ns/cgroup")
    return f"{encode_dev(st.st_dev)}/{st.st_ino:#x}"


@pytest.fixture
def box(require_perf: None) -> Iterator[tuple[int, str]]:
    """A cgroup namespace kept alive by a sleeping holder: (its pid, its cgroup_id text)."""
    if os.geteuid() != 0:
        if os.environ.get("REQUIRE_PERF") == "1":
            pytest.fail("REQUIRE_PERF=1 but the namespace tests need root (unshare -C, nsenter)")
        pytest.skip("needs root for unshare -C and nsenter")
    holder = subprocess.Popen(["unshare", "-C", "sh", "-c", "echo ready; exec sleep 600"], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        text = ns_text(holder.pid)
        assert text != ns_text("self")
        yield holder.pid, text
    finally:
        holder.kill()
        holder.wait()


def perf_needed() -> None:
    if shutil.which("perf") is None:
        pytest.skip("perf is not installed: nothing to compare with")


def table_rows(text: str, header: str = "cgroup id (dev/inode)") -> dict[tuple[str, str], float]:
    """(cgroup_id, comm) -> percent from a ``--sort cgroup_id,comm`` table (perf's or ours)."""
    assert header in text, text[:2000]
    rows: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        fields = line.split()
        if fields and not line.startswith("#") and fields[0].endswith("%"):
            key = (fields[-2], fields[-1])
            rows[key] = rows.get(key, 0.0) + float(fields[0].rstrip("%"))
    return rows


def ours(capture: Path, sort: str = "cgroup_id,comm") -> str:
    return subprocess.run([*PROFILER, "report", "-i", str(capture), "--sort", sort], capture_output=True,
                          text=True, timeout=180, check=True).stdout


def perfs(data: Path, sort: str = "cgroup_id,comm") -> str:
    return subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", sort], capture_output=True,
                          text=True, timeout=180, check=True).stdout


def big(rows: dict[tuple[str, str], float], floor: float = 2.0) -> dict[tuple[str, str], float]:
    return {k: v for k, v in rows.items() if v >= floor}


def same_shares(a: dict[tuple[str, str], float], b: dict[tuple[str, str], float]) -> None:
    assert set(big(a)) == set(big(b)), (a, b)
    for key in big(a):
        assert abs(a[key] - b[key]) <= TOLERANCE, (key, a, b)


def namespace_bodies(script_text: str) -> list[str]:
    """Each NAMESPACES record of a ``script --show-namespace-events`` output, from
    ``PERF_RECORD_NAMESPACES`` to the end of its last line (the header before it is each
    tool's sample header)."""
    lines = script_text.splitlines()
    return ["|".join([line[line.index("PERF_RECORD_NAMESPACES"):], *lines[i + 1:i + 3]])
            for i, line in enumerate(lines) if "PERF_RECORD_NAMESPACES" in line]


def script_of(tool: list[str], path: Path) -> str:
    return subprocess.run([*tool, "script", "-i", str(path), "--show-namespace-events"], capture_output=True,
                          text=True, timeout=180, check=True).stdout


def programs(fixtures_dir: Path, tmp_path: Path, source: str) -> tuple[Path, Path]:
    """Two copies of a workload whose comms tell them apart: ``boxed`` and ``hosted``."""
    made = []
    for name in ("boxed", "hosted"):
        shutil.copy(fixtures_dir / "workloads" / source, tmp_path / name)
        made.append(tmp_path / name)
    return made[0], made[1]


def test_new_processes_inside_and_outside_a_cgroup_namespace_as_perf(box: tuple[int, str], fixtures_dir: Path,
                                                                     tmp_path: Path) -> None:
    holder, inside = box
    outside = ns_text("self")
    boxed, hosted = programs(fixtures_dir, tmp_path, "shares")
    # a fixed amount of work each (2:1), so the shares do not depend on the scheduler
    argv = ["sh", "-c", f"nsenter -t {holder} -C {boxed} 0.3 >/dev/null & {hosted} 0.15 >/dev/null & wait"]
    capture = tmp_path / "ns.prof"
    subprocess.run([*PROFILER, "record", "-q", "--namespaces", "-o", str(capture), "--", *argv], check=True,
                   timeout=180)
    text = ours(capture)
    mine = table_rows(text)
    assert mine.get((inside, "boxed"), 0) > 55 and mine.get((outside, "hosted"), 0) > 25, mine
    assert not [k for k in mine if k[1] in ("boxed", "hosted") and k not in ((inside, "boxed"), (outside, "hosted"))]
    done = subprocess.run([*PROFILER, "report", "-i", str(capture)], capture_output=True, text=True, timeout=180)
    assert "cgroup id" not in done.stdout  # the default sort is unchanged
    bodies = namespace_bodies(script_of(PROFILER, capture))
    assert any(body.endswith(f"6/cgroup: {inside}]") for body in bodies), bodies  # nsenter's setns
    assert bodies[0].endswith(f"6/cgroup: {outside}]")  # the command, synthesized before its exec
    perf_needed()
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "--namespaces", "-o", str(data), "--", *argv], check=True,
                   capture_output=True, timeout=180)
    theirs = table_rows(perfs(data))
    same_shares(mine, theirs)
    # our reader of perf.data: the same rows from perf's own capture
    same_shares(table_rows(ours(data)), theirs)
    # script --show-namespace-events: perf's text of every record of perf's file
    assert namespace_bodies(script_of(PROFILER, data)) == namespace_bodies(script_of(["perf"], data))


@pytest.fixture
def spinners(box: tuple[int, str], fixtures_dir: Path, tmp_path: Path) -> Iterator[tuple[list[int], str]]:
    """Two running spinners (two threads each) on CPU 0, one inside the box, one outside:
    (their pids, the box's cgroup_id text)."""
    holder, inside = box
    boxed, hosted = programs(fixtures_dir, tmp_path, "spinner")
    procs = [subprocess.Popen(["taskset", "-c", "0", "nsenter", "-t", str(holder), "-C", str(boxed)],
                              stdout=subprocess.PIPE, text=True),
             subprocess.Popen(["taskset", "-c", "0", str(hosted)], stdout=subprocess.PIPE, text=True)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        yield [p.pid for p in procs], inside
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_existing_processes_attached_with_p_as_perf(spinners: tuple[list[int], str], tmp_path: Path) -> None:
    pids, inside = spinners
    outside = ns_text("self")
    assert ns_text(pids[0]) == inside and ns_text(pids[1]) == outside
    capture = tmp_path / "p.prof"
    target = ",".join(map(str, pids))
    subprocess.run([*PROFILER, "record", "-q", "--namespaces", "-p", target, "--duration", "1", "-o", str(capture)],
                   check=True, timeout=180)
    mine = table_rows(ours(capture))
    assert set(big(mine)) == {(inside, "boxed"), (outside, "hosted")}, mine
    # every thread was synthesized with its own record: none is 0/0x0
    by_tid = json.loads(subprocess.run([*PROFILER, "report", "-i", str(capture), "--sort", "cgroup_id,tid",
                                        "--format", "json"], capture_output=True, text=True, timeout=180,
                                       check=True).stdout)["rows"]
    assert len({r["tid"] for r in by_tid}) == 4 and all(r["cgroup_id"] in (inside, outside) for r in by_tid), by_tid
    perf_needed()
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "--namespaces", "-p", target, "-o", str(data), "--", "sleep", "1"],
                   check=True, capture_output=True, timeout=180)
    same_shares(mine, table_rows(perfs(data)))


def test_existing_processes_system_wide_as_perf(spinners: tuple[list[int], str], tmp_path: Path) -> None:
    _, inside = spinners
    outside = ns_text("self")
    capture = tmp_path / "a.prof"
    subprocess.run([*PROFILER, "record", "-q", "--namespaces", "-a", "--duration", "1", "-o", str(capture)],
                   check=True, timeout=180)
    mine = table_rows(ours(capture))
    ours_spin = {k[1]: k[0] for k, v in mine.items() if k[1] in ("boxed", "hosted")}
    assert ours_spin == {"boxed": inside, "hosted": outside}, mine
    perf_needed()
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "--namespaces", "-a", "-o", str(data), "--", "sleep", "1"],
                   check=True, capture_output=True, timeout=180)
    theirs = table_rows(perfs(data))
    assert {k[1]: k[0] for k in theirs if k[1] in ("boxed", "hosted")} == ours_spin, theirs
    # the machine's other work differs between the two runs: only the spinners' balance is
    # compared (they share CPU 0 alike, whatever else runs there)
    for rows in (mine, theirs):
        b, h = rows[(inside, "boxed")], rows[(outside, "hosted")]
        assert abs(b - h) <= 0.25 * max(b, h), rows
