"""Tracepoints where tracefs is not mounted (issue 29): in a private mount namespace made with
``unshare -m`` and tracefs unmounted there, ``record -e sched:sched_switch`` mounts it itself as
perf does (we are root) and records the tracepoint; the host's mounts are untouched."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]


def test_record_mounts_tracefs_when_it_is_missing(tmp_path: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    out = tmp_path / "tp.prof"
    profiler = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "profiler"))
    script = f"""
set -e
for m in /sys/kernel/debug/tracing /sys/kernel/tracing; do umount "$m" 2>/dev/null || true; done
if [ -d /sys/kernel/tracing/events ] || [ -d /sys/kernel/debug/tracing/events ]; then echo still-mounted; exit 3; fi
{profiler} record -q -e sched:sched_switch -o {shlex.quote(str(out))} -- sh -c 'sleep 0.05; sleep 0.05'
test -d /sys/kernel/tracing/events && echo mounted-by-record
"""
    res = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                         capture_output=True, text=True, timeout=120)
    if "still-mounted" in res.stdout:
        pytest.skip("tracefs cannot be unmounted in a private mount namespace here")
    assert res.returncode == 0, res.stderr
    assert "mounted-by-record" in res.stdout
    script_out = subprocess.run([sys.executable, "-m", "profiler", "script", "-i", str(out), "-F", "comm,event"],
                                capture_output=True, text=True, timeout=120)
    assert script_out.returncode == 0, script_out.stderr
    assert "sched:sched_switch" in script_out.stdout and "sleep" in script_out.stdout
    assert Path("/sys/kernel/tracing/events").is_dir()  # the host's tracefs is still there
