"""The recorder's own PATH search (profiler/record/target.py) answers as shutil.which does."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from profiler.errors import CommandNotFoundError
from profiler.record.target import find_on_path, resolve_command


@pytest.fixture
def bins(tmp_path: Path) -> Path:
    for sub in ("a", "b", "c"):
        (tmp_path / sub).mkdir()
    for sub, name, mode in (("a", "tool", 0o644), ("b", "tool", 0o755), ("c", "tool", 0o755),
                            ("c", "other", 0o755)):
        (tmp_path / sub / name).write_text("#!/bin/sh\n")
        (tmp_path / sub / name).chmod(mode)
    (tmp_path / "a" / "dir").mkdir(mode=0o755)
    (tmp_path / "b" / "dir").write_text("")
    (tmp_path / "b" / "dir").chmod(0o755)
    return tmp_path


@pytest.mark.parametrize("name", ["tool", "other", "dir", "missing"])
@pytest.mark.parametrize("entries", [["a", "b", "c"], ["c", "b"], ["a"], ["a", "a", "c"], [], ["", "b"]])
def test_find_on_path_answers_as_shutil_which(bins: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                              entries: list[str]) -> None:
    monkeypatch.chdir(bins / "c")
    path = os.pathsep.join(str(bins / e) if e else "" for e in entries)
    assert find_on_path(name, path) == shutil.which(name, path=path)


def test_find_on_path_reads_PATH(bins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{bins / 'a'}{os.pathsep}{bins / 'c'}")
    assert find_on_path("tool") == str(bins / "c" / "tool")
    assert resolve_command(("tool", "-x")) == str(bins / "c" / "tool")
    monkeypatch.setenv("PATH", "")
    assert find_on_path("tool") is None
    with pytest.raises(CommandNotFoundError, match="tool: command not found"):
        resolve_command(("tool",))
