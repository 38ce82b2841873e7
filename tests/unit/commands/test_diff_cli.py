"""``profiler diff`` in-process on hand-built captures: the numbers through the pipeline, the
gate's exit codes, Markdown, and the bad inputs (different events, an empty side, different
architectures, no samples, bad options): one sentence each, never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import run_main
from tests.support.capture_factory import cpu_clock_attr, make_test_header
from tests.support.report_capture import comm, kallsyms_text, kernel_sample, write_capture

from profiler.format import records as R
from profiler.format.container.writer import CaptureWriter
from profiler.format.encode import encode


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))


run = run_main


def records(n_a: int, n_b: int) -> list[R.Record]:
    recs: list[R.Record] = [comm(100, 100, "app", 1)]
    t = 100
    for i in range(n_a + n_b):
        t += 1000
        recs.append(kernel_sample(("k_leaf_a", "k_root") if i < n_a else ("k_leaf_b", "k_root"), t, period=1000))
    return recs


def capture(path: Path, n_a: int, n_b: int, **header: Any) -> str:
    if not header:
        return str(write_capture(path, records(n_a, n_b), kallsyms=kallsyms_text()))
    head = make_test_header([{"name": "cpu-clock", "attr": cpu_clock_attr(), "ids": [7]}], **header)
    layout = R.SampleLayout.from_attr(head["events"][0]["attr"])
    writer = CaptureWriter.create(path, head)
    writer.write_synth(b"".join(encode(r, layout) for r in records(n_a, n_b)))
    writer.write_meta("kallsyms", {"text": kallsyms_text(), "kptr_restrict": 0, "hidden": False})
    writer.close({})
    return str(path)


def test_numbers_through_the_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = capture(tmp_path / "a.prof", 60, 40), capture(tmp_path / "b.prof", 75, 25)
    code, out, err = run(capsys, "diff", base, new)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "# Event 'cpu-clock'" and lines[2].split()[1:3] == ["Baseline", "Delta"]
    assert "    60.00%    +15.00%  [kernel.kallsyms]  [k] k_leaf_a" in lines
    assert "    40.00%    -15.00%  [kernel.kallsyms]  [k] k_leaf_b" in lines
    code, out, _ = run(capsys, "diff", "-c", "ratio", "-p", base, new)
    assert code == 0
    row = next(line for line in out.splitlines() if line.endswith("k_leaf_a"))
    assert row.split()[:4] == ["60.00%", "60000", f"{75000 / 60000:.6f}", "75000"]


def test_gate_exit_codes_and_the_rows_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = capture(tmp_path / "a.prof", 60, 40), capture(tmp_path / "b.prof", 75, 25)
    code, out, err = run(capsys, "diff", "--fail-on", "any>+2pp", base, new)
    assert code == 1
    assert "# Event" in out  # the table is still printed
    gate = [line for line in err.splitlines() if line.startswith("profiler: gate:")]
    assert gate == ["profiler: gate: rule 'any>+2pp' broken by [kernel.kallsyms]  [k] k_leaf_a: +15.00pp."]
    assert "Traceback" not in err
    code, _, err = run(capsys, "diff", "--fail-on", "any>+20pp,total>+1%", base, new)
    assert code == 0 and "passed" in err
    code, _, err = run(capsys, "diff", "--fail-on", "sym:k_leaf_*<-30%", base, new)
    assert code == 1 and "k_leaf_b" in err  # 40 % -> 25 %: -37.5 % of itself


def test_repeats_cut_the_captures_into_sides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = [capture(tmp_path / f"a{i}.prof", 60 + d, 40 - d) for i, d in enumerate((0, 8, -8))]
    b = [capture(tmp_path / f"b{i}.prof", 63 + d, 37 - d) for i, d in enumerate((0, 8, -8))]
    code, out, err = run(capsys, "diff", "--repeats", "3", "--fail-on", "any>+2pp", *a, *b)
    assert code == 0, err  # +3 points, but the repeats scatter by 8
    assert "    60.00%     +3.00%" in out
    code, _, err = run(capsys, "diff", "--fail-on", "any>+2pp", a[0], b[0])
    assert code == 1  # the same change without repeats breaks the rule


def test_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = capture(tmp_path / "a.prof", 60, 40), capture(tmp_path / "b.prof", 75, 25)
    code, out, _ = run(capsys, "diff", "--format", "markdown", base, new)
    assert code == 0
    assert "| Baseline | Delta Abs | Shared Object" in out.replace("  ", " ").replace("  ", " ")
    assert "\\[k\\] k\\_leaf\\_a" in out


def test_different_architectures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = capture(tmp_path / "a.prof", 60, 40)
    new = capture(tmp_path / "arm.prof", 60, 40, arch="aarch64")
    code, out, err = run(capsys, "diff", base, new)
    assert code == 1 and out == ""
    assert err.strip() == (f"profiler: {base} was recorded on x86_64 and {new} on aarch64: "
                           "profiles of different architectures do not compare.")


def test_no_common_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = capture(tmp_path / "a.prof", 60, 40)
    attr = dict(cpu_clock_attr(), config=2)  # page-faults
    new = str(write_capture(tmp_path / "pf.prof", records(5, 5), kallsyms=kallsyms_text(),
                            events=[{"name": "page-faults", "attr": attr, "ids": [7]}]))
    code, _, err = run(capsys, "diff", base, new)
    assert code == 1
    assert err.strip() == (f"profiler: {base} has events cpu-clock and {new} has page-faults: "
                           "no event in common to compare.")
    code, _, err = run(capsys, "diff", "--event", "page-faults", base, new)
    assert code == 1 and err.count("\n") == 1 and "has no event 'page-faults'" in err


def test_empty_side_and_empty_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = capture(tmp_path / "a.prof", 60, 40)
    code, _, err = run(capsys, "diff", base)
    assert code == 2 and "needs a baseline and at least one capture" in err and err.count("\n") == 1
    code, _, err = run(capsys, "diff", "--repeats", "2", base, base, base)
    assert code == 2 and err.count("\n") == 1
    empty = str(write_capture(tmp_path / "empty.prof", [comm(1, 1, "x", 1)], kallsyms=kallsyms_text()))
    code, _, err = run(capsys, "diff", base, empty)
    assert code == 1 and "has no samples" in err and err.count("\n") == 1


@pytest.mark.parametrize("args", [["-c", "nope"], ["--sort", "parent"], ["--order", "2"], ["--fail-on", "x"],
                                  ["-i", "other.prof"]])
def test_bad_options_are_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    base = capture(tmp_path / "a.prof", 6, 4)
    code, out, err = run(capsys, "diff", *args, base, base)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err


def test_period_normalised_shares_and_the_field_separator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # k_leaf_a: 60 -> 60 samples (its period did not change), k_leaf_b: 40 -> 90
    base, new = capture(tmp_path / "a.prof", 60, 40), capture(tmp_path / "b.prof", 60, 90)
    code, out, err = run(capsys, "diff", "-c", "delta", "--shares", "baseline", base, new)
    assert code == 0, err
    assert "# Shares of new files: of the baseline's total period (--shares baseline)" in out
    assert out.splitlines()[-2:] == ["    40.00%  +50.00%  [kernel.kallsyms]  [k] k_leaf_b",
                                     "    60.00%   +0.00%  [kernel.kallsyms]  [k] k_leaf_a"]
    code, out, _ = run(capsys, "diff", "-c", "delta", base, new)  # own totals: a's share fell
    assert "    60.00%  -20.00%  [kernel.kallsyms]  [k] k_leaf_a" in out.splitlines()
    code, out, _ = run(capsys, "diff", "-t", ";", base, new)
    assert code == 0
    assert out.splitlines()[2] == "# Baseline;Delta Abs;Shared Object    ;Symbol      "
    assert "60.00   ;-20.00%  ;[kernel.kallsyms];[k] k_leaf_a" in out.splitlines()
    code, _, err = run(capsys, "diff", "-t", ";", "--format", "markdown", base, new)
    assert code == 2 and "-t takes" in err and "Traceback" not in err
