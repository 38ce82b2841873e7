"""The held command of ``profiler stat`` (no perf events needed)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from profiler.errors import CommandNotFoundError
from profiler.stat.workload import HeldCommand


def test_release_runs_the_command_with_its_argv_and_status(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = HeldCommand(("sh", "-c", f'echo "$0 $1" > {out}; exit 7', "a b", "c"))
    assert not out.exists()  # held: the command has not run
    cmd.release()
    assert cmd.exit_code() == 7
    assert out.read_text() == "a b c\n"


def test_abandon_never_runs_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    cmd = HeldCommand(("touch", str(marker)))
    cmd.abandon()
    assert cmd.exit_code() == 127 and not marker.exists()


def test_signals_are_default_in_the_command(tmp_path: Path) -> None:
    """Python ignores SIGPIPE; the command must not inherit that (nor our SIGINT handler)."""
    out = tmp_path / "sig"
    cmd = HeldCommand(("sh", "-c", f"grep -E '^Sig(Ign|Cgt)' /proc/self/status > {out}"))
    cmd.release()
    assert cmd.exit_code() == 0
    ignored = int(out.read_text().split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1)) and not ignored & (1 << (signal.SIGINT - 1))


def test_killed_command_is_128_plus_signal() -> None:
    cmd = HeldCommand(("sleep", "5"))
    cmd.release()
    os.kill(cmd.pid, signal.SIGKILL)  # the shell has exec'd sleep or is about to: either dies
    assert cmd.exit_code() == 128 + signal.SIGKILL


def test_missing_command_is_one_sentence() -> None:
    with pytest.raises(CommandNotFoundError, match=r"^/no/such/thing: command not found\.$"):
        HeldCommand(("/no/such/thing",))
