"""Running the CLI in the test's own process (``profiler.main.main``): its exit status and what it
wrote, for tests that need no child process."""

from __future__ import annotations

import pytest

from profiler.main import main


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``profiler ARGV``."""
    code = 0
    try:
        main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
