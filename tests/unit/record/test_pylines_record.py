"""The recorder's side of ``--python-lines``: reads packed as metadata, one notice for a
process that is not CPython."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from profiler.record.pylines import PythonLines, payload
from tests.unit.record.test_pyreader import interpreters, started_target


@pytest.fixture
def target(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    exe = next((e for e in interpreters() if Path(e).exists()), None)
    if exe is None:
        pytest.skip("no pyenv CPython 3.11-3.13 here")
    yield from started_target(exe, tmp_path)


def test_the_recorder_side_packs_reads(target: subprocess.Popen[str]) -> None:
    said: list[str] = []
    lines = PythonLines(1, said.append)
    lines.add(target.pid)
    lines._find(0.0)
    lines._read_pass(0.0)
    data = payload(lines._new_processes, lines._take_codes(), lines)
    assert not said and data["processes"][0]["pid"] == target.pid
    assert len(data["reads"]["time"]) == 8 * 2 and len(data["codes"]) >= 5


def test_not_cpython_and_unknown_versions_get_one_notice() -> None:
    said: list[str] = []
    lines = PythonLines(1, said.append)
    with subprocess.Popen(["sleep", "5"]) as proc:
        lines.add(proc.pid)
        lines._find(1e18)  # past its deadline: given up
        proc.kill()
    assert len(said) == 1 and "not a CPython" in said[0] and not lines.pending and not lines.readers


class _Writer:
    def __init__(self) -> None:
        self.metas: list[dict[str, object]] = []

    def write_meta(self, kind: str, data: dict[str, object]) -> None:
        assert kind == "python_lines"
        self.metas.append(data)


def test_every_file_of_a_switch_output_recording_declares_its_codes(target: subprocess.Popen[str]) -> None:
    lines = PythonLines(1, lambda _: None)
    lines.add(target.pid)
    first, second = _Writer(), _Writer()
    lines._find(0.0)
    lines._read_pass(0.0)
    lines.flush(first)  # type: ignore[arg-type]
    lines._read_pass(0.0)  # nothing new to read: the codes are cached
    lines.flush(second)  # type: ignore[arg-type]
    declared = [{c[0] for c in m["codes"]} for m in (*first.metas, *second.metas)]  # type: ignore[attr-defined]
    # the second file declares again every code the first did (and any the target ran since:
    # a busy machine can let it reach new functions between the two reads), and every code
    # its reads use
    assert len(declared[0]) >= 5 and declared[0] <= declared[1]
    used = set(np.frombuffer(second.metas[0]["reads"]["code"], dtype="<u4").tolist())  # type: ignore[call-overload]
    assert used and used <= declared[1]
    assert second.metas[0]["processes"] == first.metas[0]["processes"]
