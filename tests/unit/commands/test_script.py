"""``profiler script`` text: perf script's default layout, readable by the collapse tools."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from tests.support.report_capture import comm, kaddr, kallsyms_text, kernel_sample, write_capture
from tests.support.paths import CAPTURES

from profiler.cli import main

# The event-line pattern of stackcollapse-perf.pl and speedscope's perf importer.
EVENT = re.compile(r"^(\S.+?)\s+(\d+)/*(\d+)*\s+.*?(\d+\.\d+):\s*(\d+)?\s*(\S+):\s*$")
FRAME = re.compile(r"^\t\s*([0-9a-f]+) (.+) \((.*)\)$")


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))


def script(capsys: pytest.CaptureFixture[str], path: Path, *args: str) -> str:
    main(["script", "-i", str(path), *args])
    return capsys.readouterr().out


def collapse(text: str) -> Counter[str]:
    """What stackcollapse-perf.pl computes: comm;root;...;leaf -> count."""
    out: Counter[str] = Counter()
    name, stack = "", []
    for line in text.splitlines():
        if m := EVENT.match(line):
            name, stack = m.group(1), []
        elif m := FRAME.match(line):
            stack.append(m.group(2).rsplit("+0x", 1)[0])
        elif not line.strip() and name:
            out[";".join([name, *reversed(stack)])] += 1
            name = ""
    return out


def test_blocks_in_time_order_with_symbol_offsets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = [comm(100, 100, "app", 1), comm(100, 101, "worker", 2)]
    recs += [kernel_sample(("k_leaf_a", "k_root"), 3_000_000_000 + i * 1000, tid=100 + i % 2, cpu=i % 2,
                           period=500 + i) for i in range(4)]
    path = write_capture(tmp_path / "s.prof", recs, kallsyms=kallsyms_text())  # type: ignore[arg-type]
    out = script(capsys, path)
    blocks = out.split("\n\n")
    assert blocks[-1] == ""
    first = blocks[0].splitlines()
    assert first[0] == "app   100/100   [000]     3.000000:        500 cpu-clock: "
    assert first[1] == f"\t{kaddr('k_leaf_a'):16x} k_leaf_a+0x10 ([kernel.kallsyms])"
    assert first[2] == f"\t{kaddr('k_root'):16x} k_root+0x10 ([kernel.kallsyms])"
    times = [float(EVENT.match(b.splitlines()[0]).group(4)) for b in blocks[:-1]]  # type: ignore[union-attr]
    assert times == sorted(times) and len(times) == 4
    assert collapse(out) == {"app;k_root;k_leaf_a": 2, "worker;k_root;k_leaf_a": 2}


def test_filters_apply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = [comm(100, 100, "app", 1)] + [kernel_sample(("k_mid",), 10 + i, cpu=i % 2) for i in range(6)]
    path = write_capture(tmp_path / "f.prof", recs, kallsyms=kallsyms_text())  # type: ignore[arg-type]
    assert sum(collapse(script(capsys, path, "--cpu", "1")).values()) == 3


def test_committed_capture_collapses_like_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    small = CAPTURES / "small.prof"
    stacks = collapse(script(capsys, small))
    assert sum(stacks.values()) == 13
    assert any(s.endswith(";__vdso_clock_gettime") for s in stacks)
