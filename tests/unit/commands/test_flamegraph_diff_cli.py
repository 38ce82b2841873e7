"""``flamegraph --diff`` and ``export -f folded --diff`` in-process on two hand-built captures:
the page and the two-column folded form, and the bad input (no common event, an empty side,
a missing capture, options that need or exclude --diff): one sentence, non-zero exit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.support.cli import run_main
from tests.support.capture_factory import cpu_clock_attr
from tests.support.diff_captures import BASE_STACKS, write_kernel_capture, write_pair
from tests.support.paths import CAPTURES
from tests.support.report_capture import comm, kallsyms_text, kernel_sample, write_capture



@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))


run = run_main


def one_sentence(err: str) -> bool:
    return err.count("\n") == 1 and err.startswith("profiler: ") and "Traceback" not in err


def test_flamegraph_diff_writes_new_shape_with_base_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = write_pair(tmp_path)
    code, _, err = run(capsys, "flamegraph", "--diff", str(base), str(new), "-o", str(tmp_path / "d.html"))
    assert code == 0, err
    page = (tmp_path / "d.html").read_text(encoding="utf-8")
    payload = json.loads(re.search(r'id="fg-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    names = [payload["strings"][payload["frames"][3 * f]] for f in payload["f"]]
    assert "k_recurse" in names and "k_other" not in names  # NEW's shape
    leaf_b = names.index("k_leaf_b")
    assert (payload["diff"]["o"][leaf_b], payload["v"][leaf_b]) == (30, 140)
    assert "10 samples of BASE in frames NEW does not have" in page

    code, _, err = run(capsys, "flamegraph", "--diff", str(base), str(new), "--negate", "-o", str(tmp_path / "n.html"))
    assert code == 0, err
    page = (tmp_path / "n.html").read_text(encoding="utf-8")
    assert "k_other" in page and "20 samples of NEW in frames BASE does not have" in page


def test_export_folded_diff_parses_back_to_each_sides_folded_export(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = write_pair(tmp_path)
    sides = []
    for path in (base, new):
        code, out, err = run(capsys, "export", "-f", "folded", "-i", str(path))
        assert code == 0, err
        sides.append({line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in out.splitlines()})
    code, out, err = run(capsys, "export", "-f", "folded", "--diff", str(base), str(new))
    assert code == 0, err
    before, after = {}, {}
    for row in out.splitlines():
        stack, b, n = row.rsplit(" ", 2)
        before.update({stack: int(b)} if int(b) else {})
        after.update({stack: int(n)} if int(n) else {})
    assert (before, after) == (sides[0], sides[1])
    assert "app;k_root_[k];k_other_[k] 10 0" in out.splitlines()


def test_captures_without_a_common_event_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_kernel_capture(tmp_path / "base.prof", BASE_STACKS)
    other = write_kernel_capture(tmp_path / "other.prof", BASE_STACKS,
                                 events=[{"name": "task-clock", "attr": cpu_clock_attr(), "ids": [7]}])
    for argv in (("flamegraph", "--diff", str(base), str(other), "-o", str(tmp_path / "x.html")),
                 ("export", "-f", "folded", "--diff", str(base), str(other))):
        code, out, err = run(capsys, *argv)
        assert code == 1 and out == "" and one_sentence(err), err
        assert "no event in common" in err and "cpu-clock" in err and "task-clock" in err
    code, _, err = run(capsys, "flamegraph", "--diff", str(base), str(other), "--event", "task-clock",
                       "-o", str(tmp_path / "x.html"))
    assert code == 1 and one_sentence(err) and f"{base} has no event 'task-clock'" in err
    assert not (tmp_path / "x.html").exists()


def test_an_empty_side_or_a_missing_capture_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = write_pair(tmp_path)
    empty = write_capture(tmp_path / "empty.prof", [comm(100, 100, "app", 1)], kallsyms=kallsyms_text())
    for a, b, said in ((base, empty, f"NEW: {empty} has no samples"), (empty, new, f"BASE: {empty} has no samples"),
                       (base, tmp_path / "nope.prof", "nope.prof: no such file")):
        for argv in (("flamegraph", "--diff", str(a), str(b), "-o", str(tmp_path / "x.html")),
                     ("export", "-f", "folded", "--diff", str(a), str(b))):
            code, out, err = run(capsys, *argv)
            assert code == 1 and out == "" and one_sentence(err) and said in err, err


def test_options_that_need_or_exclude_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = write_pair(tmp_path)
    cases = [(("flamegraph", "-i", str(new), "--negate"), "--negate needs --diff"),
             (("flamegraph", "--diff", str(base), str(new), "--min-width", "1.5"), "--min-width must be"),
             (("export", "-f", "pprof", "--diff", str(base), str(new)), "go tool pprof -diff_base"),
             (("export", "-f", "speedscope", "--diff", str(base), str(new)), "--diff is for -f folded")]
    for argv, said in cases:
        code, out, err = run(capsys, *argv)
        assert code == 2 and one_sentence(err) and said in err, err


def test_warnings_name_their_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, _ = write_pair(tmp_path)
    flat = write_capture(tmp_path / "flat.prof", [comm(100, 100, "app", 1), kernel_sample(("k_leaf_a",), 5)],
                         kallsyms=kallsyms_text(), callchain=False)
    code, out, err = run(capsys, "export", "-f", "folded", "--diff", str(base), str(flat))
    assert code == 0, err
    assert "warning: NEW: the capture has no call chains" in err and "BASE:" not in err
    assert "app;k_leaf_a_[k] 0 1" in out.splitlines()


def test_a_perf_data_file_compares_with_our_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "export", "-f", "folded", "--diff", str(CAPTURES / "perf-6.1-g.data"),
                         str(CAPTURES / "small.prof"))
    assert code == 0, err
    rows = [line.rsplit(" ", 2) for line in out.splitlines()]
    assert sum(int(b) for _, b, _ in rows) == 88 and sum(int(n) for _, _, n in rows) == 13


def test_filters_leaving_one_side_empty_name_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_kernel_capture(tmp_path / "base.prof", BASE_STACKS, name="old")
    new = write_kernel_capture(tmp_path / "new.prof", BASE_STACKS, name="app")
    code, out, err = run(capsys, "export", "-f", "folded", "--diff", str(base), str(new), "--comm", "app")
    assert code == 1 and out == "" and one_sentence(err), err
    assert "BASE: no samples match the filters" in err


def test_captures_of_different_architectures_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_kernel_capture(tmp_path / "base.prof", BASE_STACKS)
    arm = write_kernel_capture(tmp_path / "arm.prof", BASE_STACKS, arch="aarch64")
    code, out, err = run(capsys, "flamegraph", "--diff", str(base), str(arm), "-o", str(tmp_path / "x.html"))
    assert code == 1 and out == "" and one_sentence(err), err
    assert f"{base} was recorded on x86_64 and {arm} on aarch64" in err

