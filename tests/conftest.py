"""Shared test fixtures.

* ``fixtures_dir``: the fixture binaries, built once per session from ``fixtures/`` sources
  into a temporary directory (``make -C fixtures OUT=...``).
* ``require_perf``: skips a test when perf events are not permitted here, unless
  ``REQUIRE_PERF=1`` is set (CI sets it): then a missing permission is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES_SRC = ROOT / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fixtures")
    result = subprocess.run(
        ["make", "--no-print-directory", "-C", str(FIXTURES_SRC), f"OUT={out}"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.fail(f"building fixtures failed:\n{result.stdout}\n{result.stderr}")
    return out


def perf_events_permitted() -> tuple[bool, str]:
    """Try to open a cpu-clock counter on ourselves with the raw syscall."""
    import ctypes

    from profiler.format.attr import PERF_TYPE_SOFTWARE, new_attr

    nr = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine)
    if nr is None:
        return False, f"no perf_event_open syscall number known for {os.uname().machine}"
    libc = ctypes.CDLL(None, use_errno=True)
    attr = new_attr(type=PERF_TYPE_SOFTWARE, config=0, disabled=1, exclude_kernel=1)
    fd = libc.syscall(nr, ctypes.byref(attr), 0, -1, -1, 0)
    if fd < 0:
        err = ctypes.get_errno()
        return False, f"perf_event_open failed: {os.strerror(err)}"
    os.close(fd)
    return True, ""


@pytest.fixture(scope="session")
def require_perf() -> None:
    ok, why = perf_events_permitted()
    if not ok:
        if os.environ.get("REQUIRE_PERF") == "1":
            pytest.fail(f"REQUIRE_PERF=1 but perf events are not usable: {why}")
        pytest.skip(f"perf events not permitted here: {why}")


@pytest.fixture(scope="session")
def profiler_cmd() -> list[str]:
    """How to run the CLI in a subprocess (the installed package of this interpreter)."""
    return [sys.executable, "-m", "profiler"]


@pytest.fixture(autouse=True, scope="session")
def _no_debuginfod_from_the_environment() -> None:
    """Debian's libdebuginfod-common sets DEBUGINFOD_URLS in login shells: reports would then
    ask the network. Tests are hermetic; the debuginfod tests set their own server."""
    os.environ.pop("DEBUGINFOD_URLS", None)

